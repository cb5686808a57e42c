#pragma once
// A minimal HTTP/1.1 server (GET only) for daemon status pages and Prometheus metrics.
// Same threading contract as RpcServer: lives on the executor it is given; get() and start()
// before the io_context runs or on its thread; stop() and the destructor from any thread.

#include <boost/asio/any_io_executor.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/endpoint.h"
#include "util/result.h"

namespace tellus::net {

struct HttpResponse {
  std::string contentType = "text/plain; charset=utf-8";
  std::string body;
  unsigned status = 200;
};

// Called on the io thread for each request: keep it quick and non-blocking.
using HttpHandler = std::function<HttpResponse()>;

namespace detail {
class HttpCore;
}

class HttpServer {
 public:
  explicit HttpServer(boost::asio::any_io_executor executor);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves GET `path` (exact match, query string ignored). Other paths get 404, other
  // methods 405, a handler that throws 500.
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
