#pragma once
// Copies of finished outputs on a second worker of the site (issue 12, "finished work survives a
// VM"): which worker keeps the copy, and the checks of a worker.Replicate request. Pure, no I/O.
//
// The worker that ran a task (W) asks one other live worker of its site (R) to pull the
// output's buckets from it with worker.Fetch and keep them in its own partition store. W
// records the output only once R answered, naming R only if the copy is complete: a record
// never names a copy that does not exist (docs/design.md, "Output copies").

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "net/identity.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::worker {

// The worker to keep the copy of an output written on `self`: the next live worker id after
// `self` in sorted order, wrapping around (deterministic, and spreads the copies of a site's
// workers over all of them). nullopt when `self` is alone. `live`: id -> RPC address.
std::optional<std::string> pickReplicaWorker(std::string_view self, const std::map<std::string, std::string>& live);

// What a Replicate request must satisfy on worker `self` of `site` (every field is hostile):
// addressed to this worker; a job id that names a directory; at most `maxBuckets` buckets; the
// source a live worker of this site (in `live`, at the address it published) other than this
// one; with TLS, the caller is that worker. kInvalidArgument / kPermissionDenied / kNotFound
// (the source is not live here yet: no copy), one line.
Status checkReplicateRequest(const pb::ReplicateRequest& req, std::string_view self, std::string_view site,
                             const std::optional<net::PeerIdentity>& caller,
                             const std::map<std::string, std::string>& live, uint32_t maxBuckets);

}  // namespace tellus::worker
