#include "net/rpc_server.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <limits>
#include <optional>
#include <unordered_map>

#include "net/framed_connection.h"
#include "net/limits.h"
#include "net/listen.h"
#include "util/log.h"

namespace tellus::net {

namespace asio = boost::asio;
using asio::ip::tcp;

std::chrono::milliseconds CallContext::remaining() const {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(0));
}

namespace detail {
namespace {
// Error messages travel in the frame meta, which has a hard size limit.
constexpr std::size_t kMaxErrorMessageBytes = 16 * 1024;
// Refused connections and rate-limited calls are logged at most this often (per server).
constexpr std::chrono::seconds kRefusalLogInterval{10};

struct MethodEntry {
  RawHandler handler;
  RoleSet callers;
};
}  // namespace

class ServerSession;

class ServerCore : public std::enable_shared_from_this<ServerCore> {
 public:
  ServerCore(asio::any_io_executor executor, ServerOptions options)
      : executor_(std::move(executor)),
        options_(options),
        limiter_(options.maxConnections, options.maxConnectionsPerPeer) {}

  void setOptions(const ServerOptions& options) {
    options_ = options;
    limiter_ = ConnectionLimiter(options.maxConnections, options.maxConnectionsPerPeer);
  }

  static asio::awaitable<void> acceptLoop(std::shared_ptr<ServerCore> self);
  static asio::awaitable<void> openSession(std::shared_ptr<ServerCore> self, std::shared_ptr<ServerSession> session);
  void stopNow();

  asio::any_io_executor executor_;
  ServerOptions options_;
  std::unordered_map<std::string, MethodEntry> handlers_;
  RpcServer::CallObserver callObserver_;
  LogThrottle deniedLog_{kRefusalLogInterval};     // failed handshakes and calls of the wrong role
  std::optional<tcp::acceptor> acceptor_;
  std::uint16_t port_ = 0;
  bool stopped_ = false;
  std::unordered_map<std::uint64_t, std::shared_ptr<ServerSession>> sessions_;
  std::uint64_t nextSessionId_ = 1;
  ConnectionLimiter limiter_;
  LogThrottle refusedLog_{kRefusalLogInterval};
  LogThrottle rateLimitedLog_{kRefusalLogInterval};
};

// One accepted connection. Owned by ServerCore::sessions_ until closed; the read loop and
// running calls keep it alive past that.
class ServerSession final : public FramedConnection {
 public:
  ServerSession(tcp::socket socket, const ServerOptions& options, std::string peer, std::string peerIp,
                std::weak_ptr<ServerCore> server, std::uint64_t id)
      : FramedConnection(std::move(socket),
                         ConnectionOptions{.maxFrameBytes = options.maxFrameBytes,
                                           .pauseReadingAboveQueuedBytes = options.pauseReadingAboveQueuedBytes,
                                           .idleTimeout = options.idleTimeout,
                                           .frameDeadline = options.frameDeadline,
                                           .frameMinBytesPerSecond = options.frameMinBytesPerSecond},
                         std::move(peer), options.tls),
        server_(std::move(server)),
        peerIp_(std::move(peerIp)),
        id_(id),
        maxCallsInFlight_(std::max<std::size_t>(1, options.maxCallsInFlightPerConnection)),
        callRate_(options.maxCallsPerSecondPerConnection, options.callBurstPerConnection,
                  std::chrono::steady_clock::now()),
        maxCallsPerSecond_(options.maxCallsPerSecondPerConnection) {}

 protected:
  void onFrame(Frame frame) override;
  void onClosed(const Error& reason) override;
  bool mayRead() const override { return callsInFlight_ < maxCallsInFlight_; }
  bool busy() const override { return callsInFlight_ > 0; }

