#include "jm/jm.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "jobstate/job_store.h"
#include "jobstate/paths.h"  // site records (not job state): sites/<site>/live, workers
#include "jobstate/site_queue.h"
#include "util/log.h"

namespace tellus::jm {

namespace asio = boost::asio;
using asio::awaitable;
using std::chrono::milliseconds;
using namespace tellus::jobstate;
using jobcore::TaskId;
using jobcore::taskLabel;

namespace {

constexpr milliseconds kMasterCallTimeout{2000};
constexpr milliseconds kStealCallTimeout{2000};
// A victim's retry hint is capped: the work may change before then anyway.
constexpr uint32_t kMaxRetryAfterMs = 60'000;
// How much longer than outputs_coalesce_ms a vanished marker of an unrecorded task is held
// (markersHeld_) when its stage's records could not be listed again at once.
constexpr milliseconds kMarkerHold{1000};
// A worker asked whether its process lives (probeWorker) answers within this, or says nothing.
constexpr milliseconds kGoneProbeTimeout{500};
// Link rates beyond this (1 Tbit/s) are not measurements.
constexpr double kMaxLinkMbps = 1e6;
// Our site's measured inbound rates (its record: lease estimates, steal requests) are re-read
// this often, and its published leases (its queue) at most this often, when a steal asks.
constexpr auto kInboundMaxAge = std::chrono::seconds(10);
constexpr auto kSiteLeasesMaxAge = std::chrono::seconds(1);
// A site queue published longer ago than this says nothing about leases now.
constexpr int64_t kSiteLeasesMaxAgeMs = 10'000;
// Containers a master may say it took back in one message (far above any site's).
constexpr int kMaxLeasesTakenBack = 65536;
constexpr milliseconds kTaskTimeout{std::chrono::hours(6)};
constexpr milliseconds kTakeOverRetry{200};
// A holder asked whether it still has an output (ProbeOutput) answers within this, or says nothing.
constexpr milliseconds kProbeTimeout{2000};

// A measured link rate as bytes/s, or nullopt when it is no measurement (not finite, not
// positive, or beyond kMaxLinkMbps): a thief's claim and our own site's record alike.
std::optional<double> linkBytesPerS(const pb::LinkRate& rate) {
  if (!std::isfinite(rate.mbps()) || rate.mbps() <= 0 || rate.mbps() > kMaxLinkMbps) return std::nullopt;
  return rate.mbps() * 1e6 / 8;
}

jobcore::CoreConfig coreConfig(const config::JmConfig& c) {
  jobcore::CoreConfig core;
  core.jobId = c.job_id;
  core.site = c.site;
  core.timings.afPeriodS = c.period_ms / 1000.0;
  core.timings.stealIntervalS = c.steal_interval_ms / 1000.0;
  core.timings.jmGraceS = c.jm_grace_ms / 1000.0;
  core.timings.jmRequestIntervalS = c.jm_request_interval_ms / 1000.0;
  core.timings.publishIntervalS = c.publish_interval_ms / 1000.0;
  core.timings.primaryMissS = c.heartbeat_interval_ms * c.heartbeat_misses / 1000.0;
  core.timings.takeOverRetryS = std::chrono::duration<double>(kTakeOverRetry).count();
  core.timings.localityWaitS = c.locality_wait_ms / 1000.0;
  core.lease.historyK = c.lease_history;
  core.lease.slackS = c.lease_slack_ms / 1000.0;
  core.lease.defaultS = c.lease_default_ms / 1000.0;
  // The daemons of a deployment share one ZooKeeper configuration: the workers' sessions
  // expire within about this of each other.
  core.timings.lossSettleS = c.zookeeper.session_timeout_ms / 1000.0;
  core.timings.siteLostS = (c.site_lost_after_ms > 0 ? c.site_lost_after_ms : c.zookeeper.session_timeout_ms) / 1000.0;
  // Output records in ZooKeeper can be forged or half-written: the primary checks them.
  core.verifyOutputs = true;
  core.recordDecisions = c.decision_log_max_bytes > 0 && !c.decision_log_file.empty();
  return core;
}

}  // namespace

JobManager::JobManager(daemon::Runtime& runtime, config::JmConfig config)
    : config_(std::move(config)),
      core_(coreConfig(config_)),
      server_(runtime),
      wake_(runtime.io().get_executor()) {}

JobManager::~JobManager() { stop(); }

double JobManager::nowS() const { return std::chrono::duration<double>(Clock::now() - origin_).count(); }

void JobManager::registerMetrics() {
  auto& m = server_.metrics();
  metrics_.taskSeconds = &m.histogram("tellus_jm_task_seconds",
                                      "Run time of this JM's task attempts in seconds (as the worker measured it; "
                                      "failed attempts: the RunTask call), by operator and result.",
                                      {"op", "result"});
  metrics_.launchSeconds = &m.histogram(
      "tellus_jm_launch_overhead_seconds",
      "RunTask call time minus the task's own run time in seconds (input fetch, executor start, queueing at the "
      "worker), by operator.",
      {"op"});
  metrics_.queueWait = &m.histogram("tellus_jm_queue_wait_seconds",
                                    "How long a task waited in this JM's queue, from ready (inputs available, "
                                    "owned here) to launched, in seconds, by operator.",
                                    {"op"});
  metrics_.launches = &m.counter("tellus_jm_task_launches_total", "Task attempts this JM launched, by operator.", {"op"});
  metrics_.steals = &m.counter("tellus_jm_steals_total",
                               "Steal rounds this JM ran (asking the other JMs in turn), by result: got_work or none.",
                               {"result"});
  metrics_.tasksGiven = &m.counter("tellus_jm_tasks_given_total", "Tasks this JM gave to stealing JMs.");
  metrics_.grantChanges = &m.counter("tellus_jm_container_changes_total",
                                     "Containers granted to or revoked from this JM by its master, by direction.",
                                     {"direction"});
  metrics_.failovers = &m.counter("tellus_jm_failovers_total",
                                  "Times this JM took over as primary from a lost primary (epoch > 1), by path: "
                                  "heartbeats (the primary went silent) or election (its session expired).",
                                  {"path"});
  metrics_.takeoverSeconds = &m.histogram(
      "tellus_jm_takeover_seconds",
      "From deciding to take over (the primary missed its heartbeats, or the election was won) to acting as primary "
      "(epoch bumped), in seconds.",
      {});
  metrics_.heartbeatsMissed = &m.counter("tellus_jm_heartbeats_missed_total",
                                         "Heartbeats this primary sent that got no reply within the takeover window.");
  const auto labels = [this] {
    return std::vector<std::pair<std::string, std::string>>{{"job", config_.job_id}, {"site", config_.site}};
  };
  m.gauge("tellus_jm_af_desire", "Containers this JM asks its master for (Af desire).", [this, labels] {
    return std::vector<daemon::MetricSample>{{labels(), double(core_.desire())}};
  });
  m.gauge("tellus_jm_containers_granted", "Containers this JM holds.", [this, labels] {
    return std::vector<daemon::MetricSample>{{labels(), double(core_.granted())}};
  });
  m.gauge("tellus_jm_primary", "1 while this JM is the job's primary, else 0.", [this, labels] {
    return std::vector<daemon::MetricSample>{{labels(), core_.primary() ? 1.0 : 0.0}};
  });
  m.gauge("tellus_jm_epoch", "The primary epoch this JM acts under.", [this, labels] {
    return std::vector<daemon::MetricSample>{{labels(), double(core_.epoch())}};
  });
  m.gauge("tellus_jm_lease_accuracy",
          "Mean accuracy of this JM's lease estimates over its finished executions (paper 004 eq. 3: 1 - "
          "|runtime - lease| / runtime, floored at 0).",
          [this, labels] { return std::vector<daemon::MetricSample>{{labels(), core_.leaseAccuracy().mean}}; });
  m.gauge("tellus_jm_lease_estimates", "Finished executions whose lease accuracy is in tellus_jm_lease_accuracy.",
          [this, labels] { return std::vector<daemon::MetricSample>{{labels(), double(core_.leaseAccuracy().executions)}}; });
}

void JobManager::countGrants(std::size_t granted) {
  if (granted > grantedContainers_) {
    metrics_.grantChanges->inc({"granted"}, static_cast<double>(granted - grantedContainers_));
  } else if (granted < grantedContainers_) {
    metrics_.grantChanges->inc({"revoked"}, static_cast<double>(grantedContainers_ - granted));
  }
  grantedContainers_ = granted;
}

Status JobManager::start() {
  server_.handle<rpc::Jm::Steal>([this](pb::StealRequest r, net::CallContext c) { return giveWork(std::move(r), c); });
  server_.handle<rpc::Jm::ContainerUsage>([this](const pb::ContainerUsageReport& r) {
    core_.onUsage(r);
    return Result<pb::Empty>(pb::Empty());
  });
  server_.handle<rpc::Jm::Heartbeat>([this](pb::JmHeartbeat beat, net::CallContext context)
                                         -> awaitable<Result<pb::JmHeartbeatResponse>> {
    co_return onHeartbeat(beat, context);
  });
  server_.handle<rpc::Jm::Grants>([this](pb::JmUpdateResponse g, net::CallContext context) -> awaitable<Result<pb::Empty>> {
    // Only our own site's master grants here, or takes containers back (a master of another
    // site holds nothing of ours: its word would cost us containers, or count a failing task's
    // ends as take-backs).
    if (Status s = net::checkCallerSite(context.identity, config_.site); !s) co_return s.error();
    onLeasesTakenBack(g);
    countGrants(static_cast<std::size_t>(g.granted_size()));
    core_.onGrants({g.granted().begin(), g.granted().end()});
    wake();
    co_return pb::Empty();
  });
  registerMetrics();
  TELLUS_RETURN_IF_ERROR(server_.start({config_.listen, config_.http_listen, config_.zookeeper, config_.rpc,
                                         config_.tls, {net::Role::kWorker, config_.site, config_.worker_id}}));
  store_.emplace(server_.coordinator());
  subscriptions_.push_back(server_.coordinator().onSessionEvent([this](coord::SessionEvent e) {
    spdlog::info("zookeeper session: {}", coord::toString(e));
    // Without a session we cannot know whether someone else is primary now: stop acting as
    // one at once. The election re-enters and the registration watch re-registers on the new
    // session.
    if (e == coord::SessionEvent::kExpired) {
      stepDown("session expired");
      registered_ = false;
      taskMapsStale_ = true;
    }
    wake();
  }));
  spdlog::info("JM of job {} at site {} ({}) serving on {}", config_.job_id, config_.site,
               config_.primary ? "started as primary" : "started as secondary", server_.address());
  server_.spawn(mainLoop(), "job manager loop");
  if (config_.heartbeat_interval_ms > 0) server_.spawn(heartbeatLoop(), "heartbeats");
  return {};
}

void JobManager::stop() {
  if (server_.stopping()) return;
  if (election_) election_->withdraw();
  election_.reset();
  workerWatches_.clear();
  subscriptions_.clear();
  server_.stop();
  wake();
}

void JobManager::writeDecisions() {
  const std::vector<jobcore::Decision> decisions = core_.takeDecisions();
  if (decisions.empty() || decisionLogFull_) return;
  if (!decisionLog_.is_open()) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(config_.decision_log_file, ec);
    decisionLogBytes_ = ec ? 0 : size;
    decisionLog_.open(config_.decision_log_file, std::ios::app);
    if (!decisionLog_) {
      spdlog::warn("decision log {}: cannot open it; no decisions are written", config_.decision_log_file);
      decisionLogFull_ = true;
      return;
    }
  }
  for (const auto& d : decisions) {
    const std::string line = jobcore::formatDecision(d);
    if (decisionLogBytes_ + line.size() + 1 > config_.decision_log_max_bytes) {
      spdlog::warn("decision log {} holds {} bytes (decision_log_max_bytes {}): later decisions are not written",
                   config_.decision_log_file, decisionLogBytes_, config_.decision_log_max_bytes);
      decisionLogFull_ = true;
      break;
    }
    decisionLog_ << line << '\n';
    decisionLogBytes_ += line.size() + 1;
  }
  // Flushed at once: a reader (the differential test) sees every decision taken so far, and a
  // JM killed with its VM loses none it wrote.
  decisionLog_.flush();
  if (!decisionLog_) {
    spdlog::warn("decision log {}: a write failed; no more decisions are written", config_.decision_log_file);
    decisionLogFull_ = true;
  }
}

