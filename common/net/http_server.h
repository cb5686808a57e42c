#pragma once
// A minimal HTTP/1.1 server (GET only) for daemon status pages, the web status page and
// Prometheus metrics. Same threading contract as RpcServer: lives on the executor it is given;
// get() and start() before the io_context runs or on its thread; stop() and the destructor
// from any thread.
//
// Everything from the network is checked here before a handler runs: the request head is
// bounded (8 KiB), a body is refused, the target passes parseHttpTarget (else 400), at most
// kMaxHttpConnections connections are open at once (more are closed on accept). Every
// response carries X-Content-Type-Options: nosniff and a Content-Security-Policy that allows
// only this origin's scripts, styles and fetches (no inline script, no framing).

#include <utility>  // Boost 1.74's awaitable.hpp needs std::exchange

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <utility>
#include <vector>

#include "net/endpoint.h"
#include "net/http_target.h"
#include "util/result.h"

namespace tellus::net {

inline constexpr std::size_t kMaxHttpConnections = 64;

struct HttpResponse {
  std::string contentType = "text/plain; charset=utf-8";
  std::string body;
  unsigned status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (e.g. Cache-Control)
};

// Called on the io thread for each request with its checked target; a coroutine, so it may
// read ZooKeeper, but it must not block the thread.
using HttpHandler = std::function<boost::asio::awaitable<HttpResponse>(HttpRequest)>;

namespace detail {
class HttpCore;
}

class HttpServer {
 public:
  explicit HttpServer(boost::asio::any_io_executor executor);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves GET `path` (exact match; the handler gets the decoded query). Other paths get 404,
  // other methods 405, a bad target 400, a handler that throws 500.
  void get(std::string path, HttpHandler handler);

  // Binds now (port 0 picks a free port) and returns the bound port.
  [[nodiscard]] Result<std::uint16_t> start(const Endpoint& listenOn);
  std::uint16_t port() const;

  // Closes the listener and all connections. Idempotent.
  void stop();

 private:
  std::shared_ptr<detail::HttpCore> core_;
};

}  // namespace tellus::net
