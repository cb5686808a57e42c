#include "master/master.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "job/exec_policy.h"
#include "job/spec.h"
#include "net/endpoint.h"
#include "jobstate/job_view.h"
#include "jobstate/job_store.h"
#include "jobstate/paths.h"
#include "config/values.h"
#include "cost/cost_proto.h"
#include "jobstate/residency.h"
#include "sched/fair_share.h"
#include "jobstate/site_queue.h"
#include "master/web_assets.h"
#include "util/log.h"
#include "util/names.h"

namespace tellus::master {

namespace asio = boost::asio;
using asio::awaitable;
using std::chrono::milliseconds;
using namespace tellus::jobstate;

namespace {

constexpr milliseconds kPeerCallTimeout{3000};
constexpr milliseconds kPublishPeriod{500};
// Chunks of one put held waiting for the ones before them (a CLI's window is 32 MiB of 1 MiB
// chunks; each waiting chunk holds its bytes).
constexpr size_t kMaxChunksWaiting = 64;
// Dropped puts whose cause later chunks are told (the most recent ones).
constexpr size_t kDroppedPutsKept = 64;



}  // namespace

Master::Master(daemon::Runtime& runtime, config::MasterConfig config)
    : config_(std::move(config)), server_(runtime) {}

Master::~Master() { stop(); }

Status Master::start() {
  loadConfiguredDatasets();
  server_.handle<rpc::Master::Submit>([this](pb::SubmitRequest r, net::CallContext c) { return submit(std::move(r), c); });
  server_.handle<rpc::Master::StartJm>(
      [this](pb::StartJmRequest r, net::CallContext c) { return startJm(std::move(r), c); });
  server_.handle<rpc::Master::Status>([this](pb::JobRequest r, net::CallContext c) { return status(std::move(r), c); });
  server_.handle<rpc::Master::List>([this](pb::ListJobsRequest r, net::CallContext c) { return list(std::move(r), c); });
  server_.handle<rpc::Master::Sites>([this](pb::ListSitesRequest r, net::CallContext c) { return sites(std::move(r), c); });
  server_.handle<rpc::Master::Kill>([this](pb::JobRequest r, net::CallContext c) { return kill(std::move(r), c); });
  server_.handle<rpc::Master::Result>([this](pb::ResultRequest r, net::CallContext c) { return result(std::move(r), c); });
  server_.handle<rpc::Master::Put>([this](pb::PutRequest r, net::CallContext c) { return put(std::move(r), c); });
  server_.handle<rpc::Master::Logs>([this](pb::LogsRequest r, net::CallContext c) { return logs(std::move(r), c); });
  // Identity binding (TLS): a worker speaks only for itself, a JM only at its own site.
  server_.handle<rpc::Master::RegisterWorker>(
      [this](pb::RegisterWorkerRequest r, net::CallContext c) -> awaitable<Result<pb::RegisterWorkerResponse>> {
        if (Status s = net::checkCaller(c.identity, {net::Role::kWorker, config_.site, r.worker_id()}); !s) co_return s.error();
        co_return registerWorker(r);
      });
  server_.handle<rpc::Master::Heartbeat>(
      [this](pb::WorkerHeartbeat r, net::CallContext c) -> awaitable<Result<pb::HeartbeatResponse>> {
        if (Status s = net::checkCaller(c.identity, {net::Role::kWorker, config_.site, r.worker_id()}); !s) co_return s.error();
        co_return heartbeat(r);
      });
  server_.handle<rpc::Master::JmUpdate>(
      [this](pb::JmUpdateRequest r, net::CallContext c) -> awaitable<Result<pb::JmUpdateResponse>> {
        if (Status s = net::checkCallerSite(c.identity, config_.site); !s) co_return s.error();
        // Any worker of the site could otherwise release, or claim done, another job's containers.
        Status jm = co_await checkJobsJm(r.job_id(), c.identity);
        if (!jm) co_return jm.error();
        co_return jmUpdate(r);
      });

  registerHttpPages();
  auto& metrics = server_.metrics();
  containerChanges_ = &metrics.counter("tellus_master_container_changes_total",
                                       "Containers granted to JMs, and released by them (handed back or job ended).",
                                       {"direction"});
  leaseOverdue_ = &metrics.counter("tellus_master_leases_overdue_total",
                                   "Container leases overdue past lease_grace_ms, by what was done: extended or taken back.",
                                   {"action"});
  workersLost_ = &metrics.counter("tellus_master_workers_lost_total", "Workers declared lost (missed heartbeats).");
  workerLossDetection_ = &metrics.histogram(
      "tellus_master_worker_loss_detection_seconds",
      "From a lost worker's last heartbeat to this master declaring it lost, in seconds.", {});
  jmReplacements_ = &metrics.counter("tellus_master_jm_replacements_total",
                                     "JMs this master started to replace a lost one, by cause.", {"cause"});
  metrics.gauge("tellus_master_workers", "Live workers registered with this master.", [this] {
    return std::vector<daemon::MetricSample>{{{{"site", config_.site}}, double(siteInfo().workers())}};
  });
  metrics.gauge("tellus_master_containers", "Containers offered by live workers.", [this] {
    auto info = siteInfo();
    return std::vector<daemon::MetricSample>{{{{"site", config_.site}, {"state", "total"}}, double(info.containers_total())},
                                             {{{"site", config_.site}, {"state", "free"}}, double(info.containers_free())}};
  });
  metrics.gauge("tellus_master_sub_jobs", "Sub-jobs holding or asking for containers.", [this] {
    return std::vector<daemon::MetricSample>{{{{"site", config_.site}}, double(subJobs_.size())}};
  });
  staleQueueEvents_ = &metrics.counter("tellus_master_stale_queue_events_total",
                                       "Times another site's published queue was found older than queue_stale_ms "
                                       "(then counted as empty by the job order), by site.",
                                       {"queue_site"});
  metrics.gauge("tellus_master_stale_queues",
                "Other sites whose published queue is stale now (ignored by the job order; 0 with job_order fair).",
                [this] {
                  return std::vector<daemon::MetricSample>{{{{"site", config_.site}}, double(staleQueues_.size())}};
                });

  TELLUS_RETURN_IF_ERROR(server_.start({config_.listen, config_.http_listen, config_.zookeeper, config_.rpc, config_.tls,
                                         {net::Role::kMaster, config_.site, ""}}));
  store_.emplace(server_.coordinator());
  spdlog::info("master of site {} serving on {} (http {}), zookeeper {}{}, job order {} (queues every {} ms, stale after {} ms)",
               config_.site, server_.address(), server_.httpAddress(), config_.zookeeper.connect,
               config_.zookeeper.chroot, sched::name(config_.job_order), config_.queue_publish_ms, config_.queue_stale_ms);
  // Published in the site record: every master prices this site's share of a job with them.
  spdlog::info("prices of site {}: {} per container-hour ({}), per GB sent {} to other sites{}{}", config_.site,
               config_.prices.container_hour, config_.prices.market, config_.prices.egress_default_gb,
               config_.prices.egress_gb.empty() ? "" : ", ", fmt::join(config_.prices.egress_gb, ", "));
  server_.spawn(publishLoop(), "site publisher");
  server_.spawn(scheduleLoop(), "container scheduler");
  server_.spawn(compactionLoop(), "job state compaction");
  server_.spawn(orphanPutLoop(), "orphan put cleaner");
  if (config_.job_order != sched::JobOrder::kFair) TELLUS_RETURN_IF_ERROR(watchSiteQueues());
  server_.spawn(queueLoop(), "queue publisher");
  return {};
}

void Master::stop() {
  if (server_.stopping()) return;
  subscriptions_.clear();
  watchedJobs_.clear();
  remoteQueues_.clear();
  server_.stop();
}

void Master::loadConfiguredDatasets() {
  for (const auto& d : config_.datasets) {
    pb::SiteDataset ds;
    ds.set_name(d.name);
    ds.set_residency_local(d.residency_local);
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(d.dir, ec)) {
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
    }
    if (ec) spdlog::warn("dataset {}: cannot list {}: {}", d.name, d.dir, ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto* p = ds.add_partitions();
      p->set_index(static_cast<uint32_t>(ds.partitions_size() - 1));
      p->set_file(std::filesystem::absolute(f).string());
      p->set_worker_id(d.worker);
      p->set_bytes(std::filesystem::file_size(f, ec));
    }
    spdlog::info("dataset {}: {} partitions in {} on worker {}", d.name, ds.partitions_size(), d.dir, d.worker);
    datasets_[d.name] = ds;
  }
}

awaitable<Status> Master::recordConfiguredDatasets() {
  // Every site's datasets are recorded in ZooKeeper, not only in its live record, so that a
  // job submitted while this site is down knows the site holds part of its input.
  for (const auto& [name, ds] : datasets_) {
    const std::string path = siteDatasetPath(config_.site, name);
    auto created = co_await server_.coordinator().create(path, ds.SerializeAsString(), coord::CreateMode::kPersistent);
    if (created) continue;
    if (created.error().code != ErrorCode::kAlreadyExists) co_return created.error();
    auto set = co_await server_.coordinator().set(path, ds.SerializeAsString(), -1);
    if (!set) co_return set.error();
  }
  co_return Status::ok();
}

awaitable<void> Master::loadPutDatasets() {
  auto names = co_await server_.coordinator().children(siteDatasetsPath(config_.site));
  if (!names) co_return;
  for (const auto& name : *names) {
    if (datasets_.count(name)) continue;  // configured datasets take precedence
    auto node = co_await server_.coordinator().get(siteDatasetsPath(config_.site) + "/" + name);
    if (!node) continue;
    auto ds = daemon::parseProto<pb::SiteDataset>(node->data, name);
    if (ds) datasets_[name] = *ds;
  }
}

pb::SiteInfo Master::siteInfo() const {
  pb::SiteInfo info;
  info.set_site(config_.site);
  info.set_master_address(server_.address());
  info.set_http_address(server_.httpAddress());
  uint32_t live = 0, total = 0, free = 0;
  for (const auto& [id, w] : workers_) {
    if (!w.alive) continue;
    ++live;
    total += w.containers;
  }
  for (const auto& [key, holder] : slots_) {
    if (holder.empty()) ++free;
  }
  info.set_workers(live);
  // The site's inbound rate from each other site: the sum over its workers (they share the
  // site's downlink, each measuring its own fetches).
  std::map<std::string, double> inbound;
  for (const auto& [id, w] : workers_) {
    if (!w.alive) continue;
    for (const auto& [from, mbps] : w.inboundMbps) inbound[from] += mbps;
  }
  for (const auto& [from, mbps] : inbound) {
    auto* rate = info.add_inbound();
    rate->set_from_site(from);
    rate->set_mbps(mbps);
  }
  info.set_containers_total(total);
  info.set_containers_free(free);
  // What other masters need to check a job at submission; the rest stays with the workers.
  info.mutable_exec()->set_enabled(config_.exec.enabled);
  for (const auto& command : config_.exec.allowed_commands) info.mutable_exec()->add_allowed_commands(command);
  *info.mutable_prices() = cost::toProto(config_.prices);
  for (const auto& [name, ds] : datasets_) {
    auto* out = info.add_datasets();
    *out = ds;
    auto addressOf = [&](const std::string& id) {
      auto w = workers_.find(id);
      return w != workers_.end() && w->second.alive ? w->second.address : std::string();
    };
    for (auto& p : *out->mutable_partitions()) {
      p.set_worker_address(addressOf(p.worker_id()));
      for (auto& r : *p.mutable_replicas()) r.set_worker_address(addressOf(r.worker_id()));
    }
  }
  return info;
}

awaitable<Status> Master::publishSite() {
  auto info = siteInfo().SerializeAsString();
  // The record changes when workers, containers, rates or datasets do; rewriting an unchanged
  // one every period would cost ZooKeeper and every watcher its size each time.
  const int64_t session = server_.coordinator().sessionId();
  if (info == publishedSite_ && session == publishedSession_ && session != 0) co_return Status::ok();
  auto live = siteLivePath(config_.site);
  if (session == publishedSession_ && session != 0) {
    // Our own node, created on this session: one write. Gone meanwhile (removed by hand; an
    // expiry ends the session) is created again below.
    auto set = co_await server_.coordinator().set(live, info, -1);
    if (set) {
      publishedSite_ = std::move(info);
      co_return Status::ok();
    }
    if (set.error().code != ErrorCode::kNotFound) co_return set.status();
  }
  auto stat = co_await server_.coordinator().exists(live);
  if (!stat) co_return stat.status();
  if (*stat && (*stat)->ephemeralOwner != server_.coordinator().sessionId()) {
    // Left by this site's previous master process whose session has not expired yet.
    (void)co_await server_.coordinator().remove(live);
    *stat = std::nullopt;
  }
  if (!*stat) {
    auto created = co_await server_.coordinator().create(live, info, coord::CreateMode::kEphemeral);
    if (!created) co_return created.status();
    spdlog::info("site {} published in ZooKeeper", config_.site);
  } else {
    auto set = co_await server_.coordinator().set(live, info, -1);
    if (!set) co_return set.status();
  }
  publishedSite_ = std::move(info);
  publishedSession_ = session;
  co_return Status::ok();
}

awaitable<void> Master::publishLoop() {
  bool prepared = false;
  while (!server_.stopping()) {
    if (!prepared) {
      if (auto st = co_await server_.coordinator().waitConnected(milliseconds(5000)); !st) {
        spdlog::warn("waiting for ZooKeeper: {}", st.message());
        continue;
      }
      auto jobs = co_await store_->ensureJobsRoot();
      auto datasets = co_await server_.coordinator().ensurePath(siteDatasetsPath(config_.site));
      if (!jobs || !datasets) {
        co_await server_.sleepFor(kPublishPeriod);
        continue;
      }
      if (auto st = co_await recordConfiguredDatasets(); !st) {
        spdlog::warn("recording the configured datasets: {}", st.message());
        co_await server_.sleepFor(kPublishPeriod);
        continue;
      }
      co_await loadPutDatasets();
      prepared = true;
    }
    // Without a session nothing can be published (the outage is logged once by the server);
    // the first round on a new session re-creates the record.
    if (server_.zookeeperAvailable()) {
      if (auto st = co_await publishSite(); !st) spdlog::warn("publishing site: {}", st.message());
    }
    co_await server_.sleepFor(kPublishPeriod);
  }
}