void JobManager::exitWith(bool failed, const std::string& why) {
  writeDecisions();
  if (failed) {
    spdlog::critical("JM exits: {}", why);
    // One line for the worker, which reports it with the exit status to the master.
    if (!config_.exit_reason_file.empty()) {
      std::ofstream out(config_.exit_reason_file, std::ios::trunc);
      out << why.substr(0, 480) << "\n";
    }
  } else {
    spdlog::info("JM exits: {}", why);
  }
  if (failed) server_.runtime().fail();
  stop();
}

// ---- the job's state, from watches ---------------------------------------------------------

awaitable<Status> JobManager::loadJob() {
  auto job = co_await store_->load(config_.job_id);
  if (!job) co_return job.status();
  co_return core_.onJobLoaded(job->spec, job->inputs);
}

Status JobManager::watchJob() {
  const std::string& job = config_.job_id;
  auto add = [this](Result<coord::Subscription> sub, const std::string& what) -> Status {
    if (!sub) return sub.status().prepend("watching " + what);
    subscriptions_.push_back(std::move(sub).value());
    return Status::ok();
  };
  // The status: its state ends the job for every JM; its sites say whose workers to watch.
  auto st = add(store_->watchStatus(job,
                                    [this](const Result<std::optional<Versioned<pb::JobStatus>>>& status) {
                                      if (!status) {
                                        core_.onStatusUnreadable(status.message());
                                      } else if (!*status) {
                                        core_.onJobDeleted();
                                      } else {
                                        core_.onStatus((*status)->value, (*status)->stat.version);
                                        watchSiteWorkers((*status)->value);
                                      }
                                      wake();
                                    }),
                "status");
  if (!st) return st;
  for (uint32_t s = 0; s < core_.view().stages.size(); ++s) {
    st = add(store_->watchTaskMap(job, s,
                                  [this, s](const Result<std::optional<Versioned<pb::TaskMap>>>& map) {
                                    if (map && !*map) return;  // not released yet
                                    if (!map) {
                                      core_.onTaskMapUnreadable(s, map.message());
                                    } else {
                                      core_.onTaskMap(s, (*map)->value, (*map)->stat.version);
                                    }
                                    wake();
                                  }),
             "taskmap of stage " + std::to_string(s));
    if (!st) return st;
    st = add(store_->watchOutputNodes(
                 job, s,
                 [this, s](const std::set<std::string>& names) {
                   partNames_[s] = names;
                   wake();
                 },
                 [this, s, coalesce = milliseconds(config_.outputs_coalesce_ms)] {
                   return core_.awaitingLastOutputs(s) ? milliseconds(0) : coalesce;
                 }),
             "outputs of stage " + std::to_string(s));
    if (!st) return st;
  }
  // Running markers are written once per attempt and removed at its end, so every change
  // moves the directory's pzxid and fires this watch. Listed at most every markers_coalesce_ms:
  // an attempt's start and end reach us by RPC; the markers tell of other executors' tasks.
  st = add(store_->watchRunningTasks(
               job,
               [this](const std::vector<TaskId>& tasks) {
                 markerNames_ = tasks;
                 wake();
               },
               milliseconds(config_.markers_coalesce_ms)),
           "running markers");
  if (!st) return st;
  // Also how we learn that our own registration went (an expired session also says so) or
  // was replaced (removed, then created by another JM): a data watch on it would fire on
  // every one of our own count updates. A replacement under the same name is caught by the
  // version our updates expect (registerSelf).
  st = add(store_->watchJmSites(job,
                              [this](const std::vector<std::string>& names) {
                                jmNames_ = names;
                                jmSites_ = {names.begin(), names.end()};
                                if (!jmSites_.count(config_.site)) registered_ = false;
                                core_.onJms(jmSites_);
                                wake();
                              }),
           "JMs");
  if (!st) return st;
  // The epoch: a secondary joins the election once a primary has acted; a primary whose
  // epoch node moved under it is fenced.
  return add(store_->watchEpoch(job,
                                [this](const std::optional<Versioned<uint64_t>>& epoch) {
                                  epochNode_ = epoch;
                                  if (epoch && core_.onEpoch(epoch->value, nowS())) {
                                    stepDown(fmt::format("the epoch moved to {}", epoch->value));
                                  }
                                  wake();
                                }),
             "epoch");
}

