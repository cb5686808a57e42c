#pragma once
// The policy registry: one enum and one spelling per policy, used by job specs (`placement:`),
// `tellus plan --policy` and `tellus-sim --policy`. Parsing a name is the only way from text
// to a policy, so the three cannot drift apart.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tellus::sched {

// Where a stage's tasks run.
enum class Placement {
  kInPlace,       // Spark's default: map tasks where their input is, reduce tasks spread by slots
  kProportional,  // HOUTU: map tasks where their input is, reduce tasks in proportion to the data
  kCentralized,   // everything at the strongest site (most slots)
  kIridium,       // reduce tasks placed to minimize shuffle time (maps stay in place)
  kTetrium,       // Tetrium's map and reduce LPs (with the WAN budget rho)
  kMaxMin,        // paper 002's max-min fair assignment over one stage's tasks (sched/max_min.h)
};

// Which job a free slot (or container) serves first.
enum class JobOrder {
  kFair,  // the site's fair scheduler: smallest share first (HOUTU §4.4, Spark's default)
  kFcfs,
  kGlobalSrpt,
  kIndependentSrpt,
  kGlobalSrptReordering,
  kIndependentSrptReordering,
  kSwag,
  kTetrium,  // fewest remaining stages, then least remaining time (Tetrium §4.1)
};

// How a site's slots reach jobs.
enum class Resources {
  kSlots,   // a free slot goes straight to the job order (no job managers)
  kStatic,  // HOUTU's job managers holding a fixed number of containers
  kAf,      // HOUTU's job managers sizing their desire with Af and stealing with Parades
};

std::string_view name(Placement policy);
std::string_view name(JobOrder policy);
std::string_view name(Resources policy);

std::optional<Placement> parsePlacement(std::string_view text);
std::optional<JobOrder> parseJobOrder(std::string_view text);
std::optional<Resources> parseResources(std::string_view text);

// Every spelling of a kind, in declaration order (for help texts and error messages).
std::vector<std::string> placementNames();
std::vector<std::string> jobOrderNames();
std::vector<std::string> resourcesNames();
// "a|b|c"
std::string joinNames(const std::vector<std::string>& names, std::string_view separator = "|");

}  // namespace tellus::sched