std::vector<pb::Container> Master::grantsOf(const std::string& jobId) const {
  std::vector<pb::Container> out;
  for (const auto& [key, holder] : slots_) {
    if (holder != jobId) continue;
    pb::Container c;
    c.mutable_id()->set_worker_id(key.first);
    c.mutable_id()->set_slot(key.second);
    auto w = workers_.find(key.first);
    if (w != workers_.end()) c.set_worker_address(w->second.address);
    c.set_site(config_.site);
    out.push_back(std::move(c));
  }
  return out;
}

void Master::allocate() {
  std::vector<sched::SubJobShare> shares;
  std::map<std::string, int> held;
  for (const auto& [key, holder] : slots_) {
    if (!holder.empty()) ++held[holder];
  }
  for (const auto& [id, s] : subJobs_) {
    shares.push_back(sched::SubJobShare{id, s.desire, held[id], 1.0});
  }
  std::vector<SlotKey> free;
  for (const auto& [key, holder] : slots_) {
    if (holder.empty()) free.push_back(key);
  }
  if (free.empty() || shares.empty()) return;
  // Spread grants over workers: interleave the free slots by slot index.
  std::stable_sort(free.begin(), free.end(), [](const SlotKey& a, const SlotKey& b) { return a.second < b.second; });
  auto share = [&](const std::vector<sched::SubJobShare>& among, int count) {
    return config_.job_order == sched::JobOrder::kFair ? sched::fairShare(among, count)
                                                       : sched::grantInOrder(among, jobOrderOf(among), count);
  };
  auto grants = share(shares, static_cast<int>(free.size()));
  std::vector<bool> allOrNone;
  for (const auto& sh : shares) allOrNone.push_back(subJobs_[sh.id].allOrNone);
  grants = sched::withAllOrNone(shares, allOrNone, std::move(grants), static_cast<int>(free.size()),
                                static_cast<int>(slots_.size()), share);
  const auto now = Clock::now();
  size_t next = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    for (int g = 0; g < grants[i] && next < free.size(); ++g) {
      leases_.granted(free[next], now);
      slots_[free[next++]] = shares[i].id;
      containerChanges_->inc({"granted"});
    }
    if (grants[i] > 0) {
      const auto& sub = subJobs_[shares[i].id];
      if (!sub.jmAddress.empty()) server_.spawn(pushGrants(sub.jobId, sub.jmAddress), "grant event");
    }
  }
}

awaitable<void> Master::compactionLoop() {
  const auto period = milliseconds(std::clamp<uint32_t>(config_.job_state_retention_ms / 4, 100, 30000));
  while (!server_.stopping()) {
    co_await server_.sleepFor(period);
    if (server_.stopping()) break;
    auto ids = co_await store_->listJobs();
    if (!ids) continue;
    const std::set<std::string> listed(ids->begin(), ids->end());
    std::erase_if(settledJobs_, [&](const std::string& id) { return !listed.count(id); });
    for (const auto& id : *ids) {
      if (server_.stopping()) break;
      if (settledJobs_.count(id)) continue;
      auto st = co_await readStatus(id);
      if (!st || !isTerminal(st->state())) continue;
      if (st->submit_site() != config_.site) {
        settledJobs_.insert(id);  // its own site's master compacts it
        continue;
      }
      if (daemon::nowUnixMs() - st->finish_unix_ms() < static_cast<int64_t>(config_.job_state_retention_ms)) continue;
      Status compacted = co_await store_->compactJob(id);
      if (!compacted) {
        spdlog::warn("compacting job {}: {}", id, compacted.message());
        continue;
      }
      spdlog::info("job {} ({}) compacted to its summary", id, jobStateName(st->state()));
      settledJobs_.insert(id);
    }
  }
}

awaitable<void> Master::pushGrants(std::string jobId, std::string jmAddress) {
  auto ep = net::Endpoint::parse(jmAddress);
  if (!ep) co_return;
  pb::JmUpdateResponse event;
  for (auto& c : grantsOf(jobId)) *event.add_granted() = std::move(c);
  auto expired = leaseExpired_.find(jobId);
  if (expired != leaseExpired_.end()) {
    for (const auto& id : expired->second) *event.add_lease_expired() = id;
  }
  auto client = server_.client(*ep);
  auto r = co_await client->call<rpc::Jm::Grants>(event, kPeerCallTimeout);
  if (!r) {
    spdlog::debug("grant event to the JM of {} not delivered: {}", jobId, r.message());
    co_return;  // the lease_expired stay for the JM's next update
  }
  if (event.lease_expired_size() > 0) {
    // Delivered: drop those told (more may have been added meanwhile).
    auto now = leaseExpired_.find(jobId);
    if (now != leaseExpired_.end()) {
      std::erase_if(now->second, [&](const pb::ContainerId& id) {
        return std::any_of(event.lease_expired().begin(), event.lease_expired().end(), [&](const pb::ContainerId& told) {
          return told.worker_id() == id.worker_id() && told.slot() == id.slot();
        });
      });
      if (now->second.empty()) leaseExpired_.erase(now);
    }
  }
}

std::vector<Master::SlotKey> Master::heldSlots() const {
  std::vector<SlotKey> held;
  for (const auto& [key, holder] : slots_) {
    if (!holder.empty()) held.push_back(key);
  }
  return held;  // slots_ is ordered: sorted
}

void Master::expireLeases(Clock::time_point now) {
  const auto held = heldSlots();
  leases_.retain(held);
  std::erase_if(leaseExpired_, [&](const auto& kv) { return !subJobs_.count(kv.first); });
  for (const auto& key : leases_.overdue(held, now)) {
    const std::string jobId = slots_.at(key);
    if (config_.lease_expiry == config::LeaseExpiry::kExtend) {
      leaseOverdue_->inc({"extended"});
      // Once per lease (a long task is extended every grace period): info, then debug.
      const bool first = leases_.extend(key, now);
      auto level = first ? spdlog::level::info : spdlog::level::debug;
      spdlog::log(level, "lease of {} on {}/{} overdue past its grace: extended", jobId, key.first, key.second);
      continue;
    }
    spdlog::info("lease of {} on {}/{} overdue past its grace of {} ms: container taken back, its task runs again",
                 jobId, key.first, key.second, config_.lease_grace_ms);
    leaseOverdue_->inc({"taken_back"});
    containerChanges_->inc({"revoked"});
    slots_[key].clear();
    auto& told = leaseExpired_[jobId];
    pb::ContainerId id;
    id.set_worker_id(key.first);
    id.set_slot(key.second);
    told.push_back(std::move(id));
    server_.spawn(takeBackLease(jobId, key), "taking back a lease of " + jobId);
  }
}

awaitable<void> Master::takeBackLease(std::string jobId, SlotKey key) {
  // The JM first, so that it knows the task's coming end for what it is.
  if (auto sub = subJobs_.find(jobId); sub != subJobs_.end() && !sub->second.jmAddress.empty()) {
    co_await pushGrants(jobId, sub->second.jmAddress);
  }
  auto worker = workers_.find(key.first);
  if (worker == workers_.end() || !worker->second.alive) co_return;
  auto ep = net::Endpoint::parse(worker->second.address);
  if (!ep) co_return;
  pb::KillJobTasksRequest req;
  req.set_job_id(jobId);
  req.set_slot(key.second);
  auto r = co_await server_.client(*ep)->call<rpc::Worker::KillJobTasks>(req, kPeerCallTimeout);
  if (!r) spdlog::warn("worker {} could not stop {}'s task in container {}: {}", key.first, jobId, key.second, r.message());
}

awaitable<void> Master::scheduleLoop() {
  auto lastRound = Clock::now();
  while (!server_.stopping()) {
    co_await server_.sleepFor(milliseconds(config_.schedule_period_ms));
    if (server_.stopping()) break;
    auto now = Clock::now();
    // A master that did not run for a worker timeout (stopped with its whole site by a
    // partition, or starved) heard no heartbeat in that time whether or not its workers sent
    // any: it gives each a full timeout from now instead of declaring them all dead (which
    // would withdraw the containers its JMs run on and start replacement JMs).
    if (now - lastRound > milliseconds(config_.worker_timeout_ms)) {
      spdlog::warn("master did not run for {} ms: its workers get {} ms from now to be heard",
                   std::chrono::duration_cast<milliseconds>(now - lastRound).count(), config_.worker_timeout_ms);
      for (auto& [id, w] : workers_) w.lastHeartbeat = std::max(w.lastHeartbeat, now);
    }
    lastRound = now;
    expireLeases(now);
    for (const auto& [id, u] : uploads_) {
      if (now - u.lastChunk > milliseconds(config_.put_idle_timeout_ms)) {
        server_.spawn(abortUpload(id, fmt::format("no chunk for {} ms", config_.put_idle_timeout_ms)),
                      "dropping an idle put");
      }
    }
    for (auto& [id, w] : workers_) {
      if (w.alive && now - w.lastHeartbeat > milliseconds(config_.worker_timeout_ms)) {
        spdlog::warn("worker {} missed heartbeats for {} ms: its containers are no longer offered", id,
                     config_.worker_timeout_ms);
        w.alive = false;
        workersLost_->inc();
        workerLossDetection_->observe(std::chrono::duration<double>(now - w.lastHeartbeat).count());
        recordFailure(failures_, {daemon::nowUnixMs(), "worker-lost", "",
                                  fmt::format("worker {} missed heartbeats for {} ms", id, config_.worker_timeout_ms)});
        std::erase_if(slots_, [&](const auto& kv) { return kv.first.first == id; });
        replaceJmsOf(id);
      }
    }
    // Containers of jobs that have ended go back to the pool even if their JM never said so.
    std::set<std::string> holders;
    for (const auto& [key, holder] : slots_) {
      if (!holder.empty()) holders.insert(holder);
    }
    for (const auto& [id, s] : subJobs_) holders.insert(id);
    for (const auto& [id, w] : jmWorker_) holders.insert(id);
    // Their statuses come from watches: a running job costs ZooKeeper nothing here.
    std::erase_if(watchedJobs_, [&](const auto& kv) { return !holders.count(kv.first); });
    for (const auto& jobId : holders) {
      if (!isJobId(jobId)) continue;
      auto watched = watchedJobs_.find(jobId);
      if (watched == watchedJobs_.end()) {
        watchedJobs_[jobId];  // before subscribing: the watch reports the current value at once
        auto sub = store_->watchStatus(jobId, [this, jobId](const Result<std::optional<Versioned<pb::JobStatus>>>& status) {
          auto it = watchedJobs_.find(jobId);
          if (it == watchedJobs_.end()) return;
          // A deleted job has ended; a malformed status is not taken as an end.
          it->second.ended = status && (!*status || isTerminal((*status)->value.state()));
          if (status && *status) it->second.submitUnixMs = (*status)->value.submit_unix_ms();
        });
        if (!sub) {
          spdlog::warn("watching the status of {}: {}", jobId, sub.message());
          watchedJobs_.erase(jobId);
          continue;
        }
        watchedJobs_[jobId].watch = std::move(sub).value();
        continue;  // decided on the next round, once the watch has reported
      }
      if (watched->second.ended) {
        watchedJobs_.erase(watched);
        server_.spawn(stopEndedJob(jobId), "stopping the tasks of " + jobId);
        for (auto& [key, holder] : slots_) {
          if (holder != jobId) continue;
          holder.clear();
          containerChanges_->inc({"released"});
        }
        subJobs_.erase(jobId);
        jmWorker_.erase(jobId);
        jmCrashes_.erase(jobId);
      }
    }
    allocate();
  }
}

Result<pb::RegisterWorkerResponse> Master::registerWorker(const pb::RegisterWorkerRequest& req) {
  if (req.worker_id().empty() || req.address().empty() || req.containers() == 0) {
    return makeError(ErrorCode::kInvalidArgument, "registration needs worker_id, address and containers >= 1");
  }
  // Checked before anything is allocated: the slots below are one map entry per container.
  if (!config::isSiteId(req.worker_id()) || req.worker_id().size() > kMaxNameBytes) {
    return makeError(ErrorCode::kInvalidArgument, "registration: worker_id is not a worker id (" +
                                                      std::string(config::kSiteIdForm) + ", at most 128 bytes)");
  }
  // Tasks and puts go to this address (a bad one broke every later put: found by fuzzing).
  if (auto address = net::Endpoint::parse(req.address()); !address || address->port == 0) {
    return makeError(ErrorCode::kInvalidArgument, "registration of worker " + req.worker_id() + ": address is not host:port");
  }
  if (req.containers() > config_.limits.max_containers_per_worker) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("registration of worker {}: {} containers, over the limit of {} "
                                 "(limits.max_containers_per_worker)",
                                 req.worker_id(), req.containers(), config_.limits.max_containers_per_worker));
  }
  if (req.running_size() != req.running_jobs_size() || static_cast<uint32_t>(req.running_size()) > req.containers()) {
    return makeError(ErrorCode::kInvalidArgument, "registration of worker " + req.worker_id() +
                                                      ": running containers and their jobs disagree");
  }
  for (int i = 0; i < req.running_size(); ++i) {
    if (req.running(i).id().slot() >= req.containers() || !isJobId(req.running_jobs(i))) {
      return makeError(ErrorCode::kInvalidArgument, "registration of worker " + req.worker_id() +
                                                        ": a running container has a bad slot or job id");
    }
  }
  auto& w = workers_[req.worker_id()];
  bool known = w.alive && !w.id.empty();
  w.id = req.worker_id();
  w.address = req.address();
  w.containers = req.containers();
  w.lastHeartbeat = Clock::now();
  w.alive = true;
  std::erase_if(slots_, [&](const auto& kv) { return kv.first.first == w.id && kv.first.second >= w.containers; });
  for (uint32_t s = 0; s < w.containers; ++s) slots_.try_emplace(SlotKey{w.id, s}, "");
  // A worker re-registering after a master restart tells us which containers are busy.
  for (int i = 0; i < req.running_size() && i < req.running_jobs_size(); ++i) {
    slots_[SlotKey{w.id, req.running(i).id().slot()}] = req.running_jobs(i);
  }
  spdlog::info("worker {} {} at {} with {} containers", w.id, known ? "re-registered" : "registered", w.address,
               w.containers);
  pb::RegisterWorkerResponse resp;
  for (const auto& [name, ds] : datasets_) {
    pb::SiteDataset mine;
    mine.set_name(name);
    mine.set_residency_local(ds.residency_local());  // the worker refuses other sites' fetches
    for (const auto& p : ds.partitions()) {
      if (p.worker_id() == w.id) *mine.add_partitions() = p;
    }
    if (mine.partitions_size() > 0) *resp.add_datasets() = mine;
  }
  return resp;
}

