#include "harness/zk_server.h"

#include "harness/eventually.h"

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "coord/connection_limit.h"
#include "proc/ports.h"

namespace tellus::harness {
namespace {

constexpr auto kStopGrace = std::chrono::milliseconds(5000);
constexpr int kStartAttempts = 3;  // a free port can be taken by someone else before we bind it

std::string envOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : fallback;
}

Result<std::string> zookeeperClasspath() {
  std::string configured = envOr("TELLUS_ZK_CLASSPATH", "");
  if (!configured.empty()) return configured;
  // The jar's manifest names its dependencies; slf4j-simple turns the server log on.
  const std::filesystem::path jar = "/usr/share/java/zookeeper.jar";
  if (!std::filesystem::exists(jar)) {
    return makeError(ErrorCode::kNotFound,
                     jar.string() + " not found: install the Debian `zookeeper` package or set TELLUS_ZK_CLASSPATH");
  }
  std::string classpath = jar.string();
  if (std::filesystem::exists("/usr/share/java/slf4j-simple.jar")) classpath += ":/usr/share/java/slf4j-simple.jar";
  return classpath;
}

std::string baseConfig(const std::filesystem::path& dataDir, uint16_t clientPort, const ZkServerOptions& o) {
  std::ostringstream cfg;
  cfg << "tickTime=" << o.tickTime.count() << "\n"
      << "initLimit=10\n"
      << "syncLimit=5\n"
      << "dataDir=" << dataDir.string() << "\n"
      << "clientPort=" << clientPort << "\n"
      << "clientPortAddress=127.0.0.1\n"
      << "minSessionTimeout=" << o.minSessionTimeout.count() << "\n"
      << "maxSessionTimeout=" << o.maxSessionTimeout.count() << "\n"
      << "admin.enableServer=false\n"
      << "4lw.commands.whitelist=*\n"
      // The bound the shipped configs use (docs/deploy.md, "ZooKeeper connections per host"):
      // every client of a test connects from 127.0.0.1, so a test that leaks sessions, or a
      // cluster that needs more than a deployment would allow, fails here rather than in
      // production. extraConfig may override it (the last occurrence of a key wins).
      << "maxClientCnxns=1000\n";
  for (const auto& line : o.extraConfig) cfg << line << "\n";
  return cfg.str();
}

Status writeFile(const std::filesystem::path& path, const std::string& content) {
  std::ofstream out(path);
  out << content;
  out.close();
  if (!out) return makeError(ErrorCode::kInternal, "writing " + path.string());
  return Status::ok();
}

}  // namespace

ZkServer::ZkServer(std::filesystem::path dir, std::filesystem::path configFile, uint16_t clientPort,
                   ZkServerOptions options)
    : dir_(std::move(dir)),
      configFile_(std::move(configFile)),
      logFile_(dir_ / "zookeeper.log"),
      clientPort_(clientPort),
      options_(std::move(options)) {}

ZkServer::~ZkServer() {
  // The JVM must be gone before its data directory is removed.
  if (process_ && process_->running()) {
    (void)process_->killGroup(SIGCONT);  // a paused JVM cannot act on SIGTERM otherwise
    process_->terminate(kStopGrace);
  }
  process_.reset();
}

Result<std::unique_ptr<ZkServer>> ZkServer::start(const ZkServerOptions& options) {
  Status lastFailure = makeError(ErrorCode::kInternal, "not started");
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    TempDir dir("zk");
    auto port = proc::findFreePort();
    if (!port) return port.error();
    auto dataDir = dir.path() / "data";
    std::filesystem::create_directories(dataDir);
    auto configFile = dir.path() / "zoo.cfg";
    TELLUS_RETURN_IF_ERROR(writeFile(configFile, baseConfig(dataDir, *port, options)));
    std::unique_ptr<ZkServer> server(new ZkServer(dir.path(), configFile, *port, options));
    server->ownedDir_.emplace(std::move(dir));
    lastFailure = server->launch();
    if (lastFailure.isOk()) {
      lastFailure = server->waitServing(std::chrono::steady_clock::now() + options.startTimeout);
      if (lastFailure.isOk()) return server;
    }
  }
  return lastFailure.error().prepend("starting ZooKeeper");
}