 private:
  static asio::awaitable<void> runCall(std::shared_ptr<ServerSession> self, RawHandler handler,
                                       std::uint64_t callId, std::string body, CallContext context);
  // `method`: a registered method's name, or "unknown" (it labels the server's call observer).
  void respond(std::uint64_t callId, std::string_view method, Result<std::string> result);

  std::weak_ptr<ServerCore> server_;
  std::string peerIp_;  // counted in the server's ConnectionLimiter until closed
  std::uint64_t id_;
  std::size_t maxCallsInFlight_;
  std::size_t callsInFlight_ = 0;
  TokenBucket callRate_;
  double maxCallsPerSecond_;
};

void ServerSession::onFrame(Frame frame) {
  const pb::RpcMeta& meta = frame.meta;
  if (meta.is_response()) {
    spdlog::warn("rpc: closing connection with {}: it sent a response frame to a server", peer());
    close(makeError(ErrorCode::kInvalidArgument, "protocol error: response frame sent to a server"));
    return;
  }
  // Relative deadline: 0 means the caller's budget was already spent when it sent the call.
  if (meta.timeout_ms() == 0) {
    spdlog::debug("rpc: dropping call {} '{}' from {}: deadline already passed", meta.call_id(), meta.method(),
                  peer());
    return;
  }
  auto server = server_.lock();
  if (!server || server->stopped_) return;
  if (!callRate_.take(std::chrono::steady_clock::now())) {
    if (auto suppressed = server->rateLimitedLog_.allow(std::chrono::steady_clock::now())) {
      spdlog::warn("rpc: refusing call '{}' from {}: over the rate limit of {} calls/s per connection ({} more "
                   "refusals not logged)",
                   meta.method(), peer(), maxCallsPerSecond_, *suppressed);
    }
    respond(meta.call_id(), server->handlers_.count(meta.method()) ? std::string_view(meta.method()) : "unknown",
            makeError(ErrorCode::kResourceExhausted,
                      fmt::format("rate limit: more than {} calls/s on this connection; retry later", maxCallsPerSecond_)));
    return;
  }
  auto handler = server->handlers_.find(meta.method());
  if (handler == server->handlers_.end()) {
    respond(meta.call_id(), "unknown",
            makeError(ErrorCode::kNotFound, fmt::format("unknown RPC method '{}'", meta.method().substr(0, 64))));
    return;
  }
  // Identity comes from the handshake (TLS mode); no identity means plaintext mode.
  if (const auto& identity = peerIdentity(); identity && !handler->second.callers.allows(identity->role)) {
    const std::string why = fmt::format("'{}' may be called by {} only; {} is {}", meta.method(),
                                        handler->second.callers.toString(), peer(), identity->toString());
    if (auto suppressed = server->deniedLog_.allow(std::chrono::steady_clock::now())) {
      spdlog::warn("rpc: refused call: {} ({} more refusals not logged)", why, *suppressed);
    }
    respond(meta.call_id(), meta.method(), makeError(ErrorCode::kPermissionDenied, "permission denied: " + why));
    return;
  }
  CallContext context{peer(), meta.method(),
                      std::chrono::steady_clock::now() + std::chrono::milliseconds(meta.timeout_ms()), peerIdentity()};
  ++callsInFlight_;
  asio::co_spawn(server->executor_,
                 runCall(std::static_pointer_cast<ServerSession>(shared_from_this()), handler->second.handler,
                         meta.call_id(), std::move(frame.body), std::move(context)),
                 asio::detached);
}

asio::awaitable<void> ServerSession::runCall(std::shared_ptr<ServerSession> self, RawHandler handler,
                                             std::uint64_t callId, std::string body, CallContext context) {
  std::optional<Result<std::string>> result;
  try {
    result.emplace(co_await handler(std::move(body), context));
  } catch (const std::exception& e) {
    spdlog::error("rpc: handler for '{}' threw: {}", context.method, e.what());
    result.emplace(makeError(ErrorCode::kInternal, fmt::format("handler for '{}' failed: {}", context.method, e.what())));
  } catch (...) {
    spdlog::error("rpc: handler for '{}' threw a non-standard exception", context.method);
    result.emplace(makeError(ErrorCode::kInternal, fmt::format("handler for '{}' failed", context.method)));
  }
  --self->callsInFlight_;
  self->wakeReader();
  if (self->isClosed()) co_return;
  if (context.expired()) {
    spdlog::debug("rpc: dropping response to call {} '{}' from {}: deadline passed", callId, context.method,
                  self->peer());
    co_return;
  }
  self->respond(callId, context.method, std::move(*result));
}

void ServerSession::respond(std::uint64_t callId, std::string_view method, Result<std::string> result) {
  if (auto server = server_.lock(); server && server->callObserver_) {
    server->callObserver_(method, result ? std::nullopt : std::optional<ErrorCode>(result.error().code));
  }
  pb::RpcMeta meta;
  meta.set_call_id(callId);
  meta.set_is_response(true);
  Status sent;
  if (result) {
    sent = send(meta, std::move(*result));
    if (!sent && sent.code() == ErrorCode::kInvalidArgument) {
      // The response does not fit in a frame: tell the caller instead of leaving it waiting.
      meta.set_status(pb::RPC_INTERNAL);
      meta.set_error_message("response too large: " + sent.message());
      sent = send(std::move(meta), {});
    }
  } else {
    meta.set_status(toRpcStatus(result.error().code));
    meta.set_error_message(result.message().substr(0, kMaxErrorMessageBytes));
    sent = send(std::move(meta), {});
  }
  if (!sent) spdlog::warn("rpc: dropping response to call {} from {}: {}", callId, peer(), sent.message());
}

void ServerSession::onClosed(const Error& reason) {
  spdlog::debug("rpc: connection with {} closed: {}", peer(), reason.message);
  if (auto server = server_.lock()) {
    server->sessions_.erase(id_);
    server->limiter_.release(peerIp_);
  }
}

asio::awaitable<void> ServerCore::acceptLoop(std::shared_ptr<ServerCore> self) {
  while (!self->stopped_) {
    boost::system::error_code ec;
    tcp::socket socket = co_await self->acceptor_->async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (self->stopped_) co_return;
    if (ec) {
      // Typically out of file descriptors: back off rather than spin on the error.
      spdlog::warn("rpc: accepting on port {} failed: {}", self->port_, ec.message());
      asio::steady_timer backoff(self->executor_, std::chrono::milliseconds(100));
      co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);  // small RPCs must not wait for Nagle
    // Responses of pipelined transfers fill a long link only with a send buffer of its
    // bandwidth × RTT (the kernel's autotuning stops at net.ipv4.tcp_wmem's maximum).
    if (self->options_.sendBufferBytes > 0) {
      socket.set_option(asio::socket_base::send_buffer_size(static_cast<int>(self->options_.sendBufferBytes)), ec);
    }
    std::string peer = peerName(socket);
    std::string peerIp = peerAddress(socket);
    if (const auto verdict = self->limiter_.admit(peerIp); verdict != ConnectionLimiter::Verdict::kAdmit) {
      // Accepted and closed at once: leaving it in the backlog would only make the peer wait.
      if (auto suppressed = self->refusedLog_.allow(std::chrono::steady_clock::now())) {
        const bool total = verdict == ConnectionLimiter::Verdict::kOverTotal;
        spdlog::warn("rpc: refusing connection from {}: {} connections {} already open (limit {}; {} more refusals "
                     "not logged)",
                     peer, total ? self->limiter_.total() : self->limiter_.of(peerIp),
                     total ? std::string("in total") : fmt::format("from {}", peerIp),
                     total ? self->options_.maxConnections : self->options_.maxConnectionsPerPeer, *suppressed);
      }
      socket.close(ec);
      continue;
    }
    const std::uint64_t id = self->nextSessionId_++;
    auto session =
        std::make_shared<ServerSession>(std::move(socket), self->options_, std::move(peer), std::move(peerIp), self, id);
    self->sessions_.emplace(id, session);
    if (self->options_.tls) {
      asio::co_spawn(self->executor_, openSession(self, std::move(session)), asio::detached);
    } else {
      session->start();
    }
  }
}

asio::awaitable<void> ServerCore::openSession(std::shared_ptr<ServerCore> self, std::shared_ptr<ServerSession> session) {
  const Status shaken = co_await session->handshake(/*asServer=*/true, self->options_.handshakeTimeout);
  if (session->isClosed()) co_return;
  if (!shaken) {
    if (auto suppressed = self->deniedLog_.allow(std::chrono::steady_clock::now())) {
      spdlog::warn("rpc: refused connection: {} ({} more refusals not logged)", shaken.message(), *suppressed);
    }
    session->close(shaken.error());
    co_return;
  }
  spdlog::debug("rpc: {} is {}", session->peer(), session->peerIdentity()->toString());
  session->start();
}

void ServerCore::stopNow() {
  if (stopped_) return;
  stopped_ = true;
  if (acceptor_) {
    boost::system::error_code ignored;
    acceptor_->close(ignored);
  }
  // close() erases from sessions_ through onClosed: iterate over a detached copy.
  auto sessions = std::move(sessions_);
  sessions_.clear();
  for (auto& [id, session] : sessions) session->close(makeError(ErrorCode::kUnavailable, "server is stopping"));
}

}  // namespace detail

