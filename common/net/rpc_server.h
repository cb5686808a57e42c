#pragma once
// RPC server: protobuf request/response calls over framed TCP (see net/frame.h).
//
// Threading: the server lives on the executor it is given, whose io_context is run by one
// thread (the daemon model). handle() and start() are called before the io_context runs or
// from its thread; stop() and the destructor may be called from any thread.
// Handlers run on that thread as coroutines; many calls may be in flight per connection and
// responses go back as they finish, matched by call id.

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "net/endpoint.h"
#include "net/frame.h"
#include "net/identity.h"
#include "net/rpc_method.h"
#include "net/tls.h"
#include "util/result.h"

namespace tellus::net {

// What a handler knows about the call it serves.
struct CallContext {
  std::string peer;    // "ip:port" of the caller
  std::string method;
  std::chrono::steady_clock::time_point deadline;  // the caller gives up at this point
  // Who the caller is, from its verified certificate; nullopt in plaintext (insecure) mode,
  // where handlers fall back to what the request claims.
  std::optional<PeerIdentity> identity;

  // Time left before the deadline, never negative.
  std::chrono::milliseconds remaining() const;
  bool expired() const { return std::chrono::steady_clock::now() >= deadline; }
};

struct ServerOptions {
  std::size_t maxFrameBytes = kDefaultMaxFrameBytes;
  // Back-pressure: a connection is not read while this many of its calls are running ...
  std::size_t maxCallsInFlightPerConnection = 256;
  // ... or while this many response bytes wait to be written to it.
  std::size_t pauseReadingAboveQueuedBytes = 32 * 1024 * 1024;

  // Limits enforced at the door (0 disables each). A connection over a cap is accepted and
  // closed at once, with a rate-limited log line naming the peer and the limit.
  std::size_t maxConnections = 4096;
  // Per peer IP. Every executor and JM of a host shares its IP, hence the generous default.
  std::size_t maxConnectionsPerPeer = 256;
  // A connection with no call running and nothing received or sent for this long is closed
  // (clients reconnect on their next call).
  std::chrono::milliseconds idleTimeout{5 * 60 * 1000};
  // Once a frame's first byte has arrived, the frame must be complete within frameDeadline
  // plus its declared size at frameMinBytesPerSecond (64 MiB at 64 KiB/s: ~17 min on a slow
  // WAN link), else the connection is closed. Stops a peer trickling a frame (slowloris).
  std::chrono::milliseconds frameDeadline{30 * 1000};
  std::uint64_t frameMinBytesPerSecond = 64 * 1024;
  // Calls a connection may start per second on average, and in a burst (token bucket);
  // calls beyond get kResourceExhausted ("rate limit ...") without running.
  double maxCallsPerSecondPerConnection = 10000;
  double callBurstPerConnection = 20000;
  // Mutual TLS (net/tls.h); null = plaintext. A peer without a certificate from the CA is
  // refused during the handshake, which must finish within handshakeTimeout.
  std::shared_ptr<TlsContext> tls;
  std::chrono::milliseconds handshakeTimeout{5000};
  // SO_SNDBUF of accepted connections (0: the kernel's autotuning). The kernel caps it at
  // net.core.wmem_max and counts only about half of it as payload. The receive buffer is left
  // to autotuning, which grows it up to net.ipv4.tcp_rmem's maximum, further than a fixed size.
  std::size_t sendBufferBytes = 4 * 1024 * 1024;
};

// Untyped handler: serialized request in, serialized response (or error) out.
using RawHandler = std::function<boost::asio::awaitable<Result<std::string>>(std::string body, CallContext context)>;

namespace detail {
class ServerCore;
}

class RpcServer {
 public:
  explicit RpcServer(boost::asio::any_io_executor executor, ServerOptions options = {});
  ~RpcServer();  // stop()
  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  // Registers the handler of method M (net/rpc_method.h); a later registration of the same
  // method replaces it. The handler is either a coroutine
  //   awaitable<Result<M::Response>>(M::Request, CallContext)
  // or, when it answers at once without waiting on anything,
  //   Result<M::Response>(const M::Request&).
  // With TLS, a caller whose role is not in M::kCallers gets kPermissionDenied before the
  // handler runs. A request that does not parse as M::Request gets kInvalidArgument; an error the handler
  // returns reaches the caller with its code and message. The handler's response is discarded
  // when the caller's deadline has passed by the time it finishes.
  // Captured references must outlive calls in flight: stop() does not wait for handlers.
  template <RpcMethod M, class Handler>
  void handle(Handler handler) {
    using Req = typename M::Request;
    using Resp = typename M::Response;
    using Async = std::function<boost::asio::awaitable<Result<Resp>>(Req, CallContext)>;
    using Sync = std::function<Result<Resp>(const Req&)>;
    if constexpr (std::is_invocable_r_v<boost::asio::awaitable<Result<Resp>>, Handler&, Req, CallContext>) {
      handleRaw(
          std::string(M::kWireName),
          [handler = Async(std::move(handler))](std::string body, CallContext context) {
            return invokeAsync<Req, Resp>(handler, std::move(body), std::move(context));
          },
          M::kCallers);
    } else {
      static_assert(std::is_invocable_r_v<Result<Resp>, Handler&, const Req&>,
                    "a handler of M is awaitable<Result<M::Response>>(M::Request, CallContext) or "
                    "Result<M::Response>(const M::Request&)");
      handleRaw(
          std::string(M::kWireName),
          [handler = Sync(std::move(handler))](std::string body, CallContext context) {
            return invokeSync<Req, Resp>(handler, std::move(body), std::move(context));
          },
          M::kCallers);
    }
  }

