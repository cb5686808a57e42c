#include "worker/worker.h"

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <utility>

#include "coord/connection_limit.h"
#include "coord/event_flag.h"
#include "data/checksum.h"
#include "data/dataset.h"
#include "data/operator.h"
#include "transfer/fetch.h"
#include "job/exec_policy.h"
#include "job/spec.h"
#include "jobstate/job_view.h"
#include "jobstate/paths.h"
#include "monitor/process_table.h"
#include "util/log.h"
#include "util/names.h"
#include "worker/log_retention.h"
#include "worker/replication.h"

namespace tellus::worker {

namespace asio = boost::asio;
using asio::awaitable;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kMasterCallTimeout{2000};
constexpr milliseconds kFetchCallTimeout{30000};
// A Replicate call covers the whole copy (the replica pulls every bucket before it answers);
// past it the output is recorded without the copy.
constexpr milliseconds kReplicateCallTimeout{60000};
// A fetch keeps up to kFetchWindowBytes of chunk calls in flight: a link's bandwidth × RTT
// (1 Gbit/s × 100 ms = 12.5 MB) fits, and 32 chunk calls stay far below the server's
// calls-in-flight cap per connection (rpc limits, 256).
constexpr uint32_t kFetchChunkBytes = 1 << 20;
constexpr uint64_t kFetchWindowBytes = 32ULL << 20;
// Copies of one input a RunTask may name (each is a source tried in turn).
constexpr int kMaxInputCopies = 16;
// The liveness node is re-checked this often while it is published and watched, and retried
// this often while it is not.
constexpr milliseconds kLivenessRecheck{30000};
constexpr milliseconds kLivenessRetry{500};
// The pause detector's period (its threshold is half the session timeout, at least 4 of these).
constexpr milliseconds kPauseTick{100};
// The start-up question to each ZooKeeper server about its connection limit.
constexpr milliseconds kZkCheckTimeout{2000};
// Writes that must land through a ZooKeeper connection loss are retried this often (each try
// waits for the connection first).
constexpr int kZkWriteRetries = 20;

Status writeFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return makeError(ErrorCode::kInternal, "cannot write " + path.string());
  return {};
}

data::PartitionKey toKey(const pb::PartitionKey& k) {
  return data::PartitionKey{k.job_id(), k.stage(), k.task(), k.bucket()};
}

}  // namespace

namespace {

// tellus-jm and tellus-executor live next to tellus-worker unless the config says otherwise.
std::filesystem::path binDirOf(const config::WorkerConfig& config) {
  if (!config.bin_dir.empty()) return config.bin_dir;
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
}

}  // namespace

Worker::Worker(daemon::Runtime& runtime, config::WorkerConfig config)
    : config_(std::move(config)),
      binDir_(binDirOf(config_)),
      dataDir_(config_.data_dir),
      server_(runtime),
      wan_(config_.wan) {}

Worker::~Worker() { stop(); }

Status Worker::start() {
  if (config_.exec.enabled) {
    if (auto st = data::checkExecConfinement(config_.exec); !st) return st.error().prepend("exec");
  }
  std::error_code ec;
  std::filesystem::create_directories(dataDir_ / "containers", ec);
  std::filesystem::create_directories(dataDir_ / "datasets", ec);
  std::filesystem::create_directories(dataDir_ / "logs", ec);
  if (ec) return makeError(ErrorCode::kInternal, "cannot create " + dataDir_.string() + ": " + ec.message());
  // Chunks of puts that were in flight when this worker last stopped: their puts failed.
  for (const auto& e : std::filesystem::directory_iterator(dataDir_ / "datasets", ec)) {
    if (e.path().filename().string().rfind(".upload-", 0) == 0) std::filesystem::remove_all(e.path(), ec);
  }
  auto store = data::PartitionStore::open(dataDir_ / "partitions");
  if (!store) return store.status().prepend("partition store");
  store_ = std::make_unique<data::PartitionStore>(std::move(store).value());

  // A master asks only its own site's workers to start JMs, stop a job's tasks or store a put:
  // another site's master (a valid certificate of the federation) may not.
  server_.handle<rpc::Worker::LaunchJm>(
      [this](pb::LaunchJmRequest r, net::CallContext c) -> awaitable<Result<pb::LaunchJmResponse>> {
        if (Status s = net::checkCallerSite(c.identity, config_.site); !s) co_return s.error();
        co_return co_await launchJm(std::move(r), c);
      });
  server_.handle<rpc::Worker::RunTask>([this](pb::RunTaskRequest r, net::CallContext c) { return runTask(std::move(r), c); });
  server_.handle<rpc::Worker::Fetch>([this](pb::FetchRequest r, net::CallContext c) { return fetch(std::move(r), c); });
  server_.handle<rpc::Worker::KillJobTasks>(
      [this](pb::KillJobTasksRequest r, net::CallContext c) -> awaitable<Result<pb::KillJobTasksResponse>> {
        if (Status s = net::checkCallerSite(c.identity, config_.site); !s) co_return s.error();
        co_return killJobTasks(r);
      });
  server_.handle<rpc::Worker::WriteDataset>(
      [this](pb::WriteDatasetRequest r, net::CallContext c) -> awaitable<Result<pb::WriteDatasetResponse>> {
        if (Status s = net::checkCallerSite(c.identity, config_.site); !s) co_return s.error();
        co_return writeDataset(r);
      });
  server_.handle<rpc::Worker::Replicate>(
      [this](pb::ReplicateRequest r, net::CallContext c) { return replicate(std::move(r), c); });
  // Only our own site's master asks (it found us from the job's state for a client).
  server_.handle<rpc::Worker::ReadLog>(
      [this](pb::ReadLogRequest r, net::CallContext c) -> awaitable<Result<pb::LogsResponse>> {
        if (Status s = net::checkCallerSite(c.identity, config_.site); !s) co_return s.error();
        co_return readLog(r);
      });

  // Every JM of this host holds its own ZooKeeper session, and ZooKeeper refuses a client
  // address's connections past maxClientCnxns with nothing but a closed socket: refuse to
  // start instead, naming the setting (docs/deploy.md, "ZooKeeper connections per host").
  auto limit = coord::checkConnectionLimit(config_.zookeeper.connect, 1 + config_.max_jms, kZkCheckTimeout);
  if (!limit) return limit.error().prepend("worker " + config_.id + " (1 session + max_jms " +
                                           std::to_string(config_.max_jms) + ")");
  for (const auto& why : limit->unchecked) spdlog::warn("cannot check ZooKeeper's connection limit: {}", why);

  registerMetrics();
  bytesSent_ = &server_.metrics().counter(
      "tellus_worker_sent_bytes_total", "Partition bytes this worker served (worker.Fetch), by site pair.",
      {"from_site", "to_site"});
  bytesReceived_ = &server_.metrics().counter(
      "tellus_worker_received_bytes_total", "Input bytes this worker fetched for its tasks, by site pair.",
      {"from_site", "to_site"});
  replications_ = &server_.metrics().counter(
      "tellus_worker_output_copies_total",
      "Copies of finished outputs (worker.Replicate), by this worker's role (source: its own output; replica: "
      "a copy it keeps) and result (ok, failed; skipped: no other live worker, or too many copies in flight).",
      {"role", "result"});
  // Before the server takes requests: RunTask asks it.
  pause_.emplace(std::max(milliseconds(config_.zookeeper.session_timeout_ms / 2), 4 * kPauseTick),
                 std::chrono::steady_clock::now());
  TELLUS_RETURN_IF_ERROR(server_.start({config_.listen, config_.http_listen, config_.zookeeper, config_.rpc, config_.tls,
                                         {net::Role::kWorker, config_.site, config_.id}}));
  // A worker's writes ride out a ZooKeeper leader election (a connection loss) themselves.
  jobStore_.emplace(server_.coordinator(),
                    jobstate::RetryPolicy{kZkWriteRetries, milliseconds(config_.zookeeper.session_timeout_ms)});
  starter_.emplace(server_, *jobStore_, config_.id);
  batcher_.emplace(server_, *jobStore_,
                   OutputBatchOptions{config_.output_batch_max_tasks, milliseconds(config_.output_batch_linger_ms)},
                   [this](const std::string& jobId, uint32_t stage) { return stageRuns(jobId, stage); });

  spdlog::info("worker {} of site {} serving on {} with {} containers", config_.id, config_.site, server_.address(),
               config_.containers);
  server_.spawn(masterLoop(), "master registration loop");
  server_.spawn(livenessLoop(), "liveness publisher");
  server_.spawn(pauseLoop(), "pause detector");
  // The site's live workers: where our outputs' copies go, and who may ask us for one.
  siteWorkersChanged_ = std::make_unique<coord::EventFlag>(server_.coordinator().executor());
  auto watched = server_.coordinator().watchChildren(jobstate::siteWorkersPath(config_.site),
                                                     [this](const std::vector<std::string>& names) {
                                                       siteWorkerNames_ = names;
                                                       siteWorkersChanged_->set();
                                                     });
  if (watched) {
    siteWorkersWatch_ = std::move(watched).value();
    server_.spawn(siteWorkersLoop(), "site workers");
  } else {
    spdlog::warn("watching the workers of {}: {}; outputs get no copies", config_.site, watched.message());
  }
  if (config_.log_retention_ms > 0) server_.spawn(logRetentionLoop(), "log retention");
  if (auto constants = monitor::SystemConstants::query()) {
    monitor_.emplace(*constants);
    server_.spawn(usageLoop(), "resource monitor");
  } else {
    spdlog::warn("resource monitor disabled: {}", constants.message());
  }
  return {};
}

