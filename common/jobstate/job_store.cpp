#include "jobstate/job_store.h"

#include "jobstate/job_view.h"
#include "jobstate/paths.h"
#include "util/log.h"

namespace tellus::jobstate {

boost::asio::awaitable<Status> endJob(coord::Coordinator& zk, std::string jobId, pb::JobState state,
                                      std::string reason) {
  if (!isJobId(jobId)) co_return makeError(ErrorCode::kInvalidArgument, "bad job id '" + jobId + "'");
  constexpr int kTries = 10;  // each lost try means another writer changed the status meanwhile
  for (int attempt = 0; attempt < kTries; ++attempt) {
    auto node = co_await zk.get(statusPath(jobId));
    if (!node) {
      if (node.error().code == ErrorCode::kNotFound) co_return makeError(ErrorCode::kNotFound, "no job " + jobId);
      co_return node.status();
    }
    pb::JobStatus status;
    if (!status.ParseFromString(node->data)) {
      spdlog::warn("job {}: malformed JobStatus in {}; replacing it", jobId, statusPath(jobId));
      status.Clear();
      status.set_job_id(jobId);
    }
    if (isTerminal(status.state())) {
      co_return makeError(ErrorCode::kInvalidArgument, "job " + jobId + " has already " + jobStateName(status.state()));
    }
    status.set_state(state);
    status.set_finish_unix_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    status.set_error(reason);
    auto set = co_await zk.set(statusPath(jobId), status.SerializeAsString(), node->stat.version);
    if (set) co_return Status::ok();
    if (set.error().code != ErrorCode::kConflict) co_return set.status();
  }
  co_return makeError(ErrorCode::kConflict, "job " + jobId + ": its status kept changing; not ended");
}

}  // namespace tellus::jobstate
