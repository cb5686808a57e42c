#include "worker/replication.h"

#include <fmt/format.h>

#include "util/names.h"

namespace tellus::worker {

std::optional<std::string> pickReplicaWorker(std::string_view self, const std::map<std::string, std::string>& live) {
  auto next = live.upper_bound(std::string(self));
  if (next == live.end()) next = live.begin();
  if (next == live.end() || next->first == self) return std::nullopt;
  return next->first;
}

Status checkReplicateRequest(const pb::ReplicateRequest& req, std::string_view self, std::string_view site,
                             const std::optional<net::PeerIdentity>& caller,
                             const std::map<std::string, std::string>& live, uint32_t maxBuckets) {
  if (req.worker_id() != self || req.site() != site) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("Replicate addressed to worker '{}' of site '{}'; this is {} of {}",
                                                              req.worker_id().substr(0, 64), req.site().substr(0, 64), self, site));
  }
  if (auto st = checkName("job id", req.job_id()); !st) return st.error().prepend("Replicate");
  if (req.buckets() == 0 || req.buckets() > maxBuckets) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("Replicate: {} buckets, expected 1 to {} (limits.max_tasks_per_stage)", req.buckets(), maxBuckets));
  }
  if (req.source_worker_id() == self) return makeError(ErrorCode::kInvalidArgument, "Replicate: a copy from this worker itself");
  // With TLS the caller must be the worker that holds the output: no one makes us pull
  // another worker's partitions. Plaintext has no identity to check against.
  if (Status st = net::checkCaller(caller, net::PeerIdentity{net::Role::kWorker, std::string(site), req.source_worker_id()}); !st) {
    return st.error().prepend("Replicate");
  }
  auto source = live.find(req.source_worker_id());
  if (source == live.end() || source->second != req.source_address()) {
    return makeError(ErrorCode::kNotFound, fmt::format("Replicate: '{}' at '{}' is not a live worker of {} here",
                                                       req.source_worker_id().substr(0, 64), req.source_address().substr(0, 128), site));
  }
  return {};
}

}  // namespace tellus::worker