void Worker::addPhase(TaskPhase phase, std::chrono::steady_clock::duration d) {
  phaseSeconds_[phase] += std::chrono::duration<double>(d).count();
  ++phaseSamples_[phase];
}

void Worker::registerMetrics() {
  static constexpr const char* kPhaseNames[kPhaseCount] = {"prepare",  "zk_start",  "executor_start", "executor",
                                                           "operator", "zk_unmark", "slot_idle"};
  auto& metrics = server_.metrics();
  metrics.counterFn("tellus_worker_tasks_total", "Tasks this worker ran, by outcome.", [this] {
    return std::vector<daemon::MetricSample>{{{{"outcome", "succeeded"}}, double(tasksRun_ - tasksFailed_)},
                                             {{{"outcome", "failed"}}, double(tasksFailed_)}};
  });
  metrics.counterFn("tellus_worker_task_phase_seconds_total",
                  "Seconds spent in each phase of running tasks here, summed over tasks.", [this] {
                    std::vector<daemon::MetricSample> out;
                    for (size_t p = 0; p < kPhaseCount; ++p) out.push_back({{{"phase", kPhaseNames[p]}}, phaseSeconds_[p]});
                    return out;
                  });
  metrics.counterFn("tellus_worker_task_phase_samples_total", "Times each phase was measured.", [this] {
    std::vector<daemon::MetricSample> out;
    for (size_t p = 0; p < kPhaseCount; ++p) out.push_back({{{"phase", kPhaseNames[p]}}, double(phaseSamples_[p])});
    return out;
  });
  // starts / transactions: how many task starts a ZooKeeper transaction holds (AttemptStarter).
  metrics.counterFn("tellus_worker_start_transactions_total",
                    "ZooKeeper transactions that started tasks here (each holds one or more starts).", [this] {
                      return std::vector<daemon::MetricSample>{
                          {{}, starter_ ? double(starter_->counts().transactions) : 0.0}};
                    });
  metrics.counterFn("tellus_worker_task_starts_total", "Task starts written to ZooKeeper here.", [this] {
    return std::vector<daemon::MetricSample>{{{}, starter_ ? double(starter_->counts().starts) : 0.0}};
  });
}

void Worker::stop() {
  if (server_.stopping()) return;
  jms_.clear();  // kills and reaps JM children
  // Their exit watchers reap them and return, so the stop does not wait on them.
  for (auto& [key, executors] : executorPool_) {
    for (auto& executor : executors) executor->kill("worker stopping");
  }
  executorPool_.clear();
  server_.stop();
}

pb::RegisterWorkerRequest Worker::registration() const {
  pb::RegisterWorkerRequest req;
  req.set_worker_id(config_.id);
  req.set_address(server_.address());
  req.set_containers(config_.containers);
  // After a master restart, it learns which containers are busy from us.
  for (const auto& [slot, busy] : busySlots_) {
    auto* c = req.add_running();
    c->mutable_id()->set_worker_id(config_.id);
    c->mutable_id()->set_slot(slot);
    c->set_worker_address(server_.address());
    c->set_site(config_.site);
    req.add_running_jobs(busy.jobId);
  }
  return req;
}

awaitable<void> Worker::usageLoop() {
  // Sampled four times a second, reported once a second: a task's CPU is known from its second
  // sample on, so with one sample a second a 1 s task was measured only when its start fell
  // just after a sample — and whether its JM packed tasks (Af, Parades) came down to that. A
  // task measured for the first time is reported at once: its JM packs the next ones by it
  // (a replacement JM, which knows nothing of the stage's tasks yet, ran a wave one per
  // container waiting for the once-a-second report).
  constexpr milliseconds kSampleEvery{250};
  constexpr int kSamplesPerReport = 4;
  // Per (job, container): the sum over the task trees running in it, as last measured.
  std::map<std::pair<std::string, uint32_t>, pb::ContainerUsage> perContainer;
  std::map<std::string, std::string> jmOf;
  std::set<std::string> reported;  // task trees whose measurement went out at least once
  for (int round = 1; !server_.stopping(); ++round) {
    co_await server_.sleepFor(kSampleEvery);
    if (server_.stopping()) break;
    auto samples = monitor_->sampleAll(std::chrono::steady_clock::now());
    if (!samples) {
      spdlog::warn("resource monitor: {}", samples.message());
      continue;
    }
    std::erase_if(reported, [&](const std::string& id) { return !tracked_.count(id); });
    bool firstMeasurement = false;
    std::map<std::pair<std::string, uint32_t>, pb::ContainerUsage> thisRound;
    for (const auto& u : *samples) {
      auto it = tracked_.find(u.containerId);
      if (it == tracked_.end() || !u.cpuMeasured) continue;
      firstMeasurement = firstMeasurement || reported.insert(u.containerId).second;
      auto& c = thisRound[{it->second.jobId, it->second.slot}];
      c.mutable_id()->set_worker_id(config_.id);
      c.mutable_id()->set_slot(it->second.slot);
      c.set_job_id(it->second.jobId);
      c.set_cpu(c.cpu() + u.cpuCores);
      c.set_rss_bytes(c.rss_bytes() + u.rssBytes);
      c.set_running_tasks(c.running_tasks() + 1);
      jmOf[it->second.jobId] = it->second.jmAddress;
    }
    for (auto& [key, usage] : thisRound) perContainer[key] = std::move(usage);
    if (round % kSamplesPerReport != 0 && !firstMeasurement) continue;
    std::map<std::string, pb::ContainerUsageReport> reports;  // by JM address
    lastUsage_.clear();
    for (auto& [key, usage] : perContainer) {
      lastUsage_.push_back(usage);
      const auto& jm = jmOf[key.first];
      if (jm.empty()) continue;
      auto& report = reports[jm];
      report.set_job_id(key.first);
      report.set_worker_id(config_.id);
      *report.add_usage() = usage;
    }
    perContainer.clear();
    jmOf.clear();
    for (auto& [jm, report] : reports) server_.spawn(sendUsage(jm, std::move(report)), "usage report");
  }
}

awaitable<void> Worker::sendUsage(std::string jmAddress, pb::ContainerUsageReport report) {
  auto ep = net::Endpoint::parse(jmAddress);
  if (!ep) co_return;
  auto client = server_.client(*ep);
  // Best effort: a JM that is gone or slow simply misses a sample.
  auto r = co_await client->call<rpc::Jm::ContainerUsage>(report, milliseconds(900));
  if (!r) spdlog::debug("usage report to {} failed: {}", jmAddress, r.message());
}

awaitable<void> Worker::logRetentionLoop() {
  const milliseconds retention(config_.log_retention_ms);
  // A quarter of the retention: a directory outlives it by at most that much.
  const auto period = std::clamp<milliseconds>(retention / 4, milliseconds(1000), milliseconds(600000));
  while (!server_.stopping()) {
    co_await server_.sleepFor(period);
    if (server_.stopping()) break;
    std::set<std::string> active;
    for (const auto& [job, jm] : jms_) {
      if (jm.running()) active.insert(job);
    }
    for (const auto& [slot, busy] : busySlots_) active.insert(busy.jobId);
    for (const auto& [key, pool] : executorPool_) active.insert(key.first);
    for (const char* kind : {"logs", "jms"}) {
      const auto root = dataDir_ / kind;
      const auto now = std::filesystem::file_time_type::clock::now();
      for (const auto& job : expiredLogDirs(listLogDirs(root), now, retention, active)) {
        std::error_code ec;
        std::filesystem::remove_all(root / job, ec);
        if (ec) {
          spdlog::warn("log retention: cannot delete {}: {}", (root / job).string(), ec.message());
        } else {
          spdlog::info("log retention: deleted {} ({} ms without a change)", (root / job).string(),
                       config_.log_retention_ms);
        }
      }
    }
  }
}