Result<pb::HeartbeatResponse> Master::heartbeat(const pb::WorkerHeartbeat& req) {
  pb::HeartbeatResponse resp;
  auto it = workers_.find(req.worker_id());
  if (it == workers_.end() || !it->second.alive) {
    resp.set_reregister(true);
    return resp;
  }
  it->second.lastHeartbeat = Clock::now();
  // The rates go into the site record: bounded in count and checked, whoever sent them.
  constexpr size_t kMaxRatedSites = 64;
  for (const auto& rate : req.inbound()) {
    if (!config::isSiteId(rate.from_site()) || rate.from_site().size() > kMaxNameBytes || !std::isfinite(rate.mbps()) ||
        rate.mbps() < 0 || rate.mbps() > 1e6) {  // 1 Tbit/s bounds any real link
      continue;
    }
    auto& rates = it->second.inboundMbps;
    if (rates.size() >= kMaxRatedSites && !rates.count(rate.from_site())) continue;
    rates[rate.from_site()] = rate.mbps();
  }
  for (int i = 0; i < req.dead_jms_size(); ++i) {
    const auto& job = req.dead_jms(i);
    if (!isJobId(job)) continue;  // from the network: never a path
    // Bounded: a one-line reason, shown to users if the job fails of it.
    std::string reason = i < req.dead_jm_reasons_size() ? req.dead_jm_reasons(i).substr(0, 512) : "no reason reported";
    spdlog::warn("worker {} reports the JM of job {} died: {}", req.worker_id(), job, reason);
    recordFailure(failures_, {daemon::nowUnixMs(), "jm-died", job, fmt::format("on {}: {}", req.worker_id(), reason)});
    jmReplacements_->inc({"jm_exited"});
    server_.spawn(replaceJm(job, true, std::move(reason)), "replacing the JM of " + job);
  }
  return resp;
}

awaitable<Status> Master::checkJobsJm(std::string jobId, std::optional<net::PeerIdentity> caller) {
  if (!caller) co_return Status::ok();  // insecure mode: no identities to check
  if (!isJobId(jobId)) co_return makeError(ErrorCode::kInvalidArgument, "JmUpdate: bad job_id '" + jobId.substr(0, 64) + "'");
  if (!jmWorker_.count(jobId)) {
    auto registered = co_await store_->jm(jobId, config_.site);
    // Read from ZooKeeper: only a worker id a certificate can carry is remembered (anything
    // else matches no caller, and would lock the real JM out until a restart).
    if (!registered || !isIdentityPart(registered->value.worker_id())) {
      co_return makeError(ErrorCode::kUnavailable,
                          fmt::format("no JM of job {} is known at site {} yet{}", jobId, config_.site,
                                      registered ? "" : ": " + registered.message()));
    }
    if (!jmWorker_.count(jobId)) jmWorker_[jobId] = registered->value.worker_id();  // (a launch may have set it)
  }
  co_return net::checkCaller(caller, {net::Role::kWorker, config_.site, jmWorker_.at(jobId)});
}

Result<pb::JmUpdateResponse> Master::jmUpdate(const pb::JmUpdateRequest& req) {
  if (!isJobId(req.job_id())) return makeError(ErrorCode::kInvalidArgument, "JmUpdate: bad job_id '" + req.job_id() + "'");
  for (const auto& c : req.release()) {
    auto it = slots_.find(SlotKey{c.worker_id(), c.slot()});
    if (it != slots_.end() && it->second == req.job_id()) {
      it->second.clear();
      containerChanges_->inc({"released"});
    }
  }
  if (req.finished()) {
    for (auto& [key, holder] : slots_) {
      if (holder != req.job_id()) continue;
      holder.clear();
      containerChanges_->inc({"released"});
    }
    subJobs_.erase(req.job_id());
    return pb::JmUpdateResponse();
  }
  auto& s = subJobs_[req.job_id()];
  s.jobId = req.job_id();
  s.jmAddress = req.jm_address();
  s.desire = static_cast<int>(req.desire());
  s.allOrNone = req.all_or_none();
  // Leases on containers this job holds (any other entry is not its to state); at most one
  // per container of the site, the rest not looked at.
  const auto now = Clock::now();
  const int stated = std::min<int>(req.leases_size(), static_cast<int>(slots_.size()));
  for (int i = 0; i < stated; ++i) {
    const auto& lease = req.leases(i);
    SlotKey key{lease.id().worker_id(), lease.id().slot()};
    auto it = slots_.find(key);
    if (it != slots_.end() && it->second == req.job_id()) leases_.stated(key, lease.ends_in_ms(), now);
  }
  // Bounded like any job's tasks: it is published, and other masters rank by it.
  s.remainingTasks = std::min(req.remaining_tasks(), config_.limits.max_tasks_per_job);
  s.lastUpdate = Clock::now();
  // The caller gets its grants in the reply: no event for it from this allocation.
  std::string caller = s.jmAddress;
  s.jmAddress.clear();
  allocate();
  subJobs_[req.job_id()].jmAddress = caller;
  pb::JmUpdateResponse resp;
  for (auto& c : grantsOf(req.job_id())) *resp.add_granted() = std::move(c);
  if (auto expired = leaseExpired_.find(req.job_id()); expired != leaseExpired_.end()) {
    for (auto& id : expired->second) *resp.add_lease_expired() = std::move(id);
    leaseExpired_.erase(expired);  // told in this reply
  }
  return resp;
}


Result<std::string> Master::pickWorkerForJm() {
  WorkerRecord* best = nullptr;
  for (auto& [id, w] : workers_) {
    if (w.alive && (!best || w.jms < best->jms)) best = &w;
  }
  if (!best) return makeError(ErrorCode::kUnavailable, "site " + config_.site + " has no live worker to run a JM");
  ++best->jms;
  return best->id;
}

awaitable<Result<std::vector<pb::SiteInfo>>> Master::liveSites() {
  auto names = co_await server_.coordinator().children(sitesPath());
  if (!names) co_return names.error();
  std::vector<pb::SiteInfo> out;
  for (const auto& name : *names) {
    auto node = co_await server_.coordinator().get(siteLivePath(name));
    if (!node) continue;  // site without a running master
    auto info = daemon::parseProto<pb::SiteInfo>(node->data, siteLivePath(name));
    if (info) out.push_back(*info);
  }
  co_return out;
}

awaitable<std::map<std::string, cost::Prices>> Master::sitePrices() {
  // Our own from the config; the others from their records, priced as they are now (a site
  // whose master is down, or whose record holds bad prices, is left out: its usage is shown
  // unpriced rather than guessed).
  constexpr auto kPricesMaxAge = std::chrono::seconds(10);
  if (pricesRead_ && Clock::now() - pricesRead_->first < kPricesMaxAge) co_return pricesRead_->second;
  std::map<std::string, cost::Prices> prices{{config_.site, config_.prices}};
  auto sites = co_await liveSites();
  if (!sites) {
    spdlog::warn("pricing a job: {}", sites.message());
    co_return prices;
  }
  for (const auto& site : *sites) {
    if (site.site() == config_.site) continue;
    auto p = cost::fromProto(site.prices(), site.site());
    if (!p) {
      spdlog::warn("{}", p.message());
      continue;
    }
    prices.emplace(site.site(), std::move(p).value());
  }
  pricesRead_.emplace(Clock::now(), prices);
  co_return prices;
}

awaitable<Result<std::vector<std::string>>> Master::downSitesHolding(const std::string& dataset,
                                                                     const std::vector<pb::SiteInfo>& live) {
  auto names = co_await server_.coordinator().children(sitesPath());
  if (!names) co_return names.error();
  std::vector<std::string> down;
  for (const auto& name : *names) {
    bool isLive = std::any_of(live.begin(), live.end(), [&](const pb::SiteInfo& s) { return s.site() == name; });
    if (isLive) continue;
    auto held = co_await server_.coordinator().exists(siteDatasetPath(name, dataset));
    if (!held) co_return held.error();
    if (held->has_value()) down.push_back(name);
  }
  co_return down;
}

awaitable<Result<pb::JobStatus>> Master::readStatus(const std::string& jobId) {
  auto status = co_await store_->status(jobId);
  if (!status) co_return status.error();
  co_return std::move(status->value);
}

awaitable<Status> Master::checkOwner(const net::CallContext& ctx, const std::string& jobId, std::string_view action) {
  // Insecure mode, a master or an admin: allowed whoever owns the job, so nothing to read.
  if (net::checkJobAccess(ctx.identity, "", config_.admins, jobId, action)) co_return Status::ok();
  auto checked = co_await store_->checkedStatus(jobId);
  if (!checked) {
    // No job (or its state is gone): nothing of it is this caller's to act on. An admin still
    // stops whatever of it runs, by id (kill).
    if (checked.error().code == ErrorCode::kNotFound) co_return makeError(ErrorCode::kNotFound, "no job " + jobId);
    co_return checked.error().prepend("reading the owner of job " + jobId);
  }
  // A status that does not decode records no owner: an admin's.
  const std::string owner = checked->status ? checked->status->owner() : std::string();
  co_return net::checkJobAccess(ctx.identity, owner, config_.admins, jobId, action);
}