void JobManager::watchSiteWorkers(const pb::JobStatus& status) {
  for (const auto& site : status.sites()) {
    if (workerWatches_.count(site)) continue;
    auto sub = server_.coordinator().watchChildren(siteWorkersPath(site), [this, site](const std::vector<std::string>& names) {
      core_.onLiveWorkers(site, {names.begin(), names.end()});
      wake();
    });
    if (!sub) {
      spdlog::warn("watching the workers of {}: {}", site, sub.message());
      continue;
    }
    workerWatches_.emplace(site, std::move(sub).value());
  }
}

awaitable<void> JobManager::readChangedState() {
  for (auto& [s, names] : partNames_) {
    if (names) co_await readParts(s);
  }
  const bool safetyReread = Clock::now() - markersReadAt_ >= milliseconds(config_.safety_reread_ms);
  if (markerNames_ || safetyReread) {
    co_await readMarkers();
  } else if (!markersHeld_.empty()) {
    applyMarkers();  // a held task recorded meanwhile, or its hold over
  }
  if (jmNames_) co_await readJms();
}

awaitable<void> JobManager::readParts(uint32_t s) {
  auto names = std::move(*partNames_[s]);
  partNames_[s].reset();
  // Record nodes are written once and replaced under a new name (lineage): only new names
  // are read, and the core hears only of the tasks of nodes that came or went.
  auto& listing = partListings_[s];
  for (const auto& name : listing.relist(names)) {
    auto node = co_await store_->outputNode(config_.job_id, s, name);
    if (!node) {
      // Replaced meanwhile (lineage) is expected; anything else is worth a line.
      if (node.error().code == ErrorCode::kNotFound) continue;
      spdlog::warn("{}", node.message());
      // Not a record (forged or corrupt): the primary removes it; whatever tasks it claimed
      // are not recorded, so they run.
      if (node.error().code == ErrorCode::kInternal && core_.primary()) {
        Status removed = co_await store_->removeOutputNodeFenced(config_.job_id, s, name, epochVersion_);
        if (!noteFence(removed)) spdlog::warn("removing {} of stage {}: {}", name, s, removed.message());
      }
      continue;
    }
    std::map<uint32_t, jobcore::ListedPart> outputs;
    for (auto& [t, record] : node->outputs) {
      outputs.emplace_hint(outputs.end(), t, jobcore::ListedPart{std::move(record.location), std::move(record.finishKey)});
    }
    listing.add(name, std::move(outputs));
  }
  listing.apply(core_, s);
}

awaitable<void> JobManager::readMarkers() {
  std::vector<TaskId> names;
  const bool fromWatch = markerNames_.has_value();
  if (fromWatch) {
    names = std::move(*markerNames_);
    markerNames_.reset();
  } else {
    // The safety net under the watch: one listing, not a read of every marker.
    auto listed = co_await store_->runningTasks(config_.job_id);
    if (!listed) co_return;
    names = *listed;
  }
  markersReadAt_ = Clock::now();
  // The watch fires on every change of the directory: the same names mean a marker was
  // removed and written again (a retry) in between, so their contents are read again.
  const bool rewritten = fromWatch && std::set<TaskId>(names.begin(), names.end()) == markerListing_;
  std::map<TaskId, pb::RunningTask> markers;
  std::set<TaskId> unread;
  for (const auto& id : names) {
    if (auto known = markers_.find(id); !rewritten && known != markers_.end() && !markersUnread_.count(id)) {
      markers.insert(*known);
      continue;
    }
    // Of a task another site owns, the name is all the core needs (the task runs elsewhere);
    // of one we launched and have not seen end, or whose output we know, not even that (a read
    // per task for nothing): such a marker is read on a later listing if it outlives that.
    if (!core_.markerContentsNeeded(id)) {
      markers[id] = pb::RunningTask();
      unread.insert(id);
      continue;
    }
    auto marker = co_await store_->runningMarker(config_.job_id, id);
    if (marker) {
      markers[id] = *marker;
    } else if (marker.error().code != ErrorCode::kNotFound) {  // gone meanwhile: the attempt ended
      spdlog::warn("{}", marker.message());
    }
  }
  markerListing_ = {names.begin(), names.end()};
  markersUnread_ = std::move(unread);
  // The hold lasts past the outputs' listing delay (outputs_coalesce_ms) with room for the
  // listing itself.
  const auto holdUntil = Clock::now() + milliseconds(config_.outputs_coalesce_ms) + kMarkerHold;
  std::set<uint32_t> heldStages;
  for (const auto& [id, marker] : markers_) {
    if (!markers.count(id) && !recorded(id) && markersHeld_.try_emplace(id, marker, holdUntil).second) {
      heldStages.insert(id.first);
    }
  }
  markers_ = std::move(markers);
  // The listing that ends the holds: begun after the markers' (see markersHeld_).
  for (uint32_t s : heldStages) {
    if (s >= core_.view().stages.size() || !(co_await relistParts(s))) continue;
    std::erase_if(markersHeld_, [s](const auto& held) { return held.first.first == s; });
  }
  applyMarkers();
}

awaitable<bool> JobManager::relistParts(uint32_t s) {
  auto names = co_await store_->outputNodeNames(config_.job_id, s);
  if (!names) {
    spdlog::warn("listing the outputs of stage {}: {}", s, names.message());
    co_return false;
  }
  partNames_[s] = std::move(names).value();
  co_await readParts(s);
  co_return true;
}

bool JobManager::recorded(const TaskId& id) const {
  const auto& stages = core_.view().stages;
  return id.first < stages.size() && stages[id.first].parts.count(id.second) > 0;
}

void JobManager::applyMarkers() {
  const auto now = Clock::now();
  std::erase_if(markersHeld_, [&](const auto& held) {
    return markers_.count(held.first) || recorded(held.first) || held.second.second <= now;
  });
  if (markersHeld_.empty()) {
    core_.onRunningMarkers(markers_);
    return;
  }
  auto shown = markers_;
  for (const auto& [id, held] : markersHeld_) shown.emplace(id, held.first);
  core_.onRunningMarkers(shown);
}

awaitable<void> JobManager::readJms() {
  auto names = std::move(*jmNames_);
  jmNames_.reset();
  std::erase_if(jms_, [&](const auto& kv) { return std::find(names.begin(), names.end(), kv.first) == names.end(); });
  for (const auto& site : names) {
    if (site == config_.site || jms_.count(site)) continue;
    auto info = co_await store_->jm(config_.job_id, site);
    if (info) jms_[site] = info->value;
  }
}

