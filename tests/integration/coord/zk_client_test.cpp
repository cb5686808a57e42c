// ZkClient against a real ZooKeeper (short tick time): operations, CAS, transactions,
// ephemeral nodes, persistent watches, session loss and expiry, and an ensemble losing its
// leader.
#include <catch2/catch.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <atomic>
#include <csignal>
#include <fmt/format.h>

#include "coord/blocking.h"
#include "coord/paths.h"
#include "harness/zk_server.h"
#include "harness/zk_session.h"
#include "proc/ports.h"
#include "zk_test_util.h"

using namespace tellus;
using namespace tellus::coord;
using namespace tellus::coord::testing;
using harness::eventually;
using harness::IoThread;
using harness::ZkServer;

namespace {

std::unique_ptr<ZkServer> startServer() {
  auto server = ZkServer::start();
  REQUIRE(server.isOk());
  return std::move(*server);
}

// A server and two clients connected to it: one that watches, one that writes.
struct WatcherAndWriter {
  IoThread io;
  std::unique_ptr<ZkServer> server = startServer();
  TestClient zk{io, options(server->connectString())};
  TestClient writer{io, options(server->connectString())};
  WatcherAndWriter() {
    REQUIRE(zk.run(zk->waitConnected(10s)).isOk());
    REQUIRE(writer.run(writer->waitConnected(10s)).isOk());
  }
};

// Thread-safe snapshot of the values a watch delivered.
template <class T>
class Observed {
 public:
  void add(T value) {
    std::lock_guard lock(mutex_);
    values_.push_back(std::move(value));
  }
  std::vector<T> values() const {
    std::lock_guard lock(mutex_);
    return values_;
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return values_.size();
  }
  bool lastIs(const T& value) const {
    std::lock_guard lock(mutex_);
    return !values_.empty() && values_.back() == value;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<T> values_;
};

// Requests of every kind, in a loop on the client's executor until told to stop (or the
// client is closed). Owned through a shared_ptr: a failed test leaves its loops running.
struct Load {
  std::atomic<bool> stop{false};
  std::atomic<int> finished{0};
  std::atomic<int64_t> requests{0};
};
constexpr int64_t kLoadRequests = 7;  // per round of loadLoop

boost::asio::awaitable<void> loadLoop(std::shared_ptr<ZkClient> client, std::shared_ptr<Load> load, int index) {
  const std::string mine = fmt::format("/load/n{}", index);
  while (!load->stop.load() && client->state() != SessionState::kClosed) {
    auto got = co_await client->get("/load");
    auto stat = co_await client->exists(mine);
    auto created = co_await client->create(mine, "x", CreateMode::kEphemeral);
    auto names = co_await client->children("/load");
    std::vector<ZkOp> ops{ZkOp::check("/load", got ? got->stat.version : 0), ZkOp::set(mine, "y", -1)};
    auto applied = co_await client->multi(std::move(ops));
    auto written = co_await client->set("/load", std::to_string(index), -1);
    auto removed = co_await client->remove(mine);
    (void)stat, (void)created, (void)names, (void)applied, (void)written, (void)removed;
    load->requests += kLoadRequests;
  }
  ++load->finished;
}

// nullopt (no node) shows as "<none>".
std::string show(const std::optional<NodeData>& data) { return data ? data->data : "<none>"; }

}  // namespace

TEST_CASE("create, get, set with CAS, children, exists, remove", "[integration][coord]") {
  IoThread io;
  auto server = startServer();
  TestClient zk(io, options(server->connectString()));
  REQUIRE(zk.run(zk->waitConnected(10s)).isOk());
  CHECK(zk.call([&] { return zk->state(); }) == SessionState::kConnected);
  CHECK(zk.call([&] { return zk->sessionId(); }) != 0);
  CHECK(zk.log().events() == std::vector<SessionEvent>{SessionEvent::kConnected});

  auto created = zk.run(zk->create("/a", "one", CreateMode::kPersistent));
  REQUIRE(created.isOk());
  CHECK(*created == "/a");
  auto dup = zk.run(zk->create("/a", "again", CreateMode::kPersistent));
  REQUIRE_FALSE(dup.isOk());
  CHECK(dup.error().code == ErrorCode::kAlreadyExists);
  CHECK_THAT(dup.message(), Catch::Contains("/a"));

  auto got = zk.run(zk->get("/a"));
  REQUIRE(got.isOk());
  CHECK(got->data == "one");
  CHECK(got->stat.version == 0);
  CHECK(got->stat.ephemeralOwner == 0);

  // Compare-and-set: the right version wins once, a stale one conflicts.
  auto set1 = zk.run(zk->set("/a", "two", 0));
  REQUIRE(set1.isOk());
  CHECK(set1->version == 1);
  auto stale = zk.run(zk->set("/a", "three", 0));
  REQUIRE_FALSE(stale.isOk());
  CHECK(stale.error().code == ErrorCode::kConflict);
  CHECK_THAT(stale.message(), Catch::Contains("set /a"));
  CHECK(zk.run(zk->get("/a"))->data == "two");
  CHECK(zk.run(zk->set("/a", "any", -1)).isOk());

  auto missing = zk.run(zk->get("/nope"));
  REQUIRE_FALSE(missing.isOk());
  CHECK(missing.error().code == ErrorCode::kNotFound);
  CHECK(missing.message() == "get /nope: no node (ZNONODE)");

  // Binary data round-trips.
  std::string binary("\0\x01\xff payload", 11);
  REQUIRE(zk.run(zk->create("/bin", binary, CreateMode::kPersistent)).isOk());
  CHECK(zk.run(zk->get("/bin"))->data == binary);
  REQUIRE(zk.run(zk->create("/empty", "", CreateMode::kPersistent)).isOk());
  CHECK(zk.run(zk->get("/empty"))->data.empty());

  REQUIRE(zk.run(zk->ensurePath("/a/b/c/d")).isOk());
  REQUIRE(zk.run(zk->ensurePath("/a/b/c/d")).isOk());  // already there: fine
  auto seq1 = zk.run(zk->create("/a/b/job-", "", CreateMode::kPersistentSequential));
  auto seq2 = zk.run(zk->create("/a/b/job-", "", CreateMode::kPersistentSequential));
  REQUIRE(seq1.isOk());
  REQUIRE(seq2.isOk());
  CHECK(*seq1 != *seq2);
  CHECK(sequenceNumber(*seq2).value() == sequenceNumber(*seq1).value() + 1);
  CHECK_THAT(*seq1, Catch::StartsWith("/a/b/job-"));

  auto kids = zk.run(zk->children("/a/b"));
  REQUIRE(kids.isOk());
  CHECK(*kids == std::vector<std::string>{"c", baseName(*seq1), baseName(*seq2)});
  CHECK(zk.run(zk->children("/nope")).error().code == ErrorCode::kNotFound);

  auto present = zk.run(zk->exists("/a/b/c"));
  REQUIRE(present.isOk());
  REQUIRE(present->has_value());
  CHECK((*present)->numChildren == 1);
  auto absent = zk.run(zk->exists("/nope"));
  REQUIRE(absent.isOk());
  CHECK_FALSE(absent->has_value());

  auto notEmpty = zk.run(zk->remove("/a/b"));
  CHECK(notEmpty.code() == ErrorCode::kConflict);
  CHECK(zk.run(zk->remove("/a/b/c/d", 5)).code() == ErrorCode::kConflict);  // wrong version
  REQUIRE(zk.run(zk->remove("/a/b/c/d", 0)).isOk());
  CHECK(zk.run(zk->remove("/a/b/c/d")).code() == ErrorCode::kNotFound);
  REQUIRE(zk.run(zk->removeRecursive("/a")).isOk());
  CHECK_FALSE(zk.run(zk->exists("/a"))->has_value());
  REQUIRE(zk.run(zk->removeRecursive("/a")).isOk());  // already gone: fine

  // Bad input is rejected before any request.
  CHECK(zk.run(zk->get("relative")).error().code == ErrorCode::kInvalidArgument);
  CHECK(zk.run(zk->create("/x/", "", CreateMode::kPersistent)).error().code == ErrorCode::kInvalidArgument);
  CHECK(zk.run(zk->removeRecursive("/")).code() == ErrorCode::kInvalidArgument);
  CHECK(zk.run(zk->set("/x", "", -2)).error().code == ErrorCode::kInvalidArgument);

  // Everything lives under the chroot: a root client sees it there.
  REQUIRE(zk.run(zk->create("/visible", "v", CreateMode::kPersistent)).isOk());
  TestClient root(io, options(server->connectString(), "/"));
  REQUIRE(root.run(root->waitConnected(10s)).isOk());
  CHECK(root.run(root->get("/tellus-test/visible"))->data == "v");
}

TEST_CASE("multi applies all operations or none", "[integration][coord]") {
  IoThread io;
  auto server = startServer();
  TestClient zk(io, options(server->connectString(), "/deep/chroot"));
  REQUIRE(zk.run(zk->waitConnected(10s)).isOk());  // creates /deep/chroot
  REQUIRE(zk.run(zk->create("/task", "jm-a", CreateMode::kPersistent)).isOk());

  auto results = zk.run(zk->multi({ZkOp::check("/task", 0), ZkOp::set("/task", "jm-b", 0),
                                   ZkOp::create("/log-", "stolen", CreateMode::kPersistentSequential),
                                   ZkOp::create("/tmp", "", CreateMode::kPersistent), ZkOp::remove("/tmp")}));
  REQUIRE(results.isOk());
  REQUIRE(results->size() == 5);
  REQUIRE((*results)[1].stat.has_value());
  CHECK((*results)[1].stat->version == 1);
  CHECK_THAT((*results)[2].createdPath, Catch::StartsWith("/log-"));
  CHECK(sequenceNumber((*results)[2].createdPath).has_value());
  CHECK(zk.run(zk->get("/task"))->data == "jm-b");

  // The stale check fails the whole transaction: the create before it is not applied.
  auto failed = zk.run(zk->multi(
      {ZkOp::create("/never", "", CreateMode::kPersistent), ZkOp::check("/task", 0), ZkOp::set("/task", "jm-c", -1)}));
  REQUIRE_FALSE(failed.isOk());
  CHECK(failed.error().code == ErrorCode::kConflict);
  CHECK_THAT(failed.message(), Catch::Contains("multi op #1 (check) /task"));
  CHECK_FALSE(zk.run(zk->exists("/never"))->has_value());
  CHECK(zk.run(zk->get("/task"))->data == "jm-b");

  CHECK(zk.run(zk->multi({}))->empty());
  CHECK(zk.run(zk->multi({ZkOp::check("/task", -1)})).error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("ephemeral nodes vanish when their session closes", "[integration][coord]") {
  IoThread io;
  auto server = startServer();
  TestClient owner(io, options(server->connectString()));
  TestClient observer(io, options(server->connectString()));
  REQUIRE(owner.run(owner->waitConnected(10s)).isOk());
  REQUIRE(observer.run(observer->waitConnected(10s)).isOk());

  REQUIRE(owner.run(owner->ensurePath("/sites")).isOk());
  REQUIRE(owner.run(owner->create("/sites/eu", "10.0.0.1:7000", CreateMode::kEphemeral)).isOk());
  auto seen = observer.run(observer->get("/sites/eu"));
  REQUIRE(seen.isOk());
  CHECK(seen->stat.ephemeralOwner == owner.call([&] { return owner->sessionId(); }));
  CHECK(owner.run(owner->create("/sites/eu/child", "", CreateMode::kPersistent)).error().code ==
        ErrorCode::kInvalidArgument);

  owner.release();  // closing the session removes its ephemeral nodes at once
  CHECK_FALSE(observer.run(observer->exists("/sites/eu"))->has_value());
}

TEST_CASE("a coalesced children watch asks its window at each change and while it runs, and gathers what comes "
          "within it",
          "[integration][coord]") {
  WatcherAndWriter clients;
  auto& zk = clients.zk;
  auto& writer = clients.writer;
  REQUIRE(writer.run(writer->ensurePath("/parts")).isOk());

  std::atomic<int64_t> windowMs{600'000};
  std::atomic<int> asked{0};
  Observed<std::vector<std::string>> kids;
  auto watch = zk.call([&] {
    return zk->watchChildren("/parts", [&](const auto& k) { kids.add(k); }, [&] {
      ++asked;
      return std::chrono::milliseconds(windowMs.load());
    });
  });
  REQUIRE(watch.isOk());
  REQUIRE(eventually([&] { return kids.lastIs({}); }, 5s));
  // The window is asked when the change comes: at 0 it is listed at once, not ten minutes
  // after the first listing (the stage's last outputs, JobCore::awaitingLastOutputs).
  windowMs = 0;
  REQUIRE(writer.run(writer->create("/parts/b-1", "", CreateMode::kPersistent)).isOk());
  REQUIRE(eventually([&] { return kids.lastIs({"b-1"}); }, 10s));
  // A change inside a ten-minute window waits; the window going to 0 meanwhile ends the wait
  // with no other change (the JM's own tasks ended, and the stage's last outputs are near).
  windowMs = 600'000;
  const int before = asked.load();
  REQUIRE(writer.run(writer->create("/parts/b-2", "", CreateMode::kPersistent)).isOk());
  REQUIRE(eventually([&] { return asked.load() >= before + 3; }, 10s));  // waiting, asking again
  CHECK(kids.lastIs({"b-1"}));
  windowMs = 0;
  REQUIRE(eventually([&] { return kids.lastIs({"b-1", "b-2"}); }, 10s));
  // Within a window, the changes that follow the first come in one listing with it.
  windowMs = 3000;
  REQUIRE(writer.run(writer->create("/parts/b-3", "", CreateMode::kPersistent)).isOk());
  REQUIRE(writer.run(writer->create("/parts/b-4", "", CreateMode::kPersistent)).isOk());
  REQUIRE(eventually([&] { return kids.lastIs({"b-1", "b-2", "b-3", "b-4"}); }, 10s));
  CHECK(kids.values().size() == 4);
}

TEST_CASE("watches deliver the current value and every later change until cancelled", "[integration][coord]") {
  WatcherAndWriter clients;
  auto& zk = clients.zk;
  auto& writer = clients.writer;
  REQUIRE(writer.run(writer->ensurePath("/jobs")).isOk());

  Observed<std::string> data;
  Observed<std::vector<std::string>> kids;
  auto dataWatch = zk.call([&] { return zk->watchData("/jobs/spec", [&](const auto& d) { data.add(show(d)); }); });
  auto kidsWatch = zk.call([&] { return zk->watchChildren("/jobs", [&](const auto& k) { kids.add(k); }); });
  REQUIRE(dataWatch.isOk());
  REQUIRE(kidsWatch.isOk());
  CHECK(zk.call([&] { return zk->watchData("bad", [](const auto&) {}).isOk(); }) == false);

  // Initial values: no node, no children.
  REQUIRE(eventually([&] { return data.lastIs("<none>"); }, 5s));
  REQUIRE(eventually([&] { return kids.lastIs({}); }, 5s));

  // Creation, then several successive changes: each one is observed (the watch re-arms).
  REQUIRE(writer.run(writer->create("/jobs/spec", "v0", CreateMode::kPersistent)).isOk());
  REQUIRE(eventually([&] { return data.lastIs("v0"); }, 5s));
  for (int i = 1; i <= 5; ++i) {
    std::string value = "v" + std::to_string(i);
    REQUIRE(writer.run(writer->set("/jobs/spec", value, -1)).isOk());
    REQUIRE(eventually([&] { return data.lastIs(value); }, 5s));
  }
  REQUIRE(eventually([&] { return kids.lastIs({"spec"}); }, 5s));
  REQUIRE(writer.run(writer->create("/jobs/j1", "", CreateMode::kPersistent)).isOk());
  REQUIRE(eventually([&] { return kids.lastIs({"j1", "spec"}); }, 5s));
  REQUIRE(writer.run(writer->create("/jobs/j2", "", CreateMode::kPersistent)).isOk());
  REQUIRE(eventually([&] { return kids.lastIs({"j1", "j2", "spec"}); }, 5s));

  // Deletion is reported, and re-creation after it.
  REQUIRE(writer.run(writer->remove("/jobs/spec")).isOk());
  REQUIRE(eventually([&] { return data.lastIs("<none>"); }, 5s));
  REQUIRE(writer.run(writer->create("/jobs/spec", "again", CreateMode::kPersistent)).isOk());
  REQUIRE(eventually([&] { return data.lastIs("again"); }, 5s));
  // No duplicates: every delivered value differs from the one before it.
  auto history = data.values();
  for (size_t i = 1; i < history.size(); ++i) CHECK(history[i] != history[i - 1]);

  // A cancelled watch hears nothing more: change both nodes, wait until the live watch has
  // seen its change (so the events have been processed), then check the cancelled one.
  zk.call([&] { dataWatch->cancel(); });
  size_t before = data.size();
  REQUIRE(writer.run(writer->set("/jobs/spec", "after-cancel", -1)).isOk());
  REQUIRE(writer.run(writer->create("/jobs/j3", "", CreateMode::kPersistent)).isOk());
  REQUIRE(eventually([&] { return kids.lastIs({"j1", "j2", "j3", "spec"}); }, 5s));
  CHECK(data.size() == before);
  zk.call([&] { kidsWatch->cancel(); });
}

TEST_CASE("an expired session is replaced; watches and ephemerals recover", "[integration][coord]") {
  IoThread io;
  auto server = startServer();
  TestClient zk(io, options(server->connectString(), "/tellus-test", 2000ms));
  TestClient writer(io, options(server->connectString()));
  REQUIRE(zk.run(zk->waitConnected(10s)).isOk());
  REQUIRE(writer.run(writer->waitConnected(10s)).isOk());
  int64_t firstSession = zk.call([&] { return zk->sessionId(); });

  REQUIRE(zk.run(zk->create("/jm", "primary", CreateMode::kEphemeral)).isOk());
  REQUIRE(writer.run(writer->create("/state", "s0", CreateMode::kPersistent)).isOk());
  Observed<std::string> data;
  auto watch = zk.call([&] { return zk->watchData("/state", [&](const auto& d) { data.add(show(d)); }); });
  REQUIRE(watch.isOk());
  REQUIRE(eventually([&] { return data.lastIs("s0"); }, 5s));

  auto credentials = zk.call([&] { return zk->sessionCredentials(); });
  CHECK(credentials.id == firstSession);
  REQUIRE(credentials.password.size() == 16);
  auto start = std::chrono::steady_clock::now();
  REQUIRE(harness::expireSession(server->connectString(), credentials.id, credentials.password).isOk());

  REQUIRE(eventually([&] { return zk.log().count(SessionEvent::kNewSession) == 1; }, 15s));
  WARN("session expiry -> new session: "
       << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count()
       << " ms");
  auto events = zk.log().events();
  // kConnected first; then (possibly kDisconnected), kExpired, kNewSession in that order.
  REQUIRE(events.size() >= 3);
  CHECK(events.front() == SessionEvent::kConnected);
  CHECK(events[events.size() - 2] == SessionEvent::kExpired);
  CHECK(events.back() == SessionEvent::kNewSession);
  CHECK(zk.log().count(SessionEvent::kExpired) == 1);
  int64_t secondSession = zk.call([&] { return zk->sessionId(); });
  CHECK(secondSession != 0);
  CHECK(secondSession != firstSession);

  // The old session's ephemeral node is gone and can be created again by the new session.
  CHECK_FALSE(writer.run(writer->exists("/jm"))->has_value());
  REQUIRE(zk.run(zk->create("/jm", "primary", CreateMode::kEphemeral)).isOk());
  CHECK(writer.run(writer->get("/jm"))->stat.ephemeralOwner == secondSession);

  // The watch was re-armed on the new session.
  REQUIRE(writer.run(writer->set("/state", "s1", -1)).isOk());
  REQUIRE(eventually([&] { return data.lastIs("s1"); }, 5s));
  zk.call([&] { watch->cancel(); });
}

TEST_CASE("a hung server makes the session expire locally; a new one follows", "[integration][coord]") {
  IoThread io;
  auto server = startServer();
  TestClient zk(io, options(server->connectString(), "/tellus-test", 1000ms));
  REQUIRE(zk.run(zk->waitConnected(10s)).isOk());
  auto timeout = zk.call([&] { return zk->negotiatedTimeout(); });
  CHECK(timeout == 1000ms);

  auto start = std::chrono::steady_clock::now();
  REQUIRE(server->pause().isOk());
  REQUIRE(eventually([&] { return zk.log().count(SessionEvent::kDisconnected) == 1; }, 5s));
  auto disconnected = std::chrono::steady_clock::now();
  REQUIRE(eventually([&] { return zk.log().count(SessionEvent::kExpired) == 1; }, 5s));
  auto expired = std::chrono::steady_clock::now();
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  WARN("pause -> disconnected " << duration_cast<milliseconds>(disconnected - start).count()
                                << " ms, -> locally expired " << duration_cast<milliseconds>(expired - start).count()
                                << " ms");
  // The local timer runs a full session timeout after the disconnect.
  CHECK(expired - disconnected >= timeout - 50ms);
  CHECK(zk.call([&] { return zk->state(); }) == SessionState::kConnecting);

  // Requests fail as unavailable (after their retry budget) while there is no session.
  auto during = zk.run(zk->get("/"));
  REQUIRE_FALSE(during.isOk());
  CHECK(during.error().code == ErrorCode::kUnavailable);

  REQUIRE(server->resume().isOk());
  REQUIRE(eventually([&] { return zk.log().count(SessionEvent::kNewSession) == 1; }, 15s));
  CHECK(zk.run(zk->get("/")).isOk());
}

TEST_CASE("a server restart within the session timeout keeps the session", "[integration][coord]") {
  IoThread io;
  auto server = startServer();
  TestClient zk(io, options(server->connectString(), "/tellus-test", 8000ms));
  REQUIRE(zk.run(zk->waitConnected(10s)).isOk());
  int64_t session = zk.call([&] { return zk->sessionId(); });
  REQUIRE(zk.run(zk->create("/mine", "", CreateMode::kEphemeral)).isOk());

  REQUIRE(server->stop().isOk());
  REQUIRE(eventually([&] { return zk.log().count(SessionEvent::kDisconnected) == 1; }, 5s));
  REQUIRE(server->restart().isOk());
  REQUIRE(eventually([&] { return zk.log().count(SessionEvent::kConnected) == 2; }, 15s));
  CHECK(zk.log().count(SessionEvent::kExpired) == 0);
  CHECK(zk.call([&] { return zk->sessionId(); }) == session);
  // Same session: the ephemeral node survived.
  CHECK(zk.run(zk->exists("/mine"))->has_value());
}

TEST_CASE("client options and unreachable servers give clear errors", "[integration][coord]") {
  IoThread io;
  SessionOptions bad;
  CHECK(ZkClient::create(io.executor(), bad).error().code == ErrorCode::kInvalidArgument);
  bad.connectString = "127.0.0.1:2181/chroot";
  CHECK_THAT(ZkClient::create(io.executor(), bad).message(), Catch::Contains("SessionOptions.chroot"));
  bad.connectString = "127.0.0.1:2181";
  bad.chroot = "no-slash";
  CHECK(ZkClient::create(io.executor(), bad).error().code == ErrorCode::kInvalidArgument);

  auto port = proc::findFreePort();
  REQUIRE(port.isOk());
  TestClient nobody(io, options("127.0.0.1:" + std::to_string(*port)));
  auto st = nobody.run(nobody->waitConnected(300ms));
  CHECK(st.code() == ErrorCode::kDeadlineExceeded);
  CHECK_THAT(st.message(), Catch::Contains(std::to_string(*port)));
}

TEST_CASE("an ensemble loses its leader server and the client carries on", "[integration][coord]") {
  IoThread io;
  auto start = std::chrono::steady_clock::now();
  auto ensemble = harness::ZkEnsemble::start(3);
  REQUIRE(ensemble.isOk());
  WARN("3-node ensemble start-up: "
       << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count()
       << " ms");
  auto& zkEnsemble = **ensemble;
  TestClient zk(io, options(zkEnsemble.connectString(), "/tellus-test", 6000ms));
  REQUIRE(zk.run(zk->waitConnected(10s)).isOk());
  int64_t session = zk.call([&] { return zk->sessionId(); });
  REQUIRE(zk.run(zk->create("/counter", "0", CreateMode::kPersistent)).isOk());
  REQUIRE(zk.run(zk->create("/eph", "", CreateMode::kEphemeral)).isOk());
  Observed<std::string> data;
  auto watch = zk.call([&] { return zk->watchData("/counter", [&](const auto& d) { data.add(show(d)); }); });
  REQUIRE(watch.isOk());
  REQUIRE(eventually([&] { return data.lastIs("0"); }, 5s));

  auto leader = zkEnsemble.leaderIndex();
  REQUIRE(leader.isOk());
  auto killedAt = std::chrono::steady_clock::now();
  REQUIRE(zkEnsemble.server(*leader).kill().isOk());

  // A versionless set is retried across the failover within the retry budget.
  auto written = zk.run(zk->set("/counter", "1", -1));
  REQUIRE(written.isOk());
  WARN("leader killed -> first write accepted: "
       << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killedAt).count()
       << " ms");
  REQUIRE(eventually([&] { return data.lastIs("1"); }, 10s));
  CHECK(zk.call([&] { return zk->sessionId(); }) == session);
  CHECK(zk.log().count(SessionEvent::kExpired) == 0);
  CHECK(zk.run(zk->exists("/eph"))->has_value());
  REQUIRE(zkEnsemble.waitForQuorum(std::chrono::steady_clock::now() + 10s).isOk());
  auto newLeader = zkEnsemble.leaderIndex();
  REQUIRE(newLeader.isOk());
  CHECK(*newLeader != *leader);

  // The killed server comes back as a follower.
  REQUIRE(zkEnsemble.server(*leader).restart().isOk());
  CHECK(zkEnsemble.server(*leader).mode().value() == "follower");
  zk.call([&] { watch->cancel(); });
}

TEST_CASE("runBlocking drives the client without an io thread", "[integration][coord]") {
  auto server = startServer();
  boost::asio::io_context io;
  auto created = ZkClient::create(io.get_executor(), options(server->connectString()));
  REQUIRE(created.isOk());
  std::shared_ptr<ZkClient> zk = *created;
  REQUIRE(runBlocking(io, zk->waitConnected(10s)).isOk());
  REQUIRE(runBlocking(io, zk->create("/tool", "x", CreateMode::kPersistent)).isOk());
  auto got = runBlocking(io, zk->get("/tool"));
  REQUIRE(got.isOk());
  CHECK(got->data == "x");
  CHECK(runBlocking(io, zk->get("/missing")).error().code == ErrorCode::kNotFound);
  zk->close();
  CHECK(runBlocking(io, zk->get("/tool")).error().code == ErrorCode::kUnavailable);
}

// Completions and watch events arrive on the C library's threads; a disconnect fails every
// request in flight there, and the local expiry closes the handle (which finishes the rest
// on the io thread) and opens a new one. Requests of every kind keep running through several
// of those rounds: each must complete and the client must carry on. `outage` makes every
// server the client can reach stop answering; `heal` undoes it.
void requestsThroughExpiries(const std::string& connectString, const std::function<void()>& outage,
                             const std::function<void()>& heal) {
  IoThread io;
  TestClient zk(io, options(connectString, "/tellus-test", 2000ms));
  REQUIRE(zk.run(zk->waitConnected(10s)).isOk());
  REQUIRE(zk.run(zk->ensurePath("/load")).isOk());
  Observed<std::string> data;
  auto watch = zk.call([&] { return zk->watchData("/load", [&](const auto& d) { data.add(show(d)); }); });
  REQUIRE(watch.isOk());
  Observed<size_t> kids;
  auto childWatch =
      zk.call([&] { return zk->watchChildren("/load", [&](const auto& names) { kids.add(names.size()); }); });
  REQUIRE(childWatch.isOk());

  constexpr int kLoops = 6;
  auto load = std::make_shared<Load>();
  zk.call([&] {
    for (int i = 0; i < kLoops; ++i) {
      boost::asio::co_spawn(io.executor(), loadLoop(zk.shared(), load, i), boost::asio::detached);
    }
  });
  REQUIRE(eventually([&] { return load->requests.load() >= kLoadRequests * kLoops; }, 10s));

  constexpr size_t kRounds = 3;
  for (size_t round = 1; round <= kRounds; ++round) {
    INFO("round " << round);
    outage();
    REQUIRE(eventually([&] { return zk.log().count(SessionEvent::kExpired) == round; }, 30s));
    heal();
    REQUIRE(eventually([&] { return zk.log().count(SessionEvent::kNewSession) == round; }, 30s));
    const int64_t before = load->requests.load();
    REQUIRE(eventually([&] { return load->requests.load() >= before + kLoadRequests * kLoops; }, 30s));
  }
  load->stop = true;
  REQUIRE(eventually([&] { return load->finished.load() == kLoops; }, 30s));

  // The watches were re-armed on the last session.
  REQUIRE(zk.run(zk->set("/load", "last", -1)).isOk());
  REQUIRE(eventually([&] { return data.lastIs("last"); }, 10s));
  zk.call([&] {
    watch->cancel();
    childWatch->cancel();
  });
}

TEST_CASE("requests and watches in flight across disconnects and local expiries", "[integration][coord][expiry]") {
  auto server = startServer();
  requestsThroughExpiries(
      server->connectString(), [&] { REQUIRE(server->pause().isOk()); }, [&] { REQUIRE(server->resume().isOk()); });
}

TEST_CASE("requests and watches in flight while an ensemble loses its quorum past the session timeout",
          "[integration][coord][expiry]") {
  auto ensemble = harness::ZkEnsemble::start(3);
  REQUIRE(ensemble.isOk());
  auto& servers = **ensemble;
  // Two voters of three stop: the third is up but serves no one, as in the cluster's quorum test.
  std::vector<size_t> paused;
  requestsThroughExpiries(
      servers.connectString(),
      [&] {
        auto leader = servers.leaderIndex();
        REQUIRE(leader.isOk());
        paused = {*leader, (*leader + 1) % 3};
        for (size_t v : paused) REQUIRE(servers.server(v).pause().isOk());
      },
      [&] {
        for (size_t v : paused) REQUIRE(servers.server(v).resume().isOk());
        REQUIRE(servers.waitForQuorum(std::chrono::steady_clock::now() + 30s).isOk());
      });
}
