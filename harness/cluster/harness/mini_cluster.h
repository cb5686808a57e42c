#pragma once
// An external mini cluster (Kudu's idea): a real ZooKeeper (a standalone server or a 3-node
// ensemble) and real tellus-master / tellus-worker processes on loopback, started from an
// options struct, with the power to kill a worker "VM" (SIGKILL to its process group: the
// worker, its JMs and executors), kill, pause or resume a single JM process, kill or restart a
// master, run the `tellus` CLI, and read ZooKeeper directly. Everything is torn down (and
// every child reaped) when the object goes away; daemons also die with the test process.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/temp_dir.h"
#include "harness/zk_reader.h"
#include "harness/zk_server.h"
#include "proc/subprocess.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::harness {

// An `exec` section enabling the exec operator, run as the daemons' own user (tests must also
// run unprivileged): for clusters whose jobs use exec. Off by default, as in a real site.
inline constexpr const char* kExecEnabledYaml = "exec:\n  enabled: true\n  run_as_user: \"\"\n";

// For programs run from a build tree (the benches): unless TELLUS_BUILD_DIR is set, the tree
// this program was built in (it lives in <build>/bin), which is where MiniCluster looks for the
// daemons. kUnavailable when /proc/self/exe cannot be read.
Status useOwnBuildDir();

struct MiniClusterOptions {
  int sites = 3;
  int workersPerSite = 2;
  int containersPerWorker = 3;
  uint32_t sessionTimeoutMs = 3000;
  uint32_t schedulePeriodMs = 200;
  uint32_t heartbeatMs = 200;
  uint32_t workerTimeoutMs = 1500;
  // Extra YAML appended to every worker config (e.g. a `wan:` list), by site.
  std::map<std::string, std::string> workerExtraYaml;
  // Extra YAML appended to the config of the worker with this id (e.g. its `limits:`).
  std::map<std::string, std::string> workerIdExtraYaml;
  // Extra YAML appended to every master config (e.g. `limits:`).
  std::string masterExtraYaml;
  // Extra YAML appended to the master config, by site.
  std::map<std::string, std::string> masterExtraYamlBySite;
  // An `exec:` section for every master and worker config ("" = exec disabled).
  std::string execYaml;
  std::chrono::milliseconds startTimeout{60000};
  // 1: a standalone ZooKeeper server; 3 (or 5): an ensemble of that many servers.
  size_t zkServers = 1;
  ZkServerOptions zkOptions;
  // Mutual TLS on every RPC, with a throwaway CA in the cluster's dir (certs/): the default,
  // as in production. false: every config says insecure: true.
  bool tls = true;
  // ZooKeeper digest authentication and ACLs, with a random credential in the cluster's dir
  // (zk-credentials, mode 0600) that every config names: the default, as in production.
  // false: every config says zookeeper.insecure: true (open nodes).
  bool zkAcl = true;
};

struct CliResult {
  int exitCode = -1;
  std::string out;
  std::string err;
};

class MiniCluster {
 public:
  static Result<std::unique_ptr<MiniCluster>> start(const MiniClusterOptions& options = {});
  ~MiniCluster();

  // Site names: us-east, eu-west, ap-south, ...
  const std::vector<std::string>& sites() const { return sites_; }
  // The names a cluster of `count` sites will have (for options keyed by site).
  static std::vector<std::string> siteNames(int count);
  std::string masterAddress(const std::string& site) const;
  // Worker ids of a site: "<site>-w1", ...
  std::vector<std::string> workers(const std::string& site) const;
  // host:port of a worker's RPC server ("" for an unknown id).
  std::string workerAddress(const std::string& workerId) const;
  // The connect string of the server, or of every member of the ensemble.
  std::string zkConnect() const;
  // The standalone server; with an ensemble, its first member.
  ZkServer& zk() { return ensemble_ ? ensemble_->server(0) : *zk_; }
  // The ensemble; nullptr with a standalone server.
  ZkEnsemble* zkEnsemble() { return ensemble_.get(); }
  // A session of the test itself on the cluster's ZooKeeper, chroot /tellus (the daemons' root),
  // authenticated as the daemons are.
  ZkReader& zkReader() { return *reader_; }
  // Another session of the test's own (e.g. one per thread), like zkReader().
  Result<std::unique_ptr<ZkReader>> connectZkReader(std::chrono::milliseconds timeout) const {
    return ZkReader::connect(zkConnect(), kDaemonChroot, timeout, zkCredentials_);
  }
  // The daemons' ZooKeeper identity (nullopt with zkAcl off), and the file every config names.
  const std::optional<coord::DigestCredentials>& zkCredentials() const { return zkCredentials_; }
  std::filesystem::path zkCredentialsFile() const { return dir() / "zk-credentials"; }
  const std::filesystem::path& dir() const { return dir_.path(); }
  std::filesystem::path binDir() const;

