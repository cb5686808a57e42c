// The test harness itself: a real ZooKeeper server can be started, paused, stopped and
// restarted, and eventually() behaves.
#include <catch2/catch.hpp>

#include "coord/connection_limit.h"
#include "harness/eventually.h"
#include "harness/zk_server.h"

using namespace std::chrono_literals;
using tellus::harness::eventually;
using tellus::harness::ZkServer;

TEST_CASE("eventually polls until the condition holds or the deadline passes", "[integration][harness]") {
  int calls = 0;
  CHECK(eventually([&] { return ++calls == 3; }, 5s, 1ms));
  CHECK(calls == 3);
  auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(eventually([] { return false; }, 50ms, 5ms));
  CHECK(std::chrono::steady_clock::now() - start >= 50ms);
}

TEST_CASE("a standalone ZooKeeper server starts, pauses, stops and restarts", "[integration][harness]") {
  auto start = std::chrono::steady_clock::now();
  auto server = ZkServer::start();
  REQUIRE(server.isOk());
  auto startup = std::chrono::steady_clock::now() - start;
  WARN("ZooKeeper standalone start-up: " << std::chrono::duration_cast<std::chrono::milliseconds>(startup).count()
                                         << " ms");
  ZkServer& zk = **server;
  CHECK(zk.running());
  CHECK(zk.connectString() == "127.0.0.1:" + std::to_string(zk.clientPort()));
  auto mode = zk.mode();
  REQUIRE(mode.isOk());
  CHECK(*mode == "standalone");
  auto ruok = zk.fourLetterWord("ruok");
  REQUIRE(ruok.isOk());
  CHECK(*ruok == "imok");

  REQUIRE(zk.pause().isOk());
  CHECK_FALSE(zk.fourLetterWord("srvr", 300ms).isOk());  // a hung server does not answer
  REQUIRE(zk.resume().isOk());
  CHECK(eventually([&] { return zk.mode().isOk(); }, 10s));

  REQUIRE(zk.stop().isOk());
  CHECK_FALSE(zk.running());
  CHECK_FALSE(zk.mode().isOk());
  CHECK_FALSE(zk.stop().isOk());

  REQUIRE(zk.restart().isOk());
  CHECK(zk.running());
  CHECK(zk.mode().isOk());
  REQUIRE(zk.kill().isOk());
  CHECK_FALSE(zk.running());
}

TEST_CASE("the connection-limit check reads a real server's maxClientCnxns and refuses a limit too low",
          "[integration][harness][limit]") {
  tellus::harness::ZkServerOptions options;
  options.extraConfig = {"maxClientCnxns=40"};
  auto server = ZkServer::start(options);
  REQUIRE(server.isOk());
  const std::string connect = (*server)->connectString();

  auto fits = tellus::coord::checkConnectionLimit(connect + "/tellus", 40, 2s);
  REQUIRE(fits.isOk());
  CHECK(fits->unchecked.empty());

  auto tooMany = tellus::coord::checkConnectionLimit(connect, 41, 2s);
  REQUIRE_FALSE(tooMany.isOk());
  CHECK(tooMany.error().code == tellus::ErrorCode::kInvalidArgument);
  CHECK(tooMany.message().find("allows 40 connections per client address (maxClientCnxns)") != std::string::npos);

  // A server that does not answer is listed as unchecked, not fatal: a voter may be down.
  auto withDown = tellus::coord::checkConnectionLimit(connect + ",127.0.0.1:1", 10, 2s);
  REQUIRE(withDown.isOk());
  REQUIRE(withDown->unchecked.size() == 1);
  CHECK(withDown->unchecked[0].find("127.0.0.1:1") != std::string::npos);
}
