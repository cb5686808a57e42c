#include "net/rpc_client.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "net/framed_connection.h"
#include "util/log.h"

namespace tellus::net {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace detail {

// A call waiting for its response. The timer expires at the call's deadline; completing the
// call cancels it, so the caller waits on one thing for both outcomes.
struct PendingCall {
  explicit PendingCall(const asio::any_io_executor& executor) : timer(executor) {}

  void complete(Result<std::string> result, bool transportFailure = false) {
    if (outcome) return;
    outcome.emplace(std::move(result));
    failedInTransport = transportFailure;
    timer.cancel();
  }

  asio::steady_timer timer;
  std::optional<Result<std::string>> outcome;
  bool failedInTransport = false;  // the connection failed, as opposed to the handler
};

// One connection (attempt) to the client's endpoint; replaced by a fresh one after it fails.
class ClientConnection final : public FramedConnection {
 public:
  ClientConnection(const asio::any_io_executor& executor, Endpoint endpoint, const ClientOptions& options)
      : FramedConnection(tcp::socket(executor),
                         ConnectionOptions{.maxFrameBytes = options.maxFrameBytes,
                                           .maxQueuedBytes = options.maxQueuedBytes},
                         endpoint.toString(), options.tls),
        endpoint_(std::move(endpoint)),
        sendBufferBytes_(options.sendBufferBytes) {}

  void connect(std::chrono::milliseconds timeout) {
    asio::co_spawn(socket().get_executor(),
                   connectLoop(std::static_pointer_cast<ClientConnection>(shared_from_this()), timeout),
                   asio::detached);
  }

  bool connecting() const { return !isStarted() && !isClosed(); }

  std::unordered_map<std::uint64_t, std::shared_ptr<PendingCall>> pending_;

 protected:
  void onFrame(Frame frame) override;
  void onClosed(const Error& reason) override;

 private:
  static asio::awaitable<void> connectLoop(std::shared_ptr<ClientConnection> self, std::chrono::milliseconds timeout);

  Endpoint endpoint_;
  std::size_t sendBufferBytes_;
};

asio::awaitable<void> ClientConnection::connectLoop(std::shared_ptr<ClientConnection> self,
                                                    std::chrono::milliseconds timeout) {
  const std::string target = self->peer();
  // Closing the socket is what aborts a connect in progress; the weak_ptr lets the timer
  // outlive a connection that already succeeded or failed.
  asio::steady_timer connectTimer(self->socket().get_executor(), timeout);
  connectTimer.async_wait([weak = std::weak_ptr<ClientConnection>(self), target, timeout](boost::system::error_code ec) {
    if (ec) return;
    if (auto connection = weak.lock(); connection && connection->connecting()) {
      connection->close(makeError(ErrorCode::kUnavailable,
                                  fmt::format("connecting to {} timed out after {} ms", target, timeout.count())));
    }
  });

  boost::system::error_code ec;
  std::vector<tcp::endpoint> addresses;
  if (auto literal = asio::ip::make_address(self->endpoint_.host, ec); !ec) {
    addresses.emplace_back(literal, self->endpoint_.port);
  } else {
    tcp::resolver resolver(self->socket().get_executor());
    auto results = co_await resolver.async_resolve(self->endpoint_.host, std::to_string(self->endpoint_.port),
                                                   asio::redirect_error(asio::use_awaitable, ec));
    if (self->isClosed()) co_return;
    if (ec || results.empty()) {
      self->close(makeError(ErrorCode::kUnavailable, fmt::format("cannot resolve {}: {}", target,
                                                                 ec ? ec.message() : "no address")));
      co_return;
    }
    for (const auto& entry : results) addresses.push_back(entry.endpoint());
  }

  co_await asio::async_connect(self->socket(), addresses, asio::redirect_error(asio::use_awaitable, ec));
  connectTimer.cancel();
  if (self->isClosed()) co_return;  // timed out or the client closed it meanwhile
  if (ec) {
    self->close(makeError(ErrorCode::kUnavailable, fmt::format("cannot connect to {}: {}", target, ec.message())));
    co_return;
  }
  self->socket().set_option(tcp::no_delay(true), ec);
  if (self->sendBufferBytes_ > 0) {
    self->socket().set_option(asio::socket_base::send_buffer_size(static_cast<int>(self->sendBufferBytes_)), ec);
  }
  // The handshake has its own timer, of the same length as the connect timer (cancelled above).
  const Status shaken = co_await self->handshake(/*asServer=*/false, timeout);
  if (self->isClosed()) co_return;
  if (!shaken) {
    spdlog::debug("rpc: {}", shaken.message());  // the calls fail with it; their callers log
    self->close(shaken.error());
    co_return;
  }
  spdlog::debug("rpc: connected to {}", target);
  self->start();  // flushes the calls queued while connecting
}

void ClientConnection::onFrame(Frame frame) {
  if (!frame.meta.is_response()) {
    spdlog::warn("rpc: closing connection with {}: it sent a request frame to a client", peer());
    close(makeError(ErrorCode::kUnavailable, fmt::format("protocol error: {} sent a request frame", peer())));
    return;
  }
  auto it = pending_.find(frame.meta.call_id());
  if (it == pending_.end()) return;  // the call already gave up at its deadline
  auto call = std::move(it->second);
  pending_.erase(it);
  if (frame.meta.status() != pb::RPC_OK) {
    call->complete(makeError(fromRpcStatus(frame.meta.status()), frame.meta.error_message()));
  } else {
    call->complete(std::move(frame.body));
  }
}

void ClientConnection::onClosed(const Error& reason) {
  if (!pending_.empty()) spdlog::debug("rpc: failing {} calls to {}: {}", pending_.size(), peer(), reason.message);
  auto calls = std::move(pending_);
  pending_.clear();
  // A refused TLS handshake stays a refusal (final); any other failure is retryable.
  const ErrorCode code = reason.code == ErrorCode::kPermissionDenied ? reason.code : ErrorCode::kUnavailable;
  for (auto& [id, call] : calls) call->complete(makeError(code, reason.message), /*transportFailure=*/true);
}

class ClientCore {
 public:
  ClientCore(asio::any_io_executor executor, Endpoint endpoint, ClientOptions options)
      : executor_(std::move(executor)), endpoint_(std::move(endpoint)), options_(options) {}

