#pragma once
// Real ZooKeeper servers for integration tests (Mesos zookeeper_test_server, Kudu external
// mini cluster): a standalone server or a 3-node ensemble on loopback, each a JVM running
// QuorumPeerMain from the Debian `zookeeper` package, with a short tick time, a temporary
// data directory (removed afterwards) and the power to stop, kill, pause and restart.
//
// Environment overrides: TELLUS_JAVA (java binary), TELLUS_ZK_CLASSPATH (classpath holding
// org.apache.zookeeper.server.quorum.QuorumPeerMain and its dependencies).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/temp_dir.h"
#include "proc/subprocess.h"
#include "util/result.h"

namespace tellus::harness {

struct ZkServerOptions {
  // Short ticks make session timeouts short: sessions may negotiate 2..20 ticks by default.
  std::chrono::milliseconds tickTime{200};
  std::chrono::milliseconds minSessionTimeout{400};
  std::chrono::milliseconds maxSessionTimeout{60000};
  // How long start()/restart() wait for the server to serve requests.
  std::chrono::milliseconds startTimeout{30000};
  // Appended verbatim to zoo.cfg.
  std::vector<std::string> extraConfig;
};

class ZkEnsemble;

class ZkServer {
 public:
  // Starts a standalone server on a free loopback port and waits until it serves requests.
  static Result<std::unique_ptr<ZkServer>> start(const ZkServerOptions& options = {});
  ~ZkServer();
  ZkServer(const ZkServer&) = delete;
  ZkServer& operator=(const ZkServer&) = delete;

  // "127.0.0.1:<port>"
  std::string connectString() const;
  uint16_t clientPort() const { return clientPort_; }
  const std::filesystem::path& logFile() const { return logFile_; }

  // True while the JVM process exists (also while paused).
  bool running();
  // SIGTERM and wait (SIGKILL after a grace period). Data survives for restart().
  Status stop();
  // SIGKILL: a crash.
  Status kill();
  // Starts again with the same port and data, and waits until it serves.
  Status restart();
  // SIGSTOP / SIGCONT the JVM: the server stops answering but keeps its sockets open, like a
  // hung host.
  Status pause();
  Status resume();

  // Sends a four-letter-word command (e.g. "srvr", "ruok") and returns the reply.
  Result<std::string> fourLetterWord(const std::string& command,
                                     std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) const;
  // "standalone", "leader" or "follower" while serving; kUnavailable otherwise.
  Result<std::string> mode() const;
  // Waits until the server answers `srvr` with a mode (it serves client requests).
  Status waitServing(std::chrono::steady_clock::time_point deadline);
  // The last lines of the server log (for failure messages).
  std::string logTail(size_t maxBytes = 4000) const;

 private:
  friend class ZkEnsemble;
  ZkServer(std::filesystem::path dir, std::filesystem::path configFile, uint16_t clientPort, ZkServerOptions options);
  Status launch();

  std::filesystem::path dir_;
  std::filesystem::path configFile_;
  std::filesystem::path logFile_;
  uint16_t clientPort_;
  ZkServerOptions options_;
  std::optional<proc::Subprocess> process_;
  std::optional<TempDir> ownedDir_;  // standalone servers own their temp dir
};

// A quorum of `size` servers (3 by default) on loopback.
class ZkEnsemble {
 public:
  static Result<std::unique_ptr<ZkEnsemble>> start(size_t size = 3, const ZkServerOptions& options = {});
  ~ZkEnsemble();

  // "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
  std::string connectString() const;
  size_t size() const { return servers_.size(); }
  ZkServer& server(size_t index) { return *servers_.at(index); }

  // Index of the server that reports "Mode: leader"; kUnavailable when there is none (yet).
  Result<size_t> leaderIndex() const;
  // Waits until every running server serves and one of them leads.
  Status waitForQuorum(std::chrono::steady_clock::time_point deadline);

 private:
  ZkEnsemble() : dir_("zk-ensemble") {}
  TempDir dir_;
  std::vector<std::unique_ptr<ZkServer>> servers_;
};

}  // namespace tellus::harness
