// Transport limits of the RPC server over real loopback sockets: connection caps per peer IP
// and in total, idle close, the frame deadline (a half frame), oversized frames and the call
// rate. Every test fails when its limit is not enforced: the peer over the limit would stay
// connected (closedByPeer times out) or its calls would all succeed.
#include <boost/asio/write.hpp>

#include <string>
#include <vector>

#include "net/rpc_client.h"
#include "net/rpc_server.h"
#include "net_test_util.h"
#include "rpc.pb.h"

namespace tellus::net {
namespace {

using namespace testing;
using asio::ip::tcp;
using pb::TestEchoRequest;
using pb::TestEchoResponse;

struct Test {
  TELLUS_RPC_METHOD(Test, Echo);
};

// Only limits under test are set; the others are off so that they cannot be what closed a
// connection.
ServerOptions noLimits() {
  ServerOptions o;
  o.maxConnections = 0;
  o.maxConnectionsPerPeer = 0;
  o.idleTimeout = std::chrono::milliseconds(0);
  o.frameDeadline = std::chrono::milliseconds(0);
  o.maxCallsPerSecondPerConnection = 0;
  return o;
}

// test.Echo echoes text after delay_ms.
class EchoServer {
 public:
  EchoServer(asio::io_context& io, ServerOptions options) : server_(io.get_executor(), options) {
    server_.handle<Test::Echo>([](TestEchoRequest request, CallContext) -> asio::awaitable<Result<TestEchoResponse>> {
      if (request.delay_ms() > 0) {
        asio::steady_timer delay(co_await asio::this_coro::executor, std::chrono::milliseconds(request.delay_ms()));
        co_await delay.async_wait(asio::use_awaitable);
      }
      TestEchoResponse response;
      response.set_text(request.text());
      co_return response;
    });
    auto bound = server_.start(Endpoint{"127.0.0.1", 0});
    REQUIRE(bound.isOk());
    endpoint_ = Endpoint{"127.0.0.1", *bound};
  }
  RpcServer& server() { return server_; }
  const Endpoint& endpoint() const { return endpoint_; }

 private:
  RpcServer server_;
  Endpoint endpoint_;
};

TestEchoRequest echo(std::string text, std::uint32_t delayMs = 0) {
  TestEchoRequest r;
  r.set_text(std::move(text));
  r.set_delay_ms(delayMs);
  return r;
}

// A raw connection from `sourceIp` (any 127/8 address is loopback on Linux, so each one is
// a distinct peer IP to the server).
asio::awaitable<tcp::socket> rawConnect(asio::io_context& io, const Endpoint& server, const char* sourceIp) {
  tcp::socket socket(io);
  socket.open(tcp::v4());
  socket.bind(tcp::endpoint(asio::ip::make_address(sourceIp), 0));
  co_await socket.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.port), asio::use_awaitable);
  co_return socket;
}

TEST_CASE("connections over the per-peer cap are closed at once; other peers still get in", "[integration][net][limits]") {
  asio::io_context io;
  ServerOptions options = noLimits();
  options.maxConnectionsPerPeer = 2;
  EchoServer server(io, options);
  runOnIo(io, [&]() -> asio::awaitable<void> {
    auto a1 = co_await rawConnect(io, server.endpoint(), "127.0.0.1");
    auto a2 = co_await rawConnect(io, server.endpoint(), "127.0.0.1");
    const bool twoOpen = co_await eventually([&] { return server.server().connectionCount() == 2; });
    REQUIRE(twoOpen);
    auto a3 = co_await rawConnect(io, server.endpoint(), "127.0.0.1");
    const bool refused = co_await closedByPeer(a3, 5s);
    CHECK(refused);
    // Another peer IP is not affected by this one's cap.
    auto b1 = co_await rawConnect(io, server.endpoint(), "127.0.0.2");
    const bool threeOpen = co_await eventually([&] { return server.server().connectionCount() == 3; });
    CHECK(threeOpen);
    // A closed connection gives its slot back: an RPC client from the first IP gets in.
    a1.close();
    const bool released = co_await eventually([&] { return server.server().connectionCount() == 2; });
    REQUIRE(released);
    RpcClient client(io.get_executor(), server.endpoint());
    auto reply = co_await client.call<Test::Echo>(echo("in"), 5s);
    INFO((reply.isOk() ? std::string() : reply.message()));
    CHECK(reply.isOk());
  });
}

TEST_CASE("connections over the total cap are closed at once", "[integration][net][limits]") {
  asio::io_context io;
  ServerOptions options = noLimits();
  options.maxConnections = 2;
  EchoServer server(io, options);
  runOnIo(io, [&]() -> asio::awaitable<void> {
    auto a = co_await rawConnect(io, server.endpoint(), "127.0.0.1");
    auto b = co_await rawConnect(io, server.endpoint(), "127.0.0.2");
    const bool twoOpen = co_await eventually([&] { return server.server().connectionCount() == 2; });
    REQUIRE(twoOpen);
    auto c = co_await rawConnect(io, server.endpoint(), "127.0.0.3");
    const bool refused = co_await closedByPeer(c, 5s);
    CHECK(refused);
    CHECK(server.server().connectionCount() == 2u);
    RpcClient client(io.get_executor(), server.endpoint());
    auto over = co_await client.call<Test::Echo>(echo("over"), 5s);
    REQUIRE_FALSE(over.isOk());
    CHECK(over.error().code == ErrorCode::kUnavailable);
    b.close();
    const bool released = co_await eventually([&] { return server.server().connectionCount() == 1; });
    REQUIRE(released);
    auto in = co_await client.call<Test::Echo>(echo("in"), 5s);
    INFO((in.isOk() ? std::string() : in.message()));
    CHECK(in.isOk());
  });
}