awaitable<Result<pb::SubmitResponse>> Master::submit(pb::SubmitRequest req, net::CallContext ctx) {
  if (req.spec().derived_operators_size() > 0) {
    co_return makeError(ErrorCode::kInvalidArgument, "derived_operators is set by the master from its config, not by a job");
  }
  for (const auto& name : config_.derived_operators) req.mutable_spec()->add_derived_operators(name);
  const pb::JobSpec& spec = req.spec();
  if (auto st = job::validateJobSpec(spec, config_.limits); !st) co_return st.error();
  auto sites = co_await liveSites();
  if (!sites) co_return sites.error().prepend("reading sites");

  // Resolve every dataset stage's partitions across the live sites (by site name, then index).
  std::sort(sites->begin(), sites->end(), [](const auto& a, const auto& b) { return a.site() < b.site(); });
  std::set<std::string> involved{config_.site};
  std::map<uint32_t, pb::StageInputs> stageInputs;
  for (int s = 0; s < spec.stages_size(); ++s) {
    const auto& stage = spec.stages(s);
    if (stage.inputs_size() == 0 || !stage.inputs(0).has_dataset()) continue;
    pb::StageInputs inputs;
    for (const auto& in : stage.inputs()) {
      bool found = false;
      for (const auto& site : *sites) {
        for (const auto& ds : site.datasets()) {
          if (ds.name() != in.dataset()) continue;
          found = true;
          for (const auto& p : ds.partitions()) {
            // The first live copy is read; the others are fallbacks.
            std::vector<pb::DatasetReplica> copies;
            pb::DatasetReplica first;
            first.set_worker_id(p.worker_id());
            first.set_file(p.file());
            first.set_worker_address(p.worker_address());
            copies.push_back(first);
            for (const auto& r : p.replicas()) copies.push_back(r);
            std::stable_partition(copies.begin(), copies.end(), [](const auto& c) { return !c.worker_address().empty(); });
            if (copies.front().worker_address().empty()) {
              co_return makeError(ErrorCode::kUnavailable, "dataset '" + ds.name() + "' partition " +
                                                               std::to_string(p.index()) + " at site " + site.site() +
                                                               " has no copy on a live worker");
            }
            auto* ref = inputs.add_partitions();
            ref->set_site(site.site());
            ref->set_worker_id(copies.front().worker_id());
            ref->set_worker_address(copies.front().worker_address());
            ref->set_dataset_file(copies.front().file());
            for (size_t c = 1; c < copies.size(); ++c) {
              if (!copies[c].worker_address().empty()) *ref->add_replicas() = copies[c];
            }
            ref->set_bytes(p.bytes());
            ref->set_residency_local(ds.residency_local());
            involved.insert(site.site());
          }
        }
      }
      // A site that is down still holds its part of the dataset: running without it would
      // give a partial result that looks complete.
      auto down = co_await downSitesHolding(in.dataset(), *sites);
      if (!down) co_return down.error().prepend("reading sites");
      if (!down->empty()) {
        co_return makeError(ErrorCode::kUnavailable,
                            fmt::format("stage '{}': dataset '{}' has partitions at site {}, which has no running "
                                        "master; submit again when it is back",
                                        stage.name(), in.dataset(), fmt::join(*down, ", ")));
      }
      if (!found) {
        co_return makeError(ErrorCode::kInvalidArgument,
                            "stage '" + stage.name() + "': dataset '" + in.dataset() + "' is not held by any live site");
      }
    }
    if (inputs.partitions_size() == 0) {
      co_return makeError(ErrorCode::kInvalidArgument, "stage '" + stage.name() + "': its datasets have no partitions");
    }
    stageInputs.emplace(static_cast<uint32_t>(s), std::move(inputs));
  }
  // The task counts are known now (one task per dataset partition): the limits apply to them
  // before anything is written.
  std::map<uint32_t, uint32_t> datasetTasks;
  for (const auto& [s, inputs] : stageInputs) datasetTasks[s] = static_cast<uint32_t>(inputs.partitions_size());
  if (auto st = job::checkResolvedTasks(spec, datasetTasks, config_.limits); !st) co_return st.error();

  // exec runs only where every site the job runs at allows it: this site by its own config,
  // the others by what they published.
  std::map<std::string, config::ExecConfig> siteExec{{config_.site, config_.exec}};
  for (const auto& site : *sites) {
    if (site.site() != config_.site && involved.count(site.site())) siteExec[site.site()] = job::fromProto(site.exec());
  }
  if (auto st = job::checkJobExec(spec, siteExec); !st) co_return st.error();
  // Residency in meaning: refuse now a job whose result could only be read elsewhere, or whose
  // stage would need raw records pinned at two sites.
  {
    JobView view;
    view.spec = spec;
    view.stages.resize(static_cast<size_t>(spec.stages_size()));
    for (const auto& [s, inputs] : stageInputs) view.stages[s].inputs = inputs;
    auto pinning = stagePinning(view);
    if (!pinning) co_return pinning.error();
    if (auto st = checkResultSite(view, *pinning, config_.site); !st) co_return st.error();
  }

  pb::JobStatus status;
  status.set_name(spec.name());
  status.set_state(pb::JOB_RUNNING);
  status.set_submit_site(config_.site);
  for (const auto& s : involved) status.add_sites(s);
  status.set_submit_unix_ms(daemon::nowUnixMs());
  // From the certificate, never from the request; none in insecure mode.
  if (ctx.identity) status.set_owner(ctx.identity->toString());
  auto created = co_await store_->createJob(spec, status, std::move(stageInputs));
  if (!created) co_return created.error();
  const std::string jobId = *created;
  status.set_job_id(jobId);

  pb::StartJmRequest primary;
  primary.set_job_id(jobId);
  primary.set_role(pb::JM_PRIMARY);
  // A named context: GCC 12 destroys a braced temporary coroutine argument twice.
  net::CallContext local;
  auto started = co_await startJm(primary, local);
  if (!started) {
    status.set_state(pb::JOB_FAILED);
    status.set_error("cannot start the primary JM: " + started.message());
    status.set_finish_unix_ms(daemon::nowUnixMs());
    (void)co_await store_->overwriteStatus(jobId, status);
    co_return started.error().prepend("job " + jobId);
  }
  // sJMs at the other sites holding input. One that cannot be started now is requested again
  // by the pJM, which watches for missing JMs.
  for (const auto& site : *sites) {
    if (site.site() == config_.site || !involved.count(site.site())) continue;
    auto ep = net::Endpoint::parse(site.master_address());
    if (!ep) continue;
    pb::StartJmRequest secondary;
    secondary.set_job_id(jobId);
    secondary.set_role(pb::JM_SECONDARY);
    auto r = co_await server_.client(*ep)->call<rpc::Master::StartJm>(secondary, kPeerCallTimeout);
    if (!r) spdlog::warn("job {}: site {} could not start an sJM yet: {}", jobId, site.site(), r.message());
  }
  spdlog::info("job {} ({}) submitted by {} over sites {}", jobId, spec.name(),
               status.owner().empty() ? "an unauthenticated client" : status.owner(), fmt::join(status.sites(), ","));
  pb::SubmitResponse resp;
  resp.set_job_id(jobId);
  co_return resp;
}

awaitable<Result<pb::StartJmResponse>> Master::startJm(pb::StartJmRequest req, net::CallContext) {
  auto st = co_await readStatus(req.job_id());
  if (!st) co_return st.error();
  if (isTerminal(st->state())) co_return makeError(ErrorCode::kInvalidArgument, "job " + req.job_id() + " has ended");
  if (std::find(st->sites().begin(), st->sites().end(), config_.site) == st->sites().end()) {
    // A JM here would serve a site the job has no tasks at, and lead it if it won the election.
    co_return makeError(ErrorCode::kInvalidArgument,
                        fmt::format("job {} does not run at site {}", req.job_id(), config_.site));
  }
  // Try each live worker until one starts the JM.
  std::set<std::string> tried;
  for (;;) {
    auto workerId = pickWorkerForJm();
    if (!workerId) co_return workerId.error();
    if (tried.count(*workerId)) co_return makeError(ErrorCode::kUnavailable, "no worker could start a JM");
    tried.insert(*workerId);
    auto ep = net::Endpoint::parse(workers_[*workerId].address);
    if (!ep) continue;
    pb::LaunchJmRequest launch;
    launch.set_job_id(req.job_id());
    launch.set_role(req.role());
    launch.set_worker_id(*workerId);
    launch.set_site(config_.site);
    jmWorker_[req.job_id()] = *workerId;  // the JM may ask for containers before the call returns
    auto r = co_await server_.client(*ep)->call<rpc::Worker::LaunchJm>(launch, kPeerCallTimeout);
    if (r) {
      pb::StartJmResponse resp;
      resp.set_worker_id(*workerId);
      co_return resp;
    }
    if (auto it = jmWorker_.find(req.job_id()); it != jmWorker_.end() && it->second == *workerId) jmWorker_.erase(it);
    spdlog::warn("worker {} could not start a JM for {}: {}", *workerId, req.job_id(), r.message());
  }
}

namespace {

// One line for `tellus status` of a job whose status does not decode: why, and what still works.
Error corruptJobError(const std::string& jobId, const std::string& reason) {
  return makeError(ErrorCode::kInternal,
                   fmt::format("job {} is corrupt: {} (`tellus kill {}` still stops its JMs and tasks)", jobId, reason, jobId));
}

// What of a job its owner alone sees (docs/security.md, "Job owners"): what comes from its spec
// (its name and stage names) and its error, which may quote its tasks' output.
void hideFromOthers(pb::JobStatus& status) {
  status.clear_name();
  status.clear_error();
}
void hideFromOthers(pb::JobStatusResponse& response) {
  hideFromOthers(*response.mutable_status());
  for (auto& stage : *response.mutable_stages()) stage.clear_name();
}

}  // namespace

awaitable<Result<pb::JobStatusResponse>> Master::status(pb::JobRequest req, net::CallContext ctx) {
  auto checked = co_await store_->checkedStatus(req.job_id());
  if (!checked) co_return checked.error();
  if (!checked->status) co_return corruptJobError(req.job_id(), checked->corrupt);
  // Anyone may see how someone else's job is doing; its tasks only its owner (or an admin).
  Status owned = net::checkJobAccess(ctx.identity, checked->status->owner(), config_.admins, req.job_id(),
                                     "see the tasks of");
  if (!owned && req.tasks()) co_return owned.error();
  auto described = co_await describeJob(std::move(req), std::move(*checked->status));
  if (described && !owned) hideFromOthers(*described);
  co_return described;
}

namespace {

// What status calls keep of the batches they read, over all jobs, in entries (an output's
// location or an execution, ~0.25 KB each): about 100 MB at most; a 100,000-task stage run
// once is 200,000 entries.
constexpr size_t kMaxStatusRecordEntries = 400000;

size_t recordEntries(const jobstate::StageRecords& records) {
  size_t n = 0;
  for (const auto& [name, node] : records.nodes) n += node.outputs.size() + node.executions.size();
  return n;
}

}  // namespace

void Master::keepStatusRecords(std::pair<std::string, uint32_t> key, jobstate::StageRecords records) {
  const size_t entries = recordEntries(records);
  if (entries == 0 || entries > kMaxStatusRecordEntries) return;
  size_t total = entries;
  for (const auto& [k, kept] : statusRecords_) total += recordEntries(kept);
  // Others make room, lowest job ids (the oldest jobs) first.
  while (total > kMaxStatusRecordEntries && !statusRecords_.empty()) {
    total -= recordEntries(statusRecords_.begin()->second);
    statusRecords_.erase(statusRecords_.begin());
  }
  statusRecords_[std::move(key)] = std::move(records);
}

awaitable<Result<pb::JobStatusResponse>> Master::describeJob(pb::JobRequest req, pb::JobStatus jobStatus) {
  const pb::JobStatus* st = &jobStatus;
  pb::JobStatusResponse resp;
  *resp.mutable_status() = *st;
  auto spec = co_await store_->spec(req.job_id());
  if (!spec) co_return spec.error();
  std::vector<std::optional<pb::TaskMap>> taskmaps(static_cast<size_t>(spec->stages_size()));
  std::vector<std::set<uint32_t>> doneByStage(static_cast<size_t>(spec->stages_size()));
  std::vector<std::map<uint32_t, std::string>> workerByStage(static_cast<size_t>(spec->stages_size()));
  // A compacted job (its state folded into a summary) has its taskMaps there.
  auto compacted = co_await store_->summary(req.job_id());
  if (!compacted) spdlog::warn("status of {}: {}", req.job_id(), compacted.message());
  const jobstate::JobFinal* summary = compacted && *compacted ? &**compacted : nullptr;
  uint64_t totalTasks = 0;
  cost::Usage usage;
  // A page of tasks shows how often each ran: the audit nodes not folded yet, listed before
  // the batches are read below (which hold the folded executions), so that no execution is
  // missed and none read twice (JobStore::countAttempts).
  std::vector<std::string> unfolded;
  std::vector<jobstate::Attempt> folded;
  if (req.tasks()) {
    auto names = co_await store_->unfoldedAttemptNames(req.job_id());
    if (names) unfolded = std::move(names).value();
  }
  for (uint32_t s = 0; s < static_cast<uint32_t>(spec->stages_size()); ++s) {
    auto* sp = resp.add_stages();
    sp->set_name(spec->stages(static_cast<int>(s)).name());
    sp->set_tasks(spec->stages(static_cast<int>(s)).tasks());
    // Taken out while in use: a concurrent status of the same job reads without it.
    auto key = std::make_pair(req.job_id(), s);
    jobstate::StageRecords records;
    if (auto kept = statusRecords_.find(key); kept != statusRecords_.end()) {
      records = std::move(kept->second);
      statusRecords_.erase(kept);
    }
    auto done = co_await store_->outputs(req.job_id(), s, &records);
    keepStatusRecords(std::move(key), std::move(records));
    if (done) {
      for (const auto& [t, record] : done->outputs) {
        doneByStage[s].insert(doneByStage[s].end(), t);
        // Only a page shows where tasks ran: a summary copies no worker id per task.
        if (req.tasks()) workerByStage[s][t] = record.location.worker_id();
      }
      usage.add(done->usage);
      if (req.tasks()) std::move(done->executions.begin(), done->executions.end(), std::back_inserter(folded));
    }
    const auto& doneTasks = doneByStage[s];
    sp->set_done(static_cast<uint32_t>(doneTasks.size()));
    if (summary != nullptr) {
      if (s >= summary->stages.size() || !summary->stages[s].taskmap) continue;
      taskmaps[s] = *summary->stages[s].taskmap;
    } else {
      auto read = co_await store_->taskMap(req.job_id(), s);
      if (!read) continue;
      taskmaps[s] = std::move(read->value);
    }
    const pb::TaskMap* taskmap = &*taskmaps[s];
    sp->set_released(true);
    sp->set_tasks(static_cast<uint32_t>(taskmap->owner_site_size()));
    totalTasks += static_cast<uint64_t>(taskmap->owner_site_size());
    std::map<std::string, std::pair<uint32_t, uint32_t>> bySite;
    for (int t = 0; t < taskmap->owner_site_size(); ++t) {
      auto& [owned, finished] = bySite[taskmap->owner_site(t)];
      ++owned;
      if (doneTasks.count(static_cast<uint32_t>(t))) ++finished;
    }
    for (const auto& [site, counts] : bySite) {
      auto* ss = sp->add_sites();
      ss->set_site(site);
      ss->set_owned(counts.first);
      ss->set_done(counts.second);
    }
  }
  resp.set_total_tasks(static_cast<uint32_t>(std::min<uint64_t>(totalTasks, UINT32_MAX)));
  const auto prices = co_await sitePrices();
  *resp.mutable_cost() = cost::toProto(cost::price(usage, prices));
  // Where each task ran, on request and one page at a time: the answer stays bounded whatever
  // the job's size.
  if (req.tasks()) {
    constexpr uint32_t kMaxTaskPage = 1000;
    const uint64_t begin = req.task_offset();
    const uint64_t end = std::min<uint64_t>(totalTasks, begin + (req.task_limit() == 0 ? kMaxTaskPage
                                                                                      : std::min(req.task_limit(), kMaxTaskPage)));
    std::map<TaskId, uint32_t> executions = jobstate::JobStore::countAttempts(unfolded, folded);
    uint64_t first = 0;  // the job-wide index of the stage's task 0
    for (uint32_t s = 0; s < static_cast<uint32_t>(resp.stages_size()) && first < end; ++s) {
      const auto& taskmap = taskmaps[s];
      if (!taskmap) continue;
      const uint64_t n = static_cast<uint64_t>(taskmap->owner_site_size());
      auto* sp = resp.mutable_stages(static_cast<int>(s));
      for (uint64_t i = std::max(begin, first); i < std::min(end, first + n); ++i) {
        const auto t = static_cast<uint32_t>(i - first);
        auto* tp = sp->add_task_placements();
        tp->set_task(t);
        tp->set_owner_site(taskmap->owner_site(static_cast<int>(t)));
        tp->set_executions(executions[{s, t}]);
        if (auto worker = workerByStage[s].find(t); worker != workerByStage[s].end()) tp->set_worker_id(worker->second);
      }
      first += n;
    }
    resp.set_next_task_offset(static_cast<uint32_t>(std::max(begin, end)));
  }
  auto jms = co_await store_->jmSites(req.job_id());
  if (jms) {
    for (const auto& site : *jms) {
      auto info = co_await store_->jm(req.job_id(), site);
      if (info) *resp.add_jms() = info->value;
    }
  }
  co_return resp;
}

