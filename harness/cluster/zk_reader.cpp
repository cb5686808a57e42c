#include "harness/zk_reader.h"

namespace tellus::harness {

Result<std::unique_ptr<ZkReader>> ZkReader::connect(const std::string& connectString, const std::string& chroot,
                                                    std::chrono::milliseconds timeout,
                                                    std::optional<coord::DigestCredentials> credentials) {
  std::unique_ptr<ZkReader> reader(new ZkReader());
  coord::SessionOptions options;
  options.connectString = connectString;
  options.chroot = chroot;
  // Long enough to ride out the loss of an ensemble member without expiring.
  options.sessionTimeout = std::chrono::milliseconds(10000);
  options.credentials = std::move(credentials);
  auto created = reader->io_.call([&] { return coord::ZkClient::create(reader->io_.executor(), options); });
  if (!created) return created.error().prepend("zookeeper client for " + connectString);
  reader->client_ = std::move(created).value();
  reader->jobs_.emplace(*reader->client_);
  Status connected = reader->io_.run(reader->client_->waitConnected(timeout));
  if (!connected) return connected.error().prepend("connecting to " + connectString);
  return reader;
}

ZkReader::~ZkReader() {
  if (!client_) return;
  io_.call([&] {
    jobs_.reset();
    client_->close();
    client_.reset();
  });
}

Result<coord::NodeData> ZkReader::get(const std::string& path) { return io_.run(client_->get(path)); }

Result<std::vector<std::string>> ZkReader::children(const std::string& path) {
  return io_.run(client_->children(path));
}

Result<std::optional<coord::NodeStat>> ZkReader::stat(const std::string& path) {
  return io_.run(client_->exists(path));
}

Result<bool> ZkReader::exists(const std::string& path) {
  auto found = stat(path);
  if (!found) return found.error();
  return found->has_value();
}

Status ZkReader::set(const std::string& path, const std::string& data) {
  auto set = io_.run(client_->set(path, data, -1));
  return set.status();
}

Status ZkReader::create(const std::string& path, const std::string& data) {
  auto created = io_.run(client_->create(path, data, coord::CreateMode::kPersistent));
  return created.status();
}

Status ZkReader::removeRecursive(const std::string& path) { return io_.run(client_->removeRecursive(path)); }

}  // namespace tellus::harness