awaitable<Status> JobManager::registerSelf() {
  // Built after every await, not before: a session that expired meanwhile has made us step
  // down, and the node must not advertise a role we no longer hold.
  auto info = [this] {
    pb::JmInfo info;
    info.set_site(config_.site);
    info.set_address(server_.address());
    info.set_role(core_.primary() ? pb::JM_PRIMARY : pb::JM_SECONDARY);
    info.set_epoch(core_.epoch());
    info.set_worker_id(config_.worker_id);
    info.set_pid(static_cast<int64_t>(::getpid()));
    info.set_desire(core_.desire());
    info.set_granted(static_cast<uint32_t>(core_.granted()));
    info.set_http_address(server_.httpAddress());
    return info;
  };
  if (registered_ && registeredVersion_ >= 0) {
    // Confirmed on this session and nobody removed it since (watchJmSites): one write, which
    // expects the version we left. A conflict (somebody else wrote it, or the epoch moved
    // under a primary) sends us through the full check below on the next round.
    const pb::JmInfo current = info();
    auto set = co_await store_->updateJmRegistration(config_.job_id, current, epochVersion_, registeredVersion_);
    if (!set) {
      registered_ = false;
      registeredVersion_ = -1;
      co_return set.status();
    }
    registeredVersion_ = *set;
    core_.onPublished(current.desire(), current.granted());
    co_return Status::ok();
  }
  auto stat = co_await store_->jmRegistration(config_.job_id, config_.site);
  if (!stat) co_return stat.status();
  if (*stat && (*stat)->ephemeralOwner == server_.coordinator().sessionId()) {
    const pb::JmInfo current = info();
    auto set = co_await store_->updateJmRegistration(config_.job_id, current, epochVersion_);
    if (set) {
      registered_ = true;
      registeredVersion_ = *set;
      core_.onPublished(current.desire(), current.granted());
    } else if (set.error().code == ErrorCode::kConflict && current.role() == pb::JM_PRIMARY) {
      // Fenced: a newer primary bumped the epoch (while we were paused, say). We register
      // again as a secondary.
      stepDown("the epoch moved: " + set.message());
      registered_ = false;
    }
    co_return set.status();
  }
  if (!*stat && everRegistered_ && server_.coordinator().sessionId() == registeredSession_) {
    // Removed while our session held: by this site's replacement JM, which creates its own
    // next, or with the job's nodes. Re-creating it would fight either (a deletion of the job
    // lost to its JMs' re-registrations). A site left without a JM gets one at the primary's
    // request (jm_grace_ms).
    exitWith(false, "this JM's registration was removed while its session held: replaced, or the job deleted");
    co_return makeError(ErrorCode::kConflict, "registration removed");
  }
  if (*stat && everRegistered_ && (*stat)->ephemeralOwner == registeredSession_) {
    // Our own node from our previous session. Without a quorum nothing expires sessions, so
    // after an outage it can outlive the session we opened since: it is no replacement of
    // us; it goes, and we register again.
    (void)co_await store_->removeJmRegistration(config_.job_id, config_.site);
  } else if (*stat) {
    if (everRegistered_) {
      // We lost our session and the site got a new JM meanwhile: it is the JM now.
      exitWith(false, "replaced by another JM of site " + config_.site);
      co_return makeError(ErrorCode::kConflict, "replaced");
    }
    // The node of this site's previous JM, whose session has not expired yet: we replace it.
    (void)co_await store_->removeJmRegistration(config_.job_id, config_.site);
  }
  const pb::JmInfo current = info();
  const int64_t session = server_.coordinator().sessionId();
  Status created = co_await store_->createJmRegistration(config_.job_id, current);
  if (!created) co_return created;
  registered_ = true;
  registeredVersion_ = 0;  // a new node's
  everRegistered_ = true;
  registeredSession_ = session;
  core_.onPublished(current.desire(), current.granted());
  co_return Status::ok();
}

// ---- election and fencing ------------------------------------------------------------------

void JobManager::joinElection() {
  if (election_ || server_.stopping()) return;
  coord::ElectionCallbacks callbacks;
  // Leading the election is one reason to take over; the core decides when (the main loop
  // tells it our place before every step).
  callbacks.onElected = [this] { wake(); };
  callbacks.onLost = [this] { stepDown("lost the election"); };
  coord::ElectionOptions options;
  options.recheckInterval = milliseconds(config_.safety_reread_ms);  // the watches do the work
  // The next in line takes over on missed heartbeats: it must know it is (a job has a few JMs).
  options.trackPosition = true;
  auto election = coord::LeaderElection::start(server_.sharedCoordinator(), JobStore::electionPath(config_.job_id),
                                               config_.site, std::move(callbacks), options);
  if (!election) {
    spdlog::warn("joining the election: {}", election.message());
    return;
  }
  election_ = std::move(election).value();
}

awaitable<void> JobManager::takeOver(jobcore::TakeOver takeOver) {
  const auto decided = Clock::now();
  if (takeOver.byHeartbeats) {
    // One direct call first: silence may be our own stall (a loaded host) or a lost message,
    // and a takeover costs the job a failover. A dead VM refuses or times out within the
    // interval. Alive and still on the epoch we would bump from: it keeps its role.
    const bool alive = co_await primaryAnswers(takeOver);
    if (server_.stopping()) co_return;
    if (alive) {
      spdlog::info("not taking over: the primary at {} answers", takeOver.primarySite);
      core_.onPrimaryHeartbeat(takeOver.primarySite, takeOver.expectedEpoch, nowS());
      core_.onTakeOverEnded(false, nowS());
      co_return;
    }
  }
  spdlog::warn("taking over as primary of job {}: {}", config_.job_id, takeOver.why);
  // Only from the epoch the core saw (another JM that took over first makes this fail), and
  // only while the job's status is the one this JM last read: a primary that finished the job
  // and exited since leaves nothing to take over.
  auto bumped = co_await store_->bumpEpoch(config_.job_id, core_.statusVersion(), takeOver.expectedEpoch);
  if (server_.stopping()) co_return;
  if (!bumped) {
    spdlog::warn("taking over from epoch {}: {}", takeOver.expectedEpoch, bumped.message());
    core_.onTakeOverEnded(false, nowS());
    wake();
    co_return;
  }
  epochVersion_ = bumped->stat.version;
  core_.onBecamePrimary(bumped->value);
  core_.onTakeOverEnded(true, nowS());
  // Epoch 1 is the first primary; any later one replaced a primary that was lost.
  if (bumped->value > 1) {
    metrics_.failovers->inc({takeOver.byHeartbeats ? "heartbeats" : "election"});
    metrics_.takeoverSeconds->observe(std::chrono::duration<double>(Clock::now() - decided).count());
  }
  spdlog::info("primary of job {} with epoch {}", config_.job_id, core_.epoch());
  wake();
}

awaitable<bool> JobManager::primaryAnswers(const jobcore::TakeOver& takeOver) {
  auto jm = jms_.find(takeOver.primarySite);
  if (jm == jms_.end()) co_return false;
  auto ep = net::Endpoint::parse(jm->second.address());
  if (!ep) co_return false;
  // Epoch 0: a question, not a heartbeat (no JM is primary under 0; receivers count none).
  pb::JmHeartbeat probe;
  probe.set_job_id(config_.job_id);
  probe.set_site(config_.site);
  probe.set_epoch(0);
  auto client = server_.client(*ep);
  auto r = co_await client->call<rpc::Jm::Heartbeat>(probe, milliseconds(config_.heartbeat_interval_ms));
  co_return r.isOk() && r->epoch() == takeOver.expectedEpoch;
}

void JobManager::stepDown(const std::string& why) {
  // (The core may have stepped down already, on a newer epoch: the fencing token says we were.)
  if (core_.primary() || epochVersion_ >= 0) spdlog::warn("no longer primary: {}", why);
  core_.onLostPrimary();
  epochVersion_ = -1;
  // Fenced while still leading the election: rejoin at the back, so that the JM that bumped
  // the epoch leads, not us.
  if (election_ && election_->isLeader()) {
    election_->withdraw();
    election_.reset();
  }
  wake();
}

// ---- heartbeats ------------------------------------------------------------------------------

awaitable<void> JobManager::heartbeatLoop() {
  const milliseconds interval(config_.heartbeat_interval_ms);
  while (!server_.stopping()) {
    // Without a session this JM may be fenced already: it does not vouch for itself.
    if (core_.primary() && server_.zookeeperAvailable()) {
      for (const auto& [site, info] : jms_) {
        if (site == config_.site || heartbeatsInFlight_.count(site)) continue;
        auto ep = net::Endpoint::parse(info.address());
        if (!ep) continue;
        heartbeatsInFlight_.insert(site);
        server_.spawn(sendHeartbeat(site, *ep, core_.epoch()), "heartbeat");
      }
    }
    co_await server_.sleepFor(interval);
  }
}