TEST_CASE("an idle connection is closed; a busy one is not; the client reconnects", "[integration][net][limits]") {
  asio::io_context io;
  ServerOptions options = noLimits();
  options.idleTimeout = 200ms;
  EchoServer server(io, options);
  RpcClient client(io.get_executor(), server.endpoint());
  runOnIo(io, [&]() -> asio::awaitable<void> {
    // A connection that never sends anything is closed.
    auto silent = co_await rawConnect(io, server.endpoint(), "127.0.0.1");
    const bool closed = co_await closedByPeer(silent, 10s);
    CHECK(closed);

    // A call running far longer than the idle timeout keeps its connection.
    auto slow = co_await client.call<Test::Echo>(echo("slow", 1000), 10s);
    INFO((slow.isOk() ? std::string() : slow.message()));
    REQUIRE(slow.isOk());

    // Once idle, the client's connection is closed by the server ...
    const bool idleClosed = co_await eventually([&] { return server.server().connectionCount() == 0; }, 10s);
    REQUIRE(idleClosed);
    // ... and the next call does not fail: the client notices and reconnects.
    auto next = co_await client.call<Test::Echo>(echo("next"), 5s);
    INFO((next.isOk() ? std::string() : next.message()));
    REQUIRE(next.isOk());
    CHECK(next->text() == "next");
  });
}

TEST_CASE("a half frame is closed after the frame deadline", "[integration][net][limits]") {
  asio::io_context io;
  ServerOptions options = noLimits();
  options.frameDeadline = 300ms;
  options.frameMinBytesPerSecond = 0;
  EchoServer server(io, options);
  RpcClient client(io.get_executor(), server.endpoint());
  runOnIo(io, [&]() -> asio::awaitable<void> {
    // Half a header (valid so far), then nothing.
    auto halfHeader = co_await rawConnect(io, server.endpoint(), "127.0.0.1");
    // (Named: GCC 12 cannot keep an initializer list alive across a co_await.)
    const std::string half = {'T', 'L', 1, 0, 0, 0};
    co_await asio::async_write(halfHeader, asio::buffer(half), asio::use_awaitable);
    const bool closedHeader = co_await closedByPeer(halfHeader, 10s);
    CHECK(closedHeader);

    // A full header announcing 100 body bytes, then only 10 of them.
    auto halfBody = co_await rawConnect(io, server.endpoint(), "127.0.0.1");
    std::string bytes = {'T', 'L', 1, 0, 0, 0, 0, 0, 0, 0, 0, 100};
    bytes += std::string(10, 'x');
    co_await asio::async_write(halfBody, asio::buffer(bytes), asio::use_awaitable);
    const bool closedBody = co_await closedByPeer(halfBody, 10s);
    CHECK(closedBody);

    // Whole frames are unaffected, also after the deadline has passed many times over.
    for (int i = 0; i < 3; ++i) {
      auto reply = co_await client.call<Test::Echo>(echo("whole", 400), 5s);
      INFO((reply.isOk() ? std::string() : reply.message()));
      CHECK(reply.isOk());
    }
  });
}

TEST_CASE("an oversized frame is closed from its header alone", "[integration][net][limits]") {
  asio::io_context io;
  ServerOptions options = noLimits();
  options.maxFrameBytes = 4096;
  EchoServer server(io, options);
  runOnIo(io, [&]() -> asio::awaitable<void> {
    auto raw = co_await rawConnect(io, server.endpoint(), "127.0.0.1");
    // meta 0, body 4096: 12 bytes over the limit.
    const std::string header = {'T', 'L', 1, 0, 0, 0, 0, 0, 0, 0, 0x10, 0};
    co_await asio::async_write(raw, asio::buffer(header), asio::use_awaitable);
    const bool closed = co_await closedByPeer(raw, 5s);
    CHECK(closed);
  });
}

TEST_CASE("calls over the rate limit get kResourceExhausted; the connection stays", "[integration][net][limits]") {
  asio::io_context io;
  ServerOptions options = noLimits();
  options.maxCallsPerSecondPerConnection = 1;
  options.callBurstPerConnection = 3;
  EchoServer server(io, options);
  RpcClient client(io.get_executor(), server.endpoint());
  runOnIo(io, [&]() -> asio::awaitable<void> {
    constexpr int kCalls = 12;
    int ok = 0;
    int limited = 0;
    std::string otherErrors;
    Countdown finished(co_await asio::this_coro::executor, kCalls);
    for (int i = 0; i < kCalls; ++i) {
      asio::co_spawn(
          io,
          [&, i]() -> asio::awaitable<void> {
            auto reply = co_await client.call<Test::Echo>(echo(std::to_string(i)), 10s);
            if (reply.isOk()) {
              ++ok;
            } else if (reply.error().code == ErrorCode::kResourceExhausted &&
                       reply.message().find("rate limit") != std::string::npos) {
              ++limited;
            } else {
              otherErrors += reply.message() + "\n";
            }
            finished.done();
          },
          asio::detached);
    }
    co_await finished.wait();
    INFO("ok " << ok << ", limited " << limited << ", other errors:\n" << otherErrors);
    CHECK(otherErrors.empty());
    CHECK(ok >= 3);        // the burst
    CHECK(limited >= 1);   // 12 calls at once cannot all fit in a burst of 3 at 1/s
    CHECK(ok + limited == kCalls);
    CHECK(server.server().connectionCount() == 1u);
  });
}

}  // namespace
}  // namespace tellus::net
