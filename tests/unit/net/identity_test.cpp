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

TEST_CASE("a job's owner, an admin or a master may act on it; others are refused naming the job",
          "[unit][net][tls][owners]") {
  const PeerIdentity alice{Role::kClient, "", "alice"};
  const PeerIdentity bob{Role::kClient, "", "bob"};
  const PeerIdentity ops{Role::kClient, "", "ops"};
  const PeerIdentity master{Role::kMaster, "eu-west", ""};
  const PeerIdentity worker{Role::kWorker, "us-east", "alice"};  // a worker named like a client
  const std::vector<std::string> admins{"ops"};
  const std::string job = "job-0000000007";

  CHECK(checkJobAccess(alice, "client/alice", admins, job, "kill").isOk());
  CHECK(checkJobAccess(ops, "client/alice", admins, job, "kill").isOk());
  CHECK(checkJobAccess(master, "client/alice", admins, job, "kill").isOk());  // a fan-out or forward
  CHECK(checkJobAccess(std::nullopt, "client/alice", admins, job, "kill").isOk());  // insecure mode

  auto refused = checkJobAccess(bob, "client/alice", admins, job, "read the result of");
  REQUIRE_FALSE(refused.isOk());
  CHECK(refused.code() == ErrorCode::kPermissionDenied);
  CHECK(refused.message() == "permission denied: client/bob may not read the result of job job-0000000007: it is not "
                             "the job's owner (client/alice) nor an admin");
  // The role counts, not only the name: a worker is no client, and no admin.
  CHECK(checkJobAccess(worker, "client/alice", admins, job, "kill").code() == ErrorCode::kPermissionDenied);
  CHECK(checkJobAccess(PeerIdentity{Role::kWorker, "us-east", "ops"}, "client/alice", admins, job, "kill").code() ==
        ErrorCode::kPermissionDenied);
  // No admins configured: only the owner.
  CHECK(checkJobAccess(ops, "client/alice", {}, job, "kill").code() == ErrorCode::kPermissionDenied);

  // A job without a recorded owner (from before owners, or an unreadable status) is an admin's.
  CHECK(checkJobAccess(ops, "", admins, job, "kill").isOk());
  CHECK(checkJobAccess(std::nullopt, "", admins, job, "kill").isOk());
  auto ownerless = checkJobAccess(alice, "", admins, job, "kill");
  REQUIRE_FALSE(ownerless.isOk());
  CHECK(ownerless.code() == ErrorCode::kPermissionDenied);
  CHECK_THAT(ownerless.message(), Catch::Contains("job job-0000000007: the job records no owner"));
  CHECK_THAT(ownerless.message(), Catch::Contains("only an admin may"));

  // A stored owner is data from ZooKeeper: matched exactly, quoted only when it is an identity.
  CHECK(checkJobAccess(alice, "client/alice ", admins, job, "kill").code() == ErrorCode::kPermissionDenied);
  CHECK(checkJobAccess(alice, "CLIENT/alice", admins, job, "kill").code() == ErrorCode::kPermissionDenied);
  auto garbage = checkJobAccess(bob, "client/x\nforged line", admins, job, "kill");
  REQUIRE_FALSE(garbage.isOk());
  CHECK(garbage.message().find('\n') == std::string::npos);
  CHECK_THAT(garbage.message(), Catch::Contains("an unreadable identity"));
  // And so is the job id a caller sent: cut.
  auto longId = checkJobAccess(bob, "client/alice", admins, std::string(500, 'j'), "kill");
  CHECK(longId.message().size() < 300);
}