awaitable<Result<pb::ListJobsResponse>> Master::list(pb::ListJobsRequest, net::CallContext ctx) {
  auto ids = co_await store_->listJobs();
  if (!ids) co_return ids.error();
  pb::ListJobsResponse resp;
  for (const auto& id : *ids) {
    auto checked = co_await store_->checkedStatus(id);
    if (!checked) {
      if (checked.error().code == ErrorCode::kNotFound) continue;  // deleted since it was listed
      // Not left out silently: an incomplete list would hide a job.
      co_return checked.error().prepend("reading the status of " + id);
    }
    if (checked->status) {
      pb::JobStatus& job = *resp.add_jobs() = std::move(*checked->status);
      if (!net::checkJobAccess(ctx.identity, job.owner(), config_.admins, id, "see")) hideFromOthers(job);
      continue;
    }
    auto* corrupt = resp.add_corrupt();
    corrupt->set_job_id(id);
    corrupt->set_reason(std::move(checked->corrupt));
  }
  co_return resp;
}

awaitable<Result<pb::ListSitesResponse>> Master::sites(pb::ListSitesRequest, net::CallContext) {
  auto sites = co_await liveSites();
  if (!sites) co_return sites.error();
  pb::ListSitesResponse resp;
  for (auto& s : *sites) *resp.add_sites() = std::move(s);
  co_return resp;
}

awaitable<Result<pb::KillResponse>> Master::kill(pb::JobRequest req, net::CallContext ctx) {
  if (!isJobId(req.job_id())) co_return makeError(ErrorCode::kInvalidArgument, "bad job id '" + req.job_id().substr(0, 64) + "'");
  // Checked here, at the master the client called: the fan-out below calls the other masters
  // as this master (allowed by them without a check of their own).
  if (Status allowed = co_await checkOwner(ctx, req.job_id(), "kill"); !allowed) co_return allowed.error();
  // The status first (JMs that still read it leave on their own), but the stop does not
  // depend on it: a job whose state is corrupt or deleted is stopped by job id all the same.
  Status ended = Status::ok();
  if (!req.this_site_only()) {
    ended = co_await store_->endJob(req.job_id(), pb::JOB_KILLED, "killed by a user through site " + config_.site);
    if (!ended && ended.code() != ErrorCode::kNotFound && ended.code() != ErrorCode::kInvalidArgument) {
      spdlog::warn("job {}: cannot mark it killed ({}); stopping its processes anyway", req.job_id(), ended.message());
    }
  }
  pb::KillResponse resp = co_await stopJobTasks(req.job_id());
  if (!req.this_site_only()) {
    // Every other live site: one hop (they do not fan out again).
    auto sites = co_await liveSites();
    if (!sites) resp.add_unreachable("sites: " + sites.message());
    for (const auto& site : sites ? *sites : std::vector<pb::SiteInfo>{}) {
      if (site.site() == config_.site) continue;
      auto ep = net::Endpoint::parse(site.master_address());
      if (!ep) {
        resp.add_unreachable(site.site());
        continue;
      }
      pb::JobRequest local;
      local.set_job_id(req.job_id());
      local.set_this_site_only(true);
      auto client = server_.client(*ep);
      auto r = co_await client->call<rpc::Master::Kill>(local, std::min(ctx.remaining(), kPeerCallTimeout));
      if (!r) {
        spdlog::warn("kill of {}: site {} not reached: {}", req.job_id(), site.site(), r.message());
        resp.add_unreachable(site.site());
        continue;
      }
      resp.set_jms_killed(resp.jms_killed() + r->jms_killed());
      resp.set_executors_killed(resp.executors_killed() + r->executors_killed());
      resp.set_workers_reached(resp.workers_reached() + r->workers_reached());
      for (const auto& u : r->unreachable()) resp.add_unreachable(u);
    }
  }
  spdlog::info("job {} killed{}: {} JMs and {} executors stopped on {} workers", req.job_id(),
               req.this_site_only() ? " (here, asked by another site)" : "", resp.jms_killed(), resp.executors_killed(),
               resp.workers_reached());
  // Already over, or unknown: still reported (after the stop, which is harmless then).
  if (!ended && ended.code() != ErrorCode::kNotFound) co_return ended.error();
  if (!ended && resp.jms_killed() + resp.executors_killed() == 0) co_return ended.error();
  co_return resp;
}

awaitable<Result<Master::ResultMeta*>> Master::resultMeta(const std::string& jobId,
                                                          const std::optional<net::PeerIdentity>& caller) {
  constexpr size_t kMaxResultMeta = 64;
  constexpr std::string_view kAction = "read the result of";
  if (auto it = resultMeta_.find(jobId); it != resultMeta_.end()) {
    if (Status allowed = net::checkJobAccess(caller, it->second.owner, config_.admins, jobId, kAction); !allowed) {
      co_return allowed.error();
    }
    it->second.lastUse = ++resultUses_;
    co_return &it->second;
  }
  auto st = co_await readStatus(jobId);
  if (!st) co_return st.error();
  // Before anything else of the job is told (its state, its error).
  if (Status allowed = net::checkJobAccess(caller, st->owner(), config_.admins, jobId, kAction); !allowed) {
    co_return allowed.error();
  }
  if (st->state() != pb::JOB_SUCCEEDED) {
    co_return makeError(ErrorCode::kInvalidArgument, "job " + jobId + " has no result: it is " +
                                                         jobStateName(st->state()) +
                                                         (st->error().empty() ? "" : " (" + st->error() + ")"));
  }
  auto loaded = co_await store_->load(jobId);
  if (!loaded) co_return loaded.error();
  if (loaded->spec.stages_size() == 0) co_return makeError(ErrorCode::kInternal, "job " + jobId + " has no stages");
  {
    // Residency in meaning: raw records pinned at another site are not returned here, whoever
    // submitted the job (submission refuses this case; a result read at another master is not).
    JobView view;
    view.spec = loaded->spec;
    view.stages.resize(loaded->inputs.size());
    for (size_t s = 0; s < loaded->inputs.size(); ++s) view.stages[s].inputs = loaded->inputs[s];
    auto pinning = stagePinning(view);
    if (!pinning) co_return pinning.error().prepend("job " + jobId);
    if (auto st = checkResultSite(view, *pinning, config_.site); !st) co_return st.error().prepend("job " + jobId);
  }
  ResultMeta meta;
  meta.owner = st->owner();
  meta.stage = static_cast<uint32_t>(loaded->spec.stages_size() - 1);
  // Every output's location at once: one read per record node (or of the summary).
  auto done = co_await store_->outputs(jobId, meta.stage);
  if (!done) co_return done.error();
  meta.tasks = static_cast<uint32_t>(done->outputs.size());
  for (auto& [t, record] : done->outputs) meta.parts[t] = std::move(record.location);
  meta.lastUse = ++resultUses_;
  if (resultMeta_.size() >= kMaxResultMeta) {
    auto oldest = std::min_element(resultMeta_.begin(), resultMeta_.end(),
                                   [](const auto& a, const auto& b) { return a.second.lastUse < b.second.lastUse; });
    resultMeta_.erase(oldest);
  }
  co_return &(resultMeta_[jobId] = std::move(meta));
}

awaitable<Result<pb::ResultResponse>> Master::result(pb::ResultRequest req, net::CallContext ctx) {
  // The job's metadata is read once (then cached); each chunk costs only the fetch.
  auto meta = co_await resultMeta(req.job_id(), ctx.identity);
  if (!meta) co_return meta.error();
  const std::string jobId = req.job_id();
  const uint32_t last = (*meta)->stage;
  pb::ResultResponse resp;
  resp.set_tasks((*meta)->tasks);
  if (req.task() >= (*meta)->tasks) co_return makeError(ErrorCode::kInvalidArgument, "no result task " + std::to_string(req.task()));
  pb::PartitionLocation loc;
  if (auto known = (*meta)->parts.find(req.task()); known != (*meta)->parts.end()) {
    loc = known->second;
  } else {
    auto parsed = co_await store_->output(jobId, last, req.task());
    if (!parsed) co_return parsed.error();
    loc = *parsed;
    // The entry may have been evicted while we read: look it up again before caching.
    if (auto again = resultMeta_.find(jobId); again != resultMeta_.end()) again->second.parts[req.task()] = loc;
  }
  if (jobstate::outputEmpty(loc)) {
    // Nothing to read, from a worker that may be gone (an empty output gets no copy).
    resp.set_total_bytes(0);
    resp.set_crc32(0);  // the CRC-32 of no bytes
    resp.set_worker_id(loc.worker_id());
    resp.set_site(loc.site());
    co_return resp;
  }
  pb::FetchRequest fetch;
  fetch.mutable_partition()->set_job_id(jobId);
  fetch.mutable_partition()->set_stage(last);
  fetch.mutable_partition()->set_task(req.task());
  fetch.mutable_partition()->set_bucket(0);
  fetch.set_offset(req.offset());
  fetch.set_max_bytes(req.max_bytes());
  // The output's worker, then its copies in order (identical bytes, the same checksum): a lost
  // VM does not take a finished result with it.
  std::vector<std::pair<std::string, std::string>> copies{{loc.worker_id(), loc.worker_address()}};
  for (const auto& r : loc.replicas()) copies.emplace_back(r.worker_id(), r.worker_address());
  std::optional<Error> failed;
  for (const auto& [worker, address] : copies) {
    auto ep = net::Endpoint::parse(address);
    if (!ep) {
      failed = ep.error().prepend("reading result from worker " + worker);
      continue;
    }
    auto chunk = co_await server_.client(*ep)->call<rpc::Worker::Fetch>(fetch, ctx.remaining());
    if (!chunk) {
      failed = chunk.error().prepend("reading result from worker " + worker);
      continue;
    }
    resp.set_data(std::move(*chunk->mutable_data()));
    resp.set_total_bytes(chunk->total_bytes());
    resp.set_crc32(chunk->crc32());
    resp.set_worker_id(worker);
    resp.set_site(loc.site());
    co_return resp;
  }
  co_return *failed;
}

awaitable<Result<std::optional<std::string>>> Master::siteOfWorker(const std::string& workerId) {
  auto names = co_await server_.coordinator().children(sitesPath());
  if (!names) co_return names.error().prepend("reading sites");
  for (const auto& site : *names) {
    if (!isName(site)) continue;
    auto held = co_await server_.coordinator().exists(siteWorkerPath(site, workerId));
    if (!held) co_return held.error();
    if (held->has_value()) co_return std::optional<std::string>(site);
  }
  co_return std::optional<std::string>();
}

awaitable<Result<net::Endpoint>> Master::siteMaster(const std::string& site) {
  auto node = co_await server_.coordinator().get(siteLivePath(site));
  if (!node) {
    if (node.error().code != ErrorCode::kNotFound) co_return node.error();
    co_return makeError(ErrorCode::kUnavailable, "site " + site + " has no live master");
  }
  auto info = daemon::parseProto<pb::SiteInfo>(node->data, siteLivePath(site));
  if (!info) co_return info.error();
  auto ep = net::Endpoint::parse(info->master_address());
  if (!ep) co_return ep.error().prepend("site " + site + " publishes a bad master address");
  co_return *ep;
}

awaitable<Result<pb::LogsResponse>> Master::logs(pb::LogsRequest req, net::CallContext ctx) {
  if (!isJobId(req.job_id())) co_return makeError(ErrorCode::kInvalidArgument, "bad job id '" + req.job_id().substr(0, 64) + "'");
  if (!req.jm_site().empty()) {
    if (auto st = checkName("site", req.jm_site()); !st) co_return st.error();
  }
  // A task's stderr is its owner's, like its result. A forwarded request was checked by the
  // master the client called (a master is allowed).
  if (Status allowed = co_await checkOwner(ctx, req.job_id(), "read the logs of"); !allowed) co_return allowed.error();
  const auto timeout = std::min(ctx.remaining(), kPeerCallTimeout);
  if (!req.worker_id().empty() || !req.attempt_id().empty()) {
    // A master that resolved the execution forwards it here, its worker's site; a client may
    // not point the read at a worker of its choosing.
    if (ctx.identity && ctx.identity->role != net::Role::kMaster) {
      co_return makeError(ErrorCode::kPermissionDenied, "worker_id and attempt_id of a logs request are set by masters only");
    }
    if (auto st = checkName("worker id", req.worker_id()); !st) co_return st.error();
    if (!req.jm_site().empty()) co_return makeError(ErrorCode::kInvalidArgument, "a JM log names no execution");
    co_return co_await localLog(std::move(req), ctx);
  }
  auto spec = co_await store_->spec(req.job_id());
  if (!spec) co_return spec.error();
  if (!req.jm_site().empty()) {
    if (req.jm_site() == config_.site) co_return co_await localLog(std::move(req), ctx);
    auto ep = co_await siteMaster(req.jm_site());
    if (!ep) co_return ep.error();
    auto r = co_await server_.client(*ep)->call<rpc::Master::Logs>(req, timeout);
    if (!r) co_return r.error().prepend("site " + req.jm_site());
    co_return r;
  }
  // A task's execution: the stage by name or index.
  std::optional<uint32_t> stage;
  const std::string& name = req.stage();
  if (!name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (name.size() <= 9 && std::stoul(name) < static_cast<unsigned long>(spec->stages_size())) {
      stage = static_cast<uint32_t>(std::stoul(name));
    }
  } else {
    for (int s = 0; s < spec->stages_size(); ++s) {
      if (spec->stages(s).name() == name) stage = static_cast<uint32_t>(s);
    }
  }
  if (!stage) {
    co_return makeError(ErrorCode::kInvalidArgument, fmt::format("job {} has no stage '{}' ({} stages)", req.job_id(),
                                                                 name.substr(0, 64), spec->stages_size()));
  }
  const std::string taskName = fmt::format("{}:{}", spec->stages(static_cast<int>(*stage)).name(), req.task());
  auto attempts = co_await store_->taskAttempts(req.job_id(), {*stage, req.task()});
  if (!attempts) co_return attempts.error();
  const auto count = static_cast<uint32_t>(attempts->size());
  if (count == 0) co_return makeError(ErrorCode::kNotFound, fmt::format("task {} of job {} has not run", taskName, req.job_id()));
  if (req.attempt() > count) {
    co_return makeError(ErrorCode::kInvalidArgument, fmt::format("task {} of job {} has run {} times: there is no attempt {}",
                                                                 taskName, req.job_id(), count, req.attempt()));
  }
  const uint32_t attempt = req.attempt() == 0 ? count : req.attempt();
  const std::string attemptId = (*attempts)[attempt - 1].id;
  const std::string* workerId = &(*attempts)[attempt - 1].workerId;
  auto site = co_await siteOfWorker(*workerId);
  if (!site) co_return site.error();
  if (!*site) {
    co_return makeError(ErrorCode::kUnavailable,
                        fmt::format("attempt {} of task {} ran on worker {}, which is registered at no site: its VM and "
                                    "the log with it are gone",
                                    attempt, taskName, *workerId));
  }
  req.set_worker_id(*workerId);
  req.set_attempt_id(attemptId);
  Result<pb::LogsResponse> r = makeError(ErrorCode::kInternal, "unreachable");
  if (**site == config_.site) {
    r = co_await localLog(req, ctx);
  } else {
    auto ep = co_await siteMaster(**site);
    if (!ep) co_return ep.error();
    r = co_await server_.client(*ep)->call<rpc::Master::Logs>(req, timeout);
    if (!r) co_return r.error().prepend("site " + **site);
  }
  if (!r) co_return r.error();
  r->set_attempt(attempt);
  r->set_attempts(count);
  co_return r;
}

