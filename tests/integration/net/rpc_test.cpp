// RPC over loopback sockets: calls, concurrency, errors, deadlines, bad peers, shutdown.
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include <iostream>
#include <stdexcept>
#include <thread>

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
using Clock = std::chrono::steady_clock;

// The test service of proto/rpc.proto.
struct Test {
  TELLUS_RPC_METHOD(Test, Echo);
  TELLUS_RPC_METHOD(Test, SyncEcho);
  TELLUS_RPC_METHOD(Test, Fail);
  TELLUS_RPC_METHOD(Test, Throw);
  TELLUS_RPC_METHOD(Test, Gate);
};

TestEchoRequest echoRequest(std::string text, std::uint32_t delayMs = 0) {
  TestEchoRequest request;
  request.set_text(std::move(text));
  request.set_delay_ms(delayMs);
  return request;
}

// A server on 127.0.0.1 with the test methods:
//   test.Echo      echoes text and payload after delay_ms (on a timer)
//   test.SyncEcho  echoes text, synchronous handler
//   test.Fail      fails with kConflict "stale epoch: <text>"
//   test.Throw     throws
//   test.Gate      waits until openGate() (back-pressure test)
class TestServer {
 public:
  explicit TestServer(asio::io_context& io, ServerOptions options = {}, std::uint16_t port = 0)
      : server_(io.get_executor(), options), gate_(io) {
    gate_.expires_at(asio::steady_timer::time_point::max());
    server_.handle<Test::Echo>([this](TestEchoRequest request, CallContext context) -> asio::awaitable<Result<TestEchoResponse>> {
      ++echoStarted_;
      lastPeer_ = context.peer;
      lastRemaining_ = context.remaining();
      if (request.delay_ms() > 0) {
        asio::steady_timer delay(co_await asio::this_coro::executor, std::chrono::milliseconds(request.delay_ms()));
        co_await delay.async_wait(asio::use_awaitable);
      }
      TestEchoResponse response;
      response.set_text(request.text());
      response.set_payload(request.payload());
      co_return response;
    });
    server_.handle<Test::SyncEcho>([](const TestEchoRequest& request) -> Result<TestEchoResponse> {
      TestEchoResponse response;
      response.set_text("sync:" + request.text());
      return response;
    });
    server_.handle<Test::Fail>([](const TestEchoRequest& request) -> Result<TestEchoResponse> {
      return makeError(ErrorCode::kConflict, "stale epoch: " + request.text());
    });
    server_.handle<Test::Throw>([](const TestEchoRequest&) -> Result<TestEchoResponse> { throw std::runtime_error("boom"); });
    server_.handle<Test::Gate>([this](TestEchoRequest request, CallContext) -> asio::awaitable<Result<TestEchoResponse>> {
      ++gateEntered_;
      while (!gateOpen_) {
        boost::system::error_code ec;
        co_await gate_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      TestEchoResponse response;
      response.set_text(request.text());
      co_return response;
    });
    auto bound = server_.start(Endpoint{"127.0.0.1", port});
    REQUIRE(bound.isOk());
    endpoint_ = Endpoint{"127.0.0.1", *bound};
  }

  void openGate() {
    gateOpen_ = true;
    gate_.cancel();
  }

  RpcServer& server() { return server_; }
  const Endpoint& endpoint() const { return endpoint_; }
  int echoStarted() const { return echoStarted_; }
  int gateEntered() const { return gateEntered_; }
  const std::string& lastPeer() const { return lastPeer_; }
  std::chrono::milliseconds lastRemaining() const { return lastRemaining_; }

 private:
  RpcServer server_;
  Endpoint endpoint_;
  asio::steady_timer gate_;
  bool gateOpen_ = false;
  int gateEntered_ = 0;
  int echoStarted_ = 0;
  std::string lastPeer_;
  std::chrono::milliseconds lastRemaining_{0};
};

std::chrono::milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

TEST_CASE("echo calls round-trip through async and sync handlers", "[integration][net]") {
  asio::io_context io;
  TestServer server(io);
  RpcClient client(io.get_executor(), server.endpoint());
  runOnIo(io, [&]() -> asio::awaitable<void> {
    auto echoed = co_await client.call<Test::Echo>(echoRequest("hello"), 2s);
    REQUIRE(echoed.isOk());
    CHECK(echoed->text() == "hello");
    CHECK_THAT(server.lastPeer(), Catch::StartsWith("127.0.0.1:"));
    CHECK(server.lastRemaining() > 1s);  // the client's deadline reached the handler
    CHECK(server.lastRemaining() <= 2s);

    auto synced = co_await client.call<Test::SyncEcho>(echoRequest("x"), 2s);
    REQUIRE(synced.isOk());
    CHECK(synced->text() == "sync:x");
    CHECK(server.server().connectionCount() == 1);  // both calls used one connection
  });
}

TEST_CASE("many concurrent calls on shared and separate connections are matched by call id",
          "[integration][net]") {
  asio::io_context io;
  TestServer server(io);
  constexpr int kClients = 6;
  constexpr int kCallsPerClient = 60;
  std::vector<std::unique_ptr<RpcClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<RpcClient>(io.get_executor(), server.endpoint()));
  }
  int succeeded = 0;
  runOnIo(io, [&]() -> asio::awaitable<void> {
    Countdown finished(co_await asio::this_coro::executor, kClients * kCallsPerClient);
    for (int c = 0; c < kClients; ++c) {
      for (int i = 0; i < kCallsPerClient; ++i) {
        // Later calls answer sooner, so responses come back out of order.
        const auto delayMs = static_cast<std::uint32_t>((kCallsPerClient - i) % 17);
        const std::string text = "client " + std::to_string(c) + " call " + std::to_string(i);
        asio::co_spawn(
            io,
            [&, c, text, delayMs]() -> asio::awaitable<void> {
              auto response = co_await clients[c]->call<Test::Echo>(echoRequest(text, delayMs), 5s);
              if (response.isOk() && response->text() == text) {
                ++succeeded;
              } else {
                FAIL_CHECK("call '" << text << "' failed: " << (response.isOk() ? response->text() : response.message()));
              }
              finished.done();
            },
            asio::detached);
      }
    }
    co_await finished.wait();
    CHECK(server.server().connectionCount() == kClients);  // one connection per client, reused
  });
  CHECK(succeeded == kClients * kCallsPerClient);
}

