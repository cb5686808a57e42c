#pragma once
// A test's own ZooKeeper session, for reading the cluster's state with plain blocking calls:
// each call runs one coroutine of a coord::ZkClient on a private io thread and waits for it.
// Job state is read through the jobstate::JobStore over this session (jobs() + run()), so
// tests do not know the job layout either; get()/children()/stat() are for the rest (site
// records). Paths are relative to the chroot given at connect (the daemons' root, "/tellus",
// for a MiniCluster).

#include <google/protobuf/message.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coord/zk_client.h"
#include "harness/io_thread.h"
#include "jobstate/job_store.h"
#include "util/result.h"

namespace tellus::harness {

// The daemons' root in ZooKeeper: the chroot every Tellus daemon is configured with.
inline constexpr const char* kDaemonChroot = "/tellus";

class ZkReader {
 public:
  // Connects and waits up to `timeout` for a session. `credentials`: the daemons' digest
  // identity (MiniCluster::connectZkReader() passes it), without which a cluster's nodes
  // cannot be read, and with which the nodes the reader creates are the daemons' too.
  static Result<std::unique_ptr<ZkReader>> connect(const std::string& connectString, const std::string& chroot,
                                                   std::chrono::milliseconds timeout,
                                                   std::optional<coord::DigestCredentials> credentials);
  ~ZkReader();
  ZkReader(const ZkReader&) = delete;
  ZkReader& operator=(const ZkReader&) = delete;

  Result<coord::NodeData> get(const std::string& path);
  // kNotFound when the node is missing.
  Result<std::vector<std::string>> children(const std::string& path);
  // nullopt when the node is missing.
  Result<std::optional<coord::NodeStat>> stat(const std::string& path);
  // Whether the node exists.
  Result<bool> exists(const std::string& path);

  // Writes for tests that corrupt a job's state behind the daemons' backs (fault injection):
  // overwrite a node's bytes, create one, or delete a subtree.
  Status set(const std::string& path, const std::string& data);
  Status create(const std::string& path, const std::string& data);
  Status removeRecursive(const std::string& path);

  // The job store over this session. Its operations are coroutines: run them with run(), e.g.
  //   auto status = zk.run(zk.jobs().status(jobId));
  jobstate::JobStore& jobs() { return *jobs_; }
  // Runs a coroutine on the session's io thread and waits for its result.
  template <class T>
  T run(boost::asio::awaitable<T> task) {
    return io_.run(std::move(task));
  }

  // get() and parse; kInternal (naming the path) when the bytes are not a `Message`.
  template <class Message>
  Result<Message> getProto(const std::string& path) {
    auto node = get(path);
    if (!node) return node.error();
    Message m;
    if (!m.ParseFromString(node->data)) {
      return makeError(ErrorCode::kInternal, path + " does not parse as " + m.GetTypeName());
    }
    return m;
  }

 private:
  ZkReader() = default;
  IoThread io_;  // declared first: outlives the client bound to it
  std::shared_ptr<coord::ZkClient> client_;
  std::optional<jobstate::JobStore> jobs_;  // over client_
};

}  // namespace tellus::harness
