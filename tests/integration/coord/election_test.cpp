// LeaderElection against a real ZooKeeper: one leader at a time, succession when the leader
// dies, stepping down on session expiry and re-entering as a follower.
#include "coord/election.h"

#include <catch2/catch.hpp>

#include "harness/zk_server.h"
#include "harness/zk_session.h"
#include "zk_test_util.h"

using namespace tellus;
using namespace tellus::coord;
using namespace tellus::coord::testing;
using harness::eventually;
using harness::IoThread;

namespace {

// Leadership as the candidates report it through their callbacks (io thread) — the test
// checks that at no time two of them believe they lead.
struct Scoreboard {
  std::mutex mutex;
  std::vector<int> leading;  // per candidate: 1 while it believes it leads
  int maxConcurrent = 0;
  std::vector<int> elections;  // per candidate: times elected
  std::vector<int> losses;

  explicit Scoreboard(size_t n) : leading(n, 0), elections(n, 0), losses(n, 0) {}
  void elected(size_t i) {
    std::lock_guard lock(mutex);
    leading[i] = 1;
    ++elections[i];
    maxConcurrent = std::max(maxConcurrent, static_cast<int>(std::count(leading.begin(), leading.end(), 1)));
  }
  void lost(size_t i) {
    std::lock_guard lock(mutex);
    leading[i] = 0;
    ++losses[i];
  }
  void forget(size_t i) {  // the candidate died: it can no longer report anything
    std::lock_guard lock(mutex);
    leading[i] = 0;
  }
  std::vector<size_t> leaders() {
    std::lock_guard lock(mutex);
    std::vector<size_t> out;
    for (size_t i = 0; i < leading.size(); ++i) {
      if (leading[i]) out.push_back(i);
    }
    return out;
  }
  int maxLeaders() {
    std::lock_guard lock(mutex);
    return maxConcurrent;
  }
};

struct Candidate {
  std::unique_ptr<TestClient> client;
  std::unique_ptr<LeaderElection> election;
};

Candidate startCandidate(IoThread& io, const std::string& connectString, Scoreboard& board, size_t index,
                         std::chrono::milliseconds sessionTimeout = 4000ms, ElectionOptions electionOptions = {}) {
  Candidate c;
  c.client = std::make_unique<TestClient>(io, options(connectString, "/tellus-test", sessionTimeout));
  REQUIRE(c.client->run((*c.client)->waitConnected(10s)).isOk());
  REQUIRE(c.client->run((*c.client)->ensurePath("/jobs/job-1/election")).isOk());
  auto election = io.call([&] {
    return LeaderElection::start(
        c.client->shared(), "/jobs/job-1/election", "jm-" + std::to_string(index),
        {.onElected = [&board, index] { board.elected(index); }, .onLost = [&board, index] { board.lost(index); }},
        electionOptions);
  });
  REQUIRE(election.isOk());
  c.election = std::move(*election);
  return c;
}

// The candidate's process dies: its session closes and its node vanishes.
void kill(IoThread& io, Candidate& c, Scoreboard& board, size_t index) {
  io.call([&] {
    board.forget(index);
    c.election.reset();
  });
  c.client->release();
}

}  // namespace

TEST_CASE("trackPosition: a candidate's place follows a change ahead of its predecessor", "[integration][coord][election]") {
  IoThread io;
  auto server = harness::ZkServer::start();
  REQUIRE(server.isOk());
  Scoreboard board(3);
  std::vector<Candidate> candidates;
  ElectionOptions tracking;
  tracking.trackPosition = true;
  tracking.recheckInterval = std::chrono::hours(1);  // only the watches can move a place here
  const auto positions = [&] {
    return io.call([&] {
      std::vector<std::optional<size_t>> out;
      for (auto& c : candidates) out.push_back(c.election ? c.election->position() : std::nullopt);
      return out;
    });
  };
  for (size_t i = 0; i < 3; ++i) {
    candidates.push_back(startCandidate(io, (*server)->connectString(), board, i, 4000ms, tracking));
    // One at a time, so that the order is known.
    REQUIRE(eventually([&] { return positions().back() == std::optional<size_t>(i); }, 10s));
  }
  // The leader goes: the last candidate's predecessor is unchanged, yet it is next in line now.
  kill(io, candidates[0], board, 0);
  const std::vector<std::optional<size_t>> after{std::nullopt, size_t{0}, size_t{1}};
  CHECK(eventually([&] { return positions() == after; }, 10s));
  // Elections live on the io thread: end them there, not in the vector's destructor here.
  kill(io, candidates[1], board, 1);
  kill(io, candidates[2], board, 2);
}

TEST_CASE("a deleted election path is not re-created by its candidates", "[integration][coord][election]") {
  // A job's election lives under the job's node: candidates re-entering after an operator
  // deleted the job must not resurrect the job's nodes (they would race the delete forever).
  IoThread io;
  auto server = harness::ZkServer::start();
  REQUIRE(server.isOk());
  Scoreboard board(2);
  ElectionOptions fast;
  fast.retryDelay = 20ms;
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < 2; ++i) candidates.push_back(startCandidate(io, (*server)->connectString(), board, i, 4000ms, fast));
  REQUIRE(eventually([&] { return board.leaders() == std::vector<size_t>{0}; }, 10s));
  auto& zk = *candidates[0].client;
  REQUIRE(zk.run(zk->removeRecursive("/jobs/job-1")).isOk());
  // Both candidates lose their nodes and retry every 20 ms: over a second (some 50 tries
  // each) the path stays gone.
  REQUIRE(eventually([&] { return board.leaders().empty(); }, 10s));
  const bool recreated = eventually(
      [&] {
        auto exists = zk.run(zk->exists("/jobs/job-1"));
        return !exists || exists->has_value();
      },
      1s, 20ms);
  CHECK_FALSE(recreated);
  // Made again by its owner, the election goes on: someone leads.
  REQUIRE(zk.run(zk->ensurePath("/jobs/job-1/election")).isOk());
  CHECK(eventually([&] { return board.leaders().size() == 1; }, 10s));
  kill(io, candidates[0], board, 0);
  kill(io, candidates[1], board, 1);
}