TEST_CASE("an unknown method is an error response, not a disconnect", "[integration][net]") {
  asio::io_context io;
  TestServer server(io);
  RpcClient client(io.get_executor(), server.endpoint());
  runOnIo(io, [&]() -> asio::awaitable<void> {
    auto unknown = co_await client.callRaw("test.Nope", echoRequest("x").SerializeAsString(), 2s);
    REQUIRE_FALSE(unknown.isOk());
    CHECK(unknown.error().code == ErrorCode::kNotFound);
    CHECK(unknown.message() == "unknown RPC method 'test.Nope'");
    auto echoed = co_await client.call<Test::Echo>(echoRequest("still here"), 2s);
    REQUIRE(echoed.isOk());
    CHECK(server.server().connectionCount() == 1);
  });
}

TEST_CASE("handler errors reach the caller with their code and message", "[integration][net]") {
  asio::io_context io;
  TestServer server(io);
  RpcClient client(io.get_executor(), server.endpoint());
  runOnIo(io, [&]() -> asio::awaitable<void> {
    auto failed = co_await client.call<Test::Fail>(echoRequest("3"), 2s);
    REQUIRE_FALSE(failed.isOk());
    CHECK(failed.error().code == ErrorCode::kConflict);
    CHECK(failed.message() == "stale epoch: 3");

    auto threw = co_await client.call<Test::Throw>(echoRequest("x"), 2s);
    REQUIRE_FALSE(threw.isOk());
    CHECK(threw.error().code == ErrorCode::kInternal);
    CHECK_THAT(threw.message(), Catch::Contains("boom"));

    // A request body that is not a TestEchoRequest.
    auto malformed = co_await client.callRaw("test.Echo", std::string("\xff\xff\xff", 3), 2s);
    REQUIRE_FALSE(malformed.isOk());
    CHECK(malformed.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(malformed.message(), Catch::Contains("malformed tellus.pb.TestEchoRequest"));
  });
}

TEST_CASE("a call whose handler outlives the deadline fails with kDeadlineExceeded on time", "[integration][net]") {
  asio::io_context io;
  TestServer server(io);
  RpcClient client(io.get_executor(), server.endpoint());
  runOnIo(io, [&]() -> asio::awaitable<void> {
    const auto start = Clock::now();
    auto slow = co_await client.call<Test::Echo>(echoRequest("slow", 3000), 150ms);
    const auto elapsed = since(start);
    REQUIRE_FALSE(slow.isOk());
    CHECK(slow.error().code == ErrorCode::kDeadlineExceeded);
    CHECK_THAT(slow.message(), Catch::Contains("rpc 'test.Echo' to " + server.endpoint().toString()));
    CHECK(elapsed >= 150ms);
    CHECK(elapsed < 1000ms);
    // The connection is still good; the late response, if any, is ignored.
    auto quick = co_await client.call<Test::Echo>(echoRequest("quick"), 2s);
    REQUIRE(quick.isOk());
    CHECK(quick->text() == "quick");

    auto expired = co_await client.call<Test::Echo>(echoRequest("x"), 0ms);
    REQUIRE_FALSE(expired.isOk());
    CHECK(expired.error().code == ErrorCode::kDeadlineExceeded);
  });
}

TEST_CASE("an unreachable endpoint fails quickly with kUnavailable naming it", "[integration][net]") {
  asio::io_context io;
  const Endpoint nowhere{"127.0.0.1", unusedLoopbackPort()};
  RpcClient client(io.get_executor(), nowhere);
  runOnIo(io, [&]() -> asio::awaitable<void> {
    const auto start = Clock::now();
    auto refused = co_await client.call<Test::Echo>(echoRequest("x"), 5s);
    REQUIRE_FALSE(refused.isOk());
    CHECK(refused.error().code == ErrorCode::kUnavailable);
    CHECK_THAT(refused.message(), Catch::Contains(nowhere.toString()));
    CHECK(since(start) < 1s);
  });

  const auto start = Clock::now();
  auto blocking = callBlocking<Test::Echo>(nowhere, echoRequest("x"), 5s);
  REQUIRE_FALSE(blocking.isOk());
  CHECK(blocking.error().code == ErrorCode::kUnavailable);
  CHECK(since(start) < 1s);
}

TEST_CASE("the client reconnects after the server restarts", "[integration][net]") {
  asio::io_context io;
  auto first = std::make_unique<TestServer>(io);
  const Endpoint endpoint = first->endpoint();
  RpcClient client(io.get_executor(), endpoint);
  std::unique_ptr<TestServer> second;
  runOnIo(io, [&]() -> asio::awaitable<void> {
    auto up = co_await client.call<Test::Echo>(echoRequest("a"), 2s);
    REQUIRE(up.isOk());
    first->server().stop();
    auto down = co_await client.call<Test::Echo>(echoRequest("b"), 2s);
    REQUIRE_FALSE(down.isOk());
    CHECK(down.error().code == ErrorCode::kUnavailable);
    second = std::make_unique<TestServer>(io, ServerOptions{}, endpoint.port);
    auto back = co_await client.call<Test::Echo>(echoRequest("c"), 2s);
    REQUIRE(back.isOk());
    CHECK(back->text() == "c");
  });
}

TEST_CASE("garbage from a raw socket closes only that connection", "[integration][net]") {
  asio::io_context io;
  TestServer server(io);
  RpcClient client(io.get_executor(), server.endpoint());
  runOnIo(io, [&]() -> asio::awaitable<void> {
    auto before = co_await client.call<Test::Echo>(echoRequest("before"), 2s);
    REQUIRE(before.isOk());

    tcp::socket raw(io);
    co_await raw.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.endpoint().port),
                               asio::use_awaitable);
    co_await asio::async_write(raw, asio::buffer(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n")),
                               asio::use_awaitable);
    const bool closed = co_await closedByPeer(raw, 5s);
    CHECK(closed);

    auto after = co_await client.call<Test::Echo>(echoRequest("after"), 2s);
    REQUIRE(after.isOk());
    CHECK(after->text() == "after");
    const bool backToOne = co_await eventually([&] { return server.server().connectionCount() == 1; });
    CHECK(backToOne);
  });
}