awaitable<void> JobManager::sendHeartbeat(std::string site, net::Endpoint to, uint64_t epoch) {
  pb::JmHeartbeat beat;
  beat.set_job_id(config_.job_id);
  beat.set_site(config_.site);
  beat.set_epoch(epoch);
  auto client = server_.client(to);
  // Up to the whole window: a late heartbeat still counts where it arrives, and a call given up
  // early may cost the connection (a new TLS handshake is slower still on a loaded host).
  auto r = co_await client->call<rpc::Jm::Heartbeat>(
      beat, milliseconds(uint64_t{config_.heartbeat_interval_ms} * config_.heartbeat_misses));
  heartbeatsInFlight_.erase(site);
  if (server_.stopping()) co_return;
  if (!r) {
    metrics_.heartbeatsMissed->inc();
    // Perhaps a replaced JM at a new address: read its node again (as stealWork does).
    if (r.error().code == ErrorCode::kUnavailable && jms_.erase(site) > 0) {
      jmNames_ = std::vector<std::string>(jmSites_.begin(), jmSites_.end());
      wake();
    }
    co_return;
  }
  if (r->epoch() > core_.epoch() && core_.primary() && !checkingEpoch_) server_.spawn(checkEpoch(), "epoch check");
  if (r->lost_inputs_size() > 0 && r->epoch() == core_.epoch()) {
    // The secondary's tasks found these outputs on no copy: ours to re-run (if we find their
    // workers dead too).
    std::vector<jobcore::TaskId> claims;
    const int n = std::min<int>(r->lost_inputs_size(), jobcore::JobCore::kMaxReportedLostInputs);
    for (int i = 0; i < n; ++i) claims.emplace_back(r->lost_inputs(i).stage(), r->lost_inputs(i).task());
    core_.onLostInputsReported(claims, nowS());
    wake();
  }
}

awaitable<void> JobManager::checkEpoch() {
  checkingEpoch_ = true;
  auto epoch = co_await store_->epoch(config_.job_id);
  checkingEpoch_ = false;
  if (server_.stopping() || !epoch) co_return;
  if (core_.onEpoch(epoch->value, nowS())) stepDown(fmt::format("the epoch moved to {}", epoch->value));
}

Result<pb::JmHeartbeatResponse> JobManager::onHeartbeat(const pb::JmHeartbeat& beat, const net::CallContext& context) {
  // A JM speaks for its own site only (TLS: the site in its certificate), as in jm.Steal.
  if (Status s = net::checkCallerSite(context.identity, beat.site()); !s) return s.error();
  pb::JmHeartbeatResponse resp;
  resp.set_epoch(core_.knownEpoch());
  if (beat.job_id() != config_.job_id || !core_.loaded()) return resp;
  const auto& sites = core_.status().sites();
  if (std::find(sites.begin(), sites.end(), beat.site()) == sites.end() || beat.site() == config_.site) return resp;
  // No wake-up: a heartbeat changes no decision now; the tick looks at the window.
  core_.onPrimaryHeartbeat(beat.site(), beat.epoch(), nowS());
  // A probe (epoch 0) asks only whether the primary lives.
  if (beat.epoch() == 0) return resp;
  for (const auto& [stage, task] : core_.lostInputClaims()) {
    auto* claim = resp.add_lost_inputs();
    claim->set_stage(stage);
    claim->set_task(task);
  }
  return resp;
}

Status JobManager::noteFence(Status written) {
  if (!written && written.code() == ErrorCode::kConflict) stepDown("fenced by a newer epoch: " + written.message());
  return written;
}

// ---- the loop --------------------------------------------------------------------------------

awaitable<void> JobManager::mainLoop() {
  if (auto st = co_await server_.coordinator().waitConnected(milliseconds(config_.zookeeper.session_timeout_ms * 2)); !st) {
    exitWith(true, "cannot reach ZooKeeper: " + st.message());
    co_return;
  }
  if (auto st = co_await loadJob(); !st) {
    exitWith(st.code() != ErrorCode::kNotFound, "cannot load job: " + st.message());
    co_return;
  }
  if (auto st = watchJob(); !st) {
    exitWith(true, st.message());
    co_return;
  }
  // A process that was not running for a good part of its session timeout (SIGSTOP, a frozen
  // VM, starvation) cannot tell from its ZooKeeper client whether its session still holds:
  // the client learns of an expiry only on its next exchange with the server, and until then
  // reports the session connected. Such a JM confirms it is still this site's JM with a
  // round trip on the session (registerSelf) before it steps: a resumed JM that a replacement
  // took over from must not launch alongside it on what it knew before the pause.
  pause_.emplace(milliseconds(std::max<uint32_t>(config_.zookeeper.session_timeout_ms / 2, 4 * config_.tick_ms)),
                 Clock::now());
  while (!server_.stopping()) {
    wake_.reset();
    const auto paused = pause_->tick(Clock::now());
    if (paused && registered_) {
      spdlog::info("JM did not run for {} ms: confirming its registration before acting",
                   std::chrono::duration_cast<milliseconds>(*paused).count());
      registered_ = false;
    }
    // Without a ZooKeeper session what this JM knows of the job may be stale (another JM may
    // be primary by now) and nothing it writes can land: it decides nothing — no launches, no
    // writes, no container requests, no steals — until the session is back (the server logs
    // the outage once). Tasks already running go on; their ends are taken in as they come.
    // A session event wakes the loop.
    if (!server_.zookeeperAvailable()) {
      co_await wake_.waitFor(milliseconds(config_.tick_ms));
      continue;
    }
    co_await readChangedState();
    if (server_.stopping()) break;
    // Before the step: a JM whose session expired and whose site got a replacement meanwhile
    // finds that out here and exits, instead of stepping (and launching) alongside it. A JM
    // launched where its job does not run registers too, briefly: its first step exits. The
    // order is no longer what keeps a first step off a stage whose outputs and running markers
    // were not read yet: the core launches nothing of such a stage (JobCore::listed).
    if (!registered_) {
      Status st = co_await registerSelf();
      if (!st && !server_.stopping()) spdlog::warn("registering JM: {}", st.message());
      if (!st && everRegistered_) {  // not confirmed as this site's JM: no step
        co_await wake_.waitFor(milliseconds(config_.tick_ms));
        continue;
      }
    }
    // The JM the submitting master started is the first primary (HOUTU); the others join once
    // a primary has acted (epoch > 0).
    if (!election_ && (config_.primary || (epochNode_ && epochNode_->value != 0))) joinElection();
    if (server_.stopping()) break;
    core_.onElectionPosition(election_ ? election_->position() : std::nullopt);
    if (taskMapsStale_) {
      const bool reread = co_await rereadTaskMaps();
      if (!reread) {  // no step on what the site owned before the session expired
        co_await wake_.waitFor(milliseconds(config_.tick_ms));
        continue;
      }
    }
    // The reads above may have outlasted the session (a read times out only after seconds).
    if (!server_.zookeeperAvailable()) continue;
    if (!inboundReadAt_ || Clock::now() - *inboundReadAt_ > kInboundMaxAge) {
      inboundReadAt_ = Clock::now();
      server_.spawn(refreshInbound(), "reading this site's measured link rates");
    }
    co_await execute(core_.step(nowS()));
    writeDecisions();
    if (server_.stopping()) break;
    co_await wake_.waitFor(milliseconds(config_.tick_ms));
  }
}