  // Untyped: serialized request in, serialized response out (the wire layer under handle<M>).
  // `callers`: the roles allowed to call it with TLS on (empty: any authenticated peer).
  void handleRaw(std::string method, RawHandler handler, RoleSet callers = {});

  // Called on the io thread for every call answered (its method, or "unknown" for a method
  // not registered; the error code, nullopt on success): the one place a daemon counts RPCs
  // served. Before start().
  using CallObserver = std::function<void(std::string_view method, std::optional<ErrorCode> error)>;
  void onCall(CallObserver observer);

  // Turns on mutual TLS (same as ServerOptions::tls); before start().
  void useTls(std::shared_ptr<TlsContext> tls);

  // Replaces the options; only before start().
  void setOptions(const ServerOptions& options);
  const ServerOptions& options() const;

  // Binds and listens now (port 0 picks a free port) and returns the bound port; connections
  // are accepted once the io_context runs. Fails with kUnavailable when the address cannot be
  // bound, kAlreadyExists when already started.
  [[nodiscard]] Result<std::uint16_t> start(const Endpoint& listenOn);

  // The bound port, 0 before start().
  std::uint16_t port() const;

  // Open connections (for status pages and tests). Call on the io thread.
  std::size_t connectionCount() const;

  // Closes the listener and every connection (their callers see kUnavailable). Handlers
  // still running finish on their own; their responses are dropped. Idempotent.
  void stop();

 private:
  template <class Req, class Resp>
  static boost::asio::awaitable<Result<std::string>> invokeAsync(
      std::function<boost::asio::awaitable<Result<Resp>>(Req, CallContext)> handler, std::string body,
      CallContext context) {
    Req request;
    if (!request.ParseFromString(body)) co_return malformedRequest(context.method, request.GetTypeName());
    Result<Resp> response = co_await handler(std::move(request), std::move(context));
    if (!response) co_return response.error();
    co_return response->SerializeAsString();
  }

  template <class Req, class Resp>
  static boost::asio::awaitable<Result<std::string>> invokeSync(std::function<Result<Resp>(const Req&)> handler,
                                                               std::string body, CallContext context) {
    Req request;
    if (!request.ParseFromString(body)) co_return malformedRequest(context.method, request.GetTypeName());
    Result<Resp> response = handler(request);
    if (!response) co_return response.error();
    co_return response->SerializeAsString();
  }

  static Error malformedRequest(const std::string& method, const std::string& type);

  std::shared_ptr<detail::ServerCore> core_;
};

}  // namespace tellus::net