awaitable<Result<pb::LogsResponse>> Master::localLog(pb::LogsRequest req, net::CallContext ctx) {
  const auto timeout = std::min(ctx.remaining(), kPeerCallTimeout);
  pb::ReadLogRequest read;
  read.set_job_id(req.job_id());
  read.set_offset(req.offset());
  read.set_tail(req.tail());
  read.set_max_bytes(req.max_bytes());
  auto ask = [&](const std::string& workerId) -> awaitable<Result<pb::LogsResponse>> {
    auto w = workers_.find(workerId);
    if (w == workers_.end() || !w->second.alive) {
      co_return makeError(ErrorCode::kUnavailable, fmt::format("worker {} of site {} is gone (not registered with its "
                                                               "master): the log went with its VM",
                                                               workerId, config_.site));
    }
    auto ep = net::Endpoint::parse(w->second.address);
    if (!ep) co_return ep.error();
    auto r = co_await server_.client(*ep)->call<rpc::Worker::ReadLog>(read, timeout);
    if (!r && r.error().code != ErrorCode::kNotFound && r.error().code != ErrorCode::kInvalidArgument) {
      co_return r.error().prepend(fmt::format("worker {} of site {} did not answer (its VM may be gone)", workerId,
                                              config_.site));
    }
    co_return r;
  };
  if (req.jm_site().empty()) {
    read.set_attempt_id(req.attempt_id());
    co_return co_await ask(req.worker_id());
  }
  read.set_jm(true);
  // The worker of the JM registered now (job state) holds the current log.
  std::string registered;
  auto info = co_await store_->jm(req.job_id(), config_.site);
  if (info) registered = info->value.worker_id();
  if (!registered.empty() && workers_.count(registered) > 0) {
    auto r = co_await ask(registered);
    if (r) co_return r;
  }
  // No JM runs here now (the job ended, or its JM is being replaced): the live worker whose JM
  // log of the job changed last (a JM replaced on another worker appends to a new file there).
  std::optional<pb::LogsResponse> newest;
  std::vector<std::string> unreachable;
  std::vector<std::string> live;  // copied: workers_ may change while we wait for answers
  for (const auto& [id, w] : workers_) {
    if (w.alive && id != registered) live.push_back(id);
  }
  for (const auto& id : live) {
    auto r = co_await ask(id);
    if (r) {
      if (!newest || r->modified_unix_ms() > newest->modified_unix_ms()) newest = std::move(*r);
    } else if (r.error().code != ErrorCode::kNotFound) {
      unreachable.push_back(id);
    }
  }
  if (newest) co_return std::move(*newest);
  co_return makeError(ErrorCode::kNotFound,
                      fmt::format("no live worker of site {} holds a JM log of job {}{}: the VMs that ran its JMs here "
                                  "are gone, or none ran here",
                                  config_.site, req.job_id(),
                                  unreachable.empty() ? "" : fmt::format(" ({} did not answer)", fmt::join(unreachable, ", "))));
}

awaitable<Result<pb::PutResponse>> Master::put(pb::PutRequest req, net::CallContext ctx) {
  // Every field is checked before anything is stored: names, counts, sizes.
  const auto& limits = config_.limits;
  if (auto st = checkName("dataset", req.dataset()); !st) co_return st.error();
  if (auto st = checkName("upload id", req.upload_id()); !st) co_return st.error();
  if (req.partitions() == 0 || req.partitions() > limits.max_partitions_per_put) {
    co_return makeError(ErrorCode::kInvalidArgument,
                        fmt::format("put of dataset '{}': {} partitions, expected 1 to {} (limits.max_partitions_per_put)",
                                    req.dataset(), req.partitions(), limits.max_partitions_per_put));
  }
  if (req.partition() >= req.partitions()) {
    co_return makeError(ErrorCode::kInvalidArgument,
                        fmt::format("put of dataset '{}': partition {} of {}", req.dataset(), req.partition(), req.partitions()));
  }
  if (req.offset() > limits.max_partition_bytes || req.data().size() > limits.max_partition_bytes - req.offset()) {
    co_return makeError(ErrorCode::kInvalidArgument,
                        fmt::format("put of dataset '{}': partition {} is larger than {} bytes (limits.max_partition_bytes)",
                                    req.dataset(), req.partition(), limits.max_partition_bytes));
  }
  auto upload = uploads_.find(req.upload_id());
  if (upload == uploads_.end()) {
    // A put starts with its first chunk, and a dropped one does not start again under its id.
    const bool dropped = std::any_of(droppedPuts_.begin(), droppedPuts_.end(),
                                     [&](const auto& d) { return d.first == req.upload_id(); });
    if (req.offset() != 0 || dropped) co_return droppedPut(req.upload_id());
    if (std::any_of(config_.datasets.begin(), config_.datasets.end(), [&](const auto& d) { return d.name == req.dataset(); })) {
      co_return makeError(ErrorCode::kInvalidArgument,
                          "dataset '" + req.dataset() + "' is configured at site " + config_.site + ": put under another name");
    }
    uint64_t existing = 0;
    if (auto ds = datasets_.find(req.dataset()); ds != datasets_.end()) existing = static_cast<uint64_t>(ds->second.partitions_size());
    for (const auto& [id, u] : uploads_) {
      if (u.dataset == req.dataset()) existing += u.partitions;
    }
    if (existing + req.partitions() > limits.max_partitions_per_dataset) {
      co_return makeError(ErrorCode::kInvalidArgument,
                          fmt::format("dataset '{}' would have {} partitions at site {}, over the limit of {} "
                                      "(limits.max_partitions_per_dataset)",
                                      req.dataset(), existing + req.partitions(), config_.site,
                                      limits.max_partitions_per_dataset));
    }
    // An id whose files are registered already would have them overwritten, or deleted by
    // an abort: refused (the pending record below refuses one in progress).
    const std::string ownPrefix = req.upload_id() + "-part-";
    if (auto ds = datasets_.find(req.dataset()); ds != datasets_.end()) {
      for (const auto& p : ds->second.partitions()) {
        if (std::filesystem::path(p.file()).filename().string().rfind(ownPrefix, 0) == 0) {
          co_return makeError(ErrorCode::kAlreadyExists, "put id " + req.upload_id() + " was used before: put again");
        }
      }
    }
    Upload fresh;
    fresh.dataset = req.dataset();
    fresh.residencyLocal = req.residency_local();
    fresh.partitions = req.partitions();
    for (const auto& [id, w] : workers_) {
      if (w.alive) fresh.workers.push_back(id);
    }
    if (fresh.workers.empty()) co_return makeError(ErrorCode::kUnavailable, "site " + config_.site + " has no live worker");
    fresh.recorded = std::make_shared<coord::EventFlag>(server_.runtime().io().get_executor());
    fresh.lastChunk = Clock::now();
    pb::PendingPut pending;
    pending.set_dataset(req.dataset());
    for (const auto& id : fresh.workers) pending.add_workers(id);
    pending.set_start_unix_ms(daemon::nowUnixMs());
    const auto recorded = fresh.recorded;
    uploads_.emplace(req.upload_id(), std::move(fresh));
    // Recorded before any worker stores a byte: if this master dies before the commit, the
    // record tells the next one which files to drop.
    Status parent = co_await server_.coordinator().ensurePath(sitePutsPath(config_.site));
    auto created = parent ? Result<std::string>(std::string())
                          : Result<std::string>(parent.error());
    if (parent) {
      created = co_await server_.coordinator().create(sitePutPath(config_.site, req.upload_id()),
                                                      pending.SerializeAsString(), coord::CreateMode::kPersistent);
    }
    if (!created) {
      uploads_.erase(req.upload_id());
      recorded->set();  // chunks waiting for the record find the put gone
      if (created.error().code == ErrorCode::kAlreadyExists) {
        co_return makeError(ErrorCode::kAlreadyExists, "put id " + req.upload_id() + " is in use: put again");
      }
      co_return created.error().prepend("put of dataset '" + req.dataset() + "': recording it");
    }
    recorded->set();
    upload = uploads_.find(req.upload_id());
    if (upload == uploads_.end()) co_return droppedPut(req.upload_id());
  } else if (upload->second.dataset != req.dataset() || upload->second.partitions != req.partitions() ||
             upload->second.residencyLocal != req.residency_local()) {
    co_return makeError(ErrorCode::kInvalidArgument, "put " + req.upload_id() + ": a chunk disagrees with the put's dataset, "
                                                     "partition count or residency");
  }
  if (!upload->second.recorded->isSet()) {
    // A chunk that came while the put's record is being written: after it, in order.
    const auto recorded = upload->second.recorded;
    const bool set = co_await recorded->waitFor(ctx.remaining());
    upload = uploads_.find(req.upload_id());
    if (!set || upload == uploads_.end()) {
      co_return makeError(ErrorCode::kUnavailable, "put " + req.upload_id() + " could not be recorded (dropped)");
    }
  }
  if (upload->second.stored.count(req.partition())) {
    co_return makeError(ErrorCode::kInvalidArgument, fmt::format("put {}: partition {} is already stored", req.upload_id(), req.partition()));
  }
  // This chunk's turn: the partition's chunks before it have reached its workers.
  const std::pair<uint32_t, uint64_t> turn{req.partition(), req.offset()};
  while (upload->second.nextOffset[req.partition()] != req.offset()) {
    if (req.offset() < upload->second.nextOffset[req.partition()]) {
      co_return makeError(ErrorCode::kInvalidArgument,
                          fmt::format("put {}: partition {} at offset {} was received already", req.upload_id(),
                                      req.partition(), req.offset()));
    }
    if (upload->second.turns.count(turn)) {
      co_return makeError(ErrorCode::kAlreadyExists,
                          fmt::format("put {}: a chunk of partition {} at offset {} is waiting already",
                                      req.upload_id(), req.partition(), req.offset()));
    }
    if (upload->second.turns.size() >= kMaxChunksWaiting) {
      co_return makeError(ErrorCode::kResourceExhausted,
                          fmt::format("put {}: {} chunks wait for the ones before them", req.upload_id(),
                                      upload->second.turns.size()));
    }
    auto flag = std::make_shared<coord::EventFlag>(server_.runtime().io().get_executor());
    upload->second.turns.emplace(turn, flag);
    const bool woken = co_await flag->waitFor(ctx.remaining());
    upload = uploads_.find(req.upload_id());
    if (upload == uploads_.end()) co_return droppedPut(req.upload_id());
    if (!woken) {
      upload->second.turns.erase(turn);
      co_return makeError(ErrorCode::kDeadlineExceeded,
                          fmt::format("put {}: partition {} at offset {}: the chunks before it did not arrive in time",
                                      req.upload_id(), req.partition(), req.offset()));
    }
  }
  upload->second.lastChunk = Clock::now();
  // Each partition is stored on two workers (one if the site has one), so a raw input
  // partition survives the loss of a VM.
  auto chosen = upload->second.targets.find(req.partition());
  if (chosen == upload->second.targets.end()) {
    // Only workers in the put's record: a master after this one must know every holder.
    std::vector<std::string> live;
    for (const auto& id : upload->second.workers) {
      if (auto w = workers_.find(id); w != workers_.end() && w->second.alive) live.push_back(id);
    }
    if (live.empty()) co_return makeError(ErrorCode::kUnavailable, "site " + config_.site + " has no live worker of the put left");
    std::vector<std::string> targets;
    uint64_t first = nextPut_++;
    for (size_t i = 0; i < std::min<size_t>(2, live.size()); ++i) targets.push_back(live[(first + i) % live.size()]);
    chosen = upload->second.targets.emplace(req.partition(), std::move(targets)).first;
  }
  // Copies: the upload may be dropped (by a failure of another chunk, or as idle) while this
  // call waits for a worker.
  const std::vector<std::string> targets = chosen->second;
  const std::string uploadId = req.upload_id();
  pb::WriteDatasetRequest write;
  write.set_dataset(req.dataset());
  write.set_upload_id(req.upload_id());
  write.set_partition(req.partition());
  write.set_offset(req.offset());
  write.set_data(req.data());
  write.set_last_chunk(req.last_chunk());
  write.set_residency_local(req.residency_local());
  std::vector<pb::WriteDatasetResponse> written;
  write.set_site(config_.site);
  for (const auto& workerId : targets) {
    write.set_worker_id(workerId);
    auto ep = net::Endpoint::parse(workers_[workerId].address);
    Result<pb::WriteDatasetResponse> r = ep.isOk() ? Result<pb::WriteDatasetResponse>(pb::WriteDatasetResponse())
                                                   : Result<pb::WriteDatasetResponse>(ep.error());
    if (ep) r = co_await server_.client(*ep)->call<rpc::Worker::WriteDataset>(write, ctx.remaining());
    if (!r) {
      auto error = r.error().prepend("storing partition " + std::to_string(req.partition()) + " on worker " + workerId);
      co_await abortUpload(uploadId, error.message);
      co_return error.prepend("put of dataset '" + req.dataset() + "' dropped (nothing registered)");
    }
    written.push_back(*r);
  }
  upload = uploads_.find(uploadId);
  if (upload == uploads_.end()) co_return droppedPut(uploadId);
  // The next chunk's turn.
  const uint64_t next = req.offset() + req.data().size();
  upload->second.nextOffset[req.partition()] = next;
  if (auto waiting = upload->second.turns.find({req.partition(), next}); waiting != upload->second.turns.end()) {
    waiting->second->set();
    upload->second.turns.erase(waiting);
  }
  pb::PutResponse resp;
  resp.set_worker_id(targets.front());
  resp.set_file(written.front().file());
  for (size_t i = 1; i < targets.size(); ++i) resp.add_replica_worker_ids(targets[i]);
  if (!req.last_chunk()) co_return resp;

  pb::DatasetPartition p;
  p.set_file(written.front().file());
  p.set_worker_id(targets.front());
  p.set_bytes(written.front().bytes());
  for (size_t i = 1; i < targets.size(); ++i) {
    auto* r = p.add_replicas();
    r->set_worker_id(targets[i]);
    r->set_file(written[i].file());
  }
  upload->second.stored[req.partition()] = std::move(p);
  if (upload->second.stored.size() < upload->second.partitions) co_return resp;
  // Every partition is stored: the dataset (or its new partitions) is published in one write.
  if (auto published = co_await publishUpload(uploadId); !published) {
    co_await abortUpload(uploadId, published.message());
    co_return published.error().prepend("put of dataset '" + req.dataset() + "' dropped (nothing registered)");
  }
  co_return resp;
}

