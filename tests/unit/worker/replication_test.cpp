// Output copies (worker/replication.h): which worker keeps a copy, and what a Replicate request
// must be to be served.
#include "worker/replication.h"

#include <catch2/catch.hpp>

using namespace tellus;
using namespace tellus::worker;

namespace {

const std::map<std::string, std::string> kLive = {{"a-w1", "h:1"}, {"a-w2", "h:2"}, {"a-w3", "h:3"}};

pb::ReplicateRequest request() {
  pb::ReplicateRequest r;
  r.set_job_id("job-7");
  r.set_stage(1);
  r.set_task(4);
  r.set_buckets(3);
  r.set_source_worker_id("a-w1");
  r.set_source_address("h:1");
  r.set_site("a");
  r.set_worker_id("a-w2");
  return r;
}

Status check(const pb::ReplicateRequest& r, const std::optional<net::PeerIdentity>& caller = std::nullopt) {
  return checkReplicateRequest(r, "a-w2", "a", caller, kLive, 100);
}

}  // namespace

TEST_CASE("the copy goes to the next live worker of the site after this one, wrapping; none when alone",
          "[unit][worker][replication]") {
  CHECK(pickReplicaWorker("a-w1", kLive) == "a-w2");
  CHECK(pickReplicaWorker("a-w2", kLive) == "a-w3");
  CHECK(pickReplicaWorker("a-w3", kLive) == "a-w1");
  // Not listed itself (its node not seen yet): still the next one after its id.
  CHECK(pickReplicaWorker("a-w25", kLive) == "a-w3");
  CHECK(pickReplicaWorker("a-w1", {{"a-w1", "h:1"}}) == std::nullopt);
  CHECK(pickReplicaWorker("a-w1", {}) == std::nullopt);
  CHECK(pickReplicaWorker("a-w1", {{"a-w0", "h:0"}}) == "a-w0");
}

TEST_CASE("a Replicate request is served only as addressed, bounded, from a live worker of the site that is the caller",
          "[unit][worker][replication]") {
  CHECK(check(request()).isOk());
  const net::PeerIdentity source{net::Role::kWorker, "a", "a-w1"};
  CHECK(check(request(), source).isOk());

  auto r = request();
  r.set_worker_id("a-w3");  // another worker's request
  CHECK(check(r).error().code == ErrorCode::kInvalidArgument);
  r = request();
  r.set_site("b");
  CHECK(check(r).error().code == ErrorCode::kInvalidArgument);
  r = request();
  r.set_job_id("../etc");
  CHECK(check(r).error().code == ErrorCode::kInvalidArgument);
  for (uint32_t buckets : {0u, 101u}) {
    r = request();
    r.set_buckets(buckets);
    const Status st = check(r);
    REQUIRE_FALSE(st.isOk());
    CHECK(st.error().code == ErrorCode::kInvalidArgument);
  }
  r = request();
  r.set_source_worker_id("a-w2");  // from itself
  r.set_source_address("h:2");
  CHECK(check(r).error().code == ErrorCode::kInvalidArgument);
  // With TLS the caller is the source: not another worker, of this site or another, nor a master.
  for (const auto& other : {net::PeerIdentity{net::Role::kWorker, "a", "a-w3"}, net::PeerIdentity{net::Role::kWorker, "b", "a-w1"},
                            net::PeerIdentity{net::Role::kMaster, "a", ""}}) {
    const Status st = check(request(), other);
    REQUIRE_FALSE(st.isOk());
    CHECK(st.error().code == ErrorCode::kPermissionDenied);
  }
  // The source must be live here at the address it published: nobody points us elsewhere.
  r = request();
  r.set_source_address("evil:1");
  CHECK(check(r).error().code == ErrorCode::kNotFound);
  r = request();
  r.set_source_worker_id("a-w9");
  CHECK(check(r).error().code == ErrorCode::kNotFound);
}