  // The live connection, or a new attempt when there is none or the last one failed.
  std::shared_ptr<ClientConnection> connection() {
    // A server closes idle connections: when its close has already arrived, do not send into
    // it (the read loop may not have run since).
    if (connection_ && connection_->peerHasClosed()) {
      connection_->close(makeError(ErrorCode::kUnavailable, fmt::format("{} closed the connection",
                                                                        endpoint_.toString())));
    }
    if (!connection_ || connection_->isClosed()) {
      connection_ = std::make_shared<ClientConnection>(executor_, endpoint_, options_);
      connection_->connect(options_.connectTimeout);
    }
    return connection_;
  }

  void close() {
    if (connection_) connection_->close(makeError(ErrorCode::kUnavailable, fmt::format("client to {} closed",
                                                                                       endpoint_.toString())));
    connection_.reset();
  }

  asio::any_io_executor executor_;
  Endpoint endpoint_;
  ClientOptions options_;
  std::shared_ptr<ClientConnection> connection_;
  std::uint64_t nextCallId_ = 1;
};

namespace {

// A call that is the first on a connection quiet for this long is retried once on a fresh
// connection when that one turns out closed: the server closes idle connections, and its
// close can cross our request on the wire (the server never read it: it closes only after
// receiving nothing for its whole idle timeout).
constexpr std::chrono::milliseconds kIdleRetryAfter{1000};

asio::awaitable<Result<std::string>> runCall(std::shared_ptr<ClientCore> core, std::string method, std::string body,
                                             std::chrono::milliseconds timeout) {
  const std::string target = core->endpoint_.toString();
  const auto context = [&] { return fmt::format("rpc '{}' to {}", method, target); };
  if (timeout <= std::chrono::milliseconds(0)) {
    co_return makeError(ErrorCode::kDeadlineExceeded, context() + ": deadline already passed");
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::shared_ptr<ClientConnection> connection;
  for (bool mayRetry = true;; mayRetry = false) {
    connection = core->connection();
    const bool afterQuiet = mayRetry && connection->isStarted() && connection->pending_.empty() &&
                            std::chrono::steady_clock::now() - connection->lastActivity() >= kIdleRetryAfter;
    const std::uint64_t callId = core->nextCallId_++;
    pb::RpcMeta meta;
    meta.set_call_id(callId);
    meta.set_method(method);
    meta.set_timeout_ms(static_cast<std::uint32_t>(
        std::min<std::chrono::milliseconds::rep>(timeout.count(), std::numeric_limits<std::uint32_t>::max())));
    // Kept for the retry only when one may happen (bodies can be 64 MiB).
    Status sent = afterQuiet ? connection->send(std::move(meta), body, deadline)
                             : connection->send(std::move(meta), std::move(body), deadline);
    if (!sent) co_return sent.error().prepend(context());

    auto call = std::make_shared<PendingCall>(core->executor_);
    call->timer.expires_at(deadline);
    connection->pending_.emplace(callId, call);
    boost::system::error_code ec;
    co_await call->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (call->outcome) {
      Result<std::string> outcome = std::move(*call->outcome);
      // Transport failures get the call as context; handler errors arrive exactly as sent.
      if (call->failedInTransport) {
        if (afterQuiet && std::chrono::steady_clock::now() < deadline) {
          spdlog::debug("{}: retrying once on a new connection ({})", context(), outcome.message());
          continue;
        }
        co_return outcome.error().prepend(context());
      }
      co_return outcome;
    }
    connection->pending_.erase(callId);
    break;
  }
  co_return makeError(ErrorCode::kDeadlineExceeded,
                      fmt::format("{}: deadline of {} ms exceeded{}", context(), timeout.count(),
                                  connection->connecting() ? " while connecting" : ""));
}

// runCall, reported to the client's observer (ClientOptions::onCall) when it ends.
asio::awaitable<Result<std::string>> observedCall(std::shared_ptr<ClientCore> core, std::string method,
                                                  std::string body, std::chrono::milliseconds timeout) {
  const std::string name = method;
  Result<std::string> result = co_await runCall(core, std::move(method), std::move(body), timeout);
  core->options_.onCall(name, result ? std::nullopt : std::optional<ErrorCode>(result.error().code));
  co_return result;
}

}  // namespace
}  // namespace detail

RpcClient::RpcClient(asio::any_io_executor executor, Endpoint endpoint, ClientOptions options)
    : endpoint_(endpoint), core_(std::make_shared<detail::ClientCore>(std::move(executor), std::move(endpoint), options)) {}

RpcClient::~RpcClient() { close(); }

asio::awaitable<Result<std::string>> RpcClient::callRaw(std::string method, std::string body,
                                                        std::chrono::milliseconds timeout) {
  // Not a coroutine itself: the call holds the core, so it may outlive this RpcClient.
  if (!core_->options_.onCall) return detail::runCall(core_, std::move(method), std::move(body), timeout);
  return detail::observedCall(core_, std::move(method), std::move(body), timeout);
}

void RpcClient::close() {
  asio::dispatch(core_->executor_, [core = core_] { core->close(); });
}

Result<std::string> callRawBlocking(const Endpoint& endpoint, std::string method, std::string body,
                                    std::chrono::milliseconds timeout, ClientOptions options) {
  asio::io_context io;
  std::optional<Result<std::string>> outcome;
  RpcClient client(io.get_executor(), endpoint, options);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        outcome.emplace(co_await client.callRaw(std::move(method), std::move(body), timeout));
        client.close();  // ends the connection's loops so that run() returns
      },
      [&](std::exception_ptr error) {
        if (error && !outcome) outcome.emplace(makeError(ErrorCode::kInternal, "RPC call failed with an exception"));
      });
  io.run();
  return std::move(*outcome);
}

ClientPool::ClientPool(asio::any_io_executor executor, ClientOptions options)
    : executor_(std::move(executor)), options_(options) {}

std::shared_ptr<RpcClient> ClientPool::get(const Endpoint& endpoint) {
  std::lock_guard lock(mutex_);
  auto& client = clients_[endpoint];
  if (!client) client = std::make_shared<RpcClient>(executor_, endpoint, options_);
  return client;
}

void ClientPool::useTls(std::shared_ptr<TlsContext> tls) {
  std::lock_guard lock(mutex_);
  options_.tls = std::move(tls);
}

void ClientPool::onCall(std::function<void(std::string_view method, std::optional<ErrorCode> error)> observer) {
  std::lock_guard lock(mutex_);
  options_.onCall = std::move(observer);
}

void ClientPool::closeAll() {
  std::unordered_map<Endpoint, std::shared_ptr<RpcClient>> clients;
  {
    std::lock_guard lock(mutex_);
    clients.swap(clients_);
  }
  for (auto& [endpoint, client] : clients) client->close();
}

}  // namespace tellus::net