awaitable<void> Worker::livenessLoop() {
  // An ephemeral node per live worker: lineage recovery decides from ZooKeeper alone whether
  // a partition's only copy is gone. Re-created after a session expiry. A watch on the node
  // wakes this loop when it changes or vanishes (it used to poll `exists` twice a second:
  // most of an idle cluster's ZooKeeper load); the slow re-check is a safety net only.
  pb::WorkerInfo info;
  info.set_worker_id(config_.id);
  info.set_address(server_.address());
  info.set_containers(config_.containers);
  info.set_http_address(server_.httpAddress());
  auto path = jobstate::siteWorkerPath(config_.site, config_.id);
  coord::EventFlag changed(server_.coordinator().executor());
  auto watch = server_.coordinator().watchData(path, [&changed](const std::optional<coord::NodeData>&) { changed.set(); });
  if (!watch) spdlog::warn("watching {}: {}; re-checking it every {} ms", path, watch.message(), kLivenessRetry.count());
  while (!server_.stopping()) {
    changed.reset();
    bool published = false;
    auto connected = co_await server_.coordinator().waitConnected(milliseconds(config_.zookeeper.session_timeout_ms));
    if (connected) {
      auto stat = co_await server_.coordinator().exists(path);
      if (stat && *stat && (*stat)->ephemeralOwner != server_.coordinator().sessionId()) {
        // Left by our previous session (or process), which ZooKeeper expires only later —
        // after a quorum loss, a session timeout after the quorum is back. Replaced in one
        // transaction: a JM must never see this worker missing in between, or its primary
        // drops the outputs stored here as lost and runs their tasks again.
        std::vector<coord::ZkOp> ops{coord::ZkOp::remove(path, (*stat)->version),
                                     coord::ZkOp::create(path, info.SerializeAsString(), coord::CreateMode::kEphemeral)};
        auto replaced = co_await server_.coordinator().multi(std::move(ops));
        if (replaced) {
          published = true;
          co_await changed.waitFor(watch ? kLivenessRecheck : kLivenessRetry);
          continue;
        }
        // Gone meanwhile (expired): created below like any missing node.
        if (replaced.error().code == ErrorCode::kNotFound) *stat = std::nullopt;
      }
      published = stat && *stat && (*stat)->ephemeralOwner == server_.coordinator().sessionId();
      if (stat && !*stat) {
        auto parent = co_await server_.coordinator().ensurePath(jobstate::siteWorkersPath(config_.site));
        auto created = co_await server_.coordinator().create(path, info.SerializeAsString(), coord::CreateMode::kEphemeral);
        if (!created) spdlog::warn("publishing liveness: {}", created.message());
        published = created.isOk();
        (void)parent;
      }
    }
    co_await changed.waitFor(published && watch ? kLivenessRecheck : kLivenessRetry);
  }
}

awaitable<void> Worker::pauseLoop() {
  const auto path = jobstate::siteWorkerPath(config_.site, config_.id);
  while (!server_.stopping()) {
    co_await server_.sleepFor(kPauseTick);
    const auto paused = pause_->tick(std::chrono::steady_clock::now());
    if (!paused) continue;
    ++pauses_;
    startsHeld_ = true;
    spdlog::warn("worker did not run for {} ms: refusing task starts until its ZooKeeper session is confirmed",
                 std::chrono::duration_cast<milliseconds>(*paused).count());
    // Confirmed by a round trip on the session: the liveness node is ours (livenessLoop
    // re-creates it under a new session after an expiry).
    while (!server_.stopping()) {
      auto stat = co_await server_.coordinator().exists(path);
      if (stat && *stat && (*stat)->ephemeralOwner == server_.coordinator().sessionId()) break;
      co_await server_.sleepFor(kPauseTick);
    }
    (void)pause_->tick(std::chrono::steady_clock::now());  // the confirmation's own wait is no pause
    startsHeld_ = false;
    spdlog::info("ZooKeeper session confirmed after the pause: taking task starts again");
  }
}

Status Worker::checkNotPaused(uint64_t pausesAtArrival) const {
  if (startsHeld_ || pauses_ != pausesAtArrival || pause_->overdue(std::chrono::steady_clock::now())) {
    return makeError(ErrorCode::kUnavailable,
                     "worker " + config_.id + " was stopped for a while and has not confirmed its ZooKeeper session: ask again");
  }
  return Status::ok();
}

awaitable<void> Worker::masterLoop() {
  auto master = net::Endpoint::parse(config_.master);
  if (!master) {
    // Exits non-zero: a worker without its master cannot do its job.
    spdlog::critical("master address {}: {}", config_.master, master.message());
    server_.runtime().fail();
    server_.runtime().shutdown();
    co_return;
  }
  auto client = server_.client(*master);
  bool registered = false;
  while (!server_.stopping()) {
    if (!registered) {
      auto r = co_await client->call<rpc::Master::RegisterWorker>(registration(),
                                                                  kMasterCallTimeout);
      if (r) {
        registered = true;
        datasetRoots_.clear();
        residentFiles_.clear();
        for (const auto& d : r->datasets()) {
          for (const auto& p : d.partitions()) {
            datasetRoots_.push_back(std::filesystem::path(p.file()).parent_path());
            std::error_code ec;
            if (d.residency_local()) residentFiles_.insert(std::filesystem::weakly_canonical(p.file(), ec));
          }
        }
        spdlog::info("registered with master {}", config_.master);
      } else {
        spdlog::warn("cannot register with master {}: {}", config_.master, r.message());
      }
    } else {
      pb::WorkerHeartbeat hb;
      hb.set_worker_id(config_.id);
      for (const auto& u : lastUsage_) *hb.add_usage() = u;
      for (const auto& [from, mbps] : inboundMbps_) {
        auto* rate = hb.add_inbound();
        rate->set_from_site(from);
        rate->set_mbps(mbps);
      }
      // Taken out of deadJms_ for the call: the reap loop may add a death while it is in
      // flight, and clearing the list afterwards would drop that report.
      std::vector<DeadJm> reported = std::exchange(deadJms_, {});
      for (const auto& j : reported) {
        hb.add_dead_jms(j.jobId);
        hb.add_dead_jm_reasons(j.reason);
      }
      auto r = co_await client->call<rpc::Master::Heartbeat>(hb, kMasterCallTimeout);
      // Sent again only if the call failed: a master that asks us to register again has declared
      // us dead and already replaced every JM it had placed here.
      if (!r) deadJms_.insert(deadJms_.begin(), reported.begin(), reported.end());
      if (r) {
        if (r->reregister()) registered = false;
      } else {
        spdlog::warn("heartbeat to master {} failed: {}", config_.master, r.message());
        // A restarted master has no record of us: register again once it answers.
        registered = false;
      }
    }
    co_await server_.sleepFor(milliseconds(registered ? config_.heartbeat_ms : 500));
  }
}

std::string Worker::jmExitReason(const std::string& jobId) const {
  // Bounded: a line from the JM, not its log.
  constexpr size_t kMaxReasonBytes = 512;
  std::ifstream in(dataDir_ / "jms" / jobId / "exit-reason", std::ios::binary);
  std::string reason(kMaxReasonBytes, '\0');
  in.read(reason.data(), static_cast<std::streamsize>(reason.size()));
  reason.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
  return reason.empty() ? "no reason left (see its jm.log)" : reason;
}

awaitable<void> Worker::watchJm(std::string jobId, pid_t pid, int pidFd) {
  asio::posix::stream_descriptor fd(server_.runtime().io(), pidFd);
  boost::system::error_code ec;
  co_await fd.async_wait(asio::posix::descriptor_base::wait_read, asio::redirect_error(asio::use_awaitable, ec));
  auto it = jms_.find(jobId);
  // Killed and reaped by KillJobTasks or the stop, or replaced by a newer JM of the job.
  if (it == jms_.end() || it->second.pid() != pid || !it->second.running()) co_return;
  auto st = it->second.tryWait();
  if (!st) {
    // Only when the wait itself failed: erasing the Subprocess kills and reaps it.
    spdlog::warn("waiting for the JM of job {} (pid {}): {}; stopping it", jobId, pid, ec.message());
    jms_.erase(it);
    co_return;
  }
  if (!st->success()) {
    std::string reason = st->toString() + ": " + jmExitReason(jobId);
    spdlog::warn("JM of job {} exited: {}", jobId, reason);
    deadJms_.push_back({jobId, std::move(reason)});
  } else {
    spdlog::info("JM of job {} finished", jobId);
  }
  jms_.erase(it);
}