RpcServer::RpcServer(asio::any_io_executor executor, ServerOptions options)
    : core_(std::make_shared<detail::ServerCore>(std::move(executor), options)) {}

RpcServer::~RpcServer() { stop(); }

void RpcServer::handleRaw(std::string method, RawHandler handler, RoleSet callers) {
  core_->handlers_.insert_or_assign(std::move(method), detail::MethodEntry{std::move(handler), callers});
}

void RpcServer::setOptions(const ServerOptions& options) {
  assert(!core_->acceptor_ && "RpcServer::setOptions after start()");
  core_->setOptions(options);
}

const ServerOptions& RpcServer::options() const { return core_->options_; }
void RpcServer::useTls(std::shared_ptr<TlsContext> tls) { core_->options_.tls = std::move(tls); }

void RpcServer::onCall(CallObserver observer) { core_->callObserver_ = std::move(observer); }

Result<std::uint16_t> RpcServer::start(const Endpoint& listenOn) {
  if (core_->acceptor_) return makeError(ErrorCode::kAlreadyExists, "RPC server already started");
  if (core_->stopped_) return makeError(ErrorCode::kUnavailable, "RPC server was stopped");
  auto acceptor = detail::openAcceptor(core_->executor_, listenOn);
  if (!acceptor) return acceptor.error();
  core_->acceptor_.emplace(std::move(*acceptor));
  boost::system::error_code ec;
  core_->port_ = core_->acceptor_->local_endpoint(ec).port();
  asio::co_spawn(core_->executor_, detail::ServerCore::acceptLoop(core_), asio::detached);
  spdlog::info("rpc: listening on {} (port {}, {})", listenOn.toString(), core_->port_,
               core_->options_.tls ? "mutual TLS" : "plaintext");
  return core_->port_;
}

std::uint16_t RpcServer::port() const { return core_->port_; }

std::size_t RpcServer::connectionCount() const { return core_->sessions_.size(); }

void RpcServer::stop() {
  // Runs inline on the io thread, otherwise is queued to it: sessions are only touched there.
  asio::dispatch(core_->executor_, [core = core_] { core->stopNow(); });
}

Error RpcServer::malformedRequest(const std::string& method, const std::string& type) {
  return makeError(ErrorCode::kInvalidArgument, fmt::format("malformed {} in call to '{}'", type, method));
}

}  // namespace tellus::net
