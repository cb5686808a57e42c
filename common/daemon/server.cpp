#include "daemon/server.h"

#include "daemon/zookeeper.h"

namespace tellus::daemon {

Server::Server(Runtime& runtime)
    : runtime_(runtime),
      rpc_(runtime.io().get_executor()),
      http_(runtime.io().get_executor()),
      clients_(runtime.io().get_executor()),
      stopped_(runtime.io().get_executor()) {}

Server::~Server() { stop(); }

Status Server::start(const ServerOptions& options) {
  auto listen = net::Endpoint::parse(options.listen);
  if (!listen) return listen.status().prepend("listen");
  auto port = rpc_.start(*listen);
  if (!port) return port.status().prepend("listen on " + options.listen);
  address_ = listen->host + ":" + std::to_string(*port);

  if (!options.httpListen.empty()) {
    http_.get("/metrics", [this] { return net::HttpResponse{"text/plain; version=0.0.4", metrics_.render(), 200}; });
    auto httpListen = net::Endpoint::parse(options.httpListen);
    if (!httpListen) return httpListen.status().prepend("http_listen");
    auto httpPort = http_.start(*httpListen);
    if (!httpPort) return httpPort.status().prepend("http_listen on " + options.httpListen);
    httpAddress_ = httpListen->host + ":" + std::to_string(*httpPort);
  }

  auto zk = connectZooKeeper(runtime_.io().get_executor(), options.zookeeper);
  if (!zk) return zk.status().prepend("zookeeper");
  coordinator_ = std::move(zk).value();
  return {};
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
  if (coordinator_) coordinator_->close();
  // Join.
  runtime_.shutdownWhenIdle(kStopGrace);
}

}  // namespace tellus::daemon
