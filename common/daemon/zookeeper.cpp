#include "daemon/zookeeper.h"

#include "coord/credentials.h"
#include "util/log.h"

namespace tellus::daemon {

Result<std::shared_ptr<coord::Coordinator>> connectZooKeeper(
    boost::asio::any_io_executor executor, const config::ZooKeeperConfig& config,
    std::function<void(std::string_view result, std::chrono::steady_clock::duration elapsed)> onRequest) {
  coord::SessionOptions options;
  options.connectString = config.connect;
  options.chroot = config.chroot;
  options.sessionTimeout = std::chrono::milliseconds(config.session_timeout_ms);
  options.onRequest = std::move(onRequest);
  if (config.insecure) {
    spdlog::warn("zookeeper.insecure: true: no ZooKeeper authentication; the nodes this daemon creates are open to "
                 "anyone who reaches ZooKeeper (use zookeeper.credentials_file outside tests, docs/security.md)");
  } else {
    // Read once: a new session after an expiry authenticates with what the daemon started with.
    bool readableByOthers = false;
    auto credentials = coord::readDigestCredentials(config.credentials_file, &readableByOthers);
    if (!credentials) return credentials.error();
    if (readableByOthers) {
      spdlog::warn("zookeeper.credentials_file '{}' is readable by other users than its owner (chmod 600 it)",
                   config.credentials_file);
    }
    spdlog::info("zookeeper: authenticating as digest user '{}' (credentials from {}); nodes created are for it only",
                 credentials->user, config.credentials_file);
    options.credentials = std::move(credentials).value();
  }
  auto client = coord::ZkClient::create(std::move(executor), std::move(options));
  if (!client) return client.error();
  return std::shared_ptr<coord::Coordinator>(std::move(client).value());
}

}  // namespace tellus::daemon