Status Worker::checkAddressee(std::string_view method, const std::string& workerId, const std::string& site) const {
  if (workerId == config_.id && site == config_.site) return {};
  return makeError(ErrorCode::kInvalidArgument,
                   fmt::format("{} addressed to worker '{}' of site '{}'; this is {} of {} (a registration under "
                               "another id claimed this address?)",
                               method, workerId.substr(0, 64), site.substr(0, 64), config_.id, config_.site));
}

awaitable<Result<pb::LaunchJmResponse>> Worker::launchJm(pb::LaunchJmRequest req, net::CallContext) {
  // The job id becomes a directory under data_dir/jms.
  if (auto st = checkName("job id", req.job_id()); !st) co_return st.error();
  if (auto st = checkAddressee("LaunchJm", req.worker_id(), req.site()); !st) co_return st.error();
  if (killedJobs_.count(req.job_id())) {
    co_return makeError(ErrorCode::kInvalidArgument, "job " + req.job_id() + " was killed on this worker");
  }
  auto existing = jms_.find(req.job_id());
  if (existing != jms_.end() && existing->second.running()) {
    pb::LaunchJmResponse resp;
    resp.set_pid(existing->second.pid());
    co_return resp;
  }
  const auto running = std::count_if(jms_.begin(), jms_.end(), [](const auto& kv) { return kv.second.running(); });
  if (static_cast<uint64_t>(running) >= config_.max_jms) {
    // The master tries its other workers; the bound keeps this host within ZooKeeper's
    // per-address connection limit checked at start.
    co_return makeError(ErrorCode::kUnavailable, fmt::format("worker {} already runs {} JMs (max_jms)", config_.id,
                                                             running));
  }
  config::JmConfig jm;
  static_cast<config::JmTuning&>(jm) = config_.jm;  // the site's timings (`jm:`)
  jm.job_id = req.job_id();
  jm.site = config_.site;
  jm.primary = req.role() == pb::JM_PRIMARY;
  jm.listen = server_.address().substr(0, server_.address().rfind(':')) + ":0";
  jm.http_listen = config_.jm_http_listen;
  jm.master = config_.master;
  jm.worker_id = config_.id;
  jm.zookeeper = config_.zookeeper;
  jm.rpc = config_.rpc;
  jm.tls = config_.tls;  // the JM calls as this worker (docs/security.md)
  jm.log_level = config_.log_level;
  jm.log_format = config_.log_format;
  auto dir = dataDir_ / "jms" / req.job_id();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // Where the JM leaves the reason it could not do its job; read when it is reaped.
  jm.exit_reason_file = (dir / "exit-reason").string();
  std::filesystem::remove(jm.exit_reason_file, ec);
  // Appended to by every JM of the job here (a replacement continues its predecessor's).
  if (jm.decision_log_max_bytes > 0) jm.decision_log_file = (dir / "decisions.jsonl").string();
  auto cfgPath = dir / ("jm-" + std::to_string(++nextRun_) + ".yaml");
  if (auto st = writeFile(cfgPath, config::toYaml(jm)); !st) co_return st.error();

  proc::SpawnOptions opts;
  opts.argv = {(binDir_ / "tellus-jm").string(), "--config", cfgPath.string()};
  opts.stdoutFile = dir / "jm.log";
  opts.stderrFile = dir / "jm.log";
  auto child = proc::Subprocess::spawn(opts);
  if (!child) co_return child.error().prepend("starting JM for " + req.job_id());
  // Its end is seen through a pidfd (no polling); without one the JM is not kept.
  auto pidFd = child->openPidFd();
  if (!pidFd) co_return pidFd.error().prepend("starting JM for " + req.job_id());
  pb::LaunchJmResponse resp;
  resp.set_pid(child->pid());
  spdlog::info("started {} JM for job {} (pid {})", jm.primary ? "primary" : "secondary", req.job_id(),
               child->pid());
  server_.spawn(watchJm(req.job_id(), child->pid(), *pidFd), "JM reaper");
  jms_.insert_or_assign(req.job_id(), std::move(child).value());
  co_return resp;
}

Result<std::shared_ptr<ExecutorProcess>> Worker::acquireExecutor(const std::string& jobId, uint32_t slot) {
  auto& executors = executorPool_[{jobId, slot}];
  std::erase_if(executors, [](const auto& e) { return !e->alive(); });
  for (auto& executor : executors) {
    if (!executor->busy()) {
      executor->reserve();
      return executor;
    }
  }
  // A container runs one job's executors: idle ones of the job it ran before go.
  for (auto it = executorPool_.begin(); it != executorPool_.end();) {
    if (it->first.second == slot && it->first.first != jobId) {
      std::erase_if(it->second, [&](const auto& e) {
        if (e->busy()) return false;
        e->kill(fmt::format("container {} now runs job {}", slot, jobId));
        return true;
      });
      if (it->second.empty()) {
        it = executorPool_.erase(it);
        continue;
      }
    }
    ++it;
  }
  // None idle (a first task, or Parades packs another task into the container): a new one.
  const auto started = std::chrono::steady_clock::now();
  auto dir = dataDir_ / "containers" / jobId / fmt::format("executor-c{}-{}", slot, ++nextRun_);
  auto executor = ExecutorProcess::start(server_.runtime().io().get_executor(), binDir_ / "tellus-executor", dir,
                                        config_.exec.enabled ? config_.exec.work_dir : std::string());
  if (!executor) return executor.error();
  server_.spawn(ExecutorProcess::watchExit(*executor), "executor exit watcher");
  server_.spawn(ExecutorProcess::readReports(*executor), "executor report reader");
  (*executor)->reserve();
  executors.push_back(*executor);
  addPhase(kExecutorStart, std::chrono::steady_clock::now() - started);
  spdlog::debug("started executor pid {} for job {} in container {}", (*executor)->pid(), jobId, slot);
  return executor;
}

transfer::TransferOptions Worker::fetchOptions() const {
  transfer::TransferOptions options;
  options.window = {.chunkBytes = kFetchChunkBytes,
                    .windowBytes = kFetchWindowBytes,
                    .maxTotalBytes = std::max(config_.limits.max_output_bytes, config_.limits.max_partition_bytes)};
  options.chunkTimeout = kFetchCallTimeout;
  return options;
}

awaitable<Result<std::string>> Worker::localInput(const pb::InputRef& ref, const std::filesystem::path& dir,
                                                  size_t index, std::map<std::string, uint64_t>& fetchedFrom) {
  if (ref.has_partition()) {
    // Ours, or a copy we keep (worker/replication.h): read in place.
    bool here = ref.worker_id() == config_.id;
    for (const auto& replica : ref.replicas()) here = here || replica.worker_id() == config_.id;
    if (here) {
      auto path = store_->dataPath(toKey(ref.partition()));
      if (path) co_return path->string();
    }
  }
  if (!ref.dataset_file().empty()) {
    if (ref.worker_id() == config_.id && servable(ref.dataset_file())) co_return ref.dataset_file();
    for (const auto& replica : ref.replicas()) {
      if (replica.worker_id() == config_.id && servable(replica.file())) co_return replica.file();
    }
  }
  auto path = dir / ("input-" + std::to_string(index));
  if (ref.has_partition() && ref.bytes() == 0) {
    // An empty bucket (its size is in the output's record): nothing to fetch, from a worker
    // that may be gone (an empty output gets no copy, and is never taken as lost).
    std::ofstream empty(path, std::ios::binary | std::ios::trunc);
    if (!empty) co_return makeError(ErrorCode::kInternal, "cannot create " + path.string());
    co_return path.string();
  }
  // The partition and its copies on other workers (an output's, or a raw partition's): a dead
  // VM costs one retry, not the job. Only output partitions carry a checksum.
  std::vector<transfer::FetchSource> sources;
  transfer::FetchSource first{ref.worker_id(), ref.worker_address(), {}, ref.has_partition()};
  if (ref.has_partition()) {
    *first.request.mutable_partition() = ref.partition();
  } else {
    first.request.set_dataset_file(ref.dataset_file());
  }
  first.request.set_from_site(config_.site);
  sources.push_back(first);
  for (const auto& replica : ref.replicas()) {
    transfer::FetchSource copy{replica.worker_id(), replica.worker_address(), first.request, ref.has_partition()};
    if (!ref.has_partition()) copy.request.set_dataset_file(replica.file());
    sources.push_back(std::move(copy));
  }
  const transfer::TransferOptions options = fetchOptions();
  // Named, not a temporary: GCC 12 destroys a lambda converted to a coroutine's std::function
  // parameter twice when it is built inside the co_await expression (harmless only while it
  // captures nothing but `this`).
  transfer::ClientFor clientFor = [this](const net::Endpoint& ep) { return server_.client(ep); };
  auto fetched = co_await transfer::fetchToFile(clientFor, std::move(sources), path, options);
  if (!fetched) co_return fetched.error();
  bytesReceived_->inc({ref.site().substr(0, 64), config_.site}, static_cast<double>(fetched->bytes));
  // Counted against the site named in the ref, as the metric is: replicas are in its site.
  if (ref.site() != config_.site && jobstate::isUsageSite(ref.site())) fetchedFrom[ref.site()] += fetched->bytes;
  // What the WAN delivered: the placement LPs are fed measured rates, not configured ones.
  // Small transfers measure latency, not bandwidth, so only those of 64 KiB and more count.
  if (ref.site() != config_.site && fetched->bytes >= (64u << 10) && fetched->seconds > 0) {
    double mbps = static_cast<double>(fetched->bytes) * 8 / 1e6 / fetched->seconds;
    auto [it, fresh] = inboundMbps_.try_emplace(ref.site(), mbps);
    if (!fresh) it->second = 0.8 * it->second + 0.2 * mbps;
  }
  co_return path.string();
}