awaitable<Status> Master::publishUpload(std::string uploadId) {
  auto upload = uploads_.find(uploadId);
  if (upload == uploads_.end()) co_return droppedPut(uploadId);
  const std::string dataset = upload->second.dataset;
  // One publisher per dataset at a time: two puts finishing together would each write the
  // record from the same old value. The other waits (bounded by its caller's deadline).
  while (publishing_.count(dataset) && !server_.stopping()) co_await server_.sleepFor(milliseconds(5));
  upload = uploads_.find(uploadId);
  if (upload == uploads_.end()) co_return droppedPut(uploadId);
  pb::SiteDataset ds;
  if (auto old = datasets_.find(dataset); old != datasets_.end()) ds = old->second;
  ds.set_name(dataset);
  ds.set_residency_local(upload->second.residencyLocal);
  size_t added = 0;
  for (auto& [index, part] : upload->second.stored) {
    auto* p = ds.add_partitions();
    *p = part;
    p->set_index(static_cast<uint32_t>(ds.partitions_size() - 1));
    // The record carries each copy's worker address too.
    added += p->ByteSizeLong() + 32 * (1 + static_cast<size_t>(p->replicas_size()));
  }
  const size_t record = siteInfo().ByteSizeLong() + added;
  if (record > config_.limits.max_site_record_bytes) {
    co_return makeError(ErrorCode::kInvalidArgument,
                        fmt::format("the site record of {} would be {} bytes, over the limit of {} "
                                    "(limits.max_site_record_bytes): put fewer partitions",
                                    config_.site, record, config_.limits.max_site_record_bytes));
  }
  publishing_.insert(dataset);
  auto path = siteDatasetsPath(config_.site) + "/" + dataset;
  auto bytes = ds.SerializeAsString();
  // The commit: the dataset's record and the end of the put's pending record in one
  // transaction, so a put is either registered or droppable by a later master, never both.
  Status written = Status::ok();
  auto exists = co_await server_.coordinator().exists(path);
  if (!exists) {
    written = exists.error().prepend("recording dataset " + dataset);
  } else {
    std::vector<coord::ZkOp> ops;
    ops.push_back(exists->has_value() ? coord::ZkOp::set(path, std::move(bytes), -1)
                                      : coord::ZkOp::create(path, std::move(bytes)));
    ops.push_back(coord::ZkOp::remove(sitePutPath(config_.site, uploadId)));
    auto committed = co_await server_.coordinator().multi(std::move(ops));
    if (!committed) written = committed.error().prepend("recording dataset " + dataset);
  }
  publishing_.erase(dataset);
  if (!written) co_return written;
  datasets_[dataset] = std::move(ds);
  uploads_.erase(uploadId);
  spdlog::info("dataset {}: put {} published", dataset, uploadId);
  (void)co_await publishSite();
  co_return Status::ok();
}

Error Master::droppedPut(const std::string& uploadId) const {
  for (const auto& [id, why] : droppedPuts_) {
    if (id == uploadId) return Error{ErrorCode::kNotFound, fmt::format("put {} was dropped: {}", uploadId, why)};
  }
  return Error{ErrorCode::kNotFound, "put " + uploadId + " is not in progress here (it failed or was dropped)"};
}

awaitable<void> Master::abortUpload(std::string uploadId, std::string why) {
  auto upload = uploads_.find(uploadId);
  if (upload == uploads_.end()) co_return;
  // Its other chunks, in flight or still coming, answer with the cause.
  droppedPuts_.emplace_back(uploadId, why.substr(0, 512));
  if (droppedPuts_.size() > kDroppedPutsKept) droppedPuts_.pop_front();
  // Taken out first: chunks still in flight find the put gone and stop.
  Upload dropped = std::move(upload->second);
  uploads_.erase(upload);
  for (auto& [turn, flag] : dropped.turns) flag->set();
  std::set<std::string> holders;
  for (const auto& [p, workers] : dropped.targets) holders.insert(workers.begin(), workers.end());
  pb::WriteDatasetRequest abort;
  abort.set_dataset(dropped.dataset);
  abort.set_upload_id(uploadId);
  abort.set_abort(true);
  bool allDropped = true;
  for (const auto& workerId : holders) {
    Status dropped = co_await dropPutFiles(workerId, abort);
    // A worker not reached keeps the put's pending record: orphanPutLoop tries it again.
    if (!dropped) {
      spdlog::warn("put {}: worker {} could not drop its files: {}", uploadId, workerId, dropped.message());
      allDropped = false;
    }
  }
  if (allDropped) {
    auto removed = co_await server_.coordinator().remove(sitePutPath(config_.site, uploadId), -1);
    if (!removed && removed.code() != ErrorCode::kNotFound) {
      spdlog::warn("put {}: cannot delete its pending record: {}", uploadId, removed.message());
    }
  }
  spdlog::warn("put {} of dataset {} dropped: {}", uploadId, dropped.dataset, why);
}

awaitable<Status> Master::dropPutFiles(std::string workerId, pb::WriteDatasetRequest abort) {
  abort.set_worker_id(workerId);  // the addressee: a worker refuses what is meant for another
  abort.set_site(config_.site);
  auto w = workers_.find(workerId);
  if (w == workers_.end() || !w->second.alive) co_return makeError(ErrorCode::kUnavailable, "not a live worker here");
  auto ep = net::Endpoint::parse(w->second.address);
  if (!ep) co_return ep.error();
  auto r = co_await server_.client(*ep)->call<rpc::Worker::WriteDataset>(abort, kPeerCallTimeout);
  if (!r) co_return r.error();
  co_return Status::ok();
}

awaitable<void> Master::orphanPutLoop() {
  // A put left by a master that died is found within a fraction of the idle timeout; its
  // workers may take longer to come back (the record waits for them).
  const auto period = milliseconds(std::clamp<uint32_t>(config_.put_idle_timeout_ms / 4, 100, 5000));
  while (!server_.stopping()) {
    auto names = co_await server_.coordinator().children(sitePutsPath(config_.site));
    if (!names && names.error().code != ErrorCode::kNotFound) spdlog::warn("listing pending puts: {}", names.message());
    for (const auto& name : names ? *names : std::vector<std::string>{}) {
      if (server_.stopping()) break;
      if (uploads_.count(name)) continue;  // in progress here
      co_await dropOrphanPut(name);
    }
    std::erase_if(orphanPutsWarned_, [&](const std::string& id) {
      return !names || std::find(names->begin(), names->end(), id) == names->end();
    });
    co_await server_.sleepFor(period);
  }
}

awaitable<void> Master::dropOrphanPut(std::string uploadId) {
  const std::string path = sitePutPath(config_.site, uploadId);
  // The node's name and content are read from ZooKeeper: checked before they name files.
  auto node = co_await server_.coordinator().get(path);
  if (!node) co_return;  // committed or dropped meanwhile, or unreadable now: next round
  auto pending = daemon::parseProto<pb::PendingPut>(node->data, path);
  Status valid = checkName("upload id", uploadId);
  if (valid && pending) valid = checkName("dataset", pending->dataset());
  if (!pending || !valid) {
    // Nothing can be dropped by it: its files (if any) cannot be named safely.
    spdlog::warn("deleting the malformed pending put {}: {}", path, pending ? valid.message() : pending.message());
    (void)co_await server_.coordinator().remove(path, node->stat.version);
    co_return;
  }
  pb::WriteDatasetRequest abort;
  abort.set_dataset(pending->dataset());
  abort.set_upload_id(uploadId);
  abort.set_abort(true);
  std::vector<std::string> waiting;
  for (const auto& workerId : pending->workers()) {
    // Only workers registered here are called (at their registered address).
    Status dropped = co_await dropPutFiles(workerId, abort);
    if (!dropped) waiting.push_back(fmt::format("{} ({})", workerId.substr(0, 64), dropped.message()));
  }
  if (!waiting.empty()) {
    if (orphanPutsWarned_.insert(uploadId).second) {
      spdlog::warn("put {} of dataset {} never committed (its master stopped); waiting for workers {} to drop its files",
                   uploadId, pending->dataset(), fmt::join(waiting, ", "));
    }
    co_return;
  }
  // At the version read: a record rewritten meanwhile is looked at again.
  Status removed = co_await server_.coordinator().remove(path, node->stat.version);
  if (!removed && removed.code() != ErrorCode::kNotFound) {
    spdlog::warn("put {}: cannot delete its pending record: {}", uploadId, removed.message());
    co_return;
  }
  spdlog::info("put {} of dataset {} never committed (its master stopped): its files are dropped on {} workers",
               uploadId, pending->dataset(), pending->workers_size());
}

awaitable<pb::KillResponse> Master::stopJobTasks(std::string jobId) {
  pb::KillJobTasksRequest req;
  req.set_job_id(jobId);
  std::vector<std::pair<std::string, std::string>> targets;
  for (const auto& [id, w] : workers_) {
    if (w.alive) targets.emplace_back(id, w.address);
  }
  pb::KillResponse resp;
  for (const auto& [id, address] : targets) {
    auto ep = net::Endpoint::parse(address);
    if (!ep) continue;
    auto client = server_.client(*ep);
    auto r = co_await client->call<rpc::Worker::KillJobTasks>(req, kPeerCallTimeout);
    if (!r) {
      spdlog::warn("worker {} could not stop the tasks of {}: {}", id, jobId, r.message());
      resp.add_unreachable(config_.site + "/" + id);
      continue;
    }
    resp.set_workers_reached(resp.workers_reached() + 1);
    resp.set_jms_killed(resp.jms_killed() + r->jms_killed());
    resp.set_executors_killed(resp.executors_killed() + r->executors_killed());
  }
  if (resp.jms_killed() > 0) jmWorker_.erase(jobId);
  co_return resp;
}

awaitable<void> Master::stopEndedJob(std::string jobId) { (void)co_await stopJobTasks(std::move(jobId)); }

void Master::replaceJmsOf(const std::string& workerId) {
  std::vector<std::string> jobs;
  for (const auto& [job, worker] : jmWorker_) {
    if (worker == workerId) jobs.push_back(job);
  }
  for (const auto& job : jobs) {
    jmReplacements_->inc({"worker_lost"});
    server_.spawn(replaceJm(job, false, ""), "replacing the JM of " + job);
  }
}

awaitable<void> Master::replaceJm(std::string jobId, bool crashed, std::string reason) {
  // Early recovery from a local signal (a dead child, missed heartbeats); the pJM's watch on
  // the JM's ephemeral node is the slower path that correctness rests on.
  jmWorker_.erase(jobId);
  if (crashed && ++jmCrashes_[jobId] > config_.max_jm_crashes) {
    // A JM that keeps failing (it logs why before it exits) would be restarted forever.
    reason = fmt::format("the JM of site {} exited with an error {} times, last: {} (its log: jm.log under the "
                         "job's directory on the worker)", config_.site, jmCrashes_[jobId], reason);
    auto ended = co_await store_->endJob(jobId, pb::JOB_FAILED, reason);
    if (ended) {
      spdlog::error("job {} failed: {}", jobId, reason);
      recordFailure(failures_, {daemon::nowUnixMs(), "job-failed", jobId, reason});
    } else if (ended.code() != ErrorCode::kInvalidArgument) {
      spdlog::warn("cannot fail job {}: {}", jobId, ended.message());
    }
    co_return;
  }
  pb::StartJmRequest req;
  req.set_job_id(jobId);
  req.set_role(pb::JM_SECONDARY);
  // The JMs of other sites join the election only once a primary has acted (epoch > 0): if
  // the first primary, ours as the submit site's, died before acting, its replacement must be
  // the first primary again, or no JM of the job would ever stand.
  auto status = co_await store_->status(jobId);
  auto epoch = co_await store_->epoch(jobId);
  const bool neverLed = status && epoch && status->value.submit_site() == config_.site && epoch->value == 0;
  if (neverLed) req.set_role(pb::JM_PRIMARY);
  net::CallContext local;
  auto r = co_await startJm(req, local);
  if (r) {
    spdlog::info("started a replacement JM for {} on {} ({})", jobId, r->worker_id(), neverLed ? "primary: the first one died before acting" : "secondary");
  } else if (r.error().code != ErrorCode::kInvalidArgument) {
    spdlog::warn("cannot replace the JM of {}: {}", jobId, r.message());
    recordFailure(failures_, {daemon::nowUnixMs(), "jm-not-replaced", jobId, r.message()});
  }
}

