#include "daemon/zookeeper.h"

namespace tellus::daemon {

Result<std::shared_ptr<coord::Coordinator>> connectZooKeeper(
    boost::asio::any_io_executor executor, const config::ZooKeeperConfig& config,
    std::function<void(std::string_view result, std::chrono::steady_clock::duration elapsed)> onRequest) {
  coord::SessionOptions options;
  options.connectString = config.connect;
  options.chroot = config.chroot;
  options.sessionTimeout = std::chrono::milliseconds(config.session_timeout_ms);
  options.onRequest = std::move(onRequest);
  auto client = coord::ZkClient::create(std::move(executor), std::move(options));
  if (!client) return client.error();
  return std::shared_ptr<coord::Coordinator>(std::move(client).value());
}

}  // namespace tellus::daemon
