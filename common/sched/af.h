#pragma once
// Af: adaptive-feedback container desire of one sub-job (HOUTU Alg. 1, §4.2).
// Pure: the caller measures allocation/utilization over period q-1 and passes them in.

#include <cstdint>
#include <limits>

namespace tellus::sched {

struct AfParams {
  double delta = 0.8;  // utilization threshold δ: u < δ with nothing waiting = inefficient period
  double rho = 2.0;    // adjustment factor ρ > 1: desire is multiplied/divided by it
  // Bounds applied after each step. The paper leaves d unbounded; a sub-job with waiting work
  // must keep asking for at least one container, and a site cannot grant more than it has.
  double minDesire = 1.0;
  double maxDesire = std::numeric_limits<double>::infinity();
};

// Desire after `period` steps. period == 0 means no desire was computed yet (q = 1 next).
struct AfState {
  std::uint64_t period = 0;
  double desire = 0;  // d(q), fractional: ρ-scaling is multiplicative; request ceil(desire)
};

// What happened in the last period q-1.
struct AfObservation {
  double allocation = 0;   // a(q-1): containers the sub-job actually held (<= desire)
  double utilization = 0;  // u(q-1): average resource utilization of those containers, in [0,1]
  bool hasWaitingTasks = false;  // any task of the sub-job waited during q-1
};

// One Af step: returns d(q) (state with period + 1).
//   q = 1                               -> 1
//   u < δ and no waiting tasks          -> d(q-1) / ρ   (inefficient)
//   d(q-1) > a(q-1)                     -> d(q-1)       (efficient, deprived)
//   otherwise                           -> d(q-1) · ρ   (efficient, satisfied)
// then clamped to [minDesire, maxDesire]. Requires rho > 1, 0 <= delta <= 1.
AfState afDesire(const AfState& previous, const AfObservation& last, const AfParams& params);

// Whole containers to request for a desire: ceil(desire), at least 0.
int afContainerRequest(const AfState& state);

}  // namespace tellus::sched
