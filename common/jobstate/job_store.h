#pragma once
// Writes of a job's state that more than one daemon makes, in one place over a
// coord::Coordinator (the start of the typed job store: the layout is jobstate/paths.h).

#include <string>

#include "coord/coordinator.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::jobstate {

// Ends a job that is still running: a compare-and-set of its status to `state` (KILLED,
// FAILED) with `reason` as its error. A malformed status is replaced, so a job whose state is
// corrupt can still be ended and its JMs see it end. Errors: kInvalidArgument for a bad id or
// a job that is already over ("job X has already succeeded"), kNotFound without the job,
// kConflict when concurrent writers won every try, else the coordinator's error.
boost::asio::awaitable<Status> endJob(coord::Coordinator& zk, std::string jobId, pb::JobState state,
                                      std::string reason);

}  // namespace tellus::jobstate
