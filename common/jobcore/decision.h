#pragma once
// The decisions of a job's JMs that the differential test compares between the two drivers of
// JobCore (tellus-jm and tellus-sim): where each task was placed, what was stolen, what ran
// again. JobCore itself produces them (CoreConfig::recordDecisions, JobCore::takeDecisions),
// from the callbacks both drivers make when an action took effect — a release written, a steal
// settled, a lost output removed, an attempt ended — so the two logs cannot drift apart by
// driver code. One record per line as JSON (formatDecision / parseDecision).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace tellus::jobcore {

struct Decision {
  enum class Kind {
    kPlace,  // a released stage's task `tasks[0]` placed at `site` (the primary's initial taskMap)
    kSteal,  // `tasks` of `stage` moved from `from` (the victim) to `site` (the thief)
    kRerun,  // task `tasks[0]` runs again, for `reason` (one of the kRerun* below)
  };
  Kind kind = Kind::kPlace;
  uint32_t stage = 0;
  std::vector<uint32_t> tasks;  // sorted
  std::string site;
  std::string from;    // kSteal only
  std::string reason;  // kRerun only

  bool operator==(const Decision&) const = default;
};

// Why a task runs again.
inline constexpr std::string_view kRerunLostOutput = "lost-output";  // lineage: its output is gone
inline constexpr std::string_view kRerunFailed = "failed";           // the attempt failed (counted)
inline constexpr std::string_view kRerunWorkerLost = "worker-lost";  // its worker died while it ran
// Its container's lease ran out past the grace and the master took it back (lease_expiry: kill).
inline constexpr std::string_view kRerunLeaseTakenBack = "lease-taken-back";

std::string_view kindName(Decision::Kind kind);

// One line of JSON, no newline: {"kind":"place","stage":1,"tasks":[3],"site":"eu-west"} (plus
// "from" for a steal and "reason" for a re-run). Deterministic: equal decisions format equally.
std::string formatDecision(const Decision& decision);

// The inverse of formatDecision. The input comes from a file: its size is bounded
// (kMaxDecisionLineBytes), and every field is checked (kind known, numbers in range, tasks
// sorted, the fields its kind needs present and the others absent).
inline constexpr size_t kMaxDecisionLineBytes = 1024 * 1024;
Result<Decision> parseDecision(std::string_view line);

}  // namespace tellus::jobcore
