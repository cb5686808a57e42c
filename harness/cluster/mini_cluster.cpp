#include "harness/mini_cluster.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "harness/certs.h"
#include "harness/eventually.h"
#include "harness/zk_credentials.h"
#include "proc/ports.h"

namespace tellus::harness {

namespace {

const char* kSiteNames[] = {"us-east", "eu-west", "ap-south", "us-west", "eu-north", "sa-east"};

std::string readAll(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Status writeAll(const std::filesystem::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
  out.close();
  if (!out) return makeError(ErrorCode::kInternal, "cannot write " + p.string());
  return {};
}

}  // namespace

Status useOwnBuildDir() {
  if (std::getenv("TELLUS_BUILD_DIR")) return Status::ok();
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return makeError(ErrorCode::kUnavailable, "set TELLUS_BUILD_DIR (cannot read /proc/self/exe: " + ec.message() + ")");
  ::setenv("TELLUS_BUILD_DIR", self.parent_path().parent_path().c_str(), 1);
  return Status::ok();
}

std::filesystem::path MiniCluster::binDir() const {
  const char* build = std::getenv("TELLUS_BUILD_DIR");
  return std::filesystem::path(build ? build : "build") / "bin";
}

Result<std::unique_ptr<MiniCluster>> MiniCluster::start(const MiniClusterOptions& options) {
  if (options.sites < 1 || options.sites > 6) return makeError(ErrorCode::kInvalidArgument, "1..6 sites");
  if (options.zkServers != 1 && options.zkServers != 3 && options.zkServers != 5) {
    return makeError(ErrorCode::kInvalidArgument, "zkServers: 1, 3 or 5");
  }
  std::unique_ptr<MiniCluster> c(new MiniCluster(options, TempDir("tellus-cluster")));
  if (options.zkServers == 1) {
    auto zk = ZkServer::start(options.zkOptions);
    if (!zk) return zk.error().prepend("zookeeper");
    c->zk_ = std::move(zk).value();
  } else {
    auto ensemble = ZkEnsemble::start(options.zkServers, options.zkOptions);
    if (!ensemble) return ensemble.error().prepend("zookeeper ensemble");
    c->ensemble_ = std::move(ensemble).value();
  }
  if (options.zkAcl) {
    auto credentials = writeZkCredentials(c->zkCredentialsFile());
    if (!credentials) return credentials.error();
    c->zkCredentials_ = std::move(credentials).value();
  }
  // Authenticated, it creates the daemons' chroot with their ACL, as the first daemon would.
  auto reader = c->connectZkReader(options.startTimeout);
  if (!reader) return reader.error().prepend("test session");
  c->reader_ = std::move(reader).value();

  int ports = options.sites * (1 + options.workersPerSite);
  auto free = proc::findFreePorts(static_cast<size_t>(ports));
  if (!free) return free.error();
  size_t next = 0;
  std::string zkYaml = "zookeeper:\n  connect: " + c->zkConnect() +
                       "\n  chroot: /tellus\n  session_timeout_ms: " + std::to_string(options.sessionTimeoutMs) + "\n" +
                       (options.zkAcl ? fmt::format("  credentials_file: {}\n", c->zkCredentialsFile().string())
                                      : std::string("  insecure: true\n"));
  if (options.tls) {
    std::vector<std::string> identities{"client/harness"};
    for (int i = 0; i < options.sites; ++i) {
      identities.push_back(std::string("master/") + kSiteNames[i]);
      for (int w = 1; w <= options.workersPerSite; ++w) {
        identities.push_back(std::string("worker/") + kSiteNames[i] + "/" + kSiteNames[i] + "-w" + std::to_string(w));
      }
    }
    TELLUS_RETURN_IF_ERROR(makeCerts(c->certsDir(), identities));
  }
  const auto securityYaml = [&](const std::string& identity) {
    return options.tls ? tlsYaml(certFiles(c->certsDir(), identity)) : std::string("insecure: true\n");
  };
  for (int i = 0; i < options.sites; ++i) {
    std::string site = kSiteNames[i];
    c->sites_.push_back(site);
    auto siteDir = c->dir() / site;
    std::filesystem::create_directories(siteDir);
    std::string master = "127.0.0.1:" + std::to_string((*free)[next++]);
    c->masterAddresses_[site] = master;
    std::string cfg = "site: " + site + "\nlisten: " + master + "\n" + zkYaml + "data_dir: " +
                      (siteDir / "master-data").string() + "\nschedule_period_ms: " +
                      std::to_string(options.schedulePeriodMs) + "\nworker_timeout_ms: " +
                      std::to_string(options.workerTimeoutMs) + "\n" + options.masterExtraYaml + options.execYaml +
                      securityYaml("master/" + site);
    if (auto extra = options.masterExtraYamlBySite.find(site); extra != options.masterExtraYamlBySite.end()) cfg += extra->second;
    TELLUS_RETURN_IF_ERROR(writeAll(siteDir / "master.yaml", cfg));
    Daemon m{"master-" + site, {(c->binDir() / "tellus-master").string(), "--config", (siteDir / "master.yaml").string()},
             c->dir() / ("master-" + site + ".log"), std::nullopt, true};
    c->masters_.emplace(site, std::move(m));
    for (int w = 1; w <= options.workersPerSite; ++w) {
      std::string id = site + "-w" + std::to_string(w);
      const std::string workerListen = "127.0.0.1:" + std::to_string((*free)[next++]);
      c->workerAddresses_[id] = workerListen;
      std::string wcfg = "id: " + id + "\nsite: " + site + "\nlisten: " + workerListen +
                         "\nmaster: " + master + "\n" + zkYaml + "containers: " +
                         std::to_string(options.containersPerWorker) + "\ndata_dir: " + (siteDir / id).string() +
                         "\nheartbeat_ms: " + std::to_string(options.heartbeatMs) + "\n" + options.execYaml +
                         securityYaml("worker/" + site + "/" + id);
      auto extra = options.workerExtraYaml.find(site);
      if (extra != options.workerExtraYaml.end()) wcfg += extra->second;
      if (auto own = options.workerIdExtraYaml.find(id); own != options.workerIdExtraYaml.end()) wcfg += own->second;
      TELLUS_RETURN_IF_ERROR(writeAll(siteDir / (id + ".yaml"), wcfg));
      Daemon d{id, {(c->binDir() / "tellus-worker").string(), "--config", (siteDir / (id + ".yaml")).string()},
               c->dir() / (id + ".log"), std::nullopt, true};
      c->workers_.emplace(id, std::move(d));
    }
  }
  for (auto& [site, m] : c->masters_) TELLUS_RETURN_IF_ERROR(c->launch(m));
  for (auto& [id, w] : c->workers_) TELLUS_RETURN_IF_ERROR(c->launch(w));
  TELLUS_RETURN_IF_ERROR(c->waitUntilUp());
  return c;
}

MiniCluster::~MiniCluster() {
  // A stopped process cannot act on SIGTERM, and a stopped voter holds up the ensemble.
  for (const auto& site : std::set<std::string>(pausedSites_)) (void)resumeSite(site);
  for (const auto& id : std::set<std::string>(pausedWorkers_)) (void)resumeWorker(id);
  // Workers first (their groups hold JMs and executors), then masters, then ZooKeeper.
  for (auto& [id, w] : workers_) {
    if (w.process && w.process->running()) (void)w.process->killGroup(SIGKILL);
    w.process.reset();
  }
  for (auto& [site, m] : masters_) {
    if (m.process) m.process->terminate(std::chrono::milliseconds(2000));
    m.process.reset();
  }
}

Status MiniCluster::launch(Daemon& d) {
  proc::SpawnOptions opts;
  opts.argv = d.argv;
  opts.stdoutFile = d.log;
  opts.stderrFile = d.log;
  // Each daemon is its own process group: a worker's group is its "VM".
  opts.newProcessGroup = true;
  // A test that crashes or times out leaves no daemon behind.
  opts.dieWithParent = true;
  auto p = proc::Subprocess::spawn(opts);
  if (!p) return p.error().prepend("starting " + d.name);
  d.process.emplace(std::move(p).value());
  d.expectedRunning = true;
  return {};
}

Status MiniCluster::waitUntilUp() {
  // Up when every site is published with all its workers registered.
  std::string lastOut;
  bool up = eventually(
      [&] {
        auto r = tellus({"--json", "sites"}, "", std::chrono::milliseconds(3000));
        lastOut = r.out + r.err;
        if (r.exitCode != 0) return false;
        size_t sitesSeen = 0, full = 0;
        for (size_t pos = 0; (pos = r.out.find("\"workers\":", pos)) != std::string::npos; ++pos) {
          ++sitesSeen;
          if (std::stoi(r.out.substr(pos + 10)) == options_.workersPerSite) ++full;
        }
        return sitesSeen == sites_.size() && full == sites_.size();
      },
      options_.startTimeout, std::chrono::milliseconds(100));
  if (!up) return makeError(ErrorCode::kDeadlineExceeded, "cluster did not come up: " + lastOut + crashedDaemons());
  return {};
}

std::string MiniCluster::zkConnect() const {
  return ensemble_ ? ensemble_->connectString() : zk_->connectString();
}

std::string MiniCluster::masterAddress(const std::string& site) const {
  auto it = masterAddresses_.find(site);
  return it == masterAddresses_.end() ? "" : it->second;
}

std::vector<std::string> MiniCluster::siteNames(int count) {
  const int known = static_cast<int>(std::size(kSiteNames));
  std::vector<std::string> names;
  for (int i = 0; i < std::min(count, known); ++i) names.emplace_back(kSiteNames[i]);
  return names;
}

std::vector<std::string> MiniCluster::workers(const std::string& site) const {
  std::vector<std::string> out;
  for (const auto& [id, w] : workers_) {
    if (id.rfind(site + "-w", 0) == 0) out.push_back(id);
  }
  return out;
}

std::string MiniCluster::workerAddress(const std::string& workerId) const {
  auto it = workerAddresses_.find(workerId);
  return it == workerAddresses_.end() ? std::string() : it->second;
}

std::vector<std::pair<std::string, std::string>> MiniCluster::cliEnv() const {
  if (!options_.tls) return {{"TELLUS_INSECURE", "1"}};
  const CertFiles files = certFiles(certsDir(), "client/harness");
  return {{"TELLUS_TLS_CA", files.ca.string()},
          {"TELLUS_TLS_CERT", files.cert.string()},
          {"TELLUS_TLS_KEY", files.key.string()}};
}

CliResult MiniCluster::tellus(const std::vector<std::string>& args, const std::string& master,
                              std::chrono::milliseconds timeout) {
  std::string target = master.empty() ? masterAddress(sites_.front()) : masterAddress(master);
  if (target.empty()) target = master;
  auto outFile = dir() / "cli.out";
  auto errFile = dir() / "cli.err";
  std::filesystem::remove(outFile);
  std::filesystem::remove(errFile);
  proc::SpawnOptions opts;
  opts.argv = {(binDir() / "tellus").string(), "--master", target};
  opts.argv.insert(opts.argv.end(), args.begin(), args.end());
  opts.extraEnv = cliEnv();
  opts.stdoutFile = outFile;
  opts.stderrFile = errFile;
  CliResult r;
  auto p = proc::Subprocess::spawn(opts);
  if (!p) {
    r.err = p.message();
    return r;
  }
  auto status = p->waitFor(timeout);
  if (!status) {
    // Stopped here (not left to the destructor) so that what it wrote so far is complete.
    (void)p->killGroup(SIGKILL);
    (void)p->waitFor(std::chrono::milliseconds(5000));
    r.out = readAll(outFile);
    r.err = readAll(errFile) + "\n(tellus did not finish within the deadline)";
    return r;
  }
  r.exitCode = status->exited ? status->code : 128 + status->signal;
  r.out = readAll(outFile);
  r.err = readAll(errFile);
  return r;
}

Status MiniCluster::killWorker(const std::string& workerId) {
  auto it = workers_.find(workerId);
  if (it == workers_.end() || !it->second.process) return makeError(ErrorCode::kNotFound, "no worker " + workerId);
  it->second.expectedRunning = false;
  TELLUS_RETURN_IF_ERROR(it->second.process->killGroup(SIGKILL));
  (void)it->second.process->waitFor(std::chrono::milliseconds(5000));
  return {};
}

bool MiniCluster::workerRunning(const std::string& workerId) {
  auto it = workers_.find(workerId);
  return it != workers_.end() && it->second.process && !it->second.process->tryWait();
}

Status MiniCluster::restartWorker(const std::string& workerId) {
  auto it = workers_.find(workerId);
  if (it == workers_.end()) return makeError(ErrorCode::kNotFound, "no worker " + workerId);
  if (workerRunning(workerId)) return makeError(ErrorCode::kInvalidArgument, "worker " + workerId + " is running");
  it->second.process.reset();
  return launch(it->second);
}

Status MiniCluster::pauseWorker(const std::string& workerId) {
  auto it = workers_.find(workerId);
  if (it == workers_.end() || !it->second.process) return makeError(ErrorCode::kNotFound, "no worker " + workerId);
  if (pausedWorkers_.count(workerId)) return makeError(ErrorCode::kInvalidArgument, workerId + " is already paused");
  TELLUS_RETURN_IF_ERROR(it->second.process->killGroup(SIGSTOP).prepend(workerId));
  pausedWorkers_.insert(workerId);
  return {};
}

Status MiniCluster::resumeWorker(const std::string& workerId) {
  if (!pausedWorkers_.count(workerId)) return makeError(ErrorCode::kInvalidArgument, workerId + " is not paused");
  pausedWorkers_.erase(workerId);
  auto& w = workers_.at(workerId);
  if (w.process && w.process->running()) TELLUS_RETURN_IF_ERROR(w.process->killGroup(SIGCONT).prepend(workerId));
  return {};
}

Status MiniCluster::killMaster(const std::string& site) {
  auto it = masters_.find(site);
  if (it == masters_.end() || !it->second.process) return makeError(ErrorCode::kNotFound, "no master " + site);
  it->second.expectedRunning = false;
  TELLUS_RETURN_IF_ERROR(it->second.process->signal(SIGKILL));
  (void)it->second.process->waitFor(std::chrono::milliseconds(5000));
  return {};
}

Status MiniCluster::restartMaster(const std::string& site) {
  auto it = masters_.find(site);
  if (it == masters_.end()) return makeError(ErrorCode::kNotFound, "no master " + site);
  it->second.process.reset();
  return launch(it->second);
}

std::optional<size_t> MiniCluster::siteVoter(const std::string& site) const {
  if (!ensemble_) return std::nullopt;
  auto it = std::find(sites_.begin(), sites_.end(), site);
  if (it == sites_.end()) return std::nullopt;
  auto index = static_cast<size_t>(it - sites_.begin());
  if (index >= ensemble_->size()) return std::nullopt;
  return index;
}

Status MiniCluster::pauseSite(const std::string& site) {
  auto master = masters_.find(site);
  if (master == masters_.end() || !master->second.process) return makeError(ErrorCode::kInvalidArgument, "no site " + site);
  if (pausedSites_.count(site)) return makeError(ErrorCode::kInvalidArgument, "site " + site + " is already paused");
  // The voter first: the site's ZooKeeper traffic stops with the rest of it, not after it.
  if (auto voter = siteVoter(site)) TELLUS_RETURN_IF_ERROR(ensemble_->server(*voter).pause().prepend("voter of " + site));
  pausedSites_.insert(site);
  TELLUS_RETURN_IF_ERROR(master->second.process->killGroup(SIGSTOP).prepend("master of " + site));
  for (const auto& id : workers(site)) {
    auto& w = workers_.at(id);
    if (w.process && w.process->running()) TELLUS_RETURN_IF_ERROR(w.process->killGroup(SIGSTOP).prepend(id));
  }
  return {};
}

Status MiniCluster::resumeSite(const std::string& site) {
  if (!pausedSites_.count(site)) return makeError(ErrorCode::kInvalidArgument, "site " + site + " is not paused");
  pausedSites_.erase(site);
  Status result;
  auto keep = [&result](Status st) {
    if (!st && result) result = std::move(st);
  };
  // Everything is resumed even when one signal fails: a stopped process must not outlive
  // the test.
  if (auto voter = siteVoter(site)) keep(ensemble_->server(*voter).resume().prepend("voter of " + site));
  auto& master = masters_.at(site);
  if (master.process && master.process->running()) keep(master.process->killGroup(SIGCONT).prepend("master of " + site));
  for (const auto& id : workers(site)) {
    auto& w = workers_.at(id);
    if (w.process && w.process->running()) keep(w.process->killGroup(SIGCONT).prepend(id));
  }
  return result;
}

Result<pb::JmInfo> MiniCluster::jmInfo(const std::string& jobId, const std::string& site) {
  auto info = reader_->run(reader_->jobs().jm(jobId, site));
  if (!info) return info.error();
  return info->value;
}

Result<std::map<std::string, pb::JmInfo>> MiniCluster::jms(const std::string& jobId) {
  auto sites = reader_->run(reader_->jobs().jmSites(jobId));
  if (!sites) return sites.error();
  std::map<std::string, pb::JmInfo> out;
  for (const auto& site : *sites) {
    auto info = jmInfo(jobId, site);
    if (info) {
      out[site] = *info;
    } else if (info.error().code != ErrorCode::kNotFound) {  // gone meanwhile: not registered
      return info.error();
    }
  }
  return out;
}

Status MiniCluster::signalJmPid(pid_t pid, int sig) {
  if (pid <= 0) return makeError(ErrorCode::kInvalidArgument, "bad JM pid " + std::to_string(pid));
  // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so parse after ')'.
  std::string stat = readAll("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  if (close == std::string::npos) return makeError(ErrorCode::kNotFound, "no process " + std::to_string(pid));
  char state = 0;
  long parent = 0;
  if (std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &parent) != 2) {
    return makeError(ErrorCode::kInternal, "cannot parse /proc/" + std::to_string(pid) + "/stat");
  }
  std::string comm = stat.substr(stat.find('(') + 1, close - stat.find('(') - 1);
  bool childOfWorker = false;
  for (auto& [id, w] : workers_) {
    if (w.process && w.process->running() && w.process->pid() == static_cast<pid_t>(parent)) childOfWorker = true;
  }
  if (!childOfWorker || comm != "tellus-jm") {
    return makeError(ErrorCode::kInvalidArgument, "process " + std::to_string(pid) + " (" + comm +
                                                      ") is not a JM started by a worker of this cluster");
  }
  if (::kill(pid, sig) != 0) return makeError(ErrorCode::kInternal, "kill(" + std::to_string(pid) + "): " + std::strerror(errno));
  return {};
}

Result<pb::JmInfo> MiniCluster::signalJm(const std::string& jobId, const std::string& site, int sig) {
  auto info = jmInfo(jobId, site);
  if (!info) return info.error().prepend("JM of " + jobId + " at " + site);
  TELLUS_RETURN_IF_ERROR(signalJmPid(static_cast<pid_t>(info->pid()), sig));
  return info;
}

std::string MiniCluster::jmLogs(const std::string& jobId, size_t maxBytesEach) const {
  std::string out;
  for (const auto& site : sites_) {
    for (const auto& id : workers(site)) {
      auto log = dir() / site / id / "jms" / jobId / "jm.log";
      std::error_code ec;
      if (!std::filesystem::exists(log, ec)) continue;
      std::string text = readAll(log);
      if (text.size() > maxBytesEach) text = "..." + text.substr(text.size() - maxBytesEach);
      out += "\n--- JM log of " + jobId + " on " + id + ":\n" + text;
    }
  }
  return out;
}

std::string MiniCluster::crashedDaemons() {
  std::string out;
  auto check = [&](Daemon& d) {
    if (!d.expectedRunning || !d.process) return;
    if (auto st = d.process->tryWait()) {
      out += "\n" + d.name + " died (" + st->toString() + "), log tail:\n";
      std::string log = readAll(d.log);
      out += log.size() > 2000 ? log.substr(log.size() - 2000) : log;
    }
  };
  for (auto& [k, m] : masters_) check(m);
  for (auto& [k, w] : workers_) check(w);
  return out;
}

Status MiniCluster::putDataset(const std::string& site, const std::string& dataset, const std::string& content,
                               uint32_t partitions, bool residencyLocal) {
  auto file = dir() / (dataset + "-" + site + ".txt");
  TELLUS_RETURN_IF_ERROR(writeAll(file, content));
  std::vector<std::string> args{"put", file.string(), "--dataset", dataset, "--site", site, "--partitions",
                                std::to_string(partitions)};
  if (residencyLocal) args.push_back("--residency-local");
  auto r = tellus(args);
  if (r.exitCode != 0) return makeError(ErrorCode::kInternal, "tellus put failed: " + r.err);
  return {};
}

}  // namespace tellus::harness
