#pragma once
// The one place a daemon's ZooKeeper config becomes a client.

#include <memory>

#include "config/config.h"
#include "coord/zk_client.h"

namespace tellus::daemon {

// Starts connecting (does not wait: use waitConnected()). Daemons hold the result as a
// coord::Coordinator, so that what they do with it works over any implementation (the
// fault-injecting wrapper included).
// `onRequest`: coord::SessionOptions::onRequest (the daemon's ZooKeeper metrics), or none.
Result<std::shared_ptr<coord::Coordinator>> connectZooKeeper(
    boost::asio::any_io_executor executor, const config::ZooKeeperConfig& config,
    std::function<void(std::string_view result, std::chrono::steady_clock::duration elapsed)> onRequest = {});

}  // namespace tellus::daemon
