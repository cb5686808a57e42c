#include "sched/fair_share.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <queue>
#include <tuple>

namespace tellus::sched {

std::vector<int> fairShare(const std::vector<SubJobShare>& subJobs, int freeContainers) {
  std::vector<int> grants(subJobs.size(), 0);
  // Min-heap on (share, index): the next container goes to the smallest share.
  using Entry = std::tuple<double, std::size_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (std::size_t i = 0; i < subJobs.size(); ++i) {
    assert(subJobs[i].weight > 0);
    if (subJobs[i].allocated < subJobs[i].desire) {
      heap.emplace(subJobs[i].allocated / subJobs[i].weight, i);
    }
  }
  for (int left = freeContainers; left > 0 && !heap.empty(); --left) {
    const auto [share, i] = heap.top();
    heap.pop();
    ++grants[i];
    const int held = subJobs[i].allocated + grants[i];
    if (held < subJobs[i].desire) heap.emplace(held / subJobs[i].weight, i);
  }
  return grants;
}

std::vector<int> grantInOrder(const std::vector<SubJobShare>& subJobs, const std::vector<std::size_t>& order,
                              int freeContainers) {
  std::vector<int> grants(subJobs.size(), 0);
  std::vector<bool> seen(subJobs.size(), false);
  std::vector<std::size_t> sequence;
  sequence.reserve(subJobs.size());
  for (std::size_t i : order) {
    if (i < subJobs.size() && !seen[i]) {
      seen[i] = true;
      sequence.push_back(i);
    }
  }
  for (std::size_t i = 0; i < subJobs.size(); ++i) {
    if (!seen[i]) sequence.push_back(i);
  }
  int left = freeContainers;
  for (std::size_t i : sequence) {
    if (left <= 0) break;
    grants[i] = std::min(left, std::max(0, subJobs[i].desire - subJobs[i].allocated));
    left -= grants[i];
  }
  return grants;
}

std::vector<int> withAllOrNone(std::vector<SubJobShare> subJobs, const std::vector<bool>& allOrNone,
                               std::vector<int> grants, int freeContainers, int siteContainers,
                               const std::function<std::vector<int>(const std::vector<SubJobShare>&, int)>& share) {
  int left = freeContainers;
  for (int g : grants) left -= g;
  bool withheld = false;
  for (size_t i = 0; i < subJobs.size(); ++i) {
    if (!allOrNone[i] || grants[i] == 0) continue;
    const int owed = std::min(std::max(0, subJobs[i].desire - subJobs[i].allocated), siteContainers - subJobs[i].allocated);
    if (grants[i] >= owed) continue;
    left += grants[i];
    grants[i] = 0;
    withheld = true;
  }
  if (!withheld || left <= 0) return grants;
  // The second round: every grant so far counts as held; the atomic sub-jobs ask for nothing
  // more (one that was withheld waits for a round with room for all it is owed).
  for (size_t i = 0; i < subJobs.size(); ++i) {
    subJobs[i].allocated += grants[i];
    if (allOrNone[i]) subJobs[i].desire = subJobs[i].allocated;
  }
  const auto more = share(subJobs, left);
  for (size_t i = 0; i < subJobs.size(); ++i) grants[i] += more[i];
  return grants;
}

}  // namespace tellus::sched
