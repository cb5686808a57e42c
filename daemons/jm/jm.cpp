#include "jm/jm.h"

#include <unistd.h>

#include <algorithm>

#include "daemon/zookeeper.h"
#include "job/spec.h"
#include "jobstate/paths.h"
#include "jobstate/placement.h"
#include "sched/parades.h"
#include "util/log.h"

namespace tellus::jm {

namespace asio = boost::asio;
using asio::awaitable;
using std::chrono::milliseconds;
using namespace tellus::jobstate;

namespace {

constexpr milliseconds kTick{100};
// A safety net under the running-markers watch (see start()).
constexpr milliseconds kMarkerRereadInterval{1000};
constexpr milliseconds kMasterCallTimeout{2000};
constexpr milliseconds kTaskTimeout{std::chrono::hours(6)};
// A JM that has never appeared gets this long to start before the primary asks again.
constexpr auto kJmGrace = std::chrono::seconds(2);
constexpr auto kJmRequestInterval = std::chrono::seconds(5);
constexpr uint32_t kDefaultMaxAttempts = 4;


std::string slotKeyOf(const pb::ContainerId& id) { return id.worker_id() + "/" + std::to_string(id.slot()); }

std::string taskName(uint32_t s, uint32_t t) { return std::to_string(s) + "/" + std::to_string(t); }

constexpr auto kStealInterval = milliseconds(300);
constexpr milliseconds kStealCallTimeout{2000};

}  // namespace

double JobManager::Slot::used() const {
  double u = 0;
  for (const auto& [id, share] : tasks) u += share;
  return u;
}

JobManager::JobManager(daemon::Runtime& runtime, config::JmConfig config)
    : runtime_(runtime),
      config_(std::move(config)),
      server_(runtime.io().get_executor()),
      clients_(runtime.io().get_executor()) {}

JobManager::~JobManager() { stop(); }

Status JobManager::start() {
  server_.handle<pb::StealRequest, pb::StealResponse>(
      "jm.Steal", [this](pb::StealRequest r, net::CallContext c) { return giveWork(std::move(r), c); });
  server_.handle<pb::ContainerUsageReport, pb::Empty>(
      "jm.ContainerUsage", std::function<Result<pb::Empty>(const pb::ContainerUsageReport&)>(
                               [this](const pb::ContainerUsageReport& r) { return recordUsage(r); }));
  server_.handle<pb::JmUpdateResponse, pb::Empty>(
      "jm.Grants", std::function<Result<pb::Empty>(const pb::JmUpdateResponse&)>([this](const pb::JmUpdateResponse& g) {
        applyGrants(g);
        launchTasks();
        return Result<pb::Empty>(pb::Empty());
      }));
  auto listen = net::Endpoint::parse(config_.listen);
  if (!listen) return listen.status().prepend("listen");
  auto port = server_.start(*listen);
  if (!port) return port.status().prepend("listen on " + config_.listen);
  address_ = listen->host + ":" + std::to_string(*port);

  auto zk = daemon::connectZooKeeper(runtime_.io().get_executor(), config_.zookeeper);
  if (!zk) return zk.status().prepend("zookeeper");
  zk_ = std::move(zk).value();
  subscriptions_.push_back(zk_->onSessionEvent([this](coord::SessionEvent e) {
    spdlog::info("zookeeper session: {}", coord::toString(e));
    // Without a session we cannot know whether someone else is primary now: stop acting as
    // one at once; the loop re-registers and rejoins the election on the new session.
    if (e == coord::SessionEvent::kExpired) {
      stepDown("session expired");
      sessionLost_ = true;
    }
  }));
  // Running markers are re-read only when the set changes (a marker is written once per attempt
  // and removed at its end, so every change moves the directory's pzxid and fires this watch);
  // re-reading them every tick cost one ZooKeeper read per task running anywhere in the job.
  auto markersWatch = zk_->watchChildren(runningPath(config_.job_id),
                                         [this](const std::vector<std::string>&) { markersChanged_ = true; });
  if (!markersWatch) return markersWatch.status().prepend("watching running markers");
  subscriptions_.push_back(std::move(markersWatch).value());
  spdlog::info("JM of job {} at site {} ({}) serving on {}", config_.job_id, config_.site,
               config_.primary ? "started as primary" : "started as secondary", address_);
  runtime_.spawn(mainLoop(), "job manager loop");
  return {};
}

void JobManager::stop() {
  if (stopping_) return;
  stopping_ = true;
  subscriptions_.clear();
  server_.stop();
  clients_.closeAll();
  if (zk_) zk_->close();
}

void JobManager::stepDown(const std::string& why) {
  if (primary_) spdlog::warn("no longer primary: {}", why);
  primary_ = false;
  epochVersion_ = -1;
}

awaitable<Status> JobManager::loadJob() {
  auto spec = co_await zk_->get(specPath(config_.job_id));
  if (!spec) co_return spec.status().prepend("job " + config_.job_id);
  auto parsed = daemon::parseProto<pb::JobSpec>(spec->data, specPath(config_.job_id));
  if (!parsed) co_return parsed.status();
  view_.jobId = config_.job_id;
  view_.spec = *parsed;
  view_.stages.assign(static_cast<size_t>(parsed->stages_size()), StageView{});
  for (uint32_t s = 0; s < view_.stages.size(); ++s) {
    if (!isDatasetStage(view_.spec, s)) continue;
    auto inputs = co_await zk_->get(inputsPath(config_.job_id, s));
    if (!inputs) co_return inputs.status().prepend("inputs of stage " + std::to_string(s));
    auto p = daemon::parseProto<pb::StageInputs>(inputs->data, inputsPath(config_.job_id, s));
    if (!p) co_return p.status();
    view_.stages[s].inputs = *p;
  }
  loaded_ = true;
  co_return Status::ok();
}

awaitable<Status> JobManager::refresh() {
  auto st = co_await zk_->get(statusPath(config_.job_id));
  if (!st) co_return st.status();
  auto parsed = daemon::parseProto<pb::JobStatus>(st->data, statusPath(config_.job_id));
  if (!parsed) co_return parsed.status();
  status_ = *parsed;
  statusVersion_ = st->stat.version;
  // Running markers first, outputs second: a worker records a task's output before it drops
  // the marker, so a task cannot fall between the two readings and look neither running nor
  // done.
  // Only names new since the last listing are read. A marker removed and written again under
  // the same name (a retry) between two listings would keep its old content, so every
  // kMarkerRereadInterval all are read again; that also bounds how long a change can go unseen
  // while the watch is being re-armed after a reconnect.
  const auto now = Clock::now();
  const bool full = now - markersReadAt_ >= kMarkerRereadInterval;
  if (markersChanged_ || full) {
    markersChanged_ = false;  // before reading: a change during the reads marks them stale again
    auto markerNames = co_await zk_->children(runningPath(config_.job_id));
    if (markerNames) {
      std::map<TaskId, pb::RunningTask> markers;
      for (const auto& name : *markerNames) {
        auto parsed = parseTaskName(name);
        if (!parsed) continue;
        const TaskId id = *parsed;
        if (auto known = markers_.find(id); !full && known != markers_.end()) {
          markers.insert(*known);
          continue;
        }
        auto node = co_await zk_->get(runningTaskPath(config_.job_id, id.first, id.second));
        if (!node) continue;
        auto marker = daemon::parseProto<pb::RunningTask>(node->data, name);
        if (marker) markers[id] = *marker;
      }
      markers_ = std::move(markers);
      if (full) markersReadAt_ = now;
    } else {
      markersChanged_ = true;
    }
  }
  for (uint32_t s = 0; s < view_.stages.size(); ++s) {
    auto& stage = view_.stages[s];
    auto tm = co_await zk_->get(taskmapPath(config_.job_id, s));
    if (tm) {
      auto map = daemon::parseProto<pb::TaskMap>(tm->data, taskmapPath(config_.job_id, s));
      if (!map) co_return map.status();
      stage.taskmap = *map;
      stage.taskmapVersion = tm->stat.version;
    } else if (tm.error().code != ErrorCode::kNotFound) {
      co_return tm.status();
    }
    if (!stage.taskmap) continue;
    auto names = co_await zk_->children(partsPath(config_.job_id, s));
    if (!names) co_return names.status();
    std::set<uint32_t> present;
    for (const auto& name : *names) {
      auto t = static_cast<uint32_t>(std::stoul(name));
      present.insert(t);
      if (stage.parts.count(t)) continue;
      auto node = co_await zk_->get(partPath(config_.job_id, s, t));
      if (!node) continue;  // removed meanwhile (lineage recovery)
      auto loc = daemon::parseProto<pb::PartitionLocation>(node->data, partPath(config_.job_id, s, t));
      if (loc) stage.parts[t] = *loc;
    }
    // A part removed from ZooKeeper (its only copy was lost) must be recomputed. Only parts an
    // earlier listing saw are forgotten: one our own task just recorded may be newer than this
    // listing.
    auto& listed = listedParts_[s];
    std::erase_if(stage.parts, [&](const auto& kv) { return listed.count(kv.first) && !present.count(kv.first); });
    listed = std::move(present);
  }
  // A marker that outlives its task's recorded output (its worker lost the connection while
  // removing it) no longer means the task or its container is busy.
  runningElsewhere_.clear();
  for (const auto& [id, marker] : markers_) {
    if (running_.count(id)) continue;
    if (id.first < view_.stages.size() && view_.stages[id.first].parts.count(id.second)) continue;
    runningElsewhere_[id] = marker;
  }
  if (registered_) {
    auto mine = co_await zk_->exists(jmPath(config_.job_id, config_.site));
    if (mine && (!*mine || (*mine)->ephemeralOwner != zk_->sessionId())) registered_ = false;
  }
  co_return Status::ok();
}

awaitable<Status> JobManager::registerSelf() {
  pb::JmInfo info;
  info.set_site(config_.site);
  info.set_address(address_);
  info.set_role(primary_ ? pb::JM_PRIMARY : pb::JM_SECONDARY);
  info.set_epoch(epoch_);
  info.set_worker_id(config_.worker_id);
  info.set_pid(static_cast<int64_t>(::getpid()));
  info.set_desire(desire_);
  info.set_granted(static_cast<uint32_t>(slots_.size()));
  publishedDesire_ = info.desire();
  publishedGranted_ = info.granted();
  auto path = jmPath(config_.job_id, config_.site);
  auto stat = co_await zk_->exists(path);
  if (!stat) co_return stat.status();
  if (*stat && (*stat)->ephemeralOwner == zk_->sessionId()) {
    auto set = co_await zk_->set(path, info.SerializeAsString(), -1);
    co_return set.status();
  }
  if (*stat) {
    if (everRegistered_) {
      // We lost our session and the site got a new JM meanwhile: it is the JM now.
      spdlog::warn("replaced by another JM of site {}: exiting", config_.site);
      stop();
      runtime_.shutdown();
      co_return makeError(ErrorCode::kConflict, "replaced");
    }
    // The node of this site's previous JM, whose session has not expired yet: we replace it.
    (void)co_await zk_->remove(path);
  }
  auto created = co_await zk_->create(path, info.SerializeAsString(), coord::CreateMode::kEphemeral);
  if (!created) co_return created.status();
  registered_ = true;
  everRegistered_ = true;
  co_return Status::ok();
}

awaitable<bool> JobManager::takeOverEpoch() {
  auto node = co_await zk_->get(epochPath(config_.job_id));
  if (!node) co_return false;
  uint64_t previous = std::strtoull(node->data.c_str(), nullptr, 10);
  // Only while the job's status is the one this JM last read: a primary that finished the job
  // and exited since leaves the election to us, but there is nothing left to take over.
  std::vector<coord::ZkOp> ops{coord::ZkOp::check(statusPath(config_.job_id), statusVersion_),
                               coord::ZkOp::set(epochPath(config_.job_id), std::to_string(previous + 1), node->stat.version)};
  auto done = co_await zk_->multi(std::move(ops));
  if (!done || done->size() != 2 || !(*done)[1].stat) co_return false;
  epoch_ = previous + 1;
  epochVersion_ = (*done)[1].stat->version;
  co_return true;
}

awaitable<void> JobManager::elect() {
  auto electionDir = electionPath(config_.job_id);
  if (electionNode_.empty()) {
    // A secondary joins only once a primary has acted (epoch > 0), so the JM the submitting
    // master started is the first primary, as in HOUTU.
    if (!config_.primary) {
      auto node = co_await zk_->get(epochPath(config_.job_id));
      if (!node || node->data == "0") co_return;
    }
    auto created = co_await zk_->create(electionDir + "/n_", config_.site, coord::CreateMode::kEphemeralSequential);
    if (!created) co_return;
    electionNode_ = created->substr(created->rfind('/') + 1);
  }
  auto contenders = co_await zk_->children(electionDir);
  if (!contenders) co_return;
  if (std::find(contenders->begin(), contenders->end(), electionNode_) == contenders->end()) {
    // Our node went with an expired session.
    electionNode_.clear();
    stepDown("left the election");
    co_return;
  }
  // Sequence numbers have a fixed width, so the smallest name is the lowest number.
  const auto& leader = *std::min_element(contenders->begin(), contenders->end());
  if (leader != electionNode_ || primary_) co_return;
  bool tookOver = co_await takeOverEpoch();
  if (!tookOver) co_return;
  primary_ = true;
  spdlog::info("primary of job {} with epoch {}", config_.job_id, epoch_);
  (void)co_await registerSelf();  // publish the role change
}

awaitable<Status> JobManager::fencedWrite(std::vector<coord::ZkOp> ops) {
  if (!primary_) co_return makeError(ErrorCode::kConflict, "not primary");
  ops.insert(ops.begin(), coord::ZkOp::check(epochPath(config_.job_id), epochVersion_));
  auto r = co_await zk_->multi(std::move(ops));
  if (!r && r.error().code == ErrorCode::kConflict) stepDown("fenced by a newer epoch: " + r.message());
  co_return r.status();
}

awaitable<void> JobManager::ensureJms() {
  auto present = co_await zk_->children(jmsPath(config_.job_id));
  if (!present) co_return;
  auto now = Clock::now();
  for (const auto& site : status_.sites()) {
    if (site == config_.site) continue;
    if (std::find(present->begin(), present->end(), site) != present->end()) {
      jmMissingSince_.erase(site);
      continue;
    }
    auto since = jmMissingSince_.try_emplace(site, now).first->second;
    auto asked = jmRequestedAt_.find(site);
    if (now - since < kJmGrace || (asked != jmRequestedAt_.end() && now - asked->second < kJmRequestInterval)) continue;
    jmRequestedAt_[site] = now;
    auto live = co_await zk_->get(siteLivePath(site));
    if (!live) {
      spdlog::warn("site {} has no JM and no live master", site);
      continue;
    }
    auto info = daemon::parseProto<pb::SiteInfo>(live->data, siteLivePath(site));
    if (!info) continue;
    auto ep = net::Endpoint::parse(info->master_address());
    if (!ep) continue;
    pb::StartJmRequest req;
    req.set_job_id(config_.job_id);
    req.set_role(pb::JM_SECONDARY);
    spdlog::warn("site {} has no JM: asking its master for one", site);
    auto r = co_await clients_.get(*ep)->call<pb::StartJmResponse>("master.StartJm", req, kMasterCallTimeout);
    if (!r) spdlog::warn("site {} could not start a JM: {}", site, r.message());
  }
}

awaitable<void> JobManager::recomputeLostOutputs() {
  std::set<std::string> live;
  for (const auto& site : status_.sites()) {
    auto workers = co_await zk_->children(siteWorkersPath(site));
    if (!workers) co_return;  // unsure: decide nothing
    live.insert(workers->begin(), workers->end());
  }
  const auto stages = static_cast<uint32_t>(view_.stages.size());
  for (uint32_t u = 0; u < stages; ++u) {
    bool needed = u + 1 == stages;  // the job's result
    for (uint32_t d : job::downstreamStages(view_.spec, u)) needed = needed || !stageDone(view_, d);
    if (!needed) continue;
    for (const auto& [t, loc] : view_.stages[u].parts) {
      if (live.count(loc.worker_id())) continue;
      spdlog::warn("output of task {} was only on dead worker {}: recomputing it", taskName(u, t), loc.worker_id());
      std::vector<coord::ZkOp> ops{coord::ZkOp::remove(partPath(config_.job_id, u, t))};
      auto st = co_await fencedWrite(std::move(ops));
      if (!st) co_return;
    }
  }
}

awaitable<void> JobManager::primaryDuties() {
  co_await recomputeLostOutputs();
  if (!primary_) co_return;
  for (uint32_t s : releasableStages(view_)) {
    std::vector<pb::SiteInfo> infos;
    for (const auto& site : status_.sites()) {
      pb::SiteInfo info;
      info.set_site(site);
      auto live = co_await zk_->get(siteLivePath(site));
      if (live) {
        auto parsed = daemon::parseProto<pb::SiteInfo>(live->data, siteLivePath(site));
        if (parsed) info = *parsed;
      }
      infos.push_back(std::move(info));
    }
    auto sites = siteCapacities(infos);
    auto map = initialTaskMap(view_, s, view_.spec.placement().empty() ? "proportional" : view_.spec.placement(), sites);
    if (!map) {
      co_await failJob("placing stage " + view_.spec.stages(static_cast<int>(s)).name() + ": " + map.message());
      co_return;
    }
    map->set_epoch(epoch_);
    // (A named vector: GCC 12 miscompiles an initializer list inside co_await.)
    std::vector<coord::ZkOp> ops{coord::ZkOp::create(taskmapPath(config_.job_id, s), map->SerializeAsString())};
    auto st = co_await fencedWrite(std::move(ops));
    if (!st && st.code() != ErrorCode::kAlreadyExists) {
      spdlog::warn("releasing stage {}: {}", s, st.message());
      co_return;
    }
    view_.stages[s].taskmap = *map;
    view_.stages[s].taskmapVersion = 0;
    std::map<std::string, int> counts;
    for (const auto& o : map->owner_site()) ++counts[o];
    std::string summary;
    for (const auto& [site, n] : counts) summary += " " + site + ":" + std::to_string(n);
    spdlog::info("released stage {} ({} tasks):{}", view_.spec.stages(static_cast<int>(s)).name(),
                 map->owner_site_size(), summary);
  }
  if (jobDone(view_) && status_.state() == pb::JOB_RUNNING) {
    pb::JobStatus done = status_;
    done.set_state(pb::JOB_SUCCEEDED);
    done.set_finish_unix_ms(daemon::nowUnixMs());
    std::vector<coord::ZkOp> ops{coord::ZkOp::set(statusPath(config_.job_id), done.SerializeAsString(), -1)};
    auto st = co_await fencedWrite(std::move(ops));
    if (st) {
      status_ = done;
      spdlog::info("job {} succeeded in {} ms", config_.job_id, done.finish_unix_ms() - done.submit_unix_ms());
    }
    co_return;
  }
  co_await ensureJms();
}

awaitable<void> JobManager::failJob(std::string reason) {
  spdlog::error("job {} failed: {}", config_.job_id, reason);
  for (int tries = 0; tries < 5; ++tries) {
    auto node = co_await zk_->get(statusPath(config_.job_id));
    if (!node) co_return;
    auto st = daemon::parseProto<pb::JobStatus>(node->data, statusPath(config_.job_id));
    if (!st || isTerminal(st->state())) co_return;
    st->set_state(pb::JOB_FAILED);
    st->set_error(reason);
    st->set_finish_unix_ms(daemon::nowUnixMs());
    auto set = co_await zk_->set(statusPath(config_.job_id), st->SerializeAsString(), node->stat.version);
    if (set) co_return;
  }
}

awaitable<void> JobManager::exchangeWithMaster() {
  auto master = net::Endpoint::parse(config_.master);
  if (!master) co_return;
  // Work this sub-job still has: its unfinished tasks of released stages.
  size_t unfinished = 0;
  for (uint32_t s = 0; s < view_.stages.size(); ++s) unfinished += unfinishedTasks(view_, s, config_.site).size();
  // Work this JM could steal: other sites' tasks that are neither done nor running. While there
  // is some, a JM keeps at least a container to steal with even when it owns no task.
  size_t stealable = 0;
  if (!view_.spec.no_stealing()) {
    for (uint32_t s = 0; s < view_.stages.size(); ++s) {
      const auto& stage = view_.stages[s];
      if (!stage.taskmap) continue;
      for (int t = 0; t < stage.taskmap->owner_site_size(); ++t) {
        TaskId id{s, static_cast<uint32_t>(t)};
        if (stage.taskmap->owner_site(t) != config_.site && !stage.parts.count(id.second) &&
            !runningElsewhere_.count(id)) {
          ++stealable;
        }
      }
    }
  }

  auto now = Clock::now();
  if (sampleCount_ == 0 || now - lastAf_ >= milliseconds(config_.period_ms)) {
    sched::AfObservation obs;
    obs.allocation = static_cast<double>(slots_.size());
    obs.utilization = sampleCount_ > 0 ? busySamples_ / sampleCount_ : 0.0;
    obs.hasWaitingTasks = hadWaiting_;
    // Af's own state is not capped by the work at hand (the request below is): a stage that
    // drains must not make the next one ramp up from a single container again.
    af_ = sched::afDesire(af_, obs, sched::AfParams{});
    lastAf_ = now;
    busySamples_ = sampleCount_ = 0;
    hadWaiting_ = false;
  }
  size_t useful = unfinished + std::min<size_t>(stealable, 1 + unfinished);
  int desire = static_cast<int>(std::min<size_t>(static_cast<size_t>(sched::afContainerRequest(af_)), useful));
  if (view_.spec.static_containers() > 0) {
    // Static allocation (the baseline HOUTU compares Af against): hold N for the whole job.
    desire = static_cast<int>(view_.spec.static_containers());
  }

  desire_ = static_cast<uint32_t>(desire);
  pb::JmUpdateRequest req;
  req.set_job_id(config_.job_id);
  req.set_jm_address(address_);
  req.set_desire(desire_);
  // When the desire drops, give back idle containers first.
  int excess = static_cast<int>(slots_.size()) - desire;
  for (auto it = slots_.begin(); it != slots_.end() && excess > 0;) {
    if (it->second.tasks.empty()) {
      *req.add_release() = it->second.container.id();
      it = slots_.erase(it);
      --excess;
    } else {
      ++it;
    }
  }
  auto resp = co_await clients_.get(*master)->call<pb::JmUpdateResponse>("master.JmUpdate", req, kMasterCallTimeout);
  if (!resp) {
    spdlog::warn("master {} unreachable: {}", config_.master, resp.message());
    co_return;
  }
  applyGrants(*resp);
  if (!slots_.empty()) {
    // Utilization: measured CPU where the worker reported it, else the occupied share.
    double busy = 0;
    for (const auto& [k, slot] : slots_) {
      if (!slot.tasks.empty()) busy += std::min(1.0, slot.cpu >= 0 ? slot.cpu : slot.used());
    }
    busySamples_ += busy / static_cast<double>(slots_.size());
    sampleCount_ += 1;
  }
}

void JobManager::applyGrants(const pb::JmUpdateResponse& grants) {
  std::set<std::string> granted;
  for (const auto& c : grants.granted()) {
    auto key = slotKeyOf(c.id());
    granted.insert(key);
    slots_.try_emplace(key, Slot{c, {}, -1});
  }
  // A revoked container goes once its tasks are done.
  std::erase_if(slots_, [&](const auto& kv) { return !granted.count(kv.first) && kv.second.tasks.empty(); });
}

Result<pb::Empty> JobManager::recordUsage(const pb::ContainerUsageReport& report) {
  for (const auto& u : report.usage()) {
    auto it = slots_.find(slotKeyOf(u.id()));
    if (it == slots_.end()) continue;
    it->second.cpu = u.cpu();
    // What one task of each stage running here uses, smoothed: lets Parades pack tasks that
    // leave most of a container idle (I/O-bound) and keep CPU-bound ones one per container.
    if (!it->second.tasks.empty() && u.running_tasks() > 0) {
      // At most four tasks per container: on a busy host the measured share is what a task
      // got, not what it needs, and packing on it alone would over-pack.
      double perTask = std::clamp(u.cpu() / static_cast<double>(u.running_tasks()), 0.25, 1.0);
      for (const auto& [id, share] : it->second.tasks) {
        auto [entry, fresh] = stageShare_.try_emplace(id.first, perTask);
        if (!fresh) entry->second = 0.7 * entry->second + 0.3 * perTask;
      }
    }
  }
  return pb::Empty();
}

double JobManager::taskShare(uint32_t s) const {
  auto it = stageShare_.find(s);
  // Round up to tenths so that rounding noise does not over-pack a container.
  return it == stageShare_.end() ? 1.0 : std::min(1.0, std::ceil(it->second * 10) / 10);
}

void JobManager::launchTasks() {
  // The tasks this site owns that can run now, as Parades sees them.
  std::vector<sched::WaitingTask> waiting;
  std::map<std::string, TaskId> byId;
  auto now = Clock::now();
  for (uint32_t s = 0; s < view_.stages.size(); ++s) {
    double meanS = 0;
    for (const auto& [t, loc] : view_.stages[s].parts) meanS += loc.elapsed_s();
    if (!view_.stages[s].parts.empty()) meanS /= static_cast<double>(view_.stages[s].parts.size());
    for (uint32_t t : unfinishedTasks(view_, s, config_.site)) {
      TaskId id{s, t};
      if (running_.count(id) || runningElsewhere_.count(id) || beingStolen_.count(id)) continue;
      auto backoff = notBefore_.find(id);
      if (backoff != notBefore_.end() && now < backoff->second) continue;
      auto inputs = taskInputs(view_, s, t);
      if (!inputs) continue;  // an upstream output is being recomputed
      auto since = waitingSince_.try_emplace(id, now).first->second;
      sched::WaitingTask w;
      w.id = taskName(s, t);
      for (const auto& in : *inputs) {
        if (in.site() != config_.site) continue;
        w.preferredNodes.push_back(in.worker_id());
        for (const auto& r : in.replicas()) w.preferredNodes.push_back(r.worker_id());
      }
      w.preferredRacks.push_back(config_.site);
      w.waitS = std::chrono::duration<double>(now - since).count();
      w.processingS = meanS;
      w.resource = taskShare(s);
      byId[w.id] = id;
      waiting.push_back(std::move(w));
    }
  }
  if (!waiting.empty()) hadWaiting_ = true;
  // Containers we inherited that still run a task launched by our predecessor.
  std::set<std::string> busyElsewhere;
  for (const auto& [id, marker] : runningElsewhere_) busyElsewhere.insert(slotKeyOf(marker.container()));
  size_t idle = 0;
  for (auto& [key, slot] : slots_) {
    if (busyElsewhere.count(key)) continue;
    double free = std::max(0.0, 1.0 - slot.used());
    if (waiting.empty()) {
      if (slot.used() <= 0.5) ++idle;  // room for more work, and nothing of ours waits
      continue;
    }
    // Parades on this container update: node-local first, then rack-local after τ·p, then
    // anywhere after 2τ·p; several tasks while the container has room.
    sched::ContainerUpdate update{key, slot.container.id().worker_id(), config_.site, free};
    auto decision = sched::paradesOnUpdate(waiting, update, sched::ParadesParams{});
    for (const auto& launch : decision.launches) {
      TaskId id = byId[launch.taskId];
      slot.tasks[id] = taskShare(id.first);
      running_.insert(id);
      waitingSince_.erase(id);
      std::erase_if(waiting, [&](const auto& w) { return w.id == launch.taskId; });
      runtime_.spawn(runTask(key, id), "task " + launch.taskId);
    }
    if (decision.steal && slot.used() <= 0.5) ++idle;
  }
  if (idle > 0 && waiting.empty() && !view_.spec.no_stealing() && !stealing_ && now - lastSteal_ >= kStealInterval) {
    stealing_ = true;
    lastSteal_ = now;
    runtime_.spawn(stealWork(idle), "steal");
  }
}

awaitable<void> JobManager::stealWork(size_t idleContainers) {
  // Ask the other JMs of the job in turn until one gives work.
  auto sites = co_await zk_->children(jmsPath(config_.job_id));
  std::vector<pb::JmInfo> victims;
  if (sites) {
    for (const auto& site : *sites) {
      if (site == config_.site) continue;
      auto node = co_await zk_->get(jmPath(config_.job_id, site));
      if (!node) continue;
      auto info = daemon::parseProto<pb::JmInfo>(node->data, site);
      if (info) victims.push_back(*info);
    }
  }
  for (size_t i = 0; i < victims.size(); ++i) {
    const auto& victim = victims[(stealRound_ + i) % victims.size()];
    auto ep = net::Endpoint::parse(victim.address());
    if (!ep) continue;
    pb::StealRequest req;
    req.set_job_id(config_.job_id);
    req.set_thief_site(config_.site);
    req.set_max_tasks(static_cast<uint32_t>(idleContainers));
    auto started = Clock::now();
    auto client = clients_.get(*ep);
    auto r = co_await client->call<pb::StealResponse>("jm.Steal", req, kStealCallTimeout);
    if (!r || r->stolen_size() == 0) continue;
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    spdlog::info("stole {} tasks from {} in {:.1f} ms", r->stolen_size(), victim.site(), ms);
    ++stealRound_;
    break;
  }
  stealing_ = false;
}

awaitable<Result<pb::StealResponse>> JobManager::giveWork(pb::StealRequest req, net::CallContext) {
  pb::StealResponse resp;
  if (req.job_id() != config_.job_id || req.thief_site() == config_.site || !loaded_) co_return resp;
  size_t freeHere = 0;
  for (const auto& [key, slot] : slots_) freeHere += slot.tasks.empty() ? 1 : 0;
  for (uint32_t s = 0; s < view_.stages.size(); ++s) {
    // Waiting tasks we cannot start ourselves right now, oldest stage first.
    std::vector<uint32_t> candidates;
    for (uint32_t t : unfinishedTasks(view_, s, config_.site)) {
      TaskId id{s, t};
      if (running_.count(id) || runningElsewhere_.count(id) || beingStolen_.count(id)) continue;
      auto inputs = taskInputs(view_, s, t);
      if (!inputs) continue;
      // Residency: raw partitions that may not leave this site stay with it.
      bool pinned = std::any_of(inputs->begin(), inputs->end(), [](const auto& in) { return in.residency_local(); });
      if (!pinned) candidates.push_back(t);
    }
    if (candidates.size() <= freeHere) {
      freeHere -= candidates.size();
      continue;
    }
    size_t give = std::min<size_t>(req.max_tasks(), candidates.size() - freeHere);
    // The newest waiting tasks go: ours keep their place in the queue.
    std::vector<uint32_t> chosen(candidates.end() - static_cast<std::ptrdiff_t>(give), candidates.end());
    for (uint32_t t : chosen) beingStolen_.insert({s, t});
    // One compare-and-set of the taskMap moves them: a concurrent steal or release loses the
    // race and retries on the fresh version, so a task never has two owners.
    Status moved = makeError(ErrorCode::kConflict, "not tried");
    for (int attempt = 0; attempt < 3 && !moved; ++attempt) {
      auto node = co_await zk_->get(taskmapPath(config_.job_id, s));
      if (!node) {
        moved = node.status();
        break;
      }
      auto map = daemon::parseProto<pb::TaskMap>(node->data, taskmapPath(config_.job_id, s));
      if (!map) break;
      std::vector<uint32_t> stillMine;
      for (uint32_t t : chosen) {
        if (map->owner_site(static_cast<int>(t)) == config_.site) {
          map->set_owner_site(static_cast<int>(t), req.thief_site());
          stillMine.push_back(t);
        }
      }
      auto set = co_await zk_->set(taskmapPath(config_.job_id, s), map->SerializeAsString(), node->stat.version);
      if (set) {
        view_.stages[s].taskmap = *map;
        view_.stages[s].taskmapVersion = set->version;
        chosen = stillMine;
        moved = Status::ok();
      } else {
        moved = set.status();
      }
    }
    for (uint32_t t : chosen) beingStolen_.erase({s, t});
    if (!moved) {
      spdlog::warn("steal by {} failed: {}", req.thief_site(), moved.message());
      co_return resp;
    }
    for (uint32_t t : chosen) {
      auto* ref = resp.add_stolen();
      ref->set_stage(s);
      ref->set_task(t);
      waitingSince_.erase({s, t});
    }
    spdlog::info("gave {} tasks of stage {} to {}", chosen.size(), s, req.thief_site());
    co_return resp;
  }
  co_return resp;
}

awaitable<void> JobManager::runTask(std::string slotKey, TaskId id) {
  auto [s, t] = id;
  uint32_t attempt = ++attempts_[id];
  auto finish = [&] {
    running_.erase(id);
    auto it = slots_.find(slotKey);
    if (it != slots_.end()) {
      it->second.tasks.erase(id);
      if (it->second.tasks.empty()) it->second.cpu = -1;  // an idle container's last reading is stale
    }
  };
  auto slotIt = slots_.find(slotKey);
  auto inputs = taskInputs(view_, s, t);
  if (slotIt == slots_.end() || !inputs) {
    finish();
    co_return;
  }
  pb::Container container = slotIt->second.container;
  const auto& stage = view_.spec.stages(static_cast<int>(s));
  pb::RunTaskRequest req;
  req.set_job_id(config_.job_id);
  req.set_stage(s);
  req.set_task(t);
  req.set_attempt(attempt);
  *req.mutable_container() = container.id();
  req.set_op(stage.op());
  *req.mutable_params() = stage.params();
  for (auto& in : *inputs) *req.add_inputs() = std::move(in);
  req.set_buckets(job::outputBuckets(view_.spec, s));
  req.set_epoch(epoch_);
  req.set_jm_address(address_);
  spdlog::info("task {} attempt {} on {}", taskName(s, t), attempt, slotKey);
  auto ep = net::Endpoint::parse(container.worker_address());
  if (!ep) {
    finish();
    co_await failJob("container on " + container.id().worker_id() + " has a bad address: " + ep.message());
    co_return;
  }
  // (Never co_await inside ?:, && or || with GCC 12: the operand may be evaluated twice.)
  auto client = clients_.get(*ep);
  Result<pb::RunTaskResponse> r = co_await client->call<pb::RunTaskResponse>("worker.RunTask", req, kTaskTimeout);
  finish();
  if (r) {
    view_.stages[s].parts[t] = r->location();
    spdlog::info("task {} done on {} in {:.3f} s", taskName(s, t), slotKey, r->location().elapsed_s());
    co_return;
  }
  spdlog::warn("task {} attempt {} on {} failed: {}", taskName(s, t), attempt, slotKey, r.message());
  switch (r.error().code) {
    case ErrorCode::kUnavailable:
    case ErrorCode::kDeadlineExceeded:
      // The container's worker is gone (a VM loss, not the task's fault): stop using its
      // containers until the master grants them again, and do not count the attempt.
      std::erase_if(slots_, [&](const auto& kv) {
        return kv.second.container.id().worker_id() == container.id().worker_id() && kv.second.tasks.empty();
      });
      --attempts_[id];
      co_return;
    case ErrorCode::kNotFound:
    case ErrorCode::kAlreadyExists:
      // An input is unreachable (lineage will recompute it) or a predecessor's launch is still
      // running: try again a little later, without counting the attempt.
      --attempts_[id];
      notBefore_[id] = Clock::now() + milliseconds(500);
      co_return;
    default:
      break;
  }
  uint32_t maxAttempts = view_.spec.max_task_attempts() ? view_.spec.max_task_attempts() : kDefaultMaxAttempts;
  if (attempt >= maxAttempts) co_await failJob("task " + taskName(s, t) + " failed " + std::to_string(attempt) + " times: " + r.message());
}

awaitable<void> JobManager::mainLoop() {
  if (auto st = co_await zk_->waitConnected(milliseconds(config_.zookeeper.session_timeout_ms * 2)); !st) {
    spdlog::critical("cannot reach ZooKeeper: {}", st.message());
    runtime_.shutdown();
    co_return;
  }
  if (auto st = co_await loadJob(); !st) {
    spdlog::critical("cannot load job: {}", st.message());
    runtime_.shutdown();
    co_return;
  }
  while (!stopping_) {
    if (sessionLost_) {
      sessionLost_ = false;
      registered_ = false;
      electionNode_.clear();
    }
    if (!registered_) {
      if (auto st = co_await registerSelf(); !st) spdlog::warn("registering JM: {}", st.message());
    }
    if (auto st = co_await refresh(); !st) {
      spdlog::warn("reading job state: {}", st.message());
      co_await daemon::sleepFor(kTick);
      continue;
    }
    if (isTerminal(status_.state())) {
      pb::JmUpdateRequest bye;
      bye.set_job_id(config_.job_id);
      bye.set_finished(true);
      if (auto master = net::Endpoint::parse(config_.master)) {
        (void)co_await clients_.get(*master)->call<pb::JmUpdateResponse>("master.JmUpdate", bye, kMasterCallTimeout);
      }
      spdlog::info("job {} is over ({}): JM exits", config_.job_id, pb::JobState_Name(status_.state()));
      stop();
      runtime_.shutdown();
      co_return;
    }
    co_await elect();
    if (primary_) co_await primaryDuties();
    co_await exchangeWithMaster();
    launchTasks();
    if (registered_ && (desire_ != publishedDesire_ || slots_.size() != publishedGranted_)) {
      (void)co_await registerSelf();  // publish the Af desire and the grant (status, tests)
    }
    co_await daemon::sleepFor(kTick);
  }
}

int run(const std::string& configPath) {
  return daemon::runDaemon<JobManager, config::JmConfig>(
      "tellus-jm", configPath, config::loadJmConfig,
      [](const config::JmConfig& c) { return "jm/" + c.job_id + "/" + c.site; });
}

}  // namespace tellus::jm