awaitable<Result<pb::RunTaskResponse>> Worker::runTask(pb::RunTaskRequest req, net::CallContext) {
  using Clock = std::chrono::steady_clock;
  const auto received = Clock::now();
  // A request that may have waited in our socket while we were stopped is refused before
  // anything else: its sender may have given its task up and run it elsewhere.
  const uint64_t pausesAtArrival = pauses_;
  if (auto st = checkNotPaused(pausesAtArrival); !st) co_return st.error();
  // Everything is checked before the container directory is made: the job id becomes a
  // directory, the counts bound what the executor writes and what we fetch.
  const auto& limits = config_.limits;
  if (auto st = checkName("job id", req.job_id()); !st) co_return st.error();
  if (auto st = checkAddressee("RunTask", req.container().worker_id(), req.site()); !st) co_return st.error();
  if (req.buckets() > limits.max_tasks_per_stage) {
    co_return makeError(ErrorCode::kInvalidArgument, fmt::format("RunTask: {} buckets, over the limit of {} (limits.max_tasks_per_stage)",
                                                                 req.buckets(), limits.max_tasks_per_stage));
  }
  if (static_cast<uint64_t>(req.inputs_size()) > limits.max_tasks_per_job) {
    co_return makeError(ErrorCode::kInvalidArgument, fmt::format("RunTask: {} inputs, over the limit of {} (limits.max_tasks_per_job)",
                                                                 req.inputs_size(), limits.max_tasks_per_job));
  }
  if (req.container().slot() >= config_.containers) {
    co_return makeError(ErrorCode::kInvalidArgument, fmt::format("RunTask: container slot {} does not exist on {} ({} containers)",
                                                                 req.container().slot(), config_.id, config_.containers));
  }
  for (const auto& in : req.inputs()) {
    if (in.has_partition()) {
      if (auto st = checkName("input job id", in.partition().job_id()); !st) co_return st.error();
    }
    // Each copy is a source tried in turn: bounded.
    if (in.replicas_size() > kMaxInputCopies) {
      co_return makeError(ErrorCode::kInvalidArgument,
                          fmt::format("RunTask: an input with {} copies, at most {}", in.replicas_size(), kMaxInputCopies));
    }
  }
  if (req.output_replicas() > job::kMaxOutputReplicas) {
    co_return makeError(ErrorCode::kInvalidArgument, fmt::format("RunTask: output_replicas {}, at most {}",
                                                                 req.output_replicas(), job::kMaxOutputReplicas));
  }
  if (auto st = job::checkOperatorLimits("s" + std::to_string(req.stage()), req.op(), req.params(), limits); !st) {
    co_return st.error();
  }
  // Fetched inputs go here (a task without inputs needs no directory).
  auto dir = dataDir_ / "containers" / req.job_id() /
             fmt::format("s{}-t{}-a{}-{}", req.stage(), req.task(), req.attempt(), ++nextRun_);
  if (req.inputs_size() > 0) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) co_return makeError(ErrorCode::kInternal, "cannot create " + dir.string());
  }

  if (req.op() == "exec") {
    // The master checked at submission; this site's own config has the last word.
    const auto cmd = req.params().find("cmd");
    if (auto st = data::checkExecAllowed(config_.exec, cmd == req.params().end() ? std::string() : cmd->second); !st) {
      co_return st.error().prepend("worker " + config_.id);
    }
  }
  pb::ExecutorTask task;
  *task.mutable_exec() = job::toProto(config_.exec);
  task.set_job_id(req.job_id());
  task.set_stage(req.stage());
  task.set_task(req.task());
  task.set_op(req.op());
  *task.mutable_params() = req.params();
  task.set_buckets(req.buckets());
  task.set_store_root(store_->root().string());
  std::map<std::string, uint64_t> fetchedFrom;
  for (int i = 0; i < req.inputs_size(); ++i) {
    auto file = co_await localInput(req.inputs(i), dir, static_cast<size_t>(i), fetchedFrom);
    if (!file) {
      const auto& in = req.inputs(i);
      // Its last copy answered that it holds no such partition (a copy the record names that
      // was lost since): told apart, so that the JM re-runs its task once its own worker is
      // dead too, instead of waiting for an input no one will bring back.
      if (in.has_partition() && in.replicas_size() > 0 && file.error().code == ErrorCode::kNotFound) {
        spdlog::warn("task {}/s{}-t{}: input {} is on no copy: {}", req.job_id(), req.stage(), req.task(), i, file.message());
        pb::RunTaskResponse lost;
        *lost.mutable_lost_input() = in.partition();
        co_return lost;
      }
      // Reported as kNotFound: the task is fine, its input is gone (the JM waits for lineage).
      co_return makeError(ErrorCode::kNotFound, "input " + std::to_string(i) + " unavailable: " + file.message());
    }
    task.add_input_files(*file);
  }
  if (auto idle = slotIdleSince_.find(req.container().slot());
      idle != slotIdleSince_.end() && idle->second.first == req.job_id()) {
    addPhase(kSlotIdle, received - idle->second.second);
    slotIdleSince_.erase(idle);
  }
  auto phaseStart = Clock::now();
  addPhase(kPrepare, phaseStart - received);

  // Mark the task as running in ZooKeeper (ephemeral: it goes with us) and record the
  // execution; a JM that replaces the one that launched it will not run it a second time.
  pb::RunningTask marker;
  *marker.mutable_container() = req.container();
  marker.set_site(config_.site);
  marker.set_attempt(req.attempt());
  marker.set_start_unix_ms(daemon::nowUnixMs());
  const jobstate::TaskId taskId{req.stage(), req.task()};
  // The marker and the execution's audit node in one transaction, so neither exists without
  // the other however a connection loss falls.
  if (killedJobs_.count(req.job_id())) {
    co_return makeError(ErrorCode::kInvalidArgument, "job " + req.job_id() + " was killed on this worker");
  }
  // Fetching the inputs took time: a pause in it is found here, before the start is written.
  if (auto st = checkNotPaused(pausesAtArrival); !st) co_return st.error();
  auto attemptId = co_await starter_->start(req.job_id(), taskId, std::move(marker));
  if (!attemptId) co_return attemptId.error();
  // The marker is this session's (startAttempt makes sure): only while it lives do we remove
  // the marker; after an expiry the path may hold another execution's (issue 12's chaos run:
  // a resumed worker's batch deleted the marker of the task's re-run on another worker).
  const int64_t markerSession = server_.coordinator().sessionId();
  addPhase(kZkStart, Clock::now() - phaseStart);
  phaseStart = Clock::now();
  auto& busy = busySlots_[req.container().slot()];
  busy.jobId = req.job_id();
  ++busy.tasks;

  // The execution's log (the operator's and an exec command's stderr) is kept by attempt id,
  // also after the task succeeds and its container directory goes: `tellus logs` reads it. It
  // is created here, empty, so that an execution on record whose executor never started (its
  // job was killed meanwhile) or died before writing reads as an empty log, not as a missing one.
  const auto logFile = dataDir_ / "logs" / req.job_id() / (*attemptId + ".stderr");
  const auto attemptKey = std::make_pair(req.job_id(), *attemptId);
  runningAttempts_.insert(attemptKey);  // its log is incomplete from here on
  {
    std::error_code logEc;
    std::filesystem::create_directories(logFile.parent_path(), logEc);
    std::ofstream created(logFile, std::ios::out | std::ios::app);
    if (!created) spdlog::warn("creating {}: {}", logFile.string(), std::strerror(errno));
  }
  task.set_log_file(logFile.string());
  // The container's executor for this job: an idle one, or a new one (a killed job's tasks
  // must not start one).
  auto executor = killedJobs_.count(req.job_id())
                      ? Result<std::shared_ptr<ExecutorProcess>>(makeError(
                            ErrorCode::kInvalidArgument, "job " + req.job_id() + " was killed on this worker"))
                      : acquireExecutor(req.job_id(), req.container().slot());
  if (!executor) {
    runningAttempts_.erase(attemptKey);
    if (--busySlots_[req.container().slot()].tasks <= 0) busySlots_.erase(req.container().slot());
    (void)co_await jobStore_->removeRunningMarker(req.job_id(), taskId, markerSession);
    co_return executor.error().prepend("starting executor");
  }
  std::string monitorKey = std::to_string(req.container().slot()) + "/" + req.job_id() + "/" +
                           jobstate::runningTaskName(req.stage(), req.task());
  if (monitor_ && monitor_->track(monitorKey, (*executor)->pid())) {
    tracked_[monitorKey] = TrackedTask{req.container().slot(), req.job_id(), req.jm_address()};
  }
  phaseStart = Clock::now();
  const auto runKey = std::make_tuple(req.job_id(), req.stage(), req.task());
  ++taskRuns_[runKey];
  // Its report comes back over its socket; its death, through its pidfd, fails the task at once.
  auto report = co_await (*executor)->run(std::move(task));
  if (tracked_.erase(monitorKey)) (void)monitor_->untrack(monitorKey);
  runningAttempts_.erase(attemptKey);
  const auto executorWall = Clock::now() - phaseStart;
  if (--busySlots_[req.container().slot()].tasks <= 0) busySlots_.erase(req.container().slot());
  if (--taskRuns_[runKey] <= 0) taskRuns_.erase(runKey);
  auto result =
      co_await recordOutput(req, *attemptId, markerSession, std::move(report), dir, executorWall, std::move(fetchedFrom));
  ++tasksRun_;
  if (!result) {
    ++tasksFailed_;
    removePartialOutputs(req, dir);
    // The marker of a failed task goes now, so a JM never sees it as running nor done (a
    // recorded output's marker goes with the batch that records it).
    phaseStart = Clock::now();
    Status unmarked = co_await jobStore_->removeRunningMarker(req.job_id(), taskId, markerSession);
    if (!unmarked) spdlog::warn("{}", unmarked.message());
    addPhase(kZkUnmark, Clock::now() - phaseStart);
  }
  if (!busySlots_.count(req.container().slot())) slotIdleSince_[req.container().slot()] = {req.job_id(), Clock::now()};
  co_return result;
}

