// FaultInjectingCoordinator over a real ZooKeeper: injected failures before and after a
// request, and a leader election that survives a lost create reply without a duplicate node.
#include <catch2/catch.hpp>

#include "coord/election.h"
#include "coord/fault_injection.h"
#include "harness/zk_server.h"
#include "zk_test_util.h"

using namespace tellus;
using namespace tellus::coord;
using namespace tellus::coord::testing;
using harness::eventually;
using harness::IoThread;
using Fault = FaultInjectingCoordinator::Fault;

TEST_CASE("injected faults before and after a request", "[integration][coord][faults]") {
  IoThread io;
  auto server = harness::ZkServer::start();
  REQUIRE(server.isOk());
  TestClient zk(io, options((*server)->connectString()));
  REQUIRE(zk.run(zk->waitConnected(10s)).isOk());
  auto faulty = std::make_shared<FaultInjectingCoordinator>(zk.shared());

  // Before: nothing reaches ZooKeeper.
  faulty->injectNext(Fault::kBefore, "create");
  auto before = zk.run(faulty->create("/f1", "", CreateMode::kPersistent));
  REQUIRE_FALSE(before.isOk());
  CHECK(before.error().code == ErrorCode::kUnavailable);
  CHECK_FALSE(zk.run(zk->exists("/f1"))->has_value());

  // After: the write happened, the caller cannot know.
  faulty->injectNext(Fault::kAfter, "create");
  auto after = zk.run(faulty->create("/f2", "", CreateMode::kPersistent));
  REQUIRE_FALSE(after.isOk());
  CHECK_THAT(after.message(), Catch::Contains("may or may not"));
  CHECK(zk.run(zk->exists("/f2"))->has_value());
  CHECK(faulty->injectedFaults() == 2);

  // Random faults follow the seed: the same seed gives the same outcomes.
  auto outcomes = [&](uint64_t seed) {
    faulty->setOptions({.failBeforeProbability = 0.5, .seed = seed});
    std::vector<bool> ok;
    for (int i = 0; i < 16; ++i) ok.push_back(zk.run(faulty->exists("/f2")).isOk());
    return ok;
  };
  auto first = outcomes(7);
  CHECK(first == outcomes(7));
  CHECK(std::count(first.begin(), first.end(), false) > 0);
  CHECK(std::count(first.begin(), first.end(), true) > 0);
}

TEST_CASE("an election survives a lost create reply without a duplicate candidate", "[integration][coord][faults]") {
  IoThread io;
  auto server = harness::ZkServer::start();
  REQUIRE(server.isOk());
  TestClient zk(io, options((*server)->connectString()));
  REQUIRE(zk.run(zk->waitConnected(10s)).isOk());
  REQUIRE(zk.run(zk->ensurePath("/jobs/job-9/election")).isOk());
  auto faulty = std::make_shared<FaultInjectingCoordinator>(zk.shared());
  faulty->injectNext(Fault::kAfter, "create");  // the candidate node is made, the reply lost

  std::atomic<int> elected{0};
  auto election = io.call([&] {
    return LeaderElection::start(faulty, "/jobs/job-9/election", "jm-x",
                                 {.onElected = [&] { ++elected; }, .onLost = [] {}});
  });
  REQUIRE(election.isOk());
  REQUIRE(eventually([&] { return elected.load() == 1; }, 10s));
  CHECK(faulty->injectedFaults() == 1);
  // The node made by the "failed" create was recognized and adopted: only one candidate.
  auto kids = zk.run(zk->children("/jobs/job-9/election"));
  REQUIRE(kids.isOk());
  CHECK(kids->size() == 1);
  CHECK(io.call([&] { return (*election)->candidatePath(); }) == "/jobs/job-9/election/" + kids->front());
  io.call([&] { election->reset(); });
}