  // The certificates (tls on): certs/ca.pem and one per daemon and for client/harness. More
  // can be issued with harness::makeCerts(certsDir(), {...}).
  std::filesystem::path certsDir() const { return dir() / "certs"; }
  // Environment for the `tellus` CLI to reach this cluster (TELLUS_TLS_* or TELLUS_INSECURE).
  std::vector<std::pair<std::string, std::string>> cliEnv() const;

  // Runs `tellus --master <master> ARGS...` (master: a site name, or "" for the first site's
  // master, or a literal "host:port"), bounded by `timeout`.
  CliResult tellus(const std::vector<std::string>& args, const std::string& master = "",
                   std::chrono::milliseconds timeout = std::chrono::milliseconds(60000));

  // SIGKILL to a worker and everything under it.
  Status killWorker(const std::string& workerId);
  // SIGKILL to a master; restartMaster() starts it again with the same config and port.
  Status killMaster(const std::string& site);
  Status restartMaster(const std::string& site);
  bool workerRunning(const std::string& workerId);
  // Starts a killed worker again with the same config, port and data dir: its VM replaced
  // (the datasets it held come back with it). kInvalidArgument while it still runs.
  Status restartWorker(const std::string& workerId);
  // SIGSTOP / SIGCONT to a worker's process group (it, its JMs and executors): a hung VM.
  // A paused worker is resumed when the cluster goes away.
  Status pauseWorker(const std::string& workerId);
  Status resumeWorker(const std::string& workerId);

  // A region partition, as seen from the rest of the system: SIGSTOP to every process of
  // `site` (its master and the process group of each of its workers: their JMs and
  // executors) and, with an ensemble, to the site's ZooKeeper voter (voter i stands in
  // region i, the sites in order: us-east holds server 0). Nothing of the site answers or
  // acts until resumeSite() sends SIGCONT to the same processes. A paused site is resumed
  // when the cluster goes away. kInvalidArgument for an unknown or already paused site.
  Status pauseSite(const std::string& site);
  Status resumeSite(const std::string& site);
  // The index of the ensemble server standing in `site`'s region; nullopt without an
  // ensemble or when the site has none (more sites than voters).
  std::optional<size_t> siteVoter(const std::string& site) const;

  // The JmInfo the JM of `jobId` at `site` registered (kNotFound when it has none now), and
  // every registered JM of the job by site.
  Result<pb::JmInfo> jmInfo(const std::string& jobId, const std::string& site);
  Result<std::map<std::string, pb::JmInfo>> jms(const std::string& jobId);
  // Sends `sig` to the JM process of `jobId` at `site` alone (its pid from its JmInfo), e.g.
  // SIGKILL (the JM crashes, its worker and containers live on) or SIGSTOP (it hangs).
  // Returns the JmInfo of the JM signalled. kInvalidArgument when that pid is not a JM
  // child of one of this cluster's workers (never signal a stranger after pid reuse).
  Result<pb::JmInfo> signalJm(const std::string& jobId, const std::string& site, int sig);
  // Sends `sig` to a JM process by pid (SIGCONT after a SIGSTOP, when its JmInfo may be gone),
  // with the same check.
  Status signalJmPid(pid_t pid, int sig);
  // Every JM log of the job on every worker (the last `maxBytesEach` of each), for failure
  // messages.
  std::string jmLogs(const std::string& jobId, size_t maxBytesEach = 3000) const;
  // The log file of a daemon ("master-<site>" or a worker id).
  std::filesystem::path daemonLog(const std::string& name) const { return dir() / (name + ".log"); }

  // Empty when every daemon that should run does; otherwise names the ones that died.
  std::string crashedDaemons();

  // Writes `lines` to a file under the cluster dir and loads it into `site` with `tellus put`.
  // residencyLocal: `tellus put --residency-local` (its raw partitions never leave the site).
  Status putDataset(const std::string& site, const std::string& dataset, const std::string& content,
                    uint32_t partitions, bool residencyLocal = false);

 private:
  struct Daemon {
    std::string name;
    std::vector<std::string> argv;
    std::filesystem::path log;
    std::optional<proc::Subprocess> process;
    bool expectedRunning = true;
  };
  MiniCluster(MiniClusterOptions options, TempDir dir) : options_(std::move(options)), dir_(std::move(dir)) {}
  Status launch(Daemon& d);
  Status waitUntilUp();

  MiniClusterOptions options_;
  TempDir dir_;
  std::unique_ptr<ZkServer> zk_;          // standalone, or
  std::unique_ptr<ZkEnsemble> ensemble_;  // an ensemble
  std::unique_ptr<ZkReader> reader_;
  std::optional<coord::DigestCredentials> zkCredentials_;
  std::vector<std::string> sites_;
  std::map<std::string, std::string> masterAddresses_;
  std::map<std::string, std::string> workerAddresses_;  // by worker id
  std::map<std::string, Daemon> masters_;  // by site
  std::map<std::string, Daemon> workers_;  // by worker id
  std::set<std::string> pausedSites_;
  std::set<std::string> pausedWorkers_;
};

}  // namespace tellus::harness