awaitable<void> JobManager::execute(jobcore::Actions actions) {
  if (actions.exit) {
    if (const auto leases = core_.leaseAccuracy(); leases.executions > 0) {
      spdlog::info("lease estimates: {} executions, mean accuracy {:.3f}; {} from a compute history, mean accuracy "
                   "{:.3f} (paper 004 eq. 3)",
                   leases.executions, leases.mean, leases.fromHistory, leases.fromHistoryMean);
    }
    pb::JmUpdateRequest bye;
    bye.set_job_id(config_.job_id);
    bye.set_finished(true);
    if (auto master = net::Endpoint::parse(config_.master)) {
      (void)co_await server_.client(*master)->call<rpc::Master::JmUpdate>(bye, kMasterCallTimeout);
    }
    exitWith(false, actions.exitReason);
    co_return;
  }
  if (actions.fail) {
    bool written = co_await failJob(*actions.fail);
    core_.onFailWritten(written);
  }
  for (const auto& lost : actions.lostOutputs) {
    spdlog::warn("output of task {} is dropped and recomputed: {}", taskLabel(lost.task), lost.why);
    Status st = makeError(ErrorCode::kConflict, "not primary");
    if (core_.primary()) {
      Status removed = co_await store_->removeOutputFenced(config_.job_id, lost.task, epochVersion_);
      st = noteFence(removed);
    }
    bool gone = st || st.code() == ErrorCode::kNotFound;
    core_.onLostOutputRemoved(lost, gone);
    if (!gone) break;
  }
  bool fenced = false;
  for (const auto& reassignment : actions.reassignments) {
    if (fenced) {  // the rest is not ours to write
      core_.onTasksReassigned(reassignment, nullptr, -1);
      continue;
    }
    const bool stillPrimary = co_await reassignTasks(reassignment);
    fenced = !stillPrimary;
  }
  for (uint32_t s : actions.readFinishRecords) {
    auto records = co_await store_->finishRecords(config_.job_id, s);
    if (!records) {
      spdlog::warn("reading the finish records of stage {}: {}", s, records.message());
      core_.onFinishRecordsUnread(s);  // asked again on a later step
      continue;
    }
    core_.onFinishRecords(s, *records);
    wake();
  }
  if (actions.needSiteRecords) {
    co_await readSiteRecords();
    wake();  // the releases are decided on the next step
  }
  for (const auto& release : actions.releases) {
    Status st = makeError(ErrorCode::kConflict, "not primary");
    if (core_.primary()) {
      Status created = co_await store_->createTaskMapFenced(config_.job_id, release.stage, release.taskmap, epochVersion_);
      st = noteFence(created);
    }
    if (!st && st.code() == ErrorCode::kAlreadyExists) {
      // Released before (an earlier primary, or a try of ours whose reply was lost) and its
      // watch has not delivered yet: the stored map is the stage's, not the one just made.
      auto stored = co_await store_->taskMap(config_.job_id, release.stage);
      if (stored) {
        core_.onTaskMap(release.stage, stored->value, stored->stat.version);
      } else {
        spdlog::warn("reading the task map of stage {}: {}", release.stage, stored.message());
      }
      wake();
      continue;
    }
    const bool ok = st.isOk();
    core_.onStageReleased(release, ok);
    if (!ok) {
      spdlog::warn("releasing stage {}: {}", release.stage, st.message());
      break;
    }
    std::map<std::string, int> counts;
    for (const auto& o : release.taskmap.owner_site()) ++counts[o];
    std::string summary;
    for (const auto& [site, n] : counts) summary += " " + site + ":" + std::to_string(n);
    spdlog::info("released stage {} ({} tasks):{}", core_.view().spec.stages(static_cast<int>(release.stage)).name(),
                 release.taskmap.owner_site_size(), summary);
  }
  if (actions.succeed) {
    pb::JobStatus done = core_.status();
    done.set_state(pb::JOB_SUCCEEDED);
    done.set_finish_unix_ms(daemon::nowUnixMs());
    Status written = makeError(ErrorCode::kConflict, "not primary");
    if (core_.primary()) {
      Status set = co_await store_->writeStatusFenced(config_.job_id, done, epochVersion_);
      written = noteFence(set);
    }
    if (written) {
      spdlog::info("job {} succeeded in {} ms", config_.job_id, done.finish_unix_ms() - done.submit_unix_ms());
    }
    core_.onSucceedWritten(written.isOk());
  }
  // Before the launches: a worker refuses to start a task whose marker is still there.
  for (auto& [task, worker] : actions.clearMarkers) {
    Status removed = co_await store_->removeMarkerOf(config_.job_id, task, worker);
    if (removed) {
      spdlog::info("removed the running marker of task {} on gone worker {}", taskLabel(task), worker);
    } else if (removed.code() != ErrorCode::kNotFound && removed.code() != ErrorCode::kConflict) {
      spdlog::warn("removing the running marker of task {} on gone worker {}: {}", taskLabel(task), worker,
                   removed.message());
      core_.onMarkerClearFailed(task);
    }
  }
  for (const auto& site : actions.startJms) server_.spawn(requestJm(site), "asking for a JM at " + site);
  if (actions.request && !requestInFlight_) server_.spawn(sendContainerRequest(*actions.request), "container request");
  for (auto& launch : actions.launches) server_.spawn(runTask(std::move(launch)), "task");
  for (auto& probe : actions.probes) server_.spawn(probeOutput(std::move(probe)), "asking an output's holders");
  for (auto& probe : actions.probeWorkers) server_.spawn(probeWorker(std::move(probe)), "asking whether a worker lives");
  if (actions.steal) server_.spawn(stealWork(*actions.steal), "steal");
  if (actions.takeOver) server_.spawn(takeOver(std::move(*actions.takeOver)), "taking over as primary");
  if (actions.publish && registered_) (void)co_await registerSelf();
}

awaitable<bool> JobManager::reassignTasks(const jobcore::ReassignTasks& reassignment) {
  // One fenced compare-and-set of the taskMap: a task the lost site gave away meanwhile (it
  // came back) is not moved, and a stale primary's write does not land.
  constexpr int kReassignTries = 3;
  size_t moved = 0;  // of the try that landed
  std::function<Status(pb::TaskMap&)> moveToLiveSites = [&](pb::TaskMap& map) {
    moved = 0;
    for (const auto& [to, tasks] : reassignment.to) {
      moved += jobcore::JobCore::moveTasks(map, tasks, reassignment.from, to).size();
    }
    return Status::ok();
  };
  Result<Versioned<pb::TaskMap>> cas = makeError(ErrorCode::kConflict, "not primary");
  if (core_.primary()) {
    cas = co_await store_->casTaskMap(config_.job_id, reassignment.stage, moveToLiveSites, kReassignTries,
                                      epochVersion_);
  }
  core_.onTasksReassigned(reassignment, cas ? &cas->value : nullptr, cas ? cas->stat.version : -1);
  if (!cas) {
    spdlog::warn("giving stage {}'s tasks of lost site {} to other sites: {}", reassignment.stage, reassignment.from,
                 cas.message());
    if (!core_.primary()) co_return false;
    Status outcome = noteFence(cas.status());
    co_return outcome.code() != ErrorCode::kConflict;
  }
  std::string summary;
  for (const auto& [to, tasks] : reassignment.to) summary += fmt::format(" {}:{}", to, tasks.size());
  spdlog::info("site {} is lost: gave {} of its tasks of stage {} to{}", reassignment.from, moved, reassignment.stage,
               summary);
  wake();
  co_return true;
}

awaitable<bool> JobManager::rereadTaskMaps() {
  taskMapsStale_ = false;
  for (uint32_t s = 0; s < core_.view().stages.size(); ++s) {
    if (!core_.view().stages[s].taskmap) continue;  // not released when last seen: its watch delivers it
    auto map = co_await store_->taskMap(config_.job_id, s);
    if (map) {
      core_.onTaskMap(s, map->value, map->stat.version);
      continue;
    }
    // Gone (the job deleted or compacted) or malformed: the watches tell the core, which ends
    // or fails the job on its next step. Unreachable: no step until it is read.
    if (map.error().code != ErrorCode::kUnavailable && map.error().code != ErrorCode::kDeadlineExceeded) continue;
    spdlog::warn("reading the taskMap of stage {} after the session expired: {}", s, map.message());
    taskMapsStale_ = true;
    co_return false;
  }
  co_return true;
}

awaitable<void> JobManager::readSiteRecords() {
  std::vector<pb::SiteInfo> infos;
  for (const auto& site : core_.status().sites()) {
    pb::SiteInfo info;
    info.set_site(site);
    auto live = co_await server_.coordinator().get(siteLivePath(site));
    if (live) {
      auto parsed = daemon::parseProto<pb::SiteInfo>(live->data, siteLivePath(site));
      if (parsed) info = *parsed;
    }
    infos.push_back(std::move(info));
  }
  core_.onSiteRecords(infos);
}

awaitable<void> JobManager::requestJm(std::string site) {
  auto live = co_await server_.coordinator().get(siteLivePath(site));
  if (!live) {
    spdlog::warn("site {} has no JM and no live master", site);
    co_return;
  }
  auto info = daemon::parseProto<pb::SiteInfo>(live->data, siteLivePath(site));
  if (!info) co_return;
  auto ep = net::Endpoint::parse(info->master_address());
  if (!ep) co_return;
  pb::StartJmRequest req;
  req.set_job_id(config_.job_id);
  req.set_role(pb::JM_SECONDARY);
  spdlog::warn("site {} has no JM: asking its master for one", site);
  auto r = co_await server_.client(*ep)->call<rpc::Master::StartJm>(req, kMasterCallTimeout);
  if (!r) spdlog::warn("site {} could not start a JM: {}", site, r.message());
}

