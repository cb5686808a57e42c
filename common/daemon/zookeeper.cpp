#include "daemon/zookeeper.h"

namespace tellus::daemon {

Result<std::shared_ptr<coord::ZkClient>> connectZooKeeper(boost::asio::any_io_executor executor,
                                                          const config::ZooKeeperConfig& config) {
  coord::SessionOptions options;
  options.connectString = config.connect;
  options.chroot = config.chroot;
  options.sessionTimeout = std::chrono::milliseconds(config.session_timeout_ms);
  return coord::ZkClient::create(std::move(executor), std::move(options));
}

}  // namespace tellus::daemon
