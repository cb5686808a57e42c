#pragma once
// What every Tellus daemon (master, worker, JM) serves and calls with, owned in one place: the
// RPC server and the address peers reach it at, the client pool, the coordinator (ZooKeeper),
// the optional HTTP server with /metrics from a metrics registry, and the ordered stop. A
// daemon registers its handlers, pages and metrics, calls start(), and keeps only its own
// logic.
//
// Ordered stop (stop()): stop accepting (RPC and HTTP listeners and connections) -> cancel
// work (sleepFor() returns at once, client calls in flight fail with kUnavailable) -> close
// the coordinator (its pending operations fail, watches end) -> join (the Runtime ends its
// loop once every spawned coroutine has returned, or after a grace period).
//
// Threading: like everything on a Runtime, use it on the runtime's io thread.

#include <utility>  // Boost 1.74's awaitable.hpp needs std::exchange

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "config/config.h"
#include <optional>

#include "coord/coordinator.h"
#include "coord/event_flag.h"
#include "daemon/daemon.h"
#include "daemon/metrics.h"
#include "net/http_server.h"
#include "net/rpc_client.h"
#include "net/rpc_method.h"
#include "net/rpc_server.h"
#include "util/result.h"

namespace tellus::daemon {

struct ServerOptions {
  std::string listen;      // RPC host:port (port 0: any free port); config field `listen`
  std::string httpListen;  // /status and /metrics host:port; "" = no HTTP server (`http_listen`)
  config::ZooKeeperConfig zookeeper;
  config::RpcLimitsConfig rpc;  // transport limits of the RPC server (`rpc` section)
  config::TlsConfig tls;  // mutual TLS of the RPC server and clients, or insecure (plaintext)
  // Who this daemon is; with TLS its certificate must say the same (a copied file is caught
  // at start, not by every peer).
  net::PeerIdentity identity;
};

class Server {
 public:
  // How long stop() lets spawned coroutines finish before the loop ends without them; below
  // the 2 s a supervisor (the mini-cluster) waits after SIGTERM.
  static constexpr std::chrono::milliseconds kStopGrace{1000};

  explicit Server(Runtime& runtime);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Runtime& runtime() { return runtime_; }

  // --- before start() -------------------------------------------------------------------------
  // The handler of RPC method M (net/rpc_method.h, net/methods.h); see RpcServer::handle.
  template <net::RpcMethod M, class Handler>
  void handle(Handler handler) {
    rpc_.handle<M>(std::move(handler));
  }
  // An HTTP page besides /metrics (served only with an http listen address).
  void httpGet(std::string path, net::HttpHandler handler) { http_.get(std::move(path), std::move(handler)); }
  MetricsRegistry& metrics() { return metrics_; }

  // Loads the TLS files (or warns that RPC is plaintext), binds the RPC server, then the HTTP server (with /metrics) if options.httpListen is set,
  // then starts connecting to ZooKeeper (use coordinator().waitConnected()). Errors name the
  // config field ("listen on 0.0.0.0:7000: ...").
  Status start(const ServerOptions& options);

  // --- after start() --------------------------------------------------------------------------
  // host:port peers reach the RPC server at: the listen host with the bound port.
  const std::string& address() const { return address_; }
  // host:port of the HTTP server, "" without one.
  const std::string& httpAddress() const { return httpAddress_; }

  net::ClientPool& clients() { return clients_; }
  std::shared_ptr<net::RpcClient> client(const net::Endpoint& to) { return clients_.get(to); }
  coord::Coordinator& coordinator() { return *coordinator_; }
  const std::shared_ptr<coord::Coordinator>& sharedCoordinator() const { return coordinator_; }

  // Runtime::spawn: the coroutine counts towards the join of stop().
  void spawn(boost::asio::awaitable<void> task, std::string what) { runtime_.spawn(std::move(task), std::move(what)); }

  // Waits `d` on a timer, or less: returns as soon as stop() is called, so loops of the form
  // `while (!server.stopping()) { ...; co_await server.sleepFor(period); }` end promptly.
  boost::asio::awaitable<void> sleepFor(std::chrono::milliseconds d);

  bool stopping() const { return stopping_; }

  // Whether the ZooKeeper session is usable now (connected). While it is not, the job state
  // this daemon holds may be stale and nothing it writes can land: daemons make no decision
  // that writes or launches until it is back. The outage is logged once when it begins (the
  // first disconnection of a session that was connected) and once when it ends, whatever
  // happens in between (expiry, new sessions, retries).
  bool zookeeperAvailable() const;

  // The ordered stop described above. Idempotent. The daemon first drops what it holds on the
  // coordinator (watches, elections) and its own children, then calls this.
  void stop();

 private:
  Runtime& runtime_;
  net::RpcServer rpc_;
  net::HttpServer http_;
  net::ClientPool clients_;
  MetricsRegistry metrics_;
  std::shared_ptr<coord::Coordinator> coordinator_;
  coord::Subscription zkOutageLog_;
  std::optional<std::chrono::steady_clock::time_point> zkUnavailableSince_;
  coord::EventFlag stopped_;  // wakes sleepFor()
  std::string address_;
  std::string httpAddress_;
  bool stopping_ = false;
};

}  // namespace tellus::daemon
