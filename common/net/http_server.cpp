#include "net/http_server.h"

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include <optional>
#include <unordered_map>

#include "net/listen.h"
#include "util/log.h"

namespace tellus::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace detail {
namespace {
// A scraper or browser that goes quiet is disconnected rather than holding a socket forever.
constexpr std::chrono::seconds kIdleTimeout{30};
}  // namespace

class HttpCore : public std::enable_shared_from_this<HttpCore> {
 public:
  explicit HttpCore(asio::any_io_executor executor) : executor_(std::move(executor)) {}

  static asio::awaitable<void> acceptLoop(std::shared_ptr<HttpCore> self);
  static asio::awaitable<void> serve(std::shared_ptr<HttpCore> self, std::uint64_t id,
                                     std::shared_ptr<beast::tcp_stream> stream);
  asio::awaitable<http::response<http::string_body>> respond(const http::request<http::string_body>& request) const;
  void stopNow();

  asio::any_io_executor executor_;
  std::unordered_map<std::string, HttpHandler> handlers_;
  std::optional<tcp::acceptor> acceptor_;
  std::uint16_t port_ = 0;
  bool stopped_ = false;
  std::unordered_map<std::uint64_t, std::shared_ptr<beast::tcp_stream>> connections_;
  std::uint64_t nextConnectionId_ = 1;
};

asio::awaitable<http::response<http::string_body>> HttpCore::respond(
    const http::request<http::string_body>& request) const {
  http::response<http::string_body> response;
  response.version(request.version());
  response.keep_alive(request.keep_alive());
  response.set(http::field::server, "tellus");
  response.set("X-Content-Type-Options", "nosniff");
  response.set("Content-Security-Policy",
               "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
               "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  response.set("Referrer-Policy", "no-referrer");
  auto plain = [&response](http::status status, std::string body) {
    response.result(status);
    response.set(http::field::content_type, "text/plain; charset=utf-8");
    response.body() = std::move(body);
  };
  auto parsed = parseHttpTarget(std::string_view(request.target().data(), request.target().size()));
  if (request.method() != http::verb::get) {
    plain(http::status::method_not_allowed, "only GET is supported\n");
    response.set(http::field::allow, "GET");
  } else if (!parsed) {
    plain(http::status::bad_request, parsed.message() + "\n");
  } else if (auto handler = handlers_.find(parsed->path); handler == handlers_.end()) {
    plain(http::status::not_found, fmt::format("no page at {}\n", parsed->path));
  } else {
    std::optional<HttpResponse> page;
    const std::string path = parsed->path;
    try {
      page = co_await handler->second(std::move(parsed).value());
    } catch (const std::exception& e) {
      spdlog::error("http: handler for {} threw: {}", path, e.what());
    }
    if (page) {
      response.result(page->status);
      response.set(http::field::content_type, page->contentType);
      for (const auto& [name, value] : page->headers) response.set(name, value);
      response.body() = std::move(page->body);
    } else {
      plain(http::status::internal_server_error, "internal error\n");
    }
  }
  response.prepare_payload();
  co_return response;
}

asio::awaitable<void> HttpCore::serve(std::shared_ptr<HttpCore> self, std::uint64_t id,
                                      std::shared_ptr<beast::tcp_stream> stream) {
  beast::flat_buffer buffer;
  boost::system::error_code ec;
  while (!self->stopped_) {
    stream->expires_after(kIdleTimeout);
    // A GET has no body, and its head fits in 8 KiB: anything larger is refused unread.
    http::request_parser<http::string_body> parser;
    parser.header_limit(8 * 1024);
    parser.body_limit(0);
    co_await http::async_read(*stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec != http::error::end_of_stream && ec != asio::error::operation_aborted) {
        spdlog::debug("http: closing connection: {}", ec.message());
      }
      break;
    }
    const http::request<http::string_body> request = parser.release();
    auto response = co_await self->respond(request);
    co_await http::async_write(*stream, response, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !response.keep_alive()) break;
  }
  stream->socket().shutdown(tcp::socket::shutdown_send, ec);
  stream->close();
  self->connections_.erase(id);
}

asio::awaitable<void> HttpCore::acceptLoop(std::shared_ptr<HttpCore> self) {
  while (!self->stopped_) {
    boost::system::error_code ec;
    tcp::socket socket = co_await self->acceptor_->async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (self->stopped_) co_return;
    if (ec) {
      spdlog::warn("http: accepting on port {} failed: {}", self->port_, ec.message());
      asio::steady_timer backoff(self->executor_, std::chrono::milliseconds(100));
      co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    if (self->connections_.size() >= kMaxHttpConnections) {
      spdlog::debug("http: {} connections open; closing a new one", self->connections_.size());
      socket.close(ec);
      continue;
    }
    const std::uint64_t id = self->nextConnectionId_++;
    auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
    self->connections_.emplace(id, stream);
    asio::co_spawn(self->executor_, serve(self, id, stream), asio::detached);
  }
}

void HttpCore::stopNow() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ignored;
  if (acceptor_) acceptor_->close(ignored);
  for (auto& [id, stream] : connections_) stream->socket().close(ignored);  // serve() then ends and erases it
}

}  // namespace detail

HttpServer::HttpServer(asio::any_io_executor executor)
    : core_(std::make_shared<detail::HttpCore>(std::move(executor))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::get(std::string path, HttpHandler handler) {
  core_->handlers_.insert_or_assign(std::move(path), std::move(handler));
}

Result<std::uint16_t> HttpServer::start(const Endpoint& listenOn) {
  if (core_->acceptor_) return makeError(ErrorCode::kAlreadyExists, "HTTP server already started");
  if (core_->stopped_) return makeError(ErrorCode::kUnavailable, "HTTP server was stopped");
  auto acceptor = detail::openAcceptor(core_->executor_, listenOn);
  if (!acceptor) return acceptor.error();
  core_->acceptor_.emplace(std::move(*acceptor));
  boost::system::error_code ec;
  core_->port_ = core_->acceptor_->local_endpoint(ec).port();
  asio::co_spawn(core_->executor_, detail::HttpCore::acceptLoop(core_), asio::detached);
  spdlog::info("http: listening on {} (port {})", listenOn.toString(), core_->port_);
  return core_->port_;
}

std::uint16_t HttpServer::port() const { return core_->port_; }

void HttpServer::stop() {
  asio::dispatch(core_->executor_, [core = core_] { core->stopNow(); });
}

}  // namespace tellus::net
