// The status/metrics HTTP server, driven by a raw socket client.
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>

#include "net/http_server.h"
#include "net_test_util.h"

namespace tellus::net {
namespace {

using namespace testing;
using asio::ip::tcp;

// Sends one raw request with "Connection: close" and returns everything the server wrote.
asio::awaitable<std::string> fetch(std::uint16_t port, const std::string& requestHead) {
  tcp::socket socket(co_await asio::this_coro::executor);
  co_await socket.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), asio::use_awaitable);
  co_await asio::async_write(socket, asio::buffer(requestHead), asio::use_awaitable);
  std::string response;
  boost::system::error_code ec;
  co_await asio::async_read(socket, asio::dynamic_buffer(response), asio::redirect_error(asio::use_awaitable, ec));
  CHECK(ec == asio::error::eof);
  co_return response;
}

std::string get(const std::string& target) {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
}

TEST_CASE("the HTTP server serves registered GET pages", "[integration][net]") {
  asio::io_context io;
  HttpServer http(io.get_executor());
  int statusHits = 0;
  std::string verbose;
  http.get("/status", [&](HttpRequest request) -> asio::awaitable<HttpResponse> {
    ++statusHits;
    verbose = request.query["verbose"];
    co_return HttpResponse{"application/json", R"({"site":"eu"})", 200, {{"Cache-Control", "no-store"}}};
  });
  http.get("/metrics", [](HttpRequest) -> asio::awaitable<HttpResponse> {
    co_return HttpResponse{"text/plain; version=0.0.4", "tellus_up 1\n"};
  });
  http.get("/broken", [](HttpRequest) -> asio::awaitable<HttpResponse> {
    throw std::runtime_error("no");
    co_return HttpResponse{};
  });
  auto port = http.start(Endpoint{"127.0.0.1", 0});
  REQUIRE(port.isOk());
  CHECK(*port == http.port());

  runOnIo(io, [&]() -> asio::awaitable<void> {
    const std::string status = co_await fetch(*port, get("/status?verbose=1"));
    CHECK_THAT(status, Catch::StartsWith("HTTP/1.1 200 OK\r\n"));
    CHECK_THAT(status, Catch::Contains("Content-Type: application/json\r\n"));
    CHECK_THAT(status, Catch::Contains("Content-Length: 13\r\n"));
    CHECK_THAT(status, Catch::EndsWith("\r\n\r\n{\"site\":\"eu\"}"));
    CHECK_THAT(status, Catch::Contains("Cache-Control: no-store\r\n"));
    CHECK_THAT(status, Catch::Contains("X-Content-Type-Options: nosniff\r\n"));
    CHECK_THAT(status, Catch::Contains("Content-Security-Policy: default-src 'none'; script-src 'self'"));

    // Targets are checked before any handler runs.
    const std::string badQuery = co_await fetch(*port, get("/status?Verbose=1"));
    CHECK_THAT(badQuery, Catch::StartsWith("HTTP/1.1 400"));
    const std::string badPath = co_await fetch(*port, get("/st%61tus"));
    CHECK_THAT(badPath, Catch::StartsWith("HTTP/1.1 400"));
    // A request with a body is refused unread (the connection closes without a reply).
    const std::string withBody = co_await fetch(*port, "GET /status HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                                                       "Content-Length: 5\r\n\r\nhello");
    CHECK(withBody.empty());

    const std::string metrics = co_await fetch(*port, get("/metrics"));
    CHECK_THAT(metrics, Catch::Contains("text/plain; version=0.0.4"));
    CHECK_THAT(metrics, Catch::EndsWith("tellus_up 1\n"));

    const std::string notFound = co_await fetch(*port, get("/nothing"));
    CHECK_THAT(notFound, Catch::StartsWith("HTTP/1.1 404 Not Found"));
    const std::string broken = co_await fetch(*port, get("/broken"));
    CHECK_THAT(broken, Catch::StartsWith("HTTP/1.1 500"));
    const std::string post =
        co_await fetch(*port, "POST /status HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    CHECK_THAT(post, Catch::StartsWith("HTTP/1.1 405"));
    CHECK_THAT(post, Catch::Contains("Allow: GET"));
    // Not HTTP at all: the connection is closed without a reply.
    const std::string notHttp = co_await fetch(*port, "this is not http\r\n\r\n");
    CHECK(notHttp.empty());
  });
  CHECK(statusHits == 1);
  CHECK(verbose == "1");
}

TEST_CASE("keep-alive requests share a connection and stop() ends it", "[integration][net]") {
  asio::io_context io;
  HttpServer http(io.get_executor());
  http.get("/status", [](HttpRequest) -> asio::awaitable<HttpResponse> { co_return HttpResponse{"application/json", "{}"}; });
  auto port = http.start(Endpoint{"127.0.0.1", 0});
  REQUIRE(port.isOk());
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        tcp::socket socket(io);
        co_await socket.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), *port), asio::use_awaitable);
        std::string received;
        for (int i = 0; i < 2; ++i) {
          co_await asio::async_write(socket, asio::buffer(std::string("GET /status HTTP/1.1\r\nHost: t\r\n\r\n")),
                                     asio::use_awaitable);
          // Each response ends with the 2-byte body "{}".
          co_await asio::async_read_until(socket, asio::dynamic_buffer(received), "\r\n\r\n{}", asio::use_awaitable);
          CHECK_THAT(received, Catch::StartsWith("HTTP/1.1 200 OK"));
          received.clear();
        }
        http.stop();
        const bool closed = co_await closedByPeer(socket, 5s);
        CHECK(closed);
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.run_for(10s);
  CHECK(io.stopped());  // nothing left running after stop()
}

}  // namespace
}  // namespace tellus::net