void Worker::removePartialOutputs(const pb::RunTaskRequest& req, const std::filesystem::path& dir) {
  std::error_code ec;
  // Fetched inputs can be as large as the outputs (the logs are under logs/, for `tellus logs`).
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind("input-", 0) == 0) std::filesystem::remove(e.path(), ec);
  }
  // Another attempt of the same task still running here writes into the same names.
  if (taskRuns_.count(std::make_tuple(req.job_id(), req.stage(), req.task()))) return;
  // A killed executor's writer never ran its destructor: its partial bucket is a .tmp-*
  // directory of the partition store (PartitionStore's layout). Committed buckets stay: they
  // are complete, and identical to what a re-run writes.
  const std::string prefix = fmt::format(".tmp-s{}-t{}-b", req.stage(), req.task());
  size_t removed = 0;
  for (const auto& e : std::filesystem::directory_iterator(store_->root() / req.job_id(), ec)) {
    if (e.path().filename().string().rfind(prefix, 0) != 0) continue;
    std::filesystem::remove_all(e.path(), ec);
    ++removed;
  }
  if (removed > 0) {
    spdlog::info("task {}/s{}-t{} attempt {}: removed {} partial outputs", req.job_id(), req.stage(), req.task(),
                 req.attempt(), removed);
  }
}

awaitable<Result<pb::RunTaskResponse>> Worker::recordOutput(const pb::RunTaskRequest& req, std::string attemptId,
                                                            int64_t markerSession,
                                                            Result<pb::ExecutorReport> report,
                                                            std::filesystem::path dir,
                                                            std::chrono::steady_clock::duration executorWall,
                                                            std::map<std::string, uint64_t> fetchedFrom) {
  if (!report) co_return report.error();
  if (!report->error().empty()) co_return makeError(ErrorCode::kInternal, report->error());
  const auto operatorTime = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::max(0.0, report->elapsed_s())));
  addPhase(kOperator, operatorTime);
  addPhase(kExecutor, executorWall - std::min(operatorTime, executorWall));

  pb::PartitionLocation loc;
  loc.set_site(config_.site);
  loc.set_worker_id(config_.id);
  loc.set_worker_address(server_.address());
  *loc.mutable_bucket_bytes() = report->bucket_bytes();
  loc.set_attempt(req.attempt());
  loc.set_elapsed_s(report->elapsed_s());
  loc.set_finish_unix_ms(daemon::nowUnixMs());
  loc.set_attempt_id(attemptId);
  for (const auto& [site, bytes] : fetchedFrom) {
    auto* f = loc.add_fetched();
    f->set_site(site);
    f->set_bytes(bytes);
  }
  // The worker, not the JM, records the output: a task that finishes while its JM is being
  // replaced is not lost. Recorded in a batch with the stage's other executions here (the
  // first copy of a task wins; a duplicate is kept for the audit only); the task stays marked
  // running until then. The JM has the location now, in the reply.
  // With a copy asked for, recorded once the copy is complete or failed (replicateThenRecord):
  // the record names only a copy that exists. The reply does not wait for it. An empty output
  // needs none: no reader fetches it (jobstate::outputEmpty).
  jobstate::BatchItem item{req.task(), loc, false};
  const bool wantsCopy = req.output_replicas() > 0 && !jobstate::outputEmpty(loc);
  const auto replica = wantsCopy ? pickReplicaWorker(config_.id, siteWorkers_) : std::nullopt;
  if (replica && replicating_ < kMaxReplications) {
    ++replicating_;
    ++stageCopies_[{req.job_id(), req.stage()}];
    server_.spawn(replicateThenRecord(req.job_id(), req.stage(), std::move(item), markerSession, req.stage_tail(),
                                      static_cast<uint32_t>(loc.bucket_bytes_size()), *replica, siteWorkers_.at(*replica)),
                  "output copy");
  } else {
    if (wantsCopy) replications_->inc({"source", "skipped"});
    recordBatchItem(req.job_id(), req.stage(), std::move(item), markerSession, req.stage_tail());
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);  // fetched inputs are no longer needed
  pb::RunTaskResponse resp;
  *resp.mutable_location() = loc;
  co_return resp;
}

bool Worker::stageRuns(const std::string& jobId, uint32_t stage) const {
  if (stageCopies_.count({jobId, stage})) return true;
  auto run = taskRuns_.lower_bound({jobId, stage, 0});
  return run != taskRuns_.end() && std::get<0>(run->first) == jobId && std::get<1>(run->first) == stage;
}

void Worker::recordBatchItem(const std::string& jobId, uint32_t stage, jobstate::BatchItem item, int64_t markerSession,
                             bool stageTail) {
  // The stage's last wave here ends with its last running task: then nothing more is coming.
  batcher_->add(jobId, stage, std::move(item), markerSession,
                stageRuns(jobId, stage) ? OutputBatcher::Due::kLinger
                : stageTail ? OutputBatcher::Due::kNow
                            : OutputBatcher::Due::kStageIdle);
}