TEST_CASE("oversized frames close the connection on either side's limit", "[integration][net]") {
  asio::io_context io;
  TestServer server(io, ServerOptions{.maxFrameBytes = 64 * 1024});
  RpcClient client(io.get_executor(), server.endpoint());
  RpcClient smallClient(io.get_executor(), server.endpoint(), ClientOptions{.maxFrameBytes = 1024});
  runOnIo(io, [&]() -> asio::awaitable<void> {
    // A header announcing 1 GiB: rejected before any body byte is buffered.
    tcp::socket raw(io);
    co_await raw.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.endpoint().port),
                               asio::use_awaitable);
    const std::string header = {'T', 'L', 1, 0, 0, 0, 0, 0, 0x40, 0, 0, 0};
    co_await asio::async_write(raw, asio::buffer(header), asio::use_awaitable);
    const bool closed = co_await closedByPeer(raw, 5s);
    CHECK(closed);

    // A well-formed call above the server's limit: the server drops the connection.
    TestEchoRequest big = echoRequest("big");
    big.set_payload(std::string(100 * 1024, 'x'));
    auto tooBig = co_await client.call<Test::Echo>(big, 2s);
    REQUIRE_FALSE(tooBig.isOk());
    CHECK(tooBig.error().code == ErrorCode::kUnavailable);

    // Above the client's own limit: refused before anything is sent.
    auto refused = co_await smallClient.call<Test::Echo>(big, 2s);
    REQUIRE_FALSE(refused.isOk());
    CHECK(refused.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(refused.message(), Catch::Contains("exceeds the limit of 1024 bytes"));

    // The server still serves, and the first client reconnects.
    auto fine = co_await client.call<Test::Echo>(echoRequest("fine"), 2s);
    REQUIRE(fine.isOk());
  });
}

