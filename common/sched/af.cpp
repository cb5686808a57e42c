#include "sched/af.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace tellus::sched {

AfState afDesire(const AfState& previous, const AfObservation& last, const AfParams& params) {
  assert(params.rho > 1.0);
  double desire = 0;
  if (previous.period == 0) {
    desire = 1.0;
  } else if (last.utilization < params.delta && !last.hasWaitingTasks) {
    desire = previous.desire / params.rho;  // inefficient
  } else if (previous.desire > last.allocation) {
    desire = previous.desire;  // efficient and deprived: the site could not give more
  } else {
    desire = previous.desire * params.rho;  // efficient and satisfied: try for more
  }
  desire = std::clamp(desire, params.minDesire, std::max(params.minDesire, params.maxDesire));
  return AfState{previous.period + 1, desire};
}

int afContainerRequest(const AfState& state) {
  // Tolerate rounding noise from repeated ρ-scaling (e.g. 4/2·2 must stay 4, not 4.0000001).
  const double rounded = std::ceil(state.desire - 1e-9);
  return std::max(0, static_cast<int>(rounded));
}

}  // namespace tellus::sched