awaitable<void> Worker::replicateThenRecord(std::string jobId, uint32_t stage, jobstate::BatchItem item,
                                            int64_t markerSession, bool stageTail, uint32_t buckets,
                                            std::string replicaId, std::string replicaAddress) {
  pb::ReplicateRequest req;
  req.set_job_id(jobId);
  req.set_stage(stage);
  req.set_task(item.task);
  req.set_buckets(buckets);
  req.set_source_worker_id(config_.id);
  req.set_source_address(server_.address());
  req.set_site(config_.site);
  req.set_worker_id(replicaId);
  Status copied;
  if (auto ep = net::Endpoint::parse(replicaAddress); !ep) {
    copied = ep.error();
  } else {
    auto client = server_.client(*ep);
    auto r = co_await client->call<rpc::Worker::Replicate>(req, kReplicateCallTimeout);
    if (!r) copied = r.error();
  }
  --replicating_;
  if (auto copies = stageCopies_.find({jobId, stage}); copies != stageCopies_.end() && --copies->second <= 0) {
    stageCopies_.erase(copies);
  }
  if (copied) {
    auto* copy = item.location.add_replicas();
    copy->set_worker_id(replicaId);
    copy->set_worker_address(replicaAddress);
    replications_->inc({"source", "ok"});
  } else {
    // Once per output: it is recorded with its one copy, as without replication.
    spdlog::warn("output {}/s{}-t{}: no copy on {}: {}", jobId, stage, item.task, replicaId, copied.message());
    replications_->inc({"source", "failed"});
  }
  recordBatchItem(jobId, stage, std::move(item), markerSession, stageTail);
}

awaitable<Result<pb::ReplicateResponse>> Worker::replicate(pb::ReplicateRequest req, net::CallContext context) {
  if (Status st = checkReplicateRequest(req, config_.id, config_.site, context.identity, siteWorkers_,
                                        config_.limits.max_tasks_per_stage);
      !st) {
    replications_->inc({"replica", "failed"});
    co_return st.error();
  }
  if (killedJobs_.count(req.job_id())) {
    co_return makeError(ErrorCode::kInvalidArgument, "job " + req.job_id() + " was killed on this worker");
  }
  const transfer::TransferOptions options = fetchOptions();
  transfer::ClientFor clientFor = [this](const net::Endpoint& ep) { return server_.client(ep); };
  pb::ReplicateResponse resp;
  std::vector<data::PartitionKey> committed;  // by this copy: removed again if it fails
  Status result;
  for (uint32_t b = 0; b < req.buckets(); ++b) {
    const data::PartitionKey key{req.job_id(), req.stage(), req.task(), b};
    if (store_->exists(key)) continue;  // here already (an execution of the task here, or a copy)
    transfer::FetchSource source{req.source_worker_id(), req.source_address(), {}, true};
    auto* k = source.request.mutable_partition();
    k->set_job_id(req.job_id());
    k->set_stage(req.stage());
    k->set_task(req.task());
    k->set_bucket(b);
    source.request.set_from_site(config_.site);
    // Streamed into the store as it arrives (each byte written once), published whole only if
    // it matches the size and checksum the source gave, as the executor publishes outputs.
    auto writer = store_->create(key);
    if (!writer) {
      result = writer.error();
      break;
    }
    transfer::SinkFn sink = [w = writer->get()](std::string_view bytes) { return w->append(bytes); };
    auto fetched = co_await transfer::fetchInto(clientFor, source, sink, options);
    if (!fetched) {
      result = fetched.error();
      break;
    }
    if (!fetched->verified) {
      result = makeError(ErrorCode::kInternal, "the source gave no checksum for bucket " + std::to_string(b));
      break;
    }
    auto info = (*writer)->commitVerified(fetched->bytes, fetched->crc32);
    if (!info) {
      result = info.error();
      break;
    }
    committed.push_back(key);
    resp.set_bytes(resp.bytes() + fetched->bytes);
  }
  if (!result) {
    for (const auto& key : committed) (void)store_->remove(key);
    replications_->inc({"replica", "failed"});
    co_return result.error().prepend(fmt::format("copying {}/s{}-t{} from {}", req.job_id(), req.stage(), req.task(),
                                                 req.source_worker_id()));
  }
  replications_->inc({"replica", "ok"});
  co_return resp;
}

awaitable<void> Worker::siteWorkersLoop() {
  // At most this many workers of a site are kept (a watch lists what ZooKeeper holds).
  constexpr size_t kMaxSiteWorkers = 4096;
  while (!server_.stopping()) {
    siteWorkersChanged_->reset();
    if (siteWorkerNames_) {
      const auto names = std::move(*siteWorkerNames_);
      siteWorkerNames_.reset();
      std::map<std::string, std::string> next;
      bool complete = true;
      for (const auto& name : names) {
        if (next.size() >= kMaxSiteWorkers) break;
        if (auto known = siteWorkers_.find(name); known != siteWorkers_.end()) {
          next.insert(*known);
          continue;
        }
        auto node = co_await server_.coordinator().get(jobstate::siteWorkerPath(config_.site, name));
        if (!node) {
          complete = complete && node.error().code == ErrorCode::kNotFound;  // gone meanwhile
          continue;
        }
        pb::WorkerInfo info;
        if (info.ParseFromString(node->data) && info.worker_id() == name && net::Endpoint::parse(info.address())) {
          next.emplace(name, info.address());
        }
      }
      siteWorkers_ = std::move(next);
      // A read that failed (connection loss) is tried again shortly, unless the watch fired.
      if (!complete && !siteWorkerNames_) siteWorkerNames_ = names;
    }
    co_await siteWorkersChanged_->waitFor(siteWorkerNames_ ? kLivenessRetry : kLivenessRecheck);
  }
}

bool Worker::residentOnly(const std::filesystem::path& file) const {
  std::error_code ec;
  const auto canonical = std::filesystem::weakly_canonical(file, ec);
  return ec || residentFiles_.contains(canonical);  // unresolvable: refuse rather than leak
}

bool Worker::servable(const std::filesystem::path& file) const {
  std::error_code ec;
  auto canonical = std::filesystem::weakly_canonical(file, ec);
  if (ec) return false;
  auto under = [&](const std::filesystem::path& root) {
    auto r = std::filesystem::weakly_canonical(root, ec);
    auto rel = canonical.lexically_relative(r);
    return !rel.empty() && *rel.begin() != "..";
  };
  if (under(dataDir_ / "datasets")) return true;
  for (const auto& root : datasetRoots_) {
    if (under(root)) return true;
  }
  return false;
}

awaitable<Result<pb::FetchResponse>> Worker::fetch(pb::FetchRequest req, net::CallContext context) {
  // The requester's site is the one in its certificate (TLS); only plaintext trusts the claim.
  if (context.identity) req.set_from_site(context.identity->site);
  if (req.has_dataset_file() && req.from_site() != config_.site && residentOnly(req.dataset_file())) {
    co_return makeError(ErrorCode::kPermissionDenied,
                        fmt::format("permission denied: {} is a raw partition of a residency: local dataset; site "
                                    "'{}' may not fetch it from site '{}'",
                                    req.dataset_file(), req.from_site().substr(0, 64), config_.site));
  }
  uint64_t maxBytes = std::min<uint64_t>(req.max_bytes() ? req.max_bytes() : kFetchChunkBytes,
                                         data::PartitionStore::kMaxChunkBytes);
  pb::FetchResponse resp;
  if (req.has_partition()) {
    auto chunk = store_->read(toKey(req.partition()), req.offset(), maxBytes);
    if (!chunk) co_return chunk.error();
    resp.set_data(std::move(chunk->data));
    resp.set_total_bytes(chunk->totalSize);
    resp.set_crc32(chunk->crc32);
  } else {
    if (!servable(req.dataset_file())) {
      co_return makeError(ErrorCode::kNotFound, "no dataset file " + req.dataset_file() + " on " + config_.id);
    }
    std::ifstream in(req.dataset_file(), std::ios::binary);
    if (!in) co_return makeError(ErrorCode::kNotFound, "cannot read " + req.dataset_file());
    in.seekg(0, std::ios::end);
    auto size = static_cast<uint64_t>(in.tellg());
    if (req.offset() > size) co_return makeError(ErrorCode::kInvalidArgument, "offset beyond end of file");
    in.seekg(static_cast<std::streamoff>(req.offset()));
    std::string buf(std::min<uint64_t>(maxBytes, size - req.offset()), '\0');
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    resp.set_data(std::move(buf));
    resp.set_total_bytes(size);
  }
  bytesSent_->inc({config_.site, req.from_site().substr(0, 64)}, static_cast<double>(resp.data().size()));
  // WAN emulation: hold the chunk until the emulated link to the requester has carried it.
  auto sendAt = wan_.reserve(req.from_site(), resp.data().size(), std::chrono::steady_clock::now());
  if (sendAt > std::chrono::steady_clock::now()) {
    asio::steady_timer timer(co_await asio::this_coro::executor, sendAt);
    co_await timer.async_wait(asio::use_awaitable);
  }
  co_return resp;
}