awaitable<void> JobManager::sendContainerRequest(jobcore::ContainerRequest request) {
  auto master = net::Endpoint::parse(config_.master);
  if (!master) co_return;
  requestInFlight_ = true;
  core_.onContainerRequestSent(request);
  pb::JmUpdateRequest req;
  req.set_job_id(config_.job_id);
  req.set_jm_address(server_.address());
  req.set_desire(request.desire);
  req.set_remaining_tasks(request.remainingTasks);
  req.set_all_or_none(request.allOrNone);
  for (const auto& id : request.release) *req.add_release() = id;
  for (const auto& [id, endsInS] : request.leases) {
    auto* lease = req.add_leases();
    *lease->mutable_id() = id;
    lease->set_ends_in_ms(static_cast<uint32_t>(std::clamp(endsInS * 1000.0, 0.0, double(jobstate::kMaxQueueLeaseMs))));
  }
  auto resp = co_await server_.client(*master)->call<rpc::Master::JmUpdate>(req, kMasterCallTimeout);
  requestInFlight_ = false;
  if (server_.stopping()) co_return;
  if (!resp) {
    spdlog::warn("container request to master {}: {}", config_.master, resp.message());  // unreachable, or refused
    co_return;
  }
  onLeasesTakenBack(*resp);
  countGrants(static_cast<std::size_t>(resp->granted_size()));
  core_.onGrants({resp->granted().begin(), resp->granted().end()});
  wake();
}

void JobManager::onLeasesTakenBack(const pb::JmUpdateResponse& update) {
  if (update.lease_expired_size() == 0) return;
  if (update.lease_expired_size() > kMaxLeasesTakenBack) {
    spdlog::warn("master took back {} containers in one message: not believed", update.lease_expired_size());
    return;
  }
  spdlog::info("master took back {} container(s) whose lease ran out: their tasks run again",
               update.lease_expired_size());
  core_.onLeasesTakenBack({update.lease_expired().begin(), update.lease_expired().end()});
}

awaitable<void> JobManager::refreshInbound() {
  inboundReadAt_ = Clock::now();
  auto live = co_await server_.coordinator().get(siteLivePath(config_.site));
  if (server_.stopping() || !live) co_return;
  inboundKnown_ = true;  // read (a record that does not parse says no more the next time)
  auto info = daemon::parseProto<pb::SiteInfo>(live->data, siteLivePath(config_.site));
  if (!info) co_return;
  inbound_.assign(info->inbound().begin(), info->inbound().end());
  std::map<std::string, double> bytesPerS;
  for (const auto& rate : inbound_) {
    if (auto bytes = linkBytesPerS(rate)) bytesPerS[rate.from_site()] = *bytes;
  }
  core_.onInboundRates(std::move(bytesPerS));
}

awaitable<void> JobManager::refreshSiteLeases() {
  siteLeasesReadAt_ = Clock::now();
  auto queueNode = co_await server_.coordinator().get(siteQueuePath(config_.site));
  if (server_.stopping()) co_return;
  std::vector<double> leaseEnds;
  if (queueNode) {
    auto queue = jobstate::parseSiteQueue(queueNode->data, config_.site);
    if (!queue) {
      spdlog::debug("site queue: {}", queue.message());
    } else {
      // Publisher's wall clock to our monotonic one (the site's master runs in the same site).
      const int64_t ageMs = daemon::nowUnixMs() - queue->published_unix_ms();
      if (std::abs(ageMs) <= kSiteLeasesMaxAgeMs) {
        const double now = nowS();
        for (const auto& lease : queue->leases()) {
          if (lease.job_id() == config_.job_id) continue;  // ours: known better here
          leaseEnds.push_back(now + (static_cast<double>(lease.ends_in_ms()) - static_cast<double>(ageMs)) / 1000.0);
        }
      }
    }
  }
  core_.onSiteLeases(std::move(leaseEnds));
}

awaitable<bool> JobManager::failJob(std::string reason) {
  spdlog::error("job {} failed: {}", config_.job_id, reason);
  Status ended = co_await store_->endJob(config_.job_id, pb::JOB_FAILED, reason);
  // Already over, or deleted: nothing left to fail.
  co_return ended || ended.code() == ErrorCode::kInvalidArgument || ended.code() == ErrorCode::kNotFound;
}

// ---- tasks and stealing ----------------------------------------------------------------------

awaitable<void> JobManager::runTask(jobcore::LaunchTask launch) {
  const std::string label = taskLabel(launch.task);
  auto ep = net::Endpoint::parse(launch.container.worker_address());
  if (!ep) {
    core_.onTaskEnded(launch, jobcore::AttemptEnd::kTaskFailed, nullptr, "bad address", nowS());
    core_.failJob("container on " + launch.container.id().worker_id() + " has a bad address: " + ep.message());
    wake();
    co_return;
  }
  if (!server_.zookeeperAvailable()) {
    // The session went while this step's earlier actions were written: no launch until it is
    // back (the worker could not record the start either). The task waits, uncounted.
    core_.onTaskEnded(launch, jobcore::AttemptEnd::kInputNotReady, nullptr, "ZooKeeper unavailable", nowS());
    wake();
    co_return;
  }
  launch.request.set_jm_address(server_.address());
  spdlog::info("task {} attempt {} on {}", label, launch.attempt, launch.slotKey);
  metrics_.launches->inc({launch.request.op()});
  metrics_.queueWait->observe({launch.request.op()}, launch.waitedS);
  const auto launchedAt = Clock::now();
  // (Never co_await inside ?:, && or || with GCC 12: the operand may be evaluated twice.)
  auto client = server_.client(*ep);
  Result<pb::RunTaskResponse> r = co_await client->call<rpc::Worker::RunTask>(launch.request, kTaskTimeout);
  if (server_.stopping()) co_return;
  const double callS = std::chrono::duration<double>(Clock::now() - launchedAt).count();
  if (r && r->has_lost_input()) {
    // An input on none of its copies: the core decides whether its task must run again.
    const auto& lost = r->lost_input();
    const std::string why = fmt::format("input {}/s{}-t{}-b{} is on none of its copies", lost.job_id().substr(0, 64),
                                        lost.stage(), lost.task(), lost.bucket());
    spdlog::warn("task {} attempt {} on {}: {}", label, launch.attempt, launch.slotKey, why);
    metrics_.taskSeconds->observe({launch.request.op(), "failed"}, callS);
    core_.onInputLost(launch, lost, why, nowS());
  } else if (r) {
    spdlog::info("task {} done on {} in {:.3f} s", label, launch.slotKey, r->location().elapsed_s());
    metrics_.taskSeconds->observe({launch.request.op(), "succeeded"}, r->location().elapsed_s());
    metrics_.launchSeconds->observe({launch.request.op()}, std::max(0.0, callS - r->location().elapsed_s()));
    core_.onTaskEnded(launch, jobcore::AttemptEnd::kSucceeded, &r->location(), "", nowS());
  } else {
    spdlog::warn("task {} attempt {} on {} failed: {}", label, launch.attempt, launch.slotKey, r.message());
    metrics_.taskSeconds->observe({launch.request.op(), "failed"}, callS);
    core_.onTaskEnded(launch, jobcore::classifyRunTaskError(r.error().code), nullptr, r.message(), nowS());
  }
  writeDecisions();
  wake();
}

awaitable<void> JobManager::probeWorker(jobcore::ProbeWorker probe) {
  // Where to ask: the address the core has (an output's record, a container's), else the
  // worker's liveness node (without one it is not live, and nothing is to say).
  std::string address = probe.address;
  if (address.empty()) {
    if (probe.site.empty()) co_return;
    auto node = co_await server_.coordinator().get(siteWorkerPath(probe.site, probe.worker));
    if (server_.stopping() || !node) co_return;
    auto info = daemon::parseProto<pb::WorkerInfo>(node->data, siteWorkerPath(probe.site, probe.worker));
    if (!info || info->worker_id() != probe.worker) co_return;
    address = info->address();
  }
  auto ep = net::Endpoint::parse(address);
  if (!ep) co_return;
  pb::FetchRequest nothing;  // names no file: a live worker answers kNotFound at once
  nothing.set_dataset_file("");
  auto client = server_.client(*ep);
  auto r = co_await client->call<rpc::Worker::Fetch>(nothing, kGoneProbeTimeout);
  if (server_.stopping()) co_return;
  // Any answer, even an error, means its process lives; a timeout says nothing.
  if (r || r.error().code != ErrorCode::kUnavailable || core_.workerGone(probe.worker)) co_return;
  spdlog::warn("worker {} is gone ({}): its tasks run again now, its unrecorded outputs are lost", probe.worker,
               r.message());
  core_.onWorkerGone(probe.worker, nowS());
  wake();
}

