#include "sched/parades.h"

#include <algorithm>
#include <cstddef>
#include <numeric>

namespace tellus::sched {
namespace {

bool contains(const std::vector<std::string_view>& values, const std::string& value) {
  return !value.empty() && std::find(values.begin(), values.end(), value) != values.end();
}

// Free capacity comparisons tolerate float noise from repeatedly subtracting fractions.
constexpr double kSlack = 1e-9;

}  // namespace

bool hasRoom(double free) { return free > kSlack; }

void sortForParades(std::span<WaitingTask> waiting) {
  const auto longerWait = [](const WaitingTask& a, const WaitingTask& b) { return a.waitS > b.waitS; };
  if (!std::is_sorted(waiting.begin(), waiting.end(), longerWait)) {
    std::stable_sort(waiting.begin(), waiting.end(), longerWait);
  }
}

void dropLaunched(std::span<WaitingTask>& waiting, uint64_t key) {
  const auto launched = std::find_if(waiting.begin(), waiting.end(), [&](const WaitingTask& w) { return w.key == key; });
  if (launched == waiting.end()) return;
  std::rotate(launched, launched + 1, waiting.end());
  waiting = waiting.first(waiting.size() - 1);
}

ParadesDecision paradesOnUpdate(std::span<const WaitingTask> waiting, const ContainerUpdate& update,
                                const ParadesParams& params) {
  ParadesDecision decision;
  decision.freeAfter = update.free;
  if (waiting.empty()) {
    decision.steal = true;
    return decision;
  }
  if (!hasRoom(decision.freeAfter)) return decision;  // a full container takes nothing
  // Longest waiting first within a locality level; stable so input order breaks ties. A
  // caller asking for many containers in a row sorts once (sortForParades).
  std::vector<std::size_t> byWait(waiting.size());
  std::iota(byWait.begin(), byWait.end(), 0);
  const auto longerWait = [&](std::size_t a, std::size_t b) { return waiting[a].waitS > waiting[b].waitS; };
  if (!std::is_sorted(byWait.begin(), byWait.end(), longerWait)) std::stable_sort(byWait.begin(), byWait.end(), longerWait);
  std::vector<bool> launched(waiting.size(), false);

  auto pick = [&](auto&& eligible) -> std::ptrdiff_t {
    for (std::size_t i : byWait) {
      if (!launched[i] && waiting[i].resource <= decision.freeAfter + kSlack && eligible(waiting[i])) {
        return static_cast<std::ptrdiff_t>(i);
      }
    }
    return -1;
  };

  while (hasRoom(decision.freeAfter)) {
    Locality locality = Locality::kNodeLocal;
    std::ptrdiff_t chosen = pick([&](const WaitingTask& t) { return contains(t.preferredNodes, update.node); });
    if (chosen < 0) {
      locality = Locality::kRackLocal;
      chosen = pick([&](const WaitingTask& t) {
        return contains(t.preferredRacks, update.rack) && t.waitS >= params.tau * t.processingS;
      });
    }
    if (chosen < 0 && decision.freeAfter >= 1.0 - params.delta - kSlack) {
      locality = Locality::kAny;
      chosen = pick([&](const WaitingTask& t) { return t.waitS >= 2.0 * params.tau * t.processingS; });
    }
    if (chosen < 0) break;
    const auto index = static_cast<std::size_t>(chosen);
    launched[index] = true;
    decision.launches.push_back(TaskLaunch{waiting[index].key, locality});
    decision.freeAfter = std::max(0.0, decision.freeAfter - waiting[index].resource);
  }
  return decision;
}

}  // namespace tellus::sched