Result<pb::KillJobTasksResponse> Worker::killJobTasks(const pb::KillJobTasksRequest& req) {
  // By job id alone: nothing of the job's state is needed, so a job whose state is corrupt or
  // deleted stops all the same.
  if (!jobstate::isJobId(req.job_id())) {
    return makeError(ErrorCode::kInvalidArgument, "KillJobTasks: bad job_id '" + req.job_id().substr(0, 64) + "'");
  }
  // With a slot, one container's executors only (its lease was taken back): the job and its JM
  // go on. Otherwise the job stops here: remembered (bounded), so that a launch already on its
  // way starts nothing for it.
  const bool oneContainer = req.has_slot();
  if (!oneContainer && killedJobs_.insert(req.job_id()).second) {
    killedOrder_.push_back(req.job_id());
    if (killedOrder_.size() > kMaxKilledJobs) {
      killedJobs_.erase(killedOrder_.front());
      killedOrder_.pop_front();
    }
  }
  pb::KillJobTasksResponse resp;
  if (auto jm = jms_.find(req.job_id()); !oneContainer && jm != jms_.end()) {
    // Erasing the Subprocess kills and reaps it; it is not reported as a dead JM (not replaced).
    if (jm->second.running()) resp.set_jms_killed(1);
    jms_.erase(jm);
  }
  // Its executors, busy or idle, with the commands they run; a task in flight fails (its
  // executor's exit watcher reaps it and ends the task).
  uint32_t busyKilled = 0;
  const std::string why = oneContainer
                              ? fmt::format("container {} taken back from job {}: its lease expired", req.slot(), req.job_id())
                              : fmt::format("job {} stopped on this worker", req.job_id());
  for (auto it = executorPool_.begin(); it != executorPool_.end();) {
    if (it->first.first != req.job_id() || (oneContainer && it->first.second != req.slot())) {
      ++it;
      continue;
    }
    for (const auto& executor : it->second) {
      if (executor->alive() && executor->busy()) ++busyKilled;
      executor->kill(why);
    }
    it = executorPool_.erase(it);
  }
  resp.set_executors_killed(busyKilled);
  if (oneContainer) {
    if (busyKilled > 0) spdlog::info("job {}: killed the task in container {} (lease taken back)", req.job_id(), req.slot());
  } else if (resp.jms_killed() + resp.executors_killed() > 0) {
    spdlog::info("job {} stopped here: killed {} JM and {} executors", req.job_id(), resp.jms_killed(),
                 resp.executors_killed());
  }
  return resp;
}

Result<pb::LogsResponse> Worker::readLog(const pb::ReadLogRequest& req) const {
  // The most one call returns; `tellus logs` asks again for more.
  constexpr uint64_t kMaxLogBytesPerCall = uint64_t{1} << 20;
  if (auto st = checkName("job id", req.job_id()); !st) return st.error();
  std::filesystem::path path;
  std::string what;
  bool running = false;
  if (req.jm()) {
    path = dataDir_ / "jms" / req.job_id() / "jm.log";
    what = "JM log";
    const auto jm = jms_.find(req.job_id());
    running = jm != jms_.end() && jm->second.running();
  } else {
    // "<stage>-<task>-<sequence>": digits and two dashes, one file name under logs/<job>.
    const auto& id = req.attempt_id();
    if (!jobstate::parseTaskName(id) || std::count(id.begin(), id.end(), '-') != 2) {
      return makeError(ErrorCode::kInvalidArgument, "bad attempt id '" + id.substr(0, 64) + "'");
    }
    path = dataDir_ / "logs" / req.job_id() / (id + ".stderr");
    what = "stderr of execution " + id;
    running = runningAttempts_.contains({req.job_id(), id});
  }
  // O_NOFOLLOW and fstat on what was opened: a symlink planted in its place is not followed.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) ::close(fd);
    return makeError(ErrorCode::kNotFound, fmt::format("worker {} holds no {} of job {}", config_.id, what, req.job_id()));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  const uint64_t want = req.max_bytes() == 0 ? kMaxLogBytesPerCall : std::min<uint64_t>(req.max_bytes(), kMaxLogBytesPerCall);
  const uint64_t offset = req.tail() ? (size > want ? size - want : 0) : std::min<uint64_t>(req.offset(), size);
  std::string data(static_cast<size_t>(std::min(want, size - offset)), '\0');
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::pread(fd, data.data() + got, data.size() - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // shorter than fstat said (truncated meanwhile): what there is
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  data.resize(got);
  pb::LogsResponse resp;
  resp.set_data(std::move(data));
  resp.set_offset(offset);
  resp.set_size(size);
  resp.set_complete(!running);
  resp.set_site(config_.site);
  resp.set_worker_id(config_.id);
  resp.set_attempt_id(req.attempt_id());
  resp.set_modified_unix_ms(int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000);
  return resp;
}

Result<pb::WriteDatasetResponse> Worker::writeDataset(const pb::WriteDatasetRequest& req) {
  TELLUS_RETURN_IF_ERROR(data::validateStoreName("dataset", req.dataset()));
  TELLUS_RETURN_IF_ERROR(data::validateStoreName("upload id", req.upload_id()));
  TELLUS_RETURN_IF_ERROR(checkAddressee("WriteDataset", req.worker_id(), req.site()));
  const auto& limits = config_.limits;
  const auto root = dataDir_ / "datasets";
  // A chunk is staged as .upload-<upload>-<partition> and a complete partition is kept as
  // <dataset>/<upload>-part-NNNNN; neither is visible until the master publishes the put.
  const std::string staged = ".upload-" + req.upload_id() + "-";
  const std::string stored = req.upload_id() + "-part-";
  if (req.abort()) {
    // Exact names only: the rest after the prefix is the partition number, so the put
    // "a" never takes a file of the put "a-part".
    auto ofThisUpload = [](const std::string& name, const std::string& prefix) {
      if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return false;
      return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                         [](char c) { return c >= '0' && c <= '9'; });
    };
    std::error_code ec;
    size_t removed = 0;
    for (const auto& [dir, prefix] : {std::pair{root, staged}, std::pair{root / req.dataset(), stored}}) {
      for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        if (!ofThisUpload(e.path().filename().string(), prefix)) continue;
        std::filesystem::remove(e.path(), ec);
        ++removed;
      }
    }
    // The dataset's directory goes with its last file (a first put that failed).
    std::filesystem::remove(root / req.dataset(), ec);  // fails harmlessly when not empty
    spdlog::info("put {} of dataset {} dropped: {} files removed", req.upload_id(), req.dataset(), removed);
    return pb::WriteDatasetResponse();
  }
  if (req.partition() >= limits.max_partitions_per_put) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("partition {} is over the limit of {} per put "
                                                              "(limits.max_partitions_per_put)",
                                                              req.partition(), limits.max_partitions_per_put));
  }
  if (req.offset() > limits.max_partition_bytes || req.data().size() > limits.max_partition_bytes - req.offset()) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("partition {} would be over {} bytes (limits.max_partition_bytes)",
                                                              req.partition(), limits.max_partition_bytes));
  }
  auto dir = root / req.dataset();
  auto temp = root / (staged + std::to_string(req.partition()));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ofstream out(temp, std::ios::binary | (req.offset() == 0 ? std::ios::trunc : std::ios::app));
  if (!out) return makeError(ErrorCode::kInternal, "cannot write " + temp.string());
  if (static_cast<uint64_t>(out.tellp()) != req.offset()) {
    return makeError(ErrorCode::kInvalidArgument, "chunk at offset " + std::to_string(req.offset()) +
                                                      " does not follow the " + std::to_string(out.tellp()) +
                                                      " bytes received");
  }
  out.write(req.data().data(), static_cast<std::streamsize>(req.data().size()));
  out.close();
  if (!out) return makeError(ErrorCode::kInternal, "cannot write " + temp.string());
  pb::WriteDatasetResponse resp;
  auto final = dir / (req.upload_id() + "-" + data::splitPartitionName(req.partition()));
  resp.set_file(final.string());
  resp.set_bytes(req.offset() + req.data().size());
  if (req.last_chunk()) {
    std::filesystem::rename(temp, final, ec);
    if (ec) return makeError(ErrorCode::kInternal, "cannot store " + final.string() + ": " + ec.message());
    if (req.residency_local()) residentFiles_.insert(std::filesystem::weakly_canonical(final, ec));
  }
  return resp;
}

int run(const std::string& configPath) {
  return daemon::runDaemon<Worker, config::WorkerConfig>(
      "tellus-worker", configPath, config::loadWorkerConfig,
      [](const config::WorkerConfig& c) { return "worker/" + c.id; });
}

}  // namespace tellus::worker