awaitable<void> JobManager::probeOutput(jobcore::ProbeOutput probe) {
  pb::FetchRequest req;
  auto* key = req.mutable_partition();
  key->set_job_id(config_.job_id);
  key->set_stage(probe.task.first);
  key->set_task(probe.task.second);
  key->set_bucket(probe.bucket);
  req.set_max_bytes(1);
  req.set_from_site(config_.site);
  std::vector<std::string> holders{probe.location.worker_address()};
  for (const auto& copy : probe.location.replicas()) holders.push_back(copy.worker_address());
  std::vector<jobcore::HolderAnswer> answers;
  std::string said;
  for (const auto& address : holders) {
    auto answer = jobcore::HolderAnswer::kUnreachable;
    if (auto ep = net::Endpoint::parse(address)) {
      auto client = server_.client(*ep);
      auto r = co_await client->call<rpc::Worker::Fetch>(req, kProbeTimeout);
      if (server_.stopping()) co_return;
      if (r) {
        answer = jobcore::HolderAnswer::kServed;
      } else if (r.error().code == ErrorCode::kNotFound) {
        answer = jobcore::HolderAnswer::kNotHeld;
      }
      said += fmt::format(" {}: {};", address.substr(0, 64), r ? "has it" : r.message().substr(0, 200));
    }
    answers.push_back(answer);
  }
  spdlog::info("output of task {} (bucket {}), claimed lost by a reader, asked of its holders:{}", taskLabel(probe.task),
               probe.bucket, said);
  core_.onOutputProbed(probe, answers, nowS());
  wake();
}

awaitable<void> JobManager::stealWork(jobcore::StealWork steal) {
  bool gotWork = false;
  std::optional<double> retryAfterS;
  // What our site's workers measured fetching from the others (its record, re-read by the
  // main loop): victims weigh moving a task against it. The first steal waits for the first
  // reading, as a victim without rates decides by Parades alone.
  if (!inboundKnown_) co_await refreshInbound();
  if (server_.stopping()) co_return;
  for (const auto& site : steal.victims) {
    auto victim = jms_.find(site);
    if (victim == jms_.end()) continue;
    auto ep = net::Endpoint::parse(victim->second.address());
    if (!ep) continue;
    pb::StealRequest req;
    req.set_job_id(config_.job_id);
    req.set_thief_site(config_.site);
    req.set_max_tasks(steal.maxTasks);
    for (const auto& rate : inbound_) *req.add_inbound() = rate;
    auto started = Clock::now();
    auto client = server_.client(*ep);
    auto r = co_await client->call<rpc::Jm::Steal>(req, kStealCallTimeout);
    if (server_.stopping()) co_return;
    if (!r) {
      // Perhaps a replaced JM at a new address: read its node again.
      if (r.error().code == ErrorCode::kUnavailable) {
        jms_.erase(site);
        jmNames_ = std::vector<std::string>(jmSites_.begin(), jmSites_.end());
      }
      continue;
    }
    if (r->stolen_size() == 0) {
      if (r->retry_after_ms() > 0) {
        const double after = std::min<uint32_t>(r->retry_after_ms(), kMaxRetryAfterMs) / 1000.0;
        if (!retryAfterS || after < *retryAfterS) retryAfterS = after;
      }
      continue;
    }
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    spdlog::info("stole {} tasks from {} in {:.1f} ms", r->stolen_size(), site, ms);
    gotWork = true;
    break;
  }
  metrics_.steals->inc({gotWork ? "got_work" : "none"});
  core_.onStealEnded(gotWork, retryAfterS);
  if (gotWork) wake();
}

awaitable<Result<pb::StealResponse>> JobManager::giveWork(pb::StealRequest req, net::CallContext context) {
  // A JM steals for its own site only (TLS: the site in its certificate).
  if (Status s = net::checkCallerSite(context.identity, req.thief_site()); !s) co_return s.error();
  pb::StealResponse resp;
  if (req.job_id() != config_.job_id || !core_.loaded()) co_return resp;
  // Other jobs' leases here: what a local container that frees up soon is worth against the
  // move. Read before the checks below, so that nothing is awaited between them and the offer.
  if (config_.steal_information == config::StealInformation::kLeases &&
      (!siteLeasesReadAt_ || Clock::now() - *siteLeasesReadAt_ > kSiteLeasesMaxAge)) {
    co_await refreshSiteLeases();
  }
  if (server_.stopping()) co_return resp;
  // A JM that may have been paused (its loop has not run for the pause threshold, or it has
  // not confirmed its registration since), or has no session, gives nothing: its view of
  // which tasks wait may be stale, and a replacement may have run them meanwhile (bench-chaos
  // worker-stop: a resumed JM gave away a task its replacement had finished). The thief asks
  // again later, by when the JM has confirmed itself or exited.
  if (!registered_ || !server_.zookeeperAvailable() || !pause_ || pause_->overdue(Clock::now())) {
    resp.set_retry_after_ms(std::min<uint32_t>(config_.tick_ms, kMaxRetryAfterMs));
    co_return resp;
  }
  // The thief's measured rates, from the network: only the job's sites, finite and positive,
  // one per site (a longer list is not a measurement: it is ignored, not scanned).
  std::map<std::string, double> inbound;
  const auto& sites = core_.status().sites();
  if (req.inbound_size() > sites.size()) {
    spdlog::warn("steal by {}: {} link rates for {} sites, ignored", req.thief_site().substr(0, 64), req.inbound_size(),
                 sites.size());
    req.clear_inbound();
  }
  if (config_.steal_information == config::StealInformation::kOffers) req.clear_inbound();  // Parades alone
  for (const auto& rate : req.inbound()) {
    if (std::find(sites.begin(), sites.end(), rate.from_site()) == sites.end()) continue;
    if (auto bytes = linkBytesPerS(rate)) inbound[rate.from_site()] = *bytes;
  }
  auto offer = core_.offerSteal(req.thief_site(), req.max_tasks(), nowS(), inbound);
  if (offer.tasks.empty()) {
    if (offer.retryAfterS) {
      resp.set_retry_after_ms(static_cast<uint32_t>(std::min(*offer.retryAfterS * 1000.0, double{kMaxRetryAfterMs})));
    }
    co_return resp;
  }
  // One compare-and-set of the taskMap moves them: a concurrent steal or release loses the
  // race and retries on the fresh version, so a task never has two owners.
  constexpr int kStealTries = 3;
  std::vector<uint32_t> moved;  // of the try that landed
  std::function<Status(pb::TaskMap&)> moveToThief = [&](pb::TaskMap& map) {
    moved = jobcore::JobCore::moveTasks(map, offer.tasks, config_.site, req.thief_site());
    return Status::ok();
  };
  auto cas = co_await store_->casTaskMap(config_.job_id, offer.stage, moveToThief, kStealTries);
  if (!cas) moved.clear();
  Status outcome = cas.status();
  core_.settleSteal(offer, moved, cas ? &cas->value : nullptr, cas ? cas->stat.version : -1);
  writeDecisions();
  if (!outcome) {
    spdlog::warn("steal by {} failed: {}", req.thief_site(), outcome.message());
    co_return resp;
  }
  for (uint32_t t : moved) {
    auto* ref = resp.add_stolen();
    ref->set_stage(offer.stage);
    ref->set_task(t);
  }
  spdlog::info("gave {} tasks of stage {} to {}", moved.size(), offer.stage, req.thief_site());
  metrics_.tasksGiven->inc({}, static_cast<double>(moved.size()));
  co_return resp;
}

int run(const std::string& configPath) {
  return daemon::runDaemon<JobManager, config::JmConfig>(
      "tellus-jm", configPath, config::loadJmConfig,
      [](const config::JmConfig& c) { return "jm/" + c.job_id + "/" + c.site; });
}

}  // namespace tellus::jm