Status ZkServer::launch() {
  auto classpath = zookeeperClasspath();
  if (!classpath) return classpath.error();
  std::string java = envOr("TELLUS_JAVA", "java");
  proc::SpawnOptions spawn{
      .argv = {java,
               // Small and quick to start: tests run several JVMs on a small machine.
               "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               "-Dzookeeper.admin.enableServer=false", "-Dorg.slf4j.simpleLogger.showDateTime=true", "-cp", *classpath,
               "org.apache.zookeeper.server.quorum.QuorumPeerMain", configFile_.string()},
      .workingDir = dir_,
      .stdoutFile = logFile_,
      .stderrFile = logFile_,
      .newProcessGroup = true,
      .dieWithParent = true,  // a crashed or killed test must not leave JVMs behind
  };
  auto child = proc::Subprocess::spawn(spawn);
  if (!child) return child.error().prepend("launching ZooKeeper JVM");
  process_.emplace(std::move(*child));
  return Status::ok();
}

std::string ZkServer::connectString() const { return "127.0.0.1:" + std::to_string(clientPort_); }

bool ZkServer::running() { return process_ && process_->running() && !process_->tryWait(); }

Status ZkServer::stop() {
  if (!running())
    return makeError(ErrorCode::kInvalidArgument,
                     "ZooKeeper on port " + std::to_string(clientPort_) + " is not running");
  (void)process_->killGroup(SIGCONT);
  process_->terminate(kStopGrace);
  return Status::ok();
}

Status ZkServer::kill() {
  if (!running())
    return makeError(ErrorCode::kInvalidArgument,
                     "ZooKeeper on port " + std::to_string(clientPort_) + " is not running");
  TELLUS_RETURN_IF_ERROR(process_->killGroup(SIGKILL));
  auto ended = process_->waitFor(kStopGrace);
  return ended.status();
}

Status ZkServer::restart() {
  if (running()) TELLUS_RETURN_IF_ERROR(stop());
  TELLUS_RETURN_IF_ERROR(launch());
  return waitServing(std::chrono::steady_clock::now() + options_.startTimeout);
}

Status ZkServer::pause() {
  if (!running())
    return makeError(ErrorCode::kInvalidArgument,
                     "ZooKeeper on port " + std::to_string(clientPort_) + " is not running");
  return process_->killGroup(SIGSTOP);
}

Status ZkServer::resume() {
  if (!running())
    return makeError(ErrorCode::kInvalidArgument,
                     "ZooKeeper on port " + std::to_string(clientPort_) + " is not running");
  return process_->killGroup(SIGCONT);
}

Result<std::string> ZkServer::fourLetterWord(const std::string& command, std::chrono::milliseconds timeout) const {
  return coord::fourLetterWord(connectString(), command, timeout);
}

Result<std::string> ZkServer::mode() const {
  auto reply = fourLetterWord("srvr");
  if (!reply) return reply.error();
  auto pos = reply->find("Mode: ");
  if (pos == std::string::npos) {
    return makeError(ErrorCode::kUnavailable, connectString() + " is not serving: " + *reply);
  }
  auto end = reply->find('\n', pos);
  return reply->substr(pos + 6, end == std::string::npos ? std::string::npos : end - pos - 6);
}

