#pragma once
// RPC client for one destination, a pool of them, and a blocking call for CLIs and tests.
//
// Every call has a deadline covering connect, send and the wait for the response; when it
// passes the call returns kDeadlineExceeded. Transport failures (refused, reset, closed) are
// kUnavailable and name the endpoint. Errors returned by the server's handler come back with
// their own code and message, unchanged.
//
// Threading: a client lives on the executor it is given, whose io_context is run by one
// thread; call() must be awaited from a coroutine on that thread. close() and the destructor
// may be called from any thread.

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "net/endpoint.h"
#include "net/frame.h"
#include "net/rpc_method.h"
#include "net/tls.h"
#include "util/result.h"

namespace tellus::net {

struct ClientOptions {
  // A connection attempt (TCP connect and TLS handshake) is abandoned after this long even if
  // the calls waiting for it allow more (each call is also bounded by its own deadline).
  std::chrono::milliseconds connectTimeout{5000};
  std::size_t maxFrameBytes = kDefaultMaxFrameBytes;
  // Calls are refused with kUnavailable while this many request bytes wait to be written.
  std::size_t maxQueuedBytes = 256 * 1024 * 1024;
  // Mutual TLS (net/tls.h); null = plaintext. The server must present a certificate from the
  // same CA; calls over a refused handshake fail with kPermissionDenied or kUnavailable.
  std::shared_ptr<TlsContext> tls;
  // SO_SNDBUF of the connection (0: the kernel's autotuning), as ServerOptions::sendBufferBytes.
  std::size_t sendBufferBytes = 4 * 1024 * 1024;
  // Called on the client's executor when a call ends (its method; the error code, nullopt on
  // success): the one place a daemon counts the RPCs it makes.
  std::function<void(std::string_view method, std::optional<ErrorCode> error)> onCall;
};

namespace detail {
class ClientCore;
}

class RpcClient {
 public:
  // Connects lazily on the first call and reconnects on the next call after a failure. The
  // first call on a connection that was quiet for a second or more is retried once on a new
  // connection if that one turns out closed (servers close idle connections; see README).
  RpcClient(boost::asio::any_io_executor executor, Endpoint endpoint, ClientOptions options = {});
  ~RpcClient();  // close()
  RpcClient(const RpcClient&) = delete;
  RpcClient& operator=(const RpcClient&) = delete;

  const Endpoint& endpoint() const { return endpoint_; }

  // Calls method M (net/rpc_method.h) with `request`. The request is serialized before this
  // returns, so it need not outlive the awaitable. A response that does not parse as
  // M::Response is kInternal. timeout <= 0 fails at once with kDeadlineExceeded.
  template <RpcMethod M>
  boost::asio::awaitable<Result<typename M::Response>> call(const typename M::Request& request,
                                                            std::chrono::milliseconds timeout) {
    return parseResponse<typename M::Response>(callRaw(std::string(M::kWireName), request.SerializeAsString(), timeout));
  }

  // Untyped call: serialized request in, serialized response out.
  boost::asio::awaitable<Result<std::string>> callRaw(std::string method, std::string body,
                                                      std::chrono::milliseconds timeout);

  // Drops the connection; calls in flight fail with kUnavailable. A later call reconnects.
  void close();

 private:
  template <class Resp>
  static boost::asio::awaitable<Result<Resp>> parseResponse(boost::asio::awaitable<Result<std::string>> pending) {
    Result<std::string> bytes = co_await std::move(pending);
    if (!bytes) co_return bytes.error();
    Resp response;
    if (!response.ParseFromString(*bytes)) {
      co_return makeError(ErrorCode::kInternal, "malformed " + response.GetTypeName() + " in RPC response");
    }
    co_return response;
  }

  Endpoint endpoint_;
  std::shared_ptr<detail::ClientCore> core_;
};

// One call on a private io_context, for code that has no running io_context (CLIs, tests).
// Returns within `timeout` (plus name resolution time for a host name).
[[nodiscard]] Result<std::string> callRawBlocking(const Endpoint& endpoint, std::string method, std::string body,
                                                  std::chrono::milliseconds timeout, ClientOptions options = {});

template <RpcMethod M>
[[nodiscard]] Result<typename M::Response> callBlocking(const Endpoint& endpoint, const typename M::Request& request,
                                                        std::chrono::milliseconds timeout, ClientOptions options = {}) {
  Result<std::string> bytes =
      callRawBlocking(endpoint, std::string(M::kWireName), request.SerializeAsString(), timeout, options);
  if (!bytes) return bytes.error();
  typename M::Response response;
  if (!response.ParseFromString(*bytes)) {
    return makeError(ErrorCode::kInternal, "malformed " + response.GetTypeName() + " in RPC response");
  }
  return response;
}

// Clients by destination, so a daemon keeps one connection per peer. Same threading rules as
// RpcClient; get() may be called from any thread.
class ClientPool {
 public:
  explicit ClientPool(boost::asio::any_io_executor executor, ClientOptions options = {});

  // The client for `endpoint`, created on first use. It stays valid while the caller holds
  // it, even after closeAll().
  std::shared_ptr<RpcClient> get(const Endpoint& endpoint);

  // Turns on mutual TLS for clients created from now on (same as ClientOptions::tls); call
  // before the first get().
  void useTls(std::shared_ptr<TlsContext> tls);
  // Sets ClientOptions::onCall for clients created from now on; call before the first get().
  void onCall(std::function<void(std::string_view method, std::optional<ErrorCode> error)> observer);

  // Closes and forgets every client (e.g. at shutdown).
  void closeAll();

 private:
  boost::asio::any_io_executor executor_;
  ClientOptions options_;
  std::mutex mutex_;  // get() may race with closeAll() from another thread
  std::unordered_map<Endpoint, std::shared_ptr<RpcClient>> clients_;
};

}  // namespace tellus::net
