#include "sched/fair_share.h"

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

}  // namespace tellus::sched