TEST_CASE("frames up to the maximum size work", "[integration][net]") {
  asio::io_context io;
  TestServer server(io);
  RpcClient client(io.get_executor(), server.endpoint());
  runOnIo(io, [&]() -> asio::awaitable<void> {
    TestEchoRequest request = echoRequest("large");
    std::string payload(kDefaultMaxFrameBytes - 1024, '\0');
    for (std::size_t i = 0; i < payload.size(); i += 4096) payload[i] = static_cast<char>(i / 4096);
    request.set_payload(payload);
    auto echoed = co_await client.call<Test::Echo>(request, 20s);
    REQUIRE(echoed.isOk());
    CHECK(echoed->payload() == payload);
  });
}

TEST_CASE("too many calls in flight pause reading from that connection", "[integration][net]") {
  asio::io_context io;
  TestServer server(io, ServerOptions{.maxCallsInFlightPerConnection = 2});
  RpcClient client(io.get_executor(), server.endpoint());
  RpcClient other(io.get_executor(), server.endpoint());
  int answered = 0;
  runOnIo(io, [&]() -> asio::awaitable<void> {
    Countdown finished(co_await asio::this_coro::executor, 5);
    for (int i = 0; i < 5; ++i) {
      asio::co_spawn(
          io,
          [&, i]() -> asio::awaitable<void> {
            auto response = co_await client.call<Test::Gate>(echoRequest(std::to_string(i)), 10s);
            if (response.isOk() && response->text() == std::to_string(i)) ++answered;
            finished.done();
          },
          asio::detached);
    }
    const bool twoEntered = co_await eventually([&] { return server.gateEntered() == 2; });
    REQUIRE(twoEntered);
    // Other connections are not held back, and a round trip on one proves the server had
    // time to read more from the first connection had it been willing to.
    auto otherReply = co_await other.call<Test::Echo>(echoRequest("other"), 2s);
    REQUIRE(otherReply.isOk());
    CHECK(server.gateEntered() == 2);
    server.openGate();
    co_await finished.wait();
    CHECK(server.gateEntered() == 5);
  });
  CHECK(answered == 5);
}

TEST_CASE("stopping with calls in flight fails them and lets the io_context finish", "[integration][net]") {
  asio::io_context io;
  auto server = std::make_unique<TestServer>(io);
  auto client = std::make_unique<RpcClient>(io.get_executor(), server->endpoint());
  int failedUnavailable = 0;
  Clock::time_point stoppedAt;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        Countdown finished(co_await asio::this_coro::executor, 3);
        for (int i = 0; i < 3; ++i) {
          asio::co_spawn(
              io,
              [&]() -> asio::awaitable<void> {
                auto response = co_await client->call<Test::Echo>(echoRequest("x", 300), 10s);
                if (!response.isOk() && response.error().code == ErrorCode::kUnavailable) ++failedUnavailable;
                finished.done();
              },
              asio::detached);
        }
        const bool allStarted = co_await eventually([&] { return server->echoStarted() == 3; });
        REQUIRE(allStarted);
        stoppedAt = Clock::now();
        server->server().stop();
        co_await finished.wait();
        CHECK(since(stoppedAt) < 1s);  // callers learn at once, not at their 10 s deadline
        client->close();
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  // No io.stop(): the io_context must run out of work by itself once the handlers' timers fire.
  const auto start = Clock::now();
  io.run_for(10s);
  CHECK(io.stopped());
  CHECK(since(start) < 5s);
  CHECK(failedUnavailable == 3);
}

