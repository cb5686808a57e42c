// daemon::Server over loopback: typed RPC and /metrics are served, and the ordered stop ends
// every coroutine the daemon spawned (woken sleeps, failed calls) before the loop ends.
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "../../integration/net/net_test_util.h"
#include "daemon/server.h"
#include "rpc.pb.h"

namespace tellus::daemon {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using net::testing::eventually;
using Clock = std::chrono::steady_clock;

struct Test {
  TELLUS_RPC_METHOD(Test, Echo);
  TELLUS_RPC_METHOD(Test, Gate);
};

// A daemon loop: runs until stop, sleeping an hour between rounds.
asio::awaitable<void> hourlyLoop(Server& server, bool& ended) {
  while (!server.stopping()) co_await server.sleepFor(std::chrono::hours(1));
  ended = true;
}

// A call that is still waiting for its answer when the daemon stops.
asio::awaitable<void> pendingCall(Server& server, Result<pb::TestEchoResponse>& outcome) {
  auto self = net::Endpoint::parse(server.address());
  outcome = co_await server.client(*self)->call<Test::Gate>(pb::TestEchoRequest(), std::chrono::hours(1));
}

asio::awaitable<std::string> httpGet(std::string address, std::string target) {
  auto endpoint = net::Endpoint::parse(address);
  asio::ip::tcp::socket socket(co_await asio::this_coro::executor);
  co_await socket.async_connect(asio::ip::tcp::endpoint(asio::ip::make_address(endpoint->host), endpoint->port),
                                asio::use_awaitable);
  std::string request = "GET " + target + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
  co_await asio::async_write(socket, asio::buffer(request), asio::use_awaitable);
  std::string response;
  boost::system::error_code ec;
  co_await asio::async_read(socket, asio::dynamic_buffer(response), asio::redirect_error(asio::use_awaitable, ec));
  co_return response;
}

struct Observed {
  std::string echoed;
  std::string metricsPage;
  Clock::time_point stoppedAt;
};

asio::awaitable<void> driveThenStop(Server& server, const int& gateEntered, Observed& seen) {
  auto self = net::Endpoint::parse(server.address());
  pb::TestEchoRequest request;
  request.set_text("hi");
  auto echoed = co_await server.client(*self)->call<Test::Echo>(request, 2s);
  if (echoed) seen.echoed = echoed->text();
  seen.metricsPage = co_await httpGet(server.httpAddress(), "/metrics");
  bool entered = co_await eventually([&] { return gateEntered == 1; });
  if (entered) {
    seen.stoppedAt = Clock::now();
    server.stop();
  }
}

TEST_CASE("a daemon server serves, then its ordered stop joins every coroutine", "[unit][daemon]") {
  Runtime runtime;
  Server server(runtime);
  int gateEntered = 0;
  server.handle<Test::Echo>([](const pb::TestEchoRequest& r) -> Result<pb::TestEchoResponse> {
    pb::TestEchoResponse response;
    response.set_text(r.text());
    return response;
  });
  server.handle<Test::Gate>([&](pb::TestEchoRequest, net::CallContext) -> asio::awaitable<Result<pb::TestEchoResponse>> {
    ++gateEntered;
    co_await server.sleepFor(std::chrono::hours(1));  // answers only once the server stops
    co_return pb::TestEchoResponse();
  });
  server.metrics().gauge("tellus_test_up", "Always 1.",
                         [] { return std::vector<MetricSample>{{{{"site", "eu"}}, 1}}; });
  // Nothing listens there: the coordinator keeps trying until stop() closes it.
  config::ZooKeeperConfig zookeeper;
  zookeeper.connect = "127.0.0.1:" + std::to_string(net::testing::unusedLoopbackPort());
  zookeeper.insecure = true;  // no credentials file: nothing to read, and no server to show it to
  // Plaintext: this test is about serving and the ordered stop (TLS: tests/integration/net).
  config::TlsConfig plaintext;
  plaintext.insecure = true;
  REQUIRE(server.start(ServerOptions{"127.0.0.1:0", "127.0.0.1:0", zookeeper, {}, plaintext, {}}).isOk());
  CHECK(server.address().starts_with("127.0.0.1:"));
  CHECK(server.address() != "127.0.0.1:0");
  CHECK(server.httpAddress().starts_with("127.0.0.1:"));

  bool loopEnded = false;
  Result<pb::TestEchoResponse> callOutcome = pb::TestEchoResponse();
  Observed seen;
  server.spawn(hourlyLoop(server, loopEnded), "loop");
  server.spawn(pendingCall(server, callOutcome), "pending call");
  server.spawn(driveThenStop(server, gateEntered, seen), "driver");
  runtime.io().run_for(20s);
  const auto joinedAt = Clock::now();

  CHECK(seen.echoed == "hi");
  CHECK(seen.metricsPage.find("\r\n\r\n# HELP tellus_test_up Always 1.\n# TYPE tellus_test_up gauge\n"
                              "tellus_test_up{site=\"eu\"} 1\n") != std::string::npos);
  REQUIRE(seen.stoppedAt != Clock::time_point());
  // The loop ended because every spawned coroutine returned, well before the grace period.
  CHECK(runtime.io().stopped());
  CHECK(runtime.running() == 0);
  CHECK(joinedAt - seen.stoppedAt < Server::kStopGrace);
  CHECK(loopEnded);
  REQUIRE_FALSE(callOutcome.isOk());
  CHECK(callOutcome.error().code == ErrorCode::kUnavailable);
  CHECK(server.coordinator().state() == coord::SessionState::kClosed);
}

}  // namespace
}  // namespace tellus::daemon
