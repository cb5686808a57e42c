// Peer identities (the tellus: SAN URI of a certificate), role sets and the identity binding
// handlers use: pure functions, no TLS.
#include <catch2/catch.hpp>

#include "net/identity.h"
#include "net/methods.h"

using namespace tellus;
using namespace tellus::net;

TEST_CASE("peer identities parse from the three forms and nothing else", "[unit][net][tls]") {
  auto master = parsePeerIdentity("master/us-east");
  REQUIRE(master.isOk());
  CHECK(master->role == Role::kMaster);
  CHECK(master->site == "us-east");
  CHECK(master->toString() == "master/us-east");

  auto worker = parsePeerIdentity("worker/us-east/us-east-w1");
  REQUIRE(worker.isOk());
  CHECK(worker->role == Role::kWorker);
  CHECK(worker->site == "us-east");
  CHECK(worker->name == "us-east-w1");
  CHECK(worker->toString() == "worker/us-east/us-east-w1");

  auto client = parsePeerIdentity("client/alice");
  REQUIRE(client.isOk());
  CHECK(client->role == Role::kClient);
  CHECK(client->name == "alice");
  CHECK(client->site.empty());

  for (const char* bad : {"", "master", "master/", "master/us-east/x", "worker/us-east", "client/alice/x",
                          "admin/root", "master/US-EAST", "master/us east", "worker//w1", "master/../etc",
                          "client/" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
    INFO(bad);
    auto id = parsePeerIdentity(bad);
    REQUIRE_FALSE(id.isOk());
    CHECK(id.error().code == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("a role set allows its roles; an empty one allows any", "[unit][net][tls]") {
  constexpr RoleSet any;
  CHECK(any.allows(Role::kClient));
  constexpr RoleSet masterOrWorker{Role::kMaster, Role::kWorker};
  CHECK(masterOrWorker.allows(Role::kMaster));
  CHECK(masterOrWorker.allows(Role::kWorker));
  CHECK_FALSE(masterOrWorker.allows(Role::kClient));
  CHECK(masterOrWorker.toString() == "master or worker");
}

TEST_CASE("daemon methods name their callers as issue 11 requires", "[unit][net][tls]") {
  // A worker cannot submit jobs; a client cannot run tasks; only masters hand out grants.
  CHECK_FALSE(rpc::Master::Submit::kCallers.allows(Role::kWorker));
  CHECK(rpc::Master::Submit::kCallers.allows(Role::kClient));
  CHECK_FALSE(rpc::Worker::RunTask::kCallers.allows(Role::kClient));
  CHECK(rpc::Worker::RunTask::kCallers.allows(Role::kWorker));
  CHECK_FALSE(rpc::Master::RegisterWorker::kCallers.allows(Role::kClient));
  CHECK_FALSE(rpc::Jm::Grants::kCallers.allows(Role::kWorker));
}

TEST_CASE("identity binding: a request speaks only for its caller's certificate", "[unit][net][tls]") {
  const PeerIdentity w1{Role::kWorker, "us-east", "us-east-w1"};
  const PeerIdentity w2{Role::kWorker, "us-east", "us-east-w2"};
  CHECK(checkCaller(w1, w1).isOk());
  auto forged = checkCaller(w2, w1);
  REQUIRE_FALSE(forged.isOk());
  CHECK(forged.code() == ErrorCode::kPermissionDenied);
  CHECK(forged.message().find("worker/us-east/us-east-w2") != std::string::npos);
  CHECK(checkCaller(std::nullopt, w1).isOk());  // plaintext: nothing to check against

  CHECK(checkCallerSite(w1, "us-east").isOk());
  CHECK(checkCallerSite(PeerIdentity{Role::kMaster, "us-east", ""}, "us-east").isOk());
  CHECK(checkCallerSite(w1, "mars").code() == ErrorCode::kPermissionDenied);
  CHECK(checkCallerSite(PeerIdentity{Role::kClient, "", "alice"}, "").code() == ErrorCode::kPermissionDenied);
  CHECK(checkCallerSite(std::nullopt, "mars").isOk());
}