TEST_CASE("callBlocking works without a running io_context", "[integration][net]") {
  asio::io_context serverIo;
  TestServer server(serverIo);
  auto guard = asio::make_work_guard(serverIo);
  std::thread serverThread([&] { serverIo.run(); });

  auto echoed = callBlocking<Test::Echo>(server.endpoint(), echoRequest("blocking"), 2s);
  const auto start = Clock::now();
  auto slow = callBlocking<Test::Echo>(server.endpoint(), echoRequest("slow", 3000), 100ms);
  const auto slowElapsed = since(start);

  server.server().stop();  // from another thread: queued to the server's io thread
  guard.reset();
  serverThread.join();

  REQUIRE(echoed.isOk());
  CHECK(echoed->text() == "blocking");
  REQUIRE_FALSE(slow.isOk());
  CHECK(slow.error().code == ErrorCode::kDeadlineExceeded);
  CHECK(slowElapsed < 1s);
}

TEST_CASE("the client pool hands out one client per endpoint", "[integration][net]") {
  asio::io_context io;
  TestServer a(io);
  TestServer b(io);
  ClientPool pool(io.get_executor());
  CHECK(pool.get(a.endpoint()) == pool.get(a.endpoint()));
  CHECK(pool.get(a.endpoint()) != pool.get(b.endpoint()));
  runOnIo(io, [&]() -> asio::awaitable<void> {
    for (int i = 0; i < 3; ++i) {
      auto fromA = co_await pool.get(a.endpoint())->call<Test::Echo>(echoRequest("a"), 2s);
      REQUIRE(fromA.isOk());
      auto fromB = co_await pool.get(b.endpoint())->call<Test::Echo>(echoRequest("b"), 2s);
      REQUIRE(fromB.isOk());
    }
    CHECK(a.server().connectionCount() == 1);
    CHECK(b.server().connectionCount() == 1);
    pool.closeAll();
    const bool allClosed = co_await eventually([&] { return a.server().connectionCount() == 0; });
    CHECK(allClosed);
  });
}

TEST_CASE("throughput and latency on loopback", "[integration][net][perf]") {
  asio::io_context io;
  TestServer server(io);
  RpcClient client(io.get_executor(), server.endpoint());
  runOnIo(
      io,
      [&]() -> asio::awaitable<void> {
        constexpr int kSequential = 2000;
        auto start = Clock::now();
        for (int i = 0; i < kSequential; ++i) {
          auto ping = co_await client.call<Test::Echo>(echoRequest("ping"), 2s);
          REQUIRE(ping.isOk());
        }
        const double sequentialUs =
            std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kSequential;

        constexpr int kConcurrent = 20000;
        constexpr int kInFlight = 100;
        int ok = 0;
        start = Clock::now();
        {
          Countdown finished(co_await asio::this_coro::executor, kInFlight);
          int next = 0;
          for (int worker = 0; worker < kInFlight; ++worker) {
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                  while (next < kConcurrent) {
                    ++next;
                    if ((co_await client.call<Test::Echo>(echoRequest("p"), 5s)).isOk()) ++ok;
                  }
                  finished.done();
                },
                asio::detached);
          }
          co_await finished.wait();
        }
        const double callsPerSecond = kConcurrent / std::chrono::duration<double>(Clock::now() - start).count();
        CHECK(ok == kConcurrent);

        constexpr int kChunks = 64;
        TestEchoRequest chunk = echoRequest("chunk");
        chunk.set_payload(std::string(1024 * 1024, 'c'));
        start = Clock::now();
        for (int i = 0; i < kChunks; ++i) {
          auto echoedChunk = co_await client.call<Test::Echo>(chunk, 5s);
          REQUIRE(echoedChunk.isOk());
        }
        // Each call moves the chunk both ways.
        const double mibPerSecond = 2.0 * kChunks / std::chrono::duration<double>(Clock::now() - start).count();
        std::cout << fmt::format(
            "net perf (loopback, one io thread for client and server): sequential small call {:.0f} us; "
            "{} calls with {} in flight: {:.0f} calls/s; 1 MiB chunk echo: {:.0f} MiB/s\n",
            sequentialUs, kConcurrent, kInFlight, callsPerSecond, mibPerSecond);
      },
      60s);
}

}  // namespace
}  // namespace tellus::net