void Master::registerHttpPages() {
  for (const web::Asset& asset : web::assets()) {
    server_.httpGet(web::urlPathFor(asset.file),
                    [&asset](net::HttpRequest) -> awaitable<net::HttpResponse> {
                      co_return net::HttpResponse{std::string(web::contentTypeFor(asset.file)), std::string(asset.body),
                                                  200, {{"Cache-Control", "no-cache"}}};
                    });
  }
  server_.httpGet("/status", [this](net::HttpRequest request) -> awaitable<net::HttpResponse> {
    co_return co_await statusPage(std::move(request));
  });
}

awaitable<net::HttpResponse> Master::statusPage(net::HttpRequest request) {
  const auto plain = [](unsigned code, std::string text) {
    text += '\n';
    return net::HttpResponse{"text/plain; charset=utf-8", std::move(text), code, {}};
  };
  auto query = parseStatusQuery(request.query);
  if (!query) co_return plain(400, query.message());
  if (query->jobId && !config_.http_jobs) {
    co_return plain(403, fmt::format("site {} does not show jobs over HTTP (http_jobs: false; docs/security.md)",
                                     config_.site));
  }
  nlohmann::json j;
  j["site"] = config_.site;
  j["address"] = server_.address();
  j["workers"] = nlohmann::json::array();
  for (const auto& [id, w] : workers_) {
    j["workers"].push_back({{"id", id}, {"address", w.address}, {"containers", w.containers}, {"alive", w.alive}});
  }
  j["sub_jobs"] = nlohmann::json::array();
  for (const auto& [id, s] : subJobs_) {
    j["sub_jobs"].push_back({{"job_id", id}, {"desire", s.desire}, {"granted", grantsOf(id).size()}});
  }
  auto info = siteInfo();
  j["containers_total"] = info.containers_total();
  j["containers_free"] = info.containers_free();
  j["unix_ms"] = daemon::nowUnixMs();
  j["http_jobs"] = config_.http_jobs;
  j["failures"] = failuresJson(failures_, config_.http_jobs);
  // The federation: every live site's counts, as its own /status shows them.
  j["sites"] = nlohmann::json::array();
  auto sites = co_await liveSites();
  if (sites) {
    std::sort(sites->begin(), sites->end(), [](const auto& a, const auto& b) { return a.site() < b.site(); });
    for (const auto& site : *sites) j["sites"].push_back(siteJson(site));
  } else {
    j["sites_error"] = sites.message();
  }
  if (config_.http_jobs) {
    auto [jobs, total] = co_await pageJobs(query->jobs);
    j["jobs"] = std::move(jobs);
    j["jobs_total"] = total;
    if (query->jobId) {
      // The Status RPC's builder, with one page of the task map.
      pb::JobRequest req;
      req.set_job_id(*query->jobId);
      req.set_tasks(true);
      req.set_task_offset(query->taskOffset);
      req.set_task_limit(query->taskLimit);
      net::CallContext local;
      auto job = co_await status(req, local);
      if (!job) {
        co_return plain(job.error().code == ErrorCode::kNotFound ? 404 : 503,
                        fmt::format("job {}: {}", *query->jobId, job.message()));
      }
      auto running = co_await store_->runningTasks(*query->jobId);
      j["job"] = jobPageJson(*job, query->taskOffset, running ? *running : std::vector<TaskId>{});
    }
  }
  // Text from users and workers may hold invalid UTF-8: replaced, never a failed page.
  co_return net::HttpResponse{"application/json", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                              200, {{"Cache-Control", "no-store"}}};
}

awaitable<std::pair<nlohmann::json, std::size_t>> Master::pageJobs(uint32_t count) {
  const auto now = Clock::now();
  if (jobsPage_ && jobsPage_->count == count && now - jobsPage_->builtAt < std::chrono::seconds(1)) {
    co_return std::pair{jobsPage_->jobs, jobsPage_->total};
  }
  nlohmann::json jobs = nlohmann::json::array();
  auto ids = co_await store_->listJobs();
  if (!ids) co_return std::pair{std::move(jobs), std::size_t{0}};
  // Job ids are sequential and fixed-width: the newest sort last.
  std::sort(ids->begin(), ids->end(), std::greater<>());
  for (std::size_t i = 0; i < ids->size() && i < count; ++i) {
    const std::string& id = (*ids)[i];
    // A job whose state cannot be read is listed with the reason, as `tellus list` does:
    // leaving it out would hide exactly the job an operator needs to see (and kill).
    auto checked = co_await store_->checkedStatus(id);
    if (!checked) {
      if (checked.error().code == ErrorCode::kNotFound) continue;  // deleted since it was listed
      jobs.push_back(brokenJobJson(id, "unreadable", checked.message()));
      continue;
    }
    if (!checked->status) {
      jobs.push_back(brokenJobJson(id, "corrupt", checked->corrupt));
      continue;
    }
    pb::JobRequest req;
    req.set_job_id(id);
    auto job = co_await describeJob(std::move(req), std::move(*checked->status));
    if (job) {
      jobs.push_back(jobJson(*job));
    } else if (job.error().code != ErrorCode::kNotFound) {
      jobs.push_back(brokenJobJson(id, "unreadable", job.message()));
    }
  }
  jobsPage_ = JobsPage{now, count, jobs, ids->size()};
  co_return std::pair{std::move(jobs), ids->size()};
}

// ---- job order across sites (paper 001 §5): published queues ---------------------------------

std::vector<sched::PublishedQueue::Entry> Master::localQueue() const {
  std::vector<sched::PublishedQueue::Entry> out;
  out.reserve(subJobs_.size());
  for (const auto& [id, s] : subJobs_) {
    auto watched = watchedJobs_.find(id);
    const int64_t submitted = watched == watchedJobs_.end() ? 0 : watched->second.submitUnixMs;
    out.push_back({id, static_cast<double>(s.remainingTasks), submitted});
  }
  return out;
}

awaitable<Status> Master::publishQueue() {
  uint32_t containers = 0;
  for (const auto& [id, w] : workers_) {
    if (w.alive) containers += w.containers;
  }
  const std::string path = siteQueuePath(config_.site);
  std::vector<pb::SiteQueue::Lease> leases;
  const auto now = Clock::now();
  for (const auto& [key, holder] : slots_) {
    if (holder.empty()) continue;
    pb::SiteQueue::Lease lease;
    lease.set_job_id(holder);
    lease.set_worker_id(key.first);
    lease.set_slot(key.second);
    const auto left = std::chrono::duration_cast<milliseconds>(leases_.endOf(key, now) - now).count();
    lease.set_ends_in_ms(static_cast<uint32_t>(std::clamp<int64_t>(left, 0, kMaxQueueLeaseMs)));
    leases.push_back(std::move(lease));
  }
  std::string data = buildSiteQueue(config_.site, daemon::nowUnixMs(), containers, localQueue(), kMaxQueueJobs,
                                    std::move(leases))
                         .SerializeAsString();
  // Rewritten every period even when unchanged: the timestamp is what tells readers it is alive.
  const int64_t session = server_.coordinator().sessionId();
  if (session != 0 && session == queueSession_) {
    auto set = co_await server_.coordinator().set(path, data, -1);
    if (set || set.error().code != ErrorCode::kNotFound) co_return set.status();
  }
  auto stat = co_await server_.coordinator().exists(path);
  if (!stat) co_return stat.status();
  if (*stat && (*stat)->ephemeralOwner != session) {
    // Left by this site's previous master process whose session has not expired yet.
    if (Status removed = co_await server_.coordinator().remove(path); !removed && removed.code() != ErrorCode::kNotFound) {
      co_return removed;
    }
    *stat = std::nullopt;
  }
  if (*stat) {
    auto set = co_await server_.coordinator().set(path, data, -1);
    if (!set) co_return set.status();
  } else {
    if (Status parent = co_await server_.coordinator().ensurePath(sitePath(config_.site)); !parent) co_return parent;
    auto created = co_await server_.coordinator().create(path, data, coord::CreateMode::kEphemeral);
    if (!created) co_return created.status();
  }
  queueSession_ = session;
  co_return Status::ok();
}

awaitable<void> Master::queueLoop() {
  while (!server_.stopping()) {
    co_await server_.sleepFor(milliseconds(config_.queue_publish_ms));
    if (server_.stopping()) break;
    noteStaleQueues();
    // Without a session nothing can be published (the outage is logged once by the server).
    if (!server_.zookeeperAvailable()) continue;
    if (Status st = co_await publishQueue(); !st) spdlog::warn("publishing the site's queue: {}", st.message());
  }
}

Status Master::watchSiteQueues() {
  auto sub = server_.coordinator().watchChildren(sitesPath(), [this](const std::vector<std::string>& sites) { onSites(sites); });
  if (!sub) return sub.error();
  subscriptions_.push_back(std::move(sub).value());
  return {};
}

void Master::onSites(const std::vector<std::string>& sites) {
  // Children of /sites are names other masters created: checked, and their number bounded.
  constexpr std::size_t kMaxWatchedSites = 1024;
  std::set<std::string> current;
  for (const auto& site : sites) {
    if (site == config_.site || !config::isSiteId(site) || site.size() > kMaxNameBytes) continue;
    if (current.size() >= kMaxWatchedSites) break;
    current.insert(site);
  }
  std::erase_if(remoteQueues_, [&](const auto& kv) { return !current.count(kv.first); });
  std::erase_if(staleQueues_, [&](const std::string& site) { return !current.count(site); });
  for (const auto& site : current) {
    if (remoteQueues_.count(site)) continue;
    remoteQueues_[site];  // before subscribing: the watch may report the current value at once
    auto sub = server_.coordinator().watchData(siteQueuePath(site), [this, site](const std::optional<coord::NodeData>& node) {
      auto it = remoteQueues_.find(site);
      if (it == remoteQueues_.end()) return;
      it->second.queue.reset();
      if (!node) return;  // no master there, or one that publishes no queue: an empty queue
      auto queue = decodeSiteQueue(node->data, site);
      if (!queue) {
        if (queue.message() != it->second.lastError) {
          spdlog::warn("ignoring the queue of site {}: {}", site, queue.message());
          it->second.lastError = queue.message();
        }
        return;
      }
      it->second.lastError.clear();
      it->second.queue = std::move(queue).value();
    });
    if (!sub) {
      spdlog::warn("watching the queue of site {}: {}", site, sub.message());
      remoteQueues_.erase(site);
      continue;
    }
    remoteQueues_[site].watch = std::move(sub).value();
  }
}

void Master::noteStaleQueues() {
  const int64_t now = daemon::nowUnixMs();
  for (const auto& [site, remote] : remoteQueues_) {
    const bool stale = remote.queue && sched::queueStale(*remote.queue, now, config_.queue_stale_ms);
    if (stale && staleQueues_.insert(site).second) {
      spdlog::warn("the queue site {} published is {} ms old (queue_stale_ms {}): it counts as empty in the job order "
                   "until it is republished",
                   site, now - remote.queue->publishedUnixMs, config_.queue_stale_ms);
      staleQueueEvents_->inc({site});
    } else if (!stale && staleQueues_.erase(site) > 0) {
      spdlog::info("the queue of site {} is {} again", site, remote.queue ? "fresh" : "gone");
    }
  }
}

std::vector<std::size_t> Master::jobOrderOf(const std::vector<sched::SubJobShare>& shares) const {
  // With at most one sub-job wanting containers every order is the same: skip the ranking
  // (SWAG's is quadratic in the jobs of all queues).
  std::size_t wanting = 0;
  for (const auto& share : shares) wanting += share.allocated < share.desire ? 1 : 0;
  if (wanting < 2) return {};
  const int64_t now = daemon::nowUnixMs();
  std::vector<sched::PublishedQueue> queues;
  queues.reserve(remoteQueues_.size() + 1);
  sched::PublishedQueue local;
  local.site = config_.site;
  local.publishedUnixMs = now;
  for (const auto& [id, w] : workers_) {
    if (w.alive) local.slots += w.containers;
  }
  local.jobs = localQueue();
  queues.push_back(std::move(local));
  for (const auto& [site, remote] : remoteQueues_) {
    if (remote.queue) queues.push_back(*remote.queue);
  }
  const sched::FederationOrder order =
      sched::federationOrder(config_.site, queues, config_.job_order, now, config_.queue_stale_ms);
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < shares.size(); ++i) index.emplace(shares[i].id, i);
  std::vector<std::size_t> out;
  out.reserve(order.jobs.size());
  for (const auto& id : order.jobs) {
    if (auto it = index.find(id); it != index.end()) out.push_back(it->second);
  }
  return out;
}

int run(const std::string& configPath) {
  return daemon::runDaemon<Master, config::MasterConfig>(
      "tellus-master", configPath, config::loadMasterConfig,
      [](const config::MasterConfig& c) { return "master/" + c.site; });
}

}  // namespace tellus::master
