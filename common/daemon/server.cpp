#include "daemon/server.h"

#include "daemon/zookeeper.h"
#include "util/log.h"

#include <fmt/format.h>

#include "util/log.h"

namespace tellus::daemon {

namespace {
net::ServerOptions rpcServerOptions(const config::RpcLimitsConfig& r) {
  net::ServerOptions o;
  o.maxFrameBytes = static_cast<std::size_t>(r.max_frame_bytes);
  o.maxConnections = r.max_connections;
  o.maxConnectionsPerPeer = r.max_connections_per_peer;
  o.idleTimeout = std::chrono::milliseconds(r.idle_timeout_ms);
  o.frameDeadline = std::chrono::milliseconds(r.frame_deadline_ms);
  o.frameMinBytesPerSecond = r.frame_min_bytes_per_s;
  o.maxCallsPerSecondPerConnection = r.max_calls_per_s;
  o.callBurstPerConnection = r.call_burst;
  return o;
}
}  // namespace

Server::Server(Runtime& runtime)
    : runtime_(runtime),
      rpc_(runtime.io().get_executor()),
      http_(runtime.io().get_executor()),
      clients_(runtime.io().get_executor()),
      stopped_(runtime.io().get_executor()) {}

Server::~Server() { stop(); }

Status Server::start(const ServerOptions& options) {
  // The limits first: setOptions replaces every server option, TLS included (set below).
  const auto& r = options.rpc;
  spdlog::info("rpc limits: max_frame_bytes={} max_connections={} max_connections_per_peer={} idle_timeout_ms={} "
               "frame_deadline_ms={} frame_min_bytes_per_s={} max_calls_per_s={} call_burst={} (0 = unlimited)",
               r.max_frame_bytes, r.max_connections, r.max_connections_per_peer, r.idle_timeout_ms, r.frame_deadline_ms,
               r.frame_min_bytes_per_s, r.max_calls_per_s, r.call_burst);
  rpc_.setOptions(rpcServerOptions(r));
  if (options.tls.insecure) {
    spdlog::warn("insecure: true: RPC is plaintext and unauthenticated; any host that reaches this port can "
                 "call it as anyone (use a tls section outside tests, docs/security.md)");
  } else {
    auto tls = net::TlsContext::load({options.tls.ca_file, options.tls.cert_file, options.tls.key_file});
    if (!tls) return tls.status();
    if ((*tls)->identity() != options.identity) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("tls.cert_file '{}' is the certificate of {}, but this daemon is {}",
                                   options.tls.cert_file, (*tls)->identity().toString(), options.identity.toString()));
    }
    spdlog::info("tls: RPC over mutual TLS 1.3 as {}", (*tls)->identity().toString());
    rpc_.useTls(*tls);
    clients_.useTls(*tls);
  }
  // RPC and ZooKeeper traffic is counted at one place each: the servers' and clients'
  // observers, and the ZooKeeper client's per-request hook (docs/operations.md, "Metrics").
  Counter& served = metrics_.counter("tellus_rpc_server_calls_total",
                                     "RPC calls this daemon answered, by method and result (ok or the error code).",
                                     {"method", "result"});
  rpc_.onCall([&served](std::string_view method, std::optional<ErrorCode> error) {
    served.inc({std::string(method), std::string(resultLabel(error))});
  });
  Counter& made = metrics_.counter("tellus_rpc_client_calls_total",
                                   "RPC calls this daemon made, by method and result (ok or the error code).",
                                   {"method", "result"});
  clients_.onCall([&made](std::string_view method, std::optional<ErrorCode> error) {
    made.inc({std::string(method), std::string(resultLabel(error))});
  });
  Counter& zkRequests = metrics_.counter("tellus_zk_requests_total",
                                         "ZooKeeper requests sent (each retry counts), by result.", {"result"});
  Histogram& zkLatency = metrics_.histogram("tellus_zk_request_seconds",
                                            "Time from sending a ZooKeeper request to its reply, in seconds.", {});
  auto onZkRequest = [&zkRequests, &zkLatency](std::string_view result, std::chrono::steady_clock::duration elapsed) {
    zkRequests.inc({std::string(result)});
    zkLatency.observe(std::chrono::duration<double>(elapsed).count());
  };

  auto listen = net::Endpoint::parse(options.listen);
  if (!listen) return listen.status().prepend("listen");
  auto port = rpc_.start(*listen);
  if (!port) return port.status().prepend("listen on " + options.listen);
  address_ = listen->host + ":" + std::to_string(*port);

  if (!options.httpListen.empty()) {
    http_.get("/metrics", [this](net::HttpRequest) -> boost::asio::awaitable<net::HttpResponse> {
      co_return net::HttpResponse{"text/plain; version=0.0.4", metrics_.render(), 200, {}};
    });
    auto httpListen = net::Endpoint::parse(options.httpListen);
    if (!httpListen) return httpListen.status().prepend("http_listen");
    auto httpPort = http_.start(*httpListen);
    if (!httpPort) return httpPort.status().prepend("http_listen on " + options.httpListen);
    httpAddress_ = httpListen->host + ":" + std::to_string(*httpPort);
  }

  auto zk = connectZooKeeper(runtime_.io().get_executor(), options.zookeeper, onZkRequest);
  if (!zk) return zk.status().prepend("zookeeper");
  coordinator_ = std::move(zk).value();
  zkOutageLog_ = coordinator_->onSessionEvent([this](coord::SessionEvent e) {
    using Clock = std::chrono::steady_clock;
    if (e == coord::SessionEvent::kDisconnected && !zkUnavailableSince_) {
      zkUnavailableSince_ = Clock::now();
      spdlog::warn("ZooKeeper unavailable: no writes and no launches until it is back");
    } else if ((e == coord::SessionEvent::kConnected || e == coord::SessionEvent::kNewSession) && zkUnavailableSince_) {
      const double s = std::chrono::duration<double>(Clock::now() - *zkUnavailableSince_).count();
      zkUnavailableSince_.reset();
      spdlog::info("ZooKeeper available again after {:.1f} s: resuming", s);
    }
  });
  return {};
}

bool Server::zookeeperAvailable() const {
  return coordinator_ && coordinator_->state() == coord::SessionState::kConnected;
}

boost::asio::awaitable<void> Server::sleepFor(std::chrono::milliseconds d) {
  (void)co_await stopped_.waitFor(d);
}

void Server::stop() {
  if (stopping_) return;
  stopping_ = true;
  // Stop accepting: no new calls or pages start from here on.
  rpc_.stop();
  http_.stop();
  // Cancel work: sleeping loops wake and see stopping(); calls in flight fail at once.
  stopped_.set();
  clients_.closeAll();
  // Close the coordinator last, so work that was cancelled above does not see it vanish first.
  zkOutageLog_.cancel();
  if (coordinator_) coordinator_->close();
  // Join.
  runtime_.shutdownWhenIdle(kStopGrace);
}

}  // namespace tellus::daemon
