#include "sched/policies.h"

#include <array>
#include <utility>

namespace tellus::sched {
namespace {


constexpr std::pair<Placement, std::string_view> kPlacementNames[] = {
    {Placement::kInPlace, "in-place"},   {Placement::kProportional, "proportional"},
    {Placement::kCentralized, "centralized"}, {Placement::kIridium, "iridium"},
    {Placement::kTetrium, "tetrium"},    {Placement::kMaxMin, "max-min"},
};
constexpr std::pair<JobOrder, std::string_view> kJobOrderNames[] = {
    {JobOrder::kFair, "fair"},
    {JobOrder::kFcfs, "fcfs"},
    {JobOrder::kGlobalSrpt, "global-srpt"},
    {JobOrder::kIndependentSrpt, "independent-srpt"},
    {JobOrder::kGlobalSrptReordering, "global-srpt-reordering"},
    {JobOrder::kIndependentSrptReordering, "independent-srpt-reordering"},
    {JobOrder::kSwag, "swag"},
    {JobOrder::kTetrium, "tetrium"},
};
constexpr std::pair<Resources, std::string_view> kResourcesNames[] = {
    {Resources::kSlots, "slots"}, {Resources::kStatic, "static"}, {Resources::kAf, "af"}};

template <class E, size_t N>
std::string_view nameIn(const std::pair<E, std::string_view> (&table)[N], E value) {
  for (const auto& [e, n] : table) {
    if (e == value) return n;
  }
  return "unknown";
}

template <class E, size_t N>
std::optional<E> parseIn(const std::pair<E, std::string_view> (&table)[N], std::string_view text) {
  for (const auto& [e, n] : table) {
    if (n == text) return e;
  }
  return std::nullopt;
}

template <class E, size_t N>
std::vector<std::string> namesIn(const std::pair<E, std::string_view> (&table)[N]) {
  std::vector<std::string> out;
  for (const auto& [e, n] : table) out.emplace_back(n);
  return out;
}

}  // namespace

std::string_view name(Placement policy) { return nameIn(kPlacementNames, policy); }
std::string_view name(JobOrder policy) { return nameIn(kJobOrderNames, policy); }
std::string_view name(Resources policy) { return nameIn(kResourcesNames, policy); }

std::optional<Placement> parsePlacement(std::string_view text) { return parseIn(kPlacementNames, text); }
std::optional<JobOrder> parseJobOrder(std::string_view text) { return parseIn(kJobOrderNames, text); }
std::optional<Resources> parseResources(std::string_view text) { return parseIn(kResourcesNames, text); }

std::vector<std::string> placementNames() { return namesIn(kPlacementNames); }
std::vector<std::string> jobOrderNames() { return namesIn(kJobOrderNames); }
std::vector<std::string> resourcesNames() { return namesIn(kResourcesNames); }

std::string joinNames(const std::vector<std::string>& names, std::string_view separator) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += separator;
    out += n;
  }
  return out;
}

}  // namespace tellus::sched