TEST_CASE("three candidates: one leader at a time, succession on death", "[integration][coord][election]") {
  IoThread io;
  auto server = harness::ZkServer::start();
  REQUIRE(server.isOk());
  Scoreboard board(3);
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < 3; ++i) {
    candidates.push_back(startCandidate(io, (*server)->connectString(), board, i));
    // The first to enter leads; wait so that entry order is deterministic.
    if (i == 0) REQUIRE(eventually([&] { return board.leaders() == std::vector<size_t>{0}; }, 10s));
  }
  REQUIRE(eventually(
      [&] {
        return io.call([&] {
          return !candidates[1].election->candidatePath().empty() && !candidates[2].election->candidatePath().empty();
        });
      },
      10s));
  CHECK(board.leaders() == std::vector<size_t>{0});
  CHECK(io.call([&] { return candidates[0].election->isLeader(); }));
  CHECK_FALSE(io.call([&] { return candidates[1].election->isLeader(); }));

  // The candidate nodes carry their data and are ephemeral.
  std::string leaderNode = io.call([&] { return candidates[0].election->candidatePath(); });
  CHECK_THAT(leaderNode, Catch::StartsWith("/jobs/job-1/election/n_"));
  auto node = candidates[1].client->run((*candidates[1].client)->get(leaderNode));
  REQUIRE(node.isOk());
  CHECK(node->data == "jm-0");
  CHECK(node->stat.ephemeralOwner != 0);

  auto killedAt = std::chrono::steady_clock::now();
  kill(io, candidates[0], board, 0);
  REQUIRE(eventually([&] { return board.leaders() == std::vector<size_t>{1}; }, 10s));
  WARN("leader death -> successor elected: "
       << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killedAt).count()
       << " ms");

  // A follower dying changes nothing for the leader.
  kill(io, candidates[2], board, 2);
  auto survivor = std::make_unique<TestClient>(io, options((*server)->connectString()));
  REQUIRE(survivor->run((*survivor)->waitConnected(10s)).isOk());
  REQUIRE(eventually([&] { return survivor->run((*survivor)->children("/jobs/job-1/election"))->size() == 1; }, 10s));
  CHECK(board.leaders() == std::vector<size_t>{1});

  // A withdrawn leader removes its node and hears no callback.
  io.call([&] { candidates[1].election->withdraw(); });
  CHECK(io.call([&] { return !candidates[1].election->isLeader(); }));
  REQUIRE(eventually([&] { return survivor->run((*survivor)->children("/jobs/job-1/election"))->empty(); }, 10s));
  {
    std::lock_guard lock(board.mutex);
    CHECK(board.losses[1] == 0);
  }
  CHECK(board.maxLeaders() == 1);
  for (auto& c : candidates) {
    io.call([&] { c.election.reset(); });
  }
}

TEST_CASE("a leader whose session expires steps down and re-enters as a follower", "[integration][coord][election]") {
  IoThread io;
  auto server = harness::ZkServer::start();
  REQUIRE(server.isOk());
  Scoreboard board(2);
  std::vector<Candidate> candidates;
  candidates.push_back(startCandidate(io, (*server)->connectString(), board, 0, 2000ms));
  REQUIRE(eventually([&] { return board.leaders() == std::vector<size_t>{0}; }, 10s));
  candidates.push_back(startCandidate(io, (*server)->connectString(), board, 1, 2000ms));
  REQUIRE(eventually([&] { return !io.call([&] { return candidates[1].election->candidatePath(); }).empty(); }, 10s));
  std::string firstNode = io.call([&] { return candidates[0].election->candidatePath(); });

  auto credentials = io.call([&] { return (*candidates[0].client)->sessionCredentials(); });
  REQUIRE(harness::expireSession((*server)->connectString(), credentials.id, credentials.password).isOk());

  // The old leader hears it lost; the other candidate takes over. (The expiry trick first
  // moves the session to another connection, so the old leader may see a disconnect, a
  // reconnect and only then the expiry: it may step down, lead again briefly, then lose.)
  REQUIRE(eventually([&] { return board.leaders() == std::vector<size_t>{1}; }, 10s));
  // The old leader comes back with a new session and a new node, behind the new leader.
  REQUIRE(eventually(
      [&] {
        auto path = io.call([&] { return candidates[0].election->candidatePath(); });
        return !path.empty() && path != firstNode;
      },
      15s));
  CHECK(board.leaders() == std::vector<size_t>{1});
  CHECK_FALSE(io.call([&] { return candidates[0].election->isLeader(); }));
  {
    std::lock_guard lock(board.mutex);
    CHECK(board.losses[0] >= 1);
    CHECK(board.elections[0] == board.losses[0]);  // every term it had, it gave up
    CHECK(board.elections[1] == 1);
    CHECK(board.losses[1] == 0);
  }
  for (auto& c : candidates) {
    io.call([&] { c.election.reset(); });
  }
}
