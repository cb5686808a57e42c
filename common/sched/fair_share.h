#pragma once
// The fair scheduler a site master uses between periods to hand free containers to the
// sub-jobs running there (HOUTU §4.4): each free container goes to the sub-job holding the
// smallest (weighted) share whose desire is still unmet.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace tellus::sched {

struct SubJobShare {
  std::string id;
  int desire = 0;     // containers wanted (Af request)
  int allocated = 0;  // containers held now
  double weight = 1;  // share = allocated / weight; > 0
};

// Returns grants[i] >= 0 with sum(grants) <= freeContainers, granting one container at a
// time to the sub-job with the smallest (allocated + granted) / weight among those with
// allocated + granted < desire (ties: smaller index). Stops when no desire is unmet.
std::vector<int> fairShare(const std::vector<SubJobShare>& subJobs, int freeContainers);

// Atomic requests (paper 004 §III-C's atomic_request): a sub-job marked in `allOrNone` that
// `grants` would give only part of what it is owed — desire - allocated, at most
// siteContainers - allocated (more could never be granted) — gets nothing this round; what it
// would have had is shared again among the others by `share` (the policy that made `grants`).
std::vector<int> withAllOrNone(std::vector<SubJobShare> subJobs, const std::vector<bool>& allOrNone,
                               std::vector<int> grants, int freeContainers, int siteContainers,
                               const std::function<std::vector<int>(const std::vector<SubJobShare>&, int)>& share);

// The same containers handed out in a job order (paper 001: FCFS, SRPT, Reordering, SWAG):
// each sub-job in `order` (indices into subJobs) gets what it still wants (desire - allocated)
// before the next gets any. Sub-jobs missing from `order` come last, by index; indices out of
// range or repeated are ignored. sum(grants) <= freeContainers.
std::vector<int> grantInOrder(const std::vector<SubJobShare>& subJobs, const std::vector<std::size_t>& order,
                              int freeContainers);

}  // namespace tellus::sched