Status ZkServer::waitServing(std::chrono::steady_clock::time_point deadline) {
  // Done when it serves, or when the JVM has died (no point waiting for that).
  Result<std::string> m = makeError(ErrorCode::kUnavailable, "not asked yet");
  bool settled = eventually(
      [&] {
        if (!running()) return true;
        m = mode();
        return m.isOk();
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()),
      std::chrono::milliseconds(20));
  if (!running()) {
    std::string how = process_ && process_->exitStatus() ? process_->exitStatus()->toString() : "not started";
    return makeError(ErrorCode::kUnavailable, "ZooKeeper on port " + std::to_string(clientPort_) + " exited (" + how +
                                                  "); log tail:\n" + logTail());
  }
  if (settled && m) return Status::ok();
  return makeError(ErrorCode::kDeadlineExceeded, "ZooKeeper on port " + std::to_string(clientPort_) +
                                                     " not serving at the deadline (" + m.message() +
                                                     "); log tail:\n" + logTail());
}

std::string ZkServer::logTail(size_t maxBytes) const {
  std::ifstream in(logFile_, std::ios::binary);
  if (!in) return "(no log)";
  in.seekg(0, std::ios::end);
  auto size = static_cast<size_t>(in.tellg());
  in.seekg(static_cast<std::streamoff>(size > maxBytes ? size - maxBytes : 0));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---------------------------------------------------------------------------------------------

Result<std::unique_ptr<ZkEnsemble>> ZkEnsemble::start(size_t size, const ZkServerOptions& options) {
  if (size == 0) return makeError(ErrorCode::kInvalidArgument, "an ensemble needs at least one server");
  Status lastFailure = makeError(ErrorCode::kInternal, "not started");
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    std::unique_ptr<ZkEnsemble> ensemble(new ZkEnsemble());
    // Per server: client port, quorum port, leader-election port.
    auto ports = proc::findFreePorts(3 * size);
    if (!ports) return ports.error();
    std::ostringstream members;
    for (size_t i = 0; i < size; ++i) {
      members << "server." << (i + 1) << "=127.0.0.1:" << (*ports)[3 * i + 1] << ":" << (*ports)[3 * i + 2] << "\n";
    }
    for (size_t i = 0; i < size; ++i) {
      auto dir = ensemble->dir_.path() / ("server" + std::to_string(i + 1));
      auto dataDir = dir / "data";
      std::filesystem::create_directories(dataDir);
      TELLUS_RETURN_IF_ERROR(writeFile(dataDir / "myid", std::to_string(i + 1) + "\n"));
      auto configFile = dir / "zoo.cfg";
      TELLUS_RETURN_IF_ERROR(writeFile(configFile, baseConfig(dataDir, (*ports)[3 * i], options) + members.str()));
      ensemble->servers_.push_back(std::unique_ptr<ZkServer>(new ZkServer(dir, configFile, (*ports)[3 * i], options)));
    }
    lastFailure = Status::ok();
    for (auto& server : ensemble->servers_) {
      lastFailure = server->launch();
      if (!lastFailure.isOk()) break;
    }
    if (lastFailure.isOk()) {
      lastFailure = ensemble->waitForQuorum(std::chrono::steady_clock::now() + options.startTimeout);
      if (lastFailure.isOk()) return ensemble;
    }
  }
  return lastFailure.error().prepend("starting a ZooKeeper ensemble of " + std::to_string(size));
}

ZkEnsemble::~ZkEnsemble() { servers_.clear(); }

std::string ZkEnsemble::connectString() const {
  std::string out;
  for (const auto& server : servers_) {
    if (!out.empty()) out += ",";
    out += server->connectString();
  }
  return out;
}

Result<size_t> ZkEnsemble::leaderIndex() const {
  for (size_t i = 0; i < servers_.size(); ++i) {
    auto m = servers_[i]->mode();
    if (m && *m == "leader") return i;
  }
  return makeError(ErrorCode::kUnavailable, "no server of " + connectString() + " reports Mode: leader");
}

Status ZkEnsemble::waitForQuorum(std::chrono::steady_clock::time_point deadline) {
  for (auto& server : servers_) {
    if (!server->running()) continue;
    TELLUS_RETURN_IF_ERROR(server->waitServing(deadline));
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (eventually([&] { return leaderIndex().isOk(); }, left, std::chrono::milliseconds(20))) return Status::ok();
  return leaderIndex().status();
}

}  // namespace tellus::harness
