#include "jobcore/job_core.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include <fmt/format.h>

#include "job/spec.h"
#include "jobstate/residency.h"

namespace tellus::jobcore {

using namespace tellus::jobstate;

std::string taskLabel(const TaskId& id) { return std::to_string(id.first) + "/" + std::to_string(id.second); }

std::string slotKeyOf(const pb::ContainerId& id) { return id.worker_id() + "/" + std::to_string(id.slot()); }

AttemptEnd classifyRunTaskError(ErrorCode code) {
  switch (code) {
    case ErrorCode::kUnavailable:
    case ErrorCode::kDeadlineExceeded:
    case ErrorCode::kResourceExhausted:  // the worker's rate limit: retry, the task is fine
      return AttemptEnd::kWorkerUnreachable;
    case ErrorCode::kNotFound:
    case ErrorCode::kAlreadyExists:
      return AttemptEnd::kInputNotReady;
    default:
      return AttemptEnd::kTaskFailed;
  }
}

bool Actions::empty() const {
  return launches.empty() && lostOutputs.empty() && probes.empty() && probeWorkers.empty() && clearMarkers.empty() &&
         reassignments.empty() && !needSiteRecords && releases.empty() &&
         !succeed && !fail && startJms.empty() && !request && !steal && !publish && readFinishRecords.empty() && !exit && !takeOver;
}

namespace {
// An executor reports exactly the buckets it was asked for: a record of stage s with another
// count is malformed, and a reader would take a bucket missing from it as empty (taskInputs).
bool bucketsWellFormed(const pb::JobSpec& spec, uint32_t s, const pb::PartitionLocation& loc) {
  return static_cast<uint32_t>(loc.bucket_bytes_size()) == job::outputBuckets(spec, s);
}

// A thief that found nothing to steal asks again at most this much later (doubling from the
// steal interval), unless the work changes first.
constexpr double kMaxStealBackoffS = 5.0;
}  // namespace

double JobCore::Slot::used() const {
  double u = 0;
  for (const auto& [id, share] : tasks) u += share;
  return u;
}

JobCore::JobCore(CoreConfig config) : config_(std::move(config)), computeHistory_(config_.lease.historyK) {}

uint32_t JobCore::attempts(const TaskId& id) const {
  auto it = attempts_.find(id);
  return it == attempts_.end() ? 0 : it->second;
}

// ---- the job's state ---------------------------------------------------------------------

Status JobCore::onJobLoaded(const pb::JobSpec& spec, const std::vector<pb::StageInputs>& inputs) {
  const auto stages = static_cast<uint32_t>(spec.stages_size());
  if (stages == 0) return makeError(ErrorCode::kInvalidArgument, "job " + config_.jobId + " has no stages");
  view_.jobId = config_.jobId;
  view_.spec = spec;
  view_.stages.assign(stages, StageView{});
  partWorkers_.assign(stages, {});
  partElapsedS_.assign(stages, 0);
  unfinishedHere_.assign(stages, {});
  unfinishedElsewhere_.assign(stages, {});
  finishKeys_.assign(stages, {});
  verified_.assign(stages, {});
  untrusted_.assign(stages, {});
  if (spec.min_locality() > 0) localityGate_.emplace(spec.min_locality(), config_.timings.localityWaitS);
  partsListed_.assign(stages, false);
  for (uint32_t s = 0; s < stages; ++s) {
    if (!isDatasetStage(spec, s)) continue;
    if (s >= inputs.size()) {
      return makeError(ErrorCode::kInvalidArgument, "job " + config_.jobId + ": no inputs for stage " + std::to_string(s));
    }
    view_.stages[s].inputs = inputs[s];
  }
  // Residency in meaning: which stages may not be stolen (computed once; the spec and inputs
  // never change). A job whose pinning is impossible was refused at submission; here it only
  // means nothing is stolen, and placement fails the job.
  auto pinning = stagePinning(view_);
  pinnedStages_.assign(stages, !pinning.isOk());
  if (pinning) {
    for (uint32_t s = 0; s < stages; ++s) pinnedStages_[s] = !(*pinning)[s].tasksAt.empty();
  }
  loaded_ = true;
  refreshRunningElsewhere();
  return Status::ok();
}

void JobCore::onStatus(const pb::JobStatus& status, int32_t version) {
  statusVersion_ = version;
  // Validated where it is read: acting on a status that makes no sense would hang the job.
  const bool known = pb::JobState_IsValid(status.state());
  std::string problem;
  if (!known) {
    problem = "unknown state " + std::to_string(static_cast<int>(status.state()));
  } else if (isTerminal(status.state())) {
    // Over, whatever else it says.
  } else if (status.sites_size() == 0) {
    problem = "no sites";
  } else if (!status.job_id().empty() && status.job_id() != config_.jobId) {
    problem = "it names job '" + status.job_id().substr(0, 64) + "'";
  } else {
    for (const auto& site : status.sites()) {
      if (site.empty() || site.size() > 256) problem = "a site name of " + std::to_string(site.size()) + " bytes";
    }
  }
  if (!problem.empty()) {
    failJob("the job's status is inconsistent (" + problem + ")");
    return;
  }
  status_ = status;
  refreshAllLive();
  // Started where the job does not run (a misdirected launch): nothing here to manage, and
  // as the primary it would lead the job from a site with no tasks and no containers.
  outsider_ = !isTerminal(status.state()) &&
              std::find(status.sites().begin(), status.sites().end(), config_.site) == status.sites().end();
}

void JobCore::onStatusUnreadable(const std::string& reason) { failJob("the job's status is unreadable: " + reason); }

void JobCore::onJobDeleted() { deleted_ = true; }

void JobCore::onTaskMapUnreadable(uint32_t stage, const std::string& reason) {
  failJob("stage " + std::to_string(stage) + ": " + reason);
}

void JobCore::onTaskMap(uint32_t stage, const pb::TaskMap& map, int32_t version, const std::vector<uint32_t>* moved) {
  if (stage >= view_.stages.size()) return;
  // A map that does not match its stage is not applied: tasks without an owner (or with one
  // that is not a site of the job) would never run, and the job would hang.
  const uint32_t tasks = taskCount(view_, stage);
  auto& st = view_.stages[stage];
  std::string problem;
  std::optional<std::vector<uint32_t>> changed;
  if (static_cast<uint32_t>(map.owner_site_size()) != tasks) {
    problem = "has " + std::to_string(map.owner_site_size()) + " tasks, the stage " + std::to_string(tasks);
  } else {
    // The owners we hold were checked when they came: only the changed ones are looked at.
    changed = changedOwners(stage, map, moved);
    auto check = [&](uint32_t t) {
      const auto& owner = map.owner_site(static_cast<int>(t));
      if (std::find(status_.sites().begin(), status_.sites().end(), owner) == status_.sites().end()) {
        problem = "gives task " + std::to_string(t) + " to '" + owner.substr(0, 64) + "', not a site of the job";
      }
    };
    if (status_.sites_size() > 0 && changed) {
      for (size_t i = 0; i < changed->size() && problem.empty(); ++i) check((*changed)[i]);
    } else if (status_.sites_size() > 0) {
      for (uint32_t t = 0; t < tasks && problem.empty(); ++t) check(t);
    }
  }
  if (!problem.empty()) {
    failJob("stage " + view_.spec.stages(static_cast<int>(stage)).name() + ": its taskMap " + problem);
    return;
  }
  // A reading older than what we wrote ourselves (a steal's CAS) is not applied.
  if (st.taskmap && version < st.taskmapVersion) return;
  applyTaskMap(stage, map, version, changed);
  stealBackoffS_ = 0;  // the work moved: worth asking again soon
  refreshRunningElsewhere();
}

void JobCore::onFinishRecords(uint32_t stage, const std::set<std::string>& records) {
  readingFinish_.erase(stage);
  if (stage >= view_.stages.size()) return;
  for (const auto& [t, loc] : view_.stages[stage].parts) {
    auto key = finishKeys_[stage].find(t);
    if (key == finishKeys_[stage].end()) continue;  // not listed yet: asked again later
    if (records.count(key->second) && bucketsWellFormed(view_.spec, stage, loc)) {
      verified_[stage][t] = key->second;
    } else {
      untrusted_[stage].insert(t);
    }
  }
}

bool JobCore::stageVerified(uint32_t s) const {
  if (!config_.verifyOutputs) return true;
  for (const auto& [t, loc] : view_.stages[s].parts) {
    auto key = finishKeys_[s].find(t);
    auto ok = verified_[s].find(t);
    if (key == finishKeys_[s].end() || ok == verified_[s].end() || ok->second != key->second) return false;
  }
  return true;
}

bool JobCore::decideVerification(Actions& out) {
  if (!config_.verifyOutputs) return true;
  bool trusted = true;
  for (uint32_t s = 0; s < view_.stages.size(); ++s) {
    const auto& stage = view_.stages[s];
    // Checked once a stage looks complete: one read of its finish records for all its parts.
    if (!listed(s) || !stage.taskmap || stage.parts.size() != taskCount(view_, s) || stageVerified(s)) continue;
    trusted = false;
    for (uint32_t t : untrusted_[s]) {
      auto part = stage.parts.find(t);
      if (part == stage.parts.end()) continue;
      out.lostOutputs.push_back({{s, t}, part->second.worker_id(),
                                 "its record names no finished execution of the task (forged or inconsistent)"});
    }
    bool keyed = true;
    for (const auto& [t, loc] : stage.parts) keyed = keyed && finishKeys_[s].count(t) > 0;
    if (untrusted_[s].empty() && keyed && readingFinish_.insert(s).second) out.readFinishRecords.push_back(s);
  }
  return trusted;
}

void JobCore::onRunningMarkers(const std::map<TaskId, pb::RunningTask>& markers) {
  markers_ = markers;
  markersListed_ = true;
  refreshRunningElsewhere();
}

void JobCore::refreshRunningElsewhere() {
  // A marker that outlives its task's recorded output (its worker lost the connection while
  // removing it) no longer means the task or its container is busy.
  runningElsewhere_.clear();
  std::erase_if(clearedMarkers_, [&](const TaskId& id) { return !markers_.count(id); });
  for (const auto& [id, marker] : markers_) {
    if (running_.count(id)) continue;
    // A gone worker's executions are over (onWorkerGone), its session's markers notwithstanding.
    const auto& on = marker.container().worker_id();
    const std::string* goneOn = nullptr;
    if (!on.empty()) {
      if (gone_.count(on)) goneOn = &on;
    } else if (auto ended = endedUnreachableOn_.find(id); ended != endedUnreachableOn_.end() && gone_.count(ended->second)) {
      goneOn = &ended->second;
    }
    if (goneOn) {
      clearMarkerOf(id, *goneOn);
      continue;
    }
    // A marker of a stage the job does not have is garbage (a forged RunTask made a worker
    // write it; indexing per-stage state with it crashed the JM: found by fuzzing).
    if (id.first >= view_.stages.size()) continue;
    if (view_.stages[id.first].parts.count(id.second)) continue;
    runningElsewhere_[id] = marker;
  }
  markersChanged_ = true;
}

void JobCore::onLiveWorkers(const std::string& site, const std::set<std::string>& listed) {
  // A gone worker stays dead while its session lists it; a listing without it ends that.
  std::set<std::string> workers = listed;
  std::erase_if(gone_, [&](const auto& kv) { return kv.second == site && !workers.count(kv.first); });
  for (const auto& [worker, goneSite] : gone_) {
    if (goneSite == site) workers.erase(worker);
  }
  for (const auto& worker : workers) deadProcess_.erase(worker);  // listed live, not gone: a new process
  liveWorkers_[site] = workers;
  refreshAllLive();
  if (workers.empty()) {
    // Cut off (or down): whichever of its workers come back, they come back one by one.
    if (!everLive_[site].empty()) returning_[site] = everLive_[site];
    returnedAt_.erase(site);
    return;
  }
  everLive_[site].insert(workers.begin(), workers.end());
  if (auto it = returning_.find(site); it != returning_.end()) {
    for (const auto& w : workers) it->second.erase(w);
    if (it->second.empty()) {
      returning_.erase(it);
      returnedAt_.erase(site);
    }
  }
}

void JobCore::onWorkerGone(const std::string& worker, double now) {
  // Its losses are decided at once: lossSettleS waits for workers that may come back.
  deadProcess_.insert(worker);
  vanishedAt_[worker] = now - config_.timings.lossSettleS;
  for (auto& [id, since] : unconfirmedSince_) {
    const auto& parts = view_.stages[id.first].parts;
    const auto part = parts.find(id.second);
    if (part != parts.end() && part->second.worker_id() == worker) since = now - config_.timings.lossSettleS;
  }
  for (const auto& [site, workers] : liveWorkers_) {
    if (!workers.count(worker)) continue;  // its session is over already
    gone_[worker] = site;
    dropIdleSlotsOn(worker);
    const std::set<std::string> listed = workers;  // the listing as it was: it leaves the gone worker out
    onLiveWorkers(site, listed);
    refreshRunningElsewhere();
    return;
  }
}

void JobCore::decideWorkerProbes(double now, Actions& out) {
  // `since`: a probe after it is what it needs (an unreachable launch's end); else it waits
  // probeRetryS after the last one.
  auto ask = [&](const std::string& worker, const std::string& address, std::optional<double> since = std::nullopt) {
    if (worker.empty() || deadProcess_.count(worker)) return;
    if (auto at = probedWorkerAt_.find(worker);
        at != probedWorkerAt_.end() && (since ? at->second >= *since : now < at->second + config_.timings.probeRetryS)) {
      return;
    }
    std::string site;
    for (const auto& [name, workers] : liveWorkers_) {
      if (workers.count(worker)) site = name;
    }
    if (site.empty() && address.empty()) return;  // neither live nor to be found
    out.probeWorkers.push_back({site, worker, address});
    probedWorkerAt_[worker] = now;
  };
  // Our outputs whose batch has not shown up: their worker may have died holding it.
  for (auto it = unlistedSince_.begin(); it != unlistedSince_.end();) {
    const auto& [u, t] = it->first;
    const auto& parts = view_.stages[u].parts;
    const auto part = parts.find(t);
    if (part == parts.end() || listedParts_[u].count(t)) {
      it = unlistedSince_.erase(it);
      continue;
    }
    if (now - it->second >= config_.timings.probeRetryS) ask(part->second.worker_id(), part->second.worker_address());
    ++it;
  }
  for (const auto& [worker, reason] : toProbe_) ask(worker, reason.address, reason.at);
  toProbe_.clear();
  for (auto& [id, worker] : staleMarkers_) {
    clearedMarkers_.insert(id);
    out.clearMarkers.emplace_back(id, std::move(worker));
  }
  staleMarkers_.clear();
  if (!markersChanged_) return;
  markersChanged_ = false;
  // A predecessor's executions of our tasks: each worker holding one is asked once.
  for (const auto& [id, marker] : runningElsewhere_) {
    const auto& worker = marker.container().worker_id();
    if (!worker.empty() && !probedWorkerAt_.count(worker) && ownedHereOrUnknown(id)) ask(worker, "");
  }
}

void JobCore::onJms(const std::set<std::string>& sites) { jms_ = sites; }

namespace {

// An output a live worker can serve: its own worker's copy, or another one (PartitionLocation::replicas).
// An empty one needs no worker: its readers read nothing (jobstate::outputEmpty).
bool outputLive(const pb::PartitionLocation& loc, const std::set<std::string>& live) {
  if (live.count(loc.worker_id()) || jobstate::outputEmpty(loc)) return true;
  return std::any_of(loc.replicas().begin(), loc.replicas().end(),
                     [&](const pb::DatasetReplica& r) { return live.count(r.worker_id()) > 0; });
}

// A part's elapsed time as stageMeanS sums it: a value from the network that is not finite, is
// negative or is absurd would stay in the running sum (NaN for good, or the small values lost).
double elapsedOf(const pb::PartitionLocation& location) {
  constexpr double kMaxElapsedS = 1e9;  // ~30 years
  const double v = location.elapsed_s();
  return std::isfinite(v) ? std::clamp(v, 0.0, kMaxElapsedS) : 0.0;
}

}  // namespace

void JobCore::setPart(uint32_t s, uint32_t t, const pb::PartitionLocation& location) {
  auto& parts = view_.stages[s].parts;
  auto it = parts.find(t);
  if (it != parts.end()) erasePart(s, it);
  parts.emplace(t, location);
  ++partWorkers_[s][location.worker_id()];
  partElapsedS_[s] += elapsedOf(location);
}

std::map<uint32_t, pb::PartitionLocation>::iterator JobCore::erasePart(
    uint32_t s, std::map<uint32_t, pb::PartitionLocation>::iterator it) {
  claimedLost_.erase({s, it->first});
  suspects_.erase({s, it->first});
  notHeld_.erase({s, it->first});
  auto& counts = partWorkers_[s];
  auto count = counts.find(it->second.worker_id());
  if (count != counts.end() && --count->second == 0) counts.erase(count);
  auto& parts = view_.stages[s].parts;
  partElapsedS_[s] -= elapsedOf(it->second);
  auto next = parts.erase(it);
  if (parts.empty()) partElapsedS_[s] = 0;  // no rounding left over from the subtractions
  return next;
}

void JobCore::erasePart(uint32_t s, uint32_t t) {
  auto& parts = view_.stages[s].parts;
  auto it = parts.find(t);
  if (it != parts.end()) erasePart(s, it);
}

bool JobCore::partsAllOn(uint32_t s, const std::set<std::string>& live) const {
  for (const auto& [worker, count] : partWorkers_[s]) {
    if (!live.count(worker)) return false;
  }
  return true;
}

void JobCore::onSiteRecords(const std::vector<pb::SiteInfo>& sites) { siteCapacities_ = siteCapacities(sites); }

void JobCore::onSiteCapacities(std::vector<SiteCapacity> sites) { siteCapacities_ = std::move(sites); }

void JobCore::onPartRecorded(uint32_t stage, uint32_t task, const pb::PartitionLocation& location,
                             const std::string& finishKey) {
  if (stage >= view_.stages.size() || task >= taskCount(view_, stage)) return;
  if (!finishKey.empty()) {
    // A part that came back under another key must be confirmed afresh.
    auto& known = finishKeys_[stage][task];
    if (known != finishKey) untrusted_[stage].erase(task);
    known = finishKey;
  }
  if (config_.verifyOutputs && !bucketsWellFormed(view_.spec, stage, location)) untrusted_[stage].insert(task);
  // Another site's execution, new to us, that read nothing across sites: its time is compute
  // alone, a record of "a similar task on a different node" for our lease estimates.
  if (location.site() != config_.site && location.fetched().empty() && !listedParts_[stage].count(task)) {
    computeHistory_.record(std::to_string(stage), location.worker_id(), elapsedOf(location));
    restateDefaultLeases(stage);
  }
  setPart(stage, task, location);
  notePart(stage, task, true);
  listedParts_[stage].insert(task);
  // A marker that outlives its task's recorded output no longer means anything runs.
  runningElsewhere_.erase({stage, task});
}

void JobCore::onPartUnlisted(uint32_t stage, uint32_t task) {
  if (stage >= view_.stages.size()) return;
  // A part that comes back must be confirmed afresh.
  finishKeys_[stage].erase(task);
  untrusted_[stage].erase(task);
  // Only our own task's output, which no listing showed yet, outlives its absence.
  if (!listedParts_[stage].erase(task)) return;
  erasePart(stage, task);
  notePart(stage, task, false);
  // Its running marker, if any, means the task runs again (refreshRunningElsewhere's rule).
  const TaskId id{stage, task};
  if (auto marker = markers_.find(id); marker != markers_.end() && !running_.count(id)) runningElsewhere_.insert(*marker);
}

void JobCore::onPartsListed(uint32_t stage) {
  if (stage < partsListed_.size()) partsListed_[stage] = true;
}

// ---- election ----------------------------------------------------------------------------

void JobCore::onBecamePrimary(uint64_t epoch) {
  primary_ = true;
  epoch_ = epoch;
  knownEpoch_ = std::max(knownEpoch_, epoch);
}

void JobCore::onLostPrimary() {
  primary_ = false;
  siteCapacities_.reset();
  // A primary again later counts a site's absence afresh: it did not watch it meanwhile.
  siteGoneSince_.clear();
}

bool JobCore::onEpoch(uint64_t epoch, double now) {
  if (!epochRead_ || epoch > knownEpoch_) {
    // A new primary has just acted (bumped it): its window starts now, its heartbeats follow.
    epochSeenAt_ = now;
    heardAt_.reset();
    heardFrom_.clear();
  }
  epochRead_ = true;
  knownEpoch_ = std::max(knownEpoch_, epoch);
  if (primary_ && epoch > epoch_) {
    onLostPrimary();
    return true;
  }
  return false;
}

void JobCore::onPrimaryHeartbeat(const std::string& site, uint64_t epoch, double now) {
  // Only the primary of the epoch the node holds: an older one is fenced (it learns so from
  // our reply), a newer one is not confirmed yet (our watch will show it; its next heartbeat
  // counts). Keeping a dead primary "alive" this way needs the current epoch's number and a
  // JM's certificate, and still leaves the election's session-expiry path.
  if (!epochRead_ || epoch != knownEpoch_ || epoch == 0 || (primary_ && epoch == epoch_)) return;
  heardAt_ = now;
  heardFrom_ = site;
}

void JobCore::onElectionPosition(std::optional<size_t> position) { electionPosition_ = position; }

void JobCore::onTakeOverEnded(bool won, double now) {
  takingOver_ = false;
  if (!won) takeOverNotBefore_ = now + config_.timings.takeOverRetryS;
  // The primary we took over from missed its heartbeats and did not answer one more: its site
  // needs a JM now, not once its node has expired and jmGraceS passed (a JM paused, not dead,
  // finds itself replaced and exits).
  if (won && primary_ && !takingOverFrom_.empty() && takingOverFrom_ != config_.site) replaceAtOnce_.insert(takingOverFrom_);
  takingOverFrom_.clear();
}

void JobCore::decideTakeOver(double now, Actions& out) {
  // Both conditional writes need what they check: the epoch and the status as read.
  if (primary_ || takingOver_ || !epochRead_ || statusVersion_ < 0) return;
  if (now < takeOverNotBefore_) {
    wakeAt(takeOverNotBefore_, now, out);
    return;
  }
  const double window = config_.timings.primaryMissS;
  std::string why;
  const bool byHeartbeats = electionPosition_ != size_t{0};
  if (!byHeartbeats) {
    // The last sign of life of the current primary: its heartbeat, or its epoch bump.
    const double lastSign = std::max(epochSeenAt_, heardAt_.value_or(epochSeenAt_));
    if (knownEpoch_ == 0) {
      why = "elected, and the job has had no primary yet";
    } else if (now - lastSign >= window) {
      why = fmt::format("elected, and the primary of epoch {} was not heard for {:.3f} s", knownEpoch_, now - lastSign);
    } else {
      wakeAt(lastSign + window, now, out);
      return;
    }
  } else if (window > 0 && heardAt_ && electionPosition_ == size_t{1}) {
    // Only a primary we heard: one whose heartbeats never reached us (blocked, or this JM is
    // new) is left to the election, or a JM cut off from it would take over again and again.
    // Only the next in line: the others would take over from it in turn once the silent
    // primary's session expires and the election moves on.
    if (now - *heardAt_ >= window) {
      why = fmt::format("the primary of epoch {} at {} missed its heartbeats for {:.3f} s", knownEpoch_, heardFrom_,
                        now - *heardAt_);
    } else {
      wakeAt(*heardAt_ + window, now, out);
      return;
    }
  } else {
    return;
  }
  takingOver_ = true;
  takingOverFrom_ = byHeartbeats ? heardFrom_ : std::string();
  out.takeOver = TakeOver{knownEpoch_, byHeartbeats, takingOverFrom_, std::move(why)};
}

// ---- resources ---------------------------------------------------------------------------

void JobCore::onGrants(const std::vector<pb::Container>& granted) {
  std::set<std::string> keys;
  for (const auto& c : granted) {
    if (gone_.count(c.id().worker_id())) continue;  // the master has not seen it go yet
    auto key = slotKeyOf(c.id());
    keys.insert(key);
    slots_.try_emplace(key, Slot{c, {}, -1});
  }
  // A revoked container goes once its tasks are done.
  std::erase_if(slots_, [&](const auto& kv) { return !keys.count(kv.first) && kv.second.tasks.empty(); });
}

void JobCore::onUsage(const pb::ContainerUsageReport& report) {
  for (const auto& u : report.usage()) {
    auto it = slots_.find(slotKeyOf(u.id()));
    if (it == slots_.end()) continue;
    if (!std::isfinite(u.cpu()) || u.cpu() < 0) continue;
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
}

double JobCore::taskShare(uint32_t s) const {
  auto it = stageShare_.find(s);
  // Round up to tenths so that rounding noise does not over-pack a container.
  return it == stageShare_.end() ? 1.0 : std::min(1.0, std::ceil(it->second * 10) / 10);
}

// ---- task outcomes -----------------------------------------------------------------------

void JobCore::dropIdleSlotsOn(const std::string& worker) {
  std::erase_if(slots_, [&](const auto& kv) { return kv.second.container.id().worker_id() == worker && kv.second.tasks.empty(); });
}

void JobCore::finishAttempt(const LaunchTask& launch) {
  running_.erase(launch.task);
  launchedAt_.erase(launch.task);
  leaseS_.erase(launch.task);
  leaseFromHistory_.erase(launch.task);
  restatedLeaseS_.erase(launch.task);
  defaultLeasedOn_.erase(launch.task);
  auto it = slots_.find(launch.slotKey);
  if (it != slots_.end()) {
    it->second.tasks.erase(launch.task);
    if (it->second.tasks.empty()) it->second.cpu = -1;  // an idle container's last reading is stale
  }
}

void JobCore::onTaskEnded(const LaunchTask& launch, AttemptEnd end, const pb::PartitionLocation* location,
                          const std::string& message, double now) {
  if (end == AttemptEnd::kSucceeded && location != nullptr) noteLease(launch, *location, now);
  const bool takenBack = leaseTakenBack_.erase(launch.task) > 0;
  if (end == AttemptEnd::kSucceeded) {
    leaseFloorS_.erase(launch.task);
  } else if (takenBack) {
    // Killed because the master took its container back: not the task's fault.
    end = AttemptEnd::kWorkerUnreachable;
  }
  finishAttempt(launch);
  const TaskId id = launch.task;
  switch (end) {
    case AttemptEnd::kSucceeded:
      // A record the listing shows already is the task's output (first copy wins); a listing
      // only tells of changes, so our copy must not replace it.
      if (location != nullptr && id.first < view_.stages.size() && !listedParts_[id.first].count(id.second)) {
        setPart(id.first, id.second, *location);
        unconfirmedSince_.erase(id);  // a new output: its worker was not seen missing since
        unlistedSince_[id] = now;
        notePart(id.first, id.second, true);
      }
      break;
    case AttemptEnd::kWorkerUnreachable: {
      // Not the task's fault: do not count the attempt. Unless its container was taken back,
      // stop using the worker's idle containers until the master grants them again.
      if (!takenBack) {
        const auto& worker = launch.container.id().worker_id();
        endedUnreachableOn_[id] = worker;
        toProbe_[worker] = ProbeReason{launch.container.worker_address(), now};
        dropIdleSlotsOn(worker);
      }
      if (attempts_[id] > 0) --attempts_[id];
      record({Decision::Kind::kRerun, id.first, {id.second}, config_.site, "",
              std::string(takenBack ? kRerunLeaseTakenBack : kRerunWorkerLost)});
      break;
    }
    case AttemptEnd::kInputNotReady:
      // Lineage will recompute the input, or the predecessor's launch will end: try again a
      // little later, without counting the attempt.
      if (attempts_[id] > 0) --attempts_[id];
      notBefore_[id] = now + config_.timings.inputRetryS;
      break;
    case AttemptEnd::kTaskFailed: {
      uint32_t maxAttempts =
          view_.spec.max_task_attempts() ? view_.spec.max_task_attempts() : config_.timings.defaultMaxAttempts;
      if (launch.attempt >= maxAttempts) {
        failJob("task " + taskLabel(id) + " failed " + std::to_string(launch.attempt) + " times: " + message);
      } else {
        record({Decision::Kind::kRerun, id.first, {id.second}, config_.site, "", std::string(kRerunFailed)});
      }
      break;
    }
  }
  refreshRunningElsewhere();
}

void JobCore::holdBackBelowMinLocality(uint32_t s, std::vector<LaunchCandidate>& waiting, size_t from, double now,
                                       Actions& out) {
  if (!localityGate_ || waiting.size() == from || !isDatasetStage(view_.spec, s)) return;
  // Eq. 2 over the stage's waiting tasks here: local when its partition is at this site (the
  // bandwidth of a local read is above any B_min a WAN link reaches).
  std::vector<double> local;
  for (size_t i = from; i < waiting.size(); ++i) {
    const uint32_t t = waiting[i].id.second;
    local.push_back(view_.stages[s].inputs.partitions(static_cast<int>(t)).site() == config_.site ? 1.0 : 0.0);
  }
  if (localityGate_->admit(s, sched::localityLevel(local, 1.0), now)) return;
  waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(from), waiting.end());
  if (auto deadline = localityGate_->nextDeadline()) wakeAt(*deadline, now, out);
}

JobCore::LeaseAccuracy JobCore::leaseAccuracy() const {
  LeaseAccuracy out;
  out.executions = leaseAccuracyN_;
  out.mean = leaseAccuracyN_ ? leaseAccuracySum_ / static_cast<double>(leaseAccuracyN_) : 0.0;
  out.fromHistory = historyAccuracyN_;
  out.fromHistoryMean = historyAccuracyN_ ? historyAccuracySum_ / static_cast<double>(historyAccuracyN_) : 0.0;
  return out;
}

double JobCore::leaseEstimateS(const TaskId& id, const std::string& worker, ShuffleCache& shuffles,
                               bool* fromHistory) const {
  auto bytes = inputBytesBySource(id.first, id.second, shuffles);
  bytes.erase(config_.site);  // read here: no transfer
  const auto computeS = computeHistory_.meanS(std::to_string(id.first), worker);
  *fromHistory = computeS.has_value();
  const double estimate = sched::leaseEstimateS(bytes, inbound_, computeS, config_.lease);
  auto floor = leaseFloorS_.find(id);
  return floor == leaseFloorS_.end() ? estimate : std::max(estimate, floor->second);
}

void JobCore::onLeasesTakenBack(const std::vector<pb::ContainerId>& containers) {
  for (const auto& id : containers) {
    auto slot = slots_.find(slotKeyOf(id));
    if (slot == slots_.end()) continue;
    for (const auto& [task, share] : slot->second.tasks) {
      leaseTakenBack_.insert(task);
      auto lease = leaseS_.find(task);
      if (lease != leaseS_.end()) leaseFloorS_[task] = 2 * lease->second;
    }
  }
}

void JobCore::noteLease(const LaunchTask& launch, const pb::PartitionLocation& location, double now) {
  const auto launched = launchedAt_.find(launch.task);
  const auto lease = leaseS_.find(launch.task);
  if (launched != launchedAt_.end() && lease != leaseS_.end()) {
    if (auto accuracy = sched::leaseAccuracy(now - launched->second, lease->second)) {
      leaseAccuracySum_ += *accuracy;
      ++leaseAccuracyN_;
      if (leaseFromHistory_.count(launch.task)) {
        historyAccuracySum_ += *accuracy;
        ++historyAccuracyN_;
      }
    }
  }
  // Compute time: the execution's time less what its fetches from other sites take at the
  // measured rates (the part eq. 1 estimates from the link, not from history).
  double computeS = elapsedOf(location);
  for (const auto& fetched : location.fetched()) {
    auto rate = inbound_.find(fetched.site());
    if (rate != inbound_.end() && rate->second > 0) computeS -= static_cast<double>(fetched.bytes()) / rate->second;
  }
  computeHistory_.record(std::to_string(launch.task.first), launch.container.id().worker_id(), std::max(0.0, computeS));
  restateDefaultLeases(launch.task.first);
}

void JobCore::restateDefaultLeases(uint32_t s) {
  // Per finished execution: only the stage's launches still on the default are looked at.
  ShuffleCache shuffles;
  for (auto it = defaultLeasedOn_.lower_bound({s, 0}); it != defaultLeasedOn_.end() && it->first.first == s;) {
    bool fromHistory = false;
    const double estimate = leaseEstimateS(it->first, it->second, shuffles, &fromHistory);
    if (!fromHistory) {  // an input from a site whose rate is not measured yet
      ++it;
      continue;
    }
    restatedLeaseS_[it->first] = estimate;
    leasesChanged_ = true;
    it = defaultLeasedOn_.erase(it);
  }
}

void JobCore::onInputLost(const LaunchTask& launch, const pb::PartitionKey& lost, const std::string& message,
                          double now) {
  onTaskEnded(launch, AttemptEnd::kInputNotReady, nullptr, message, now);
  const uint32_t s = launch.task.first;
  if (lost.job_id() != config_.jobId || s >= view_.stages.size() || lost.stage() >= view_.stages.size()) return;
  // Only an upstream output this task reads (forward: its own task; shuffle: any of the stage).
  for (const auto& in : view_.spec.stages(static_cast<int>(s)).inputs()) {
    if (!in.has_stage() || job::stageIndex(view_.spec, in.stage()) != static_cast<int>(lost.stage())) continue;
    if (in.edge() == pb::EDGE_FORWARD && lost.task() != launch.task.second) continue;
    claimLost({lost.stage(), lost.task()}, lost.bucket(), now);
    return;
  }
}

void JobCore::claimLost(TaskId output, std::optional<uint32_t> bucket, double now) {
  if (output.first >= view_.stages.size()) return;
  const auto& parts = view_.stages[output.first].parts;
  const auto part = parts.find(output.second);
  const auto& live = allLiveWorkers();
  if (part == parts.end() || !live) return;
  // Its worker dead: taken (lineage drops it unless a copy serves it, which this says none does).
  if (!live->count(part->second.worker_id())) {
    claimedLost_.insert(output);
    return;
  }
  // Its worker lives and should serve it: only its holders' own answer drops it (a claim kept
  // as a loss would linger until the worker dies, and then outvote a live copy).
  auto suspect = suspects_.find(output);
  if (suspect == suspects_.end()) {
    if (suspects_.size() >= kMaxReportedLostInputs) return;
    suspect = suspects_.emplace(output, Suspect{}).first;
  }
  suspect->second.claimedAt = now;
  if (bucket) suspect->second.bucket = bucket;
}

std::vector<TaskId> JobCore::lostInputClaims() const {
  std::vector<TaskId> claims;
  for (const auto& claim : claimedLost_) {
    if (claims.size() == kMaxReportedLostInputs) return claims;
    claims.push_back(claim);
  }
  for (const auto& [claim, suspect] : suspects_) {
    if (claims.size() == kMaxReportedLostInputs) break;
    claims.push_back(claim);
  }
  return claims;
}

void JobCore::onLostInputsReported(const std::vector<TaskId>& claims, double now) {
  if (!primary()) return;
  for (size_t i = 0; i < claims.size() && i < kMaxReportedLostInputs; ++i) claimLost(claims[i], std::nullopt, now);
}

void JobCore::decideProbes(double now, Actions& out) {
  for (auto it = suspects_.begin(); it != suspects_.end();) {
    auto& [id, suspect] = *it;
    if (suspect.probing) {  // its answer settles it (onOutputProbed)
      ++it;
      continue;
    }
    if (now - suspect.claimedAt > kClaimLifeS) {
      it = suspects_.erase(it);
      continue;
    }
    if (!primary_) {
      ++it;
      continue;
    }
    if (suspect.probedAt && now < *suspect.probedAt + config_.timings.probeRetryS) {
      wakeAt(*suspect.probedAt + config_.timings.probeRetryS, now, out);
      ++it;
      continue;
    }
    const auto part = view_.stages[id.first].parts.find(id.second);  // erasePart drops its suspect
    if (part == view_.stages[id.first].parts.end()) {
      it = suspects_.erase(it);
      continue;
    }
    const auto& loc = part->second;
    // The bucket the reader missed, else the first with data (an empty one is read by no one).
    std::optional<uint32_t> bucket;
    if (suspect.bucket && *suspect.bucket < static_cast<uint32_t>(loc.bucket_bytes_size()) &&
        loc.bucket_bytes(static_cast<int>(*suspect.bucket)) > 0) {
      bucket = suspect.bucket;
    }
    for (int b = 0; !bucket && b < loc.bucket_bytes_size(); ++b) {
      if (loc.bucket_bytes(b) > 0) bucket = static_cast<uint32_t>(b);
    }
    if (!bucket) {  // every bucket empty: never fetched, never lost
      it = suspects_.erase(it);
      continue;
    }
    suspect.probing = true;
    out.probes.push_back({id, *bucket, loc});
    ++it;
  }
}

void JobCore::onOutputProbed(const ProbeOutput& probe, const std::vector<HolderAnswer>& answers, double now) {
  auto suspect = suspects_.find(probe.task);
  if (suspect == suspects_.end() || !suspect->second.probing) return;
  suspect->second.probing = false;
  suspect->second.probedAt = now;
  const auto& parts = view_.stages[probe.task.first].parts;
  const auto part = parts.find(probe.task.second);
  // The record changed since (its task re-recorded elsewhere): the claim was about the old one.
  if (part == parts.end() || part->second.worker_id() != probe.location.worker_id() ||
      part->second.attempt_id() != probe.location.attempt_id()) {
    suspects_.erase(suspect);
    return;
  }
  auto answer = [&](size_t i) { return i < answers.size() ? answers[i] : HolderAnswer::kUnreachable; };
  const auto& live = allLiveWorkers();
  bool served = false, settled = answer(0) == HolderAnswer::kNotHeld;
  for (size_t i = 0; i < 1 + static_cast<size_t>(probe.location.replicas_size()); ++i) {
    served = served || answer(i) == HolderAnswer::kServed;
    if (i == 0 || answer(i) == HolderAnswer::kNotHeld) continue;
    // A copy that did not answer counts only when its worker is dead.
    const auto& copy = probe.location.replicas(static_cast<int>(i - 1)).worker_id();
    settled = settled && answer(i) == HolderAnswer::kUnreachable && live && !live->count(copy);
  }
  if (served) {
    suspects_.erase(suspect);  // a reader that still misses it claims again
  } else if (settled) {
    suspects_.erase(suspect);
    notHeld_.insert(probe.task);
  }
}

void JobCore::failJob(std::string reason) {
  if (!failure_) failure_ = std::move(reason);
}

// ---- primary writes ----------------------------------------------------------------------

void JobCore::onStageReleased(const ReleaseStage& release, bool ok) {
  if (!ok || release.stage >= view_.stages.size()) return;
  for (int t = 0; config_.recordDecisions && t < release.taskmap.owner_site_size(); ++t) {
    record({Decision::Kind::kPlace, release.stage, {static_cast<uint32_t>(t)}, release.taskmap.owner_site(t), "", ""});
  }
  auto& st = view_.stages[release.stage];
  if (st.taskmap) return;  // the watch was faster (or another primary released it)
  st.taskmap = release.taskmap;
  st.taskmapVersion = 0;
  indexOwners(release.stage);
}

void JobCore::onLostOutputRemoved(const RemoveLostOutput& removal, bool ok) {
  if (!ok || removal.task.first >= view_.stages.size()) return;
  if (config_.recordDecisions) {
    // Recorded by the primary, which decided it, under the site that owns the task (runs it).
    const auto& map = view_.stages[removal.task.first].taskmap;
    const bool known = map && removal.task.second < static_cast<uint32_t>(map->owner_site_size());
    record({Decision::Kind::kRerun, removal.task.first, {removal.task.second},
            known ? map->owner_site(static_cast<int>(removal.task.second)) : config_.site, "",
            std::string(kRerunLostOutput)});
  }
  finishKeys_[removal.task.first].erase(removal.task.second);
  verified_[removal.task.first].erase(removal.task.second);
  untrusted_[removal.task.first].erase(removal.task.second);
  // Its record is gone: an output our task records afresh is ours until a listing shows it.
  listedParts_[removal.task.first].erase(removal.task.second);
  // Its task runs again; the execution's marker, if its worker is gone, must go first.
  if (deadProcess_.count(removal.deadWorker)) clearMarkerOf(removal.task, removal.deadWorker);
  erasePart(removal.task.first, removal.task.second);
  notePart(removal.task.first, removal.task.second, false);
  refreshRunningElsewhere();
}

void JobCore::onTasksReassigned(const ReassignTasks& reassignment, const pb::TaskMap* map, int32_t version) {
  reassigning_.erase(reassignment.stage);
  if (!map || reassignment.stage >= view_.stages.size()) return;
  auto& st = view_.stages[reassignment.stage];
  if (st.taskmap && version < st.taskmapVersion) return;  // the watch brought a newer one
  applyTaskMap(reassignment.stage, *map, version, changedOwners(reassignment.stage, *map));
}

void JobCore::onContainerRequestSent(const ContainerRequest& request) {
  sentDesire_ = request.desire;
  leasesChanged_ = false;
  sentRemaining_ = request.remainingTasks;
  for (const auto& id : request.release) slots_.erase(slotKeyOf(id));
}

void JobCore::onFailWritten(bool ok) {
  if (!ok) failReported_ = false;
}

void JobCore::onSucceedWritten(bool ok) {
  if (!ok) succeedReported_ = false;
}

void JobCore::onPublished(uint32_t desire, uint32_t granted) {
  publishedDesire_ = desire;
  publishedGranted_ = granted;
  publishedPrimary_ = primary_;
}

// ---- stealing ----------------------------------------------------------------------------

std::vector<uint32_t> JobCore::moveTasks(pb::TaskMap& map, const std::vector<uint32_t>& tasks, const std::string& from,
                                         const std::string& to) {
  std::vector<uint32_t> moved;
  for (uint32_t t : tasks) {
    if (t >= static_cast<uint32_t>(map.owner_site_size())) continue;
    if (map.owner_site(static_cast<int>(t)) != from) continue;
    map.set_owner_site(static_cast<int>(t), to);
    moved.push_back(t);
  }
  return moved;
}

template <class Visit>
void JobCore::forEachQueuedHere(uint32_t s, Visit&& visit) const {
  // A merge with the sorted sets of what runs or goes, not a lookup per task: a step walks
  // past every task of ours running here before it reaches the waiting ones.
  auto running = running_.lower_bound({s, 0});
  auto elsewhere = runningElsewhere_.lower_bound({s, 0});
  auto stolen = beingStolen_.lower_bound({s, 0});
  for (uint32_t t : unfinishedHere_[s]) {
    const TaskId id{s, t};
    while (running != running_.end() && *running < id) ++running;
    while (elsewhere != runningElsewhere_.end() && elsewhere->first < id) ++elsewhere;
    while (stolen != beingStolen_.end() && *stolen < id) ++stolen;
    const bool busy = (running != running_.end() && *running == id) ||
                      (elsewhere != runningElsewhere_.end() && elsewhere->first == id) ||
                      (stolen != beingStolen_.end() && *stolen == id);
    if (!busy && !visit(t)) return;
  }
}

StealOffer JobCore::offerSteal(const std::string& thief, uint32_t maxTasks, double now,
                               const std::map<std::string, double>& inboundToThief) {
  StealOffer offer;
  offer.thief = thief;
  if (!loaded_ || thief == config_.site || maxTasks == 0) return offer;
  // Only a site the job runs at may take work: a task given to any other would never run.
  if (std::find(status_.sites().begin(), status_.sites().end(), thief) == status_.sites().end()) return offer;
  size_t freeHere = 0;
  for (const auto& [key, slot] : slots_) freeHere += slot.tasks.empty() ? 1 : 0;
  for (uint32_t s = 0; s < view_.stages.size(); ++s) {
    // A task of a stage not listed yet may be done or running elsewhere: not ours to give.
    if (!listed(s)) continue;
    // Waiting tasks, oldest first; the first `freeHere` are ours to start on our own idle
    // containers (they wait for locality there). Past those, Parades looks at the head of the
    // queue only, as in decideLaunches (CoreConfig::launchWindow): a steal costs
    // O(containers + window), not O(tasks), for stages of 10^4 tasks. Under min_locality a
    // dataset stage's every candidate is looked at: which are local decides what we keep.
    const bool dataset = isDatasetStage(view_.spec, s);
    const bool gated = localityGate_ && dataset;
    const size_t window = freeHere + config_.launchWindow;
    std::vector<uint32_t> candidates;
    forEachQueuedHere(s, [&](uint32_t t) {
      if (!gated && candidates.size() == window) return false;
      if (!inputsReady(s, t)) return true;
      // Residency: raw partitions that may not leave this site stay with it.
      if (dataset && view_.stages[s].inputs.partitions(static_cast<int>(t)).residency_local()) return true;
      // ... and so do tasks reading raw records derived from them (residency in meaning).
      if (s < pinnedStages_.size() && pinnedStages_[s]) return true;
      candidates.push_back(t);
      return true;
    });
    // The first `shelter` candidates are kept for our idle containers.
    size_t shelter = freeHere;
    if (gated) {
      // Under min_locality our idle containers start only the local tasks; the others, which
      // hold the stage back here, are for the thieves where their partitions are.
      const auto nonLocal = std::stable_partition(candidates.begin(), candidates.end(), [&](uint32_t t) {
        return view_.stages[s].inputs.partitions(static_cast<int>(t)).site() == config_.site;
      });
      shelter = std::min<size_t>(freeHere, static_cast<size_t>(nonLocal - candidates.begin()));
    }
    if (candidates.size() <= shelter) {
      freeHere -= candidates.size();
      continue;
    }
    // HOUTU Alg. 2 ONRECEIVESTEAL: the steal is an update of the thief's idle container here,
    // so Parades decides what goes: tasks with input at the thief's site after τ·p, any task
    // after 2τ·p, longest-waiting first.
    const double meanS = stageMeanS(s);
    ShuffleCache shuffles;
    size_t viewed = 0;
    candidates.resize(std::min(candidates.size(), shelter + config_.launchWindow));
    // A cursor through the waiting times: candidates are in task order (but for min_locality's
    // partition above, where it seeks again).
    auto since = waitingSince_.lower_bound({s, 0});
    for (size_t i = shelter; i < candidates.size(); ++i) {
      const uint32_t t = candidates[i];
      const TaskId id{s, t};
      sched::WaitingTask& w = nextParadesEntry(viewed);
      w.key = t;
      // The only "rack" asked about is the thief's site: whether it holds the task's input.
      if (inputBytesBySource(s, t, shuffles).count(thief) > 0) w.preferredRacks.push_back(thief);
      if (i > shelter && t < candidates[i - 1]) since = waitingSince_.lower_bound(id);
      while (since != waitingSince_.end() && since->first < id) ++since;
      w.waitS = since == waitingSince_.end() || since->first != id ? 0.0 : now - since->second;
      w.processingS = meanS;
      w.resource = taskShare(s);
    }
    std::span<sched::WaitingTask> waiting(paradesView_.data(), viewed);
    freeHere -= shelter;
    sched::sortForParades(waiting);  // once, not once per task given below
    const sched::ContainerUpdate update{"steal:" + thief, "", thief, 1.0};
    bool tooCostly = false;  // Parades would give a task, but moving its input costs more than waiting
    std::map<std::string, double> givenBytes;  // by source, of the tasks given so far
    for (uint32_t c = 0; c < maxTasks && !waiting.empty(); ++c) {
      const auto decision = sched::paradesOnUpdate(waiting, update, config_.parades);
      if (decision.launches.empty()) break;
      for (const auto& launch : decision.launches) {
        const auto t = static_cast<uint32_t>(launch.key);
        sched::dropLaunched(waiting, launch.key);
        // Where it stands in our queue, and its input, for the finish-time comparison (looked up
        // for the few Parades gives, not kept for the whole window).
        const auto queued = std::find(candidates.begin() + static_cast<std::ptrdiff_t>(shelter), candidates.end(), t);
        const auto position = static_cast<size_t>(queued - candidates.begin()) - shelter;
        const auto inputBytes = inputBytesBySource(s, t, shuffles);
        if (thiefFinishesFirst(inputBytes, givenBytes, s, position, thief, inboundToThief, now)) {
          offer.tasks.push_back(t);
          for (const auto& [site, amount] : inputBytes) givenBytes[site] += amount;
        } else {
          tooCostly = true;
        }
      }
    }
    if (offer.tasks.empty()) {
      // When the first of them will qualify: the thief need not ask before. A task refused
      // for its transfer may qualify once our queue has moved on, about one task time later.
      if (tooCostly) offer.retryAfterS = meanS;
      for (const auto& w : waiting) {
        const bool local = std::find(w.preferredRacks.begin(), w.preferredRacks.end(), thief) != w.preferredRacks.end();
        const double due = (local ? 1 : 2) * config_.parades.tau * w.processingS - w.waitS;
        if (!offer.retryAfterS || due < *offer.retryAfterS) offer.retryAfterS = std::max(0.0, due);
      }
      continue;
    }
    offer.stage = s;
    for (uint32_t t : offer.tasks) beingStolen_.insert({s, t});
    return offer;
  }
  return offer;
}

std::map<std::string, double> JobCore::inputBytesBySource(uint32_t s, uint32_t t, ShuffleCache& shuffles) const {
  std::map<std::string, double> bytes;
  if (isDatasetStage(view_.spec, s)) {
    const auto& part = view_.stages[s].inputs.partitions(static_cast<int>(t));
    bytes[part.site()] += static_cast<double>(part.bytes());
    return bytes;
  }
  for (const auto& in : view_.spec.stages(static_cast<int>(s)).inputs()) {
    const int u = job::stageIndex(view_.spec, in.stage());
    if (u < 0) continue;
    const auto& parts = view_.stages[static_cast<uint32_t>(u)].parts;
    if (in.edge() == pb::EDGE_FORWARD) {
      auto it = parts.find(t);
      if (it == parts.end()) continue;
      for (auto b : it->second.bucket_bytes()) bytes[it->second.site()] += static_cast<double>(b);
      continue;
    }
    // A shuffle task reads its bucket of every upstream output, about 1/n of each: the same
    // sources for every task of the stage, computed once.
    auto [cached, fresh] = shuffles.try_emplace(static_cast<uint32_t>(u));
    if (fresh) {
      const double share = 1.0 / std::max<uint32_t>(1, taskCount(view_, s));
      for (const auto& [ut, loc] : parts) {
        double total = 0;
        for (auto b : loc.bucket_bytes()) total += static_cast<double>(b);
        // A site holding outputs is a source even when they are empty (data-less stages).
        cached->second[loc.site()] += total * share;
      }
    }
    for (const auto& [site, amount] : cached->second) bytes[site] += amount;
  }
  return bytes;
}

bool JobCore::thiefFinishesFirst(const std::map<std::string, double>& inputBytes,
                                 const std::map<std::string, double>& givenBytes, uint32_t s, size_t queuePosition,
                                 const std::string& thief, const std::map<std::string, double>& inboundToThief,
                                 double now) const {
  if (inboundToThief.empty()) return true;  // nothing measured: Parades alone decides
  double transferS = 0;
  for (const auto& [site, amount] : inputBytes) {
    if (site == thief || amount <= 0) continue;
    auto rate = inboundToThief.find(site);
    if (rate == inboundToThief.end() || rate->second <= 0) return false;  // no path measured: keep it
    const auto ahead = givenBytes.find(site);
    transferS += (amount + (ahead == givenBytes.end() ? 0.0 : ahead->second)) / rate->second;
  }
  if (transferS == 0) return true;
  // Here it starts when a container frees up for it: each container frees when its running
  // tasks reach their stage's mean time, then takes one task per mean time.
  const double p = stageMeanS(s);
  std::vector<double> freeAt;
  for (const auto& [key, slot] : slots_) {
    double at = now;
    for (const auto& [id, share] : slot.tasks) {
      auto launched = launchedAt_.find(id);
      at = std::max(at, (launched == launchedAt_.end() ? now : launched->second) + stageMeanS(id.first));
    }
    freeAt.push_back(at);
  }
  // Owed containers (desire above the grant) come from other jobs' containers here as their
  // leases end: the soonest of them count as ours (Awan: wait for a local container that frees
  // up soon rather than move the input).
  if (desire_ > slots_.size() && !siteLeaseEnds_.empty()) {
    std::vector<double> ends = siteLeaseEnds_;
    const size_t owed = std::min<size_t>(desire_ - slots_.size(), ends.size());
    std::partial_sort(ends.begin(), ends.begin() + static_cast<std::ptrdiff_t>(owed), ends.end());
    for (size_t i = 0; i < owed; ++i) freeAt.push_back(std::max(now, ends[i]));
  }
  if (freeAt.empty()) return true;  // we cannot run it at all
  const double victimFinish = sched::queuedStartAt(std::move(freeAt), queuePosition, p) + p;
  return now + transferS + p < victimFinish;
}

double JobCore::stageMeanS(uint32_t s) const {
  const auto& parts = view_.stages[s].parts;
  if (parts.empty()) return 0;
  return partElapsedS_[s] / static_cast<double>(parts.size());
}

void JobCore::settleSteal(const StealOffer& offer, const std::vector<uint32_t>& moved, const pb::TaskMap* map,
                          int32_t version) {
  for (uint32_t t : offer.tasks) beingStolen_.erase({offer.stage, t});
  if (!map || offer.stage >= view_.stages.size()) return;
  if (config_.recordDecisions && !moved.empty()) {
    std::vector<uint32_t> tasks = moved;
    std::sort(tasks.begin(), tasks.end());
    record({Decision::Kind::kSteal, offer.stage, std::move(tasks), offer.thief, config_.site, ""});
  }
  applyTaskMap(offer.stage, *map, version, changedOwners(offer.stage, *map));
  for (uint32_t t : moved) waitingSince_.erase({offer.stage, t});
}

void JobCore::onStealEnded(bool gotWork, std::optional<double> retryAfterS) {
  stealing_ = false;
  if (gotWork) {
    ++stealRound_;
    stealBackoffS_ = 0;
  } else if (retryAfterS) {
    // A victim said when its next task becomes stealable.
    stealBackoffS_ = std::max(0.0, *retryAfterS);
  } else {
    // Nothing anywhere qualifies yet: ask less often, until the work changes (onTaskMap).
    stealBackoffS_ = std::clamp(2 * stealBackoffS_, config_.timings.stealIntervalS, kMaxStealBackoffS);
  }
}

// ---- decisions ---------------------------------------------------------------------------

bool JobCore::awaitingLastOutputs(uint32_t s) const {
  if (!loaded_ || s >= view_.stages.size() || !view_.stages[s].taskmap) return false;
  const size_t tasks = jobstate::taskCount(view_, s);
  const size_t known = view_.stages[s].parts.size();
  return known < tasks && tasks - known <= static_cast<size_t>(std::max(1, status_.sites_size()));
}

bool JobCore::ownedHereOrUnknown(const TaskId& id) const {
  if (id.first >= view_.stages.size()) return true;
  const auto& map = view_.stages[id.first].taskmap;
  if (!map || static_cast<int>(id.second) >= map->owner_site_size()) return true;
  return map->owner_site(static_cast<int>(id.second)) == config_.site;
}

bool JobCore::markerContentsNeeded(const TaskId& id) const {
  if (running_.count(id) || !ownedHereOrUnknown(id)) return false;
  return id.first >= view_.stages.size() || !view_.stages[id.first].parts.count(id.second);
}

std::optional<std::vector<uint32_t>> JobCore::changedOwners(uint32_t s, const pb::TaskMap& map,
                                                            const std::vector<uint32_t>* candidates) const {
  const auto& held = view_.stages[s].taskmap;
  if (!held || held->owner_site_size() != map.owner_site_size()) return std::nullopt;
  std::vector<uint32_t> changed;
  auto compare = [&](uint32_t t) {
    if (held->owner_site(static_cast<int>(t)) != map.owner_site(static_cast<int>(t))) changed.push_back(t);
  };
  if (candidates) {
    std::vector<uint32_t> sorted = *candidates;  // applied in task order, as a full comparison would
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    for (uint32_t t : sorted) {
      if (t < static_cast<uint32_t>(map.owner_site_size())) compare(t);
    }
  } else {
    for (uint32_t t = 0; t < static_cast<uint32_t>(map.owner_site_size()); ++t) compare(t);
  }
  return changed;
}

void JobCore::applyTaskMap(uint32_t s, const pb::TaskMap& map, int32_t version,
                           const std::optional<std::vector<uint32_t>>& changed) {
  auto& stage = view_.stages[s];
  stage.taskmapVersion = version;
  if (!changed) {
    stage.taskmap = map;
    indexOwners(s);
    return;
  }
  // A steal or a reassignment moves a few tasks of a stage of thousands: only those change,
  // in place (a copy of the whole map per change was most of a large job's cost), and only
  // those move between the owner sets (notePart keeps both to the unfinished tasks).
  stage.taskmap->set_epoch(map.epoch());
  auto& here = unfinishedHere_[s];
  auto& elsewhere = unfinishedElsewhere_[s];
  for (uint32_t t : *changed) {
    std::string& owner = *stage.taskmap->mutable_owner_site(static_cast<int>(t));
    const bool wasHere = owner == config_.site;
    owner = map.owner_site(static_cast<int>(t));
    if (wasHere == (owner == config_.site) || stage.parts.count(t)) continue;
    (wasHere ? here : elsewhere).erase(t);
    (wasHere ? elsewhere : here).insert(t);
  }
}

void JobCore::indexOwners(uint32_t s) {
  if (s >= view_.stages.size()) return;
  auto& here = unfinishedHere_[s];
  auto& elsewhere = unfinishedElsewhere_[s];
  const auto& stage = view_.stages[s];
  here.clear();
  elsewhere.clear();
  if (!stage.taskmap) return;
  for (int t = 0; t < stage.taskmap->owner_site_size(); ++t) {
    if (stage.parts.count(static_cast<uint32_t>(t))) continue;
    (stage.taskmap->owner_site(t) == config_.site ? here : elsewhere).insert(static_cast<uint32_t>(t));
  }
}

void JobCore::notePart(uint32_t s, uint32_t t, bool recorded) {
  if (recorded) {
    unfinishedHere_[s].erase(t);
    unfinishedElsewhere_[s].erase(t);
    return;
  }
  const auto& map = view_.stages[s].taskmap;
  if (!map || static_cast<int>(t) >= map->owner_site_size()) return;
  (map->owner_site(static_cast<int>(t)) == config_.site ? unfinishedHere_[s] : unfinishedElsewhere_[s]).insert(t);
}

Actions JobCore::step(double now) {
  Actions out;
  if (deleted_) {
    out.exit = true;
    out.exitReason = "job " + config_.jobId + " was deleted: nothing left to manage";
    return out;
  }
  if (!loaded_) return out;
  if (outsider_) {
    out.exit = true;
    out.exitReason = "site " + config_.site + " is not one of job " + config_.jobId + "'s sites: nothing to manage here";
    return out;
  }
  if (isTerminal(status_.state())) {
    out.exit = true;
    out.exitReason = "job " + config_.jobId + " is over (" + jobStateName(status_.state()) + ")";
    return out;
  }
  if (failure_ && !failReported_) {
    out.fail = *failure_;
    failReported_ = true;
  }
  noteReturningSites(now, out);
  decideTakeOver(now, out);
  if (primary_) {
    decidePrimary(now, out);
  } else if (const auto& live = allLiveWorkers()) {
    // Our own task's output, known from its end before any listing showed it, whose worker
    // went missing since: the primary may drop its record before we list it (no listing would
    // take it away here), or the worker may have died before recording it. Once its worker is
    // seen missing, a listing must show it within lossSettleS (what the primary gives a missing
    // worker), back or not; else it is forgotten and its task runs again. Not at once: a worker
    // resumed past its session's expiry answers a RunTask before its liveness node is back and
    // records the output a moment later (bench-chaos worker-stop re-ran such a task at once,
    // on that same worker).
    std::erase_if(unconfirmedSince_, [&](const auto& kv) {
      const auto& [u, t] = kv.first;
      return u >= view_.stages.size() || !view_.stages[u].parts.count(t) || listedParts_[u].count(t);
    });
    const auto stages = static_cast<uint32_t>(view_.stages.size());
    for (uint32_t u = 0; u < stages; ++u) {
      // Before the stage's first listing, a part no listing showed is no sign of a removal.
      if (!listed(u) || !outputsNeeded(u).value_or(false)) continue;
      // Nothing to look at when every part is on a live worker and none is being watched.
      const auto watchedHere = unconfirmedSince_.lower_bound(TaskId{u, 0});
      if (partsAllOn(u, *live) && (watchedHere == unconfirmedSince_.end() || watchedHere->first.first != u)) continue;
      auto& parts = view_.stages[u].parts;
      const auto& listed = listedParts_[u];
      for (auto it = parts.begin(); it != parts.end();) {
        const uint32_t t = it->first;
        auto since = unconfirmedSince_.find({u, t});
        const bool watched = since != unconfirmedSince_.end();
        if (listed.count(t) || (!watched && live->count(it->second.worker_id())) ||
            lossUndecided(u, t, it->second, *live)) {
          ++it;
          continue;
        }
        if (!watched) {
          const bool gone = deadProcess_.count(it->second.worker_id()) > 0;  // nothing of it is still to come
          since = unconfirmedSince_.emplace(TaskId{u, t}, gone ? now - config_.timings.lossSettleS : now).first;
        }
        if (now - since->second < config_.timings.lossSettleS) {
          wakeAt(since->second + config_.timings.lossSettleS, now, out);
          ++it;
          continue;
        }
        unconfirmedSince_.erase(since);
        // Its task runs again; the execution's marker, if its worker is gone, must go first.
        if (deadProcess_.count(it->second.worker_id())) clearMarkerOf({u, t}, it->second.worker_id());
        it = erasePart(u, it);
        notePart(u, t, false);
      }
    }
  }
  decideProbes(now, out);
  decideWorkerProbes(now, out);
  // Launches first: the containers decideContainers hands back are those still idle after
  // them (a container released and filled in the same step would run a task the master has
  // given to another job), and the utilization it samples for the coming interval counts them.
  countStealable();
  decideLaunches(now, out);
  decideContainers(now, out);
  const bool roleChanged = primary_ != publishedPrimary_;
  const bool countsChanged = desire_ != publishedDesire_ || slots_.size() != publishedGranted_;
  if (roleChanged || countsChanged) {
    const double due = publishAskedAt_ ? *publishAskedAt_ + config_.timings.publishIntervalS : now;
    if (roleChanged || now >= due) {
      out.publish = true;
      publishAskedAt_ = now;
    } else {
      wakeAt(due, now, out);
    }
  }
  return out;
}

void JobCore::refreshAllLive() {
  allLive_.reset();
  if (status_.sites_size() == 0) return;
  std::set<std::string> live;
  for (const auto& site : status_.sites()) {
    auto it = liveWorkers_.find(site);
    if (it == liveWorkers_.end()) return;
    live.insert(it->second.begin(), it->second.end());
  }
  allLive_ = std::move(live);
}

void JobCore::noteReturningSites(double now, Actions& out) {
  for (auto it = returning_.begin(); it != returning_.end();) {
    const std::string& site = it->first;
    auto live = liveWorkers_.find(site);
    if (live == liveWorkers_.end() || live->second.empty()) {
      ++it;
      continue;
    }
    const double since = returnedAt_.try_emplace(site, now).first->second;
    if (now - since >= config_.timings.siteReturnGraceS) {
      returnedAt_.erase(site);
      it = returning_.erase(it);
      continue;
    }
    wakeAt(since + config_.timings.siteReturnGraceS, now, out);
    ++it;
  }
}

bool JobCore::lossUndecided(uint32_t u, uint32_t t, const pb::PartitionLocation& loc,
                            const std::set<std::string>& live) const {
  // A site coming back: its missing workers get the grace to come back with their outputs.
  if (auto it = returning_.find(loc.site()); it != returning_.end() && it->second.count(loc.worker_id()) &&
                                             returnedAt_.count(loc.site())) {
    return true;
  }
  // A raw partition no live worker holds a copy of (its site is cut off by a partition, or
  // its workers are down): the task that read it cannot run again anywhere before one is
  // back, so dropping its output gains nothing, and a site that comes back brings it too.
  if (!isDatasetStage(view_.spec, u) || static_cast<int>(t) >= view_.stages[u].inputs.partitions_size()) return false;
  return rawInputLost(u, t, live);
}

bool JobCore::rawInputLost(uint32_t s, uint32_t t, const std::set<std::string>& live) const {
  const auto& ref = view_.stages[s].inputs.partitions(static_cast<int>(t));
  if (live.count(ref.worker_id())) return false;
  for (const auto& replica : ref.replicas()) {
    if (live.count(replica.worker_id())) return false;
  }
  return true;
}

bool JobCore::inputsLive(uint32_t s, uint32_t t, const std::set<std::string>& live,
                         std::map<uint32_t, bool>& shuffleLive) const {
  if (isDatasetStage(view_.spec, s)) {
    return static_cast<int>(t) < view_.stages[s].inputs.partitions_size() && !rawInputLost(s, t, live);
  }
  for (const auto& in : view_.spec.stages(static_cast<int>(s)).inputs()) {
    const int u = job::stageIndex(view_.spec, in.stage());
    if (u < 0) return false;
    const auto& parts = view_.stages[static_cast<uint32_t>(u)].parts;
    if (in.edge() == pb::EDGE_FORWARD) {
      auto it = parts.find(t);
      if (it == parts.end() || !outputLive(it->second, live)) return false;
      continue;
    }
    // Every task of a shuffle reads every upstream output: decided once per upstream stage.
    auto [cached, fresh] = shuffleLive.try_emplace(static_cast<uint32_t>(u), true);
    if (fresh) {
      for (const auto& [ut, loc] : parts) cached->second = cached->second && outputLive(loc, live);
    }
    if (!cached->second) return false;
  }
  return true;
}

void JobCore::decideLostSites(double now, const std::set<std::string>& live, Actions& out) {
  // Gone: no registered JM (none to answer a steal) and no live worker (none to run a task),
  // both only after their sessions expired. Receivers: sites with a JM and live workers.
  std::set<std::string> lost;
  std::vector<std::string> receivers;
  for (const auto& site : status_.sites()) {
    const auto workers = liveWorkers_.find(site);
    const bool known = workers != liveWorkers_.end();
    if (site == config_.site || jms_.count(site) || !known || !workers->second.empty()) {
      siteGoneSince_.erase(site);
      if (site == config_.site || (jms_.count(site) && known && !workers->second.empty())) receivers.push_back(site);
      continue;
    }
    const double since = siteGoneSince_.try_emplace(site, now).first->second;
    if (now - since < config_.timings.siteLostS) {
      wakeAt(since + config_.timings.siteLostS, now, out);
      continue;
    }
    lost.insert(site);
  }
  if (lost.empty() || receivers.empty()) return;
  for (uint32_t s = 0; s < view_.stages.size(); ++s) {
    const auto& stage = view_.stages[s];
    // Pinned stages stay with their site whatever happens to it (residency in meaning).
    const bool pinned = s < pinnedStages_.size() && pinnedStages_[s];
    if (!listed(s) || !stage.taskmap || reassigning_.count(s) || pinned) continue;
    const auto& map = *stage.taskmap;
    // Spread evenly: each task to the receiver owning the fewest unfinished tasks of the stage.
    std::map<std::string, size_t> load;
    for (const auto& site : receivers) load[site] = 0;
    load[config_.site] = unfinishedHere_[s].size();
    for (uint32_t t : unfinishedElsewhere_[s]) {
      if (auto it = load.find(map.owner_site(static_cast<int>(t))); it != load.end()) ++it->second;
    }
    std::optional<ReassignTasks> reassignment;
    std::map<uint32_t, bool> shuffleLive;
    for (uint32_t t : unfinishedElsewhere_[s]) {
      const std::string& owner = map.owner_site(static_cast<int>(t));
      if (!lost.count(owner) || (reassignment && reassignment->from != owner)) continue;
      const TaskId id{s, t};
      // A marker: it may still be recorded (first copy wins); its session's end removes it.
      if (markers_.count(id) || running_.count(id)) continue;
      if (isDatasetStage(view_.spec, s) && stage.inputs.partitions(static_cast<int>(t)).residency_local()) continue;
      // Only what can run elsewhere now: an input on a dead worker (lineage recomputes it, or
      // it waits for the lost site with its raw data) would only fail there.
      if (!inputsReady(s, t) || !inputsLive(s, t, live, shuffleLive)) continue;
      auto to = std::min_element(receivers.begin(), receivers.end(),
                                 [&](const auto& a, const auto& b) { return load[a] < load[b]; });
      ++load[*to];
      if (!reassignment) reassignment = ReassignTasks{s, owner, {}};
      reassignment->to[*to].push_back(t);
    }
    if (!reassignment) continue;
    reassigning_.insert(s);
    out.reassignments.push_back(std::move(*reassignment));
  }
}

std::optional<bool> JobCore::outputsNeeded(uint32_t u) const {
  bool needed = u + 1 == view_.stages.size();  // the job's result
  for (uint32_t d : job::downstreamStages(view_.spec, u)) {
    if (view_.stages[d].taskmap && !listed(d)) return std::nullopt;
    needed = needed || !stageDone(view_, d);
  }
  return needed;
}

void JobCore::decidePrimary(double now, Actions& out) {
  // Lineage: outputs whose only copy was on a dead worker and that are still needed are
  // dropped from the job state, so their owners run the tasks again. Decided only when the
  // live workers of every site are known, and not while the loss is undecided
  // (lossUndecided): such an output is kept, and held as a loss not yet decided.
  const auto& liveWorkers = allLiveWorkers();
  const bool workersKnown = liveWorkers.has_value();
  const std::set<std::string> none;
  const std::set<std::string>& live = workersKnown ? *liveWorkers : none;
  const auto stages = static_cast<uint32_t>(view_.stages.size());
  bool unreachable = false;  // a needed output is on a dead worker and cannot be recomputed yet
  // Outputs whose holders answered that they hold them no longer (onOutputProbed), their worker
  // alive: no copy serves them.
  for (auto it = notHeld_.begin(); it != notHeld_.end();) {
    const auto [u, t] = *it;
    const auto part = view_.stages[u].parts.find(t);  // erasePart drops the entry
    const auto needed = listed(u) ? outputsNeeded(u) : std::nullopt;
    if (part == view_.stages[u].parts.end() || (needed && !*needed)) {
      it = notHeld_.erase(it);
      continue;
    }
    if (!needed) {
      unreachable = true;
    } else {
      out.lostOutputs.push_back({{u, t}, part->second.worker_id(),
                                 fmt::format("its worker {} lives but holds it no longer, nor does any copy (each was "
                                             "asked)",
                                             part->second.worker_id())});
    }
    ++it;
  }
  if (workersKnown) {
    std::erase_if(vanishedAt_, [&](const auto& kv) { return live.count(kv.first) > 0; });
    for (uint32_t u = 0; u < stages; ++u) {
      // Not on a stage whose outputs (or whose readers' outputs) were not listed yet: removing
      // a record removed already, or one a done stage no longer needs, would re-run its task.
      // An output on a dead worker there is a loss not decided yet: it holds releases too.
      if (partsAllOn(u, live)) continue;  // no output of this stage is on a dead worker
      const auto needed = listed(u) ? outputsNeeded(u) : std::nullopt;
      if (!needed) {
        unreachable = true;
        continue;
      }
      if (!*needed) continue;
      for (const auto& [t, loc] : view_.stages[u].parts) {
        if (live.count(loc.worker_id()) || notHeld_.count({u, t})) continue;
        // Another copy serves it, unless a reader found none there (onInputLost).
        const bool claimed = claimedLost_.count({u, t}) > 0;
        if (!claimed && outputLive(loc, live)) continue;
        const double vanished =
            vanishedAt_
                .try_emplace(loc.worker_id(), deadProcess_.count(loc.worker_id()) ? now - config_.timings.lossSettleS : now)
                .first->second;
        if (now - vanished < config_.timings.lossSettleS) {
          unreachable = true;
          wakeAt(vanished + config_.timings.lossSettleS, now, out);
          continue;
        }
        if (lossUndecided(u, t, loc, live)) {
          unreachable = true;
          continue;
        }
        out.lostOutputs.push_back(
            {{u, t}, loc.worker_id(),
             claimed                  ? fmt::format("its worker {} is dead and a reader found no other copy", loc.worker_id())
             : loc.replicas().empty() ? "its only copy was on dead worker " + loc.worker_id()
                                      : fmt::format("every copy was on a dead worker (its own: {})", loc.worker_id())});
      }
    }
    decideLostSites(now, live, out);
  }
  if (!out.lostOutputs.empty()) return;  // release only on a state without known losses
  // Output records are trusted only once confirmed: nothing is released or finished on a
  // forged one.
  const bool trusted = decideVerification(out);
  if (!out.lostOutputs.empty()) return;

  // Nothing is released or finished on an output no live worker can serve.
  auto releasable = unreachable ? std::vector<uint32_t>() : releasableStages(view_);
  // Nor on inputs whose stage was not listed yet (their records may have been removed since).
  std::erase_if(releasable, [&](uint32_t s) {
    for (const auto& in : view_.spec.stages(static_cast<int>(s)).inputs()) {
      const int u = in.has_stage() ? job::stageIndex(view_.spec, in.stage()) : -1;
      if (u >= 0 && (!listed(static_cast<uint32_t>(u)) || !stageVerified(static_cast<uint32_t>(u)))) return true;
    }
    return false;
  });
  if (!releasable.empty()) {
    if (!siteCapacities_) {
      out.needSiteRecords = true;
    } else {
      // The spec was validated at submission; an unknown name here is a corrupt spec.
      const auto policy = view_.spec.placement().empty() ? std::optional(sched::Placement::kProportional)
                                                          : sched::parsePlacement(view_.spec.placement());
      for (uint32_t s : releasable) {
        auto map = policy ? initialTaskMap(view_, s, *policy, *siteCapacities_, config_.placement)
                          : Result<pb::TaskMap>(makeError(ErrorCode::kInvalidArgument,
                                                          "unknown placement '" + view_.spec.placement() + "'"));
        if (!map) {
          failJob("placing stage " + view_.spec.stages(static_cast<int>(s)).name() + ": " + map.message());
          if (!failReported_) {
            out.fail = *failure_;
            failReported_ = true;
          }
          return;
        }
        map->set_epoch(epoch_);
        out.releases.push_back({s, std::move(*map)});
      }
      siteCapacities_.reset();  // capacities are read afresh for the next release
    }
  }
  bool allListed = true;
  for (uint32_t s = 0; s < stages; ++s) allListed = allListed && listed(s);
  if (trusted && !unreachable && allListed && jobDone(view_) && status_.state() == pb::JOB_RUNNING) {
    if (!succeedReported_) out.succeed = true;
    succeedReported_ = true;
    return;
  }
  // Every site of the job needs a JM: ask a site's master for one when it has none.
  for (const auto& site : status_.sites()) {
    if (site == config_.site) continue;
    if (replaceAtOnce_.erase(site) > 0) {
      jmMissingSince_.erase(site);
      jmRequestedAt_[site] = now;
      out.startJms.push_back(site);
      continue;
    }
    if (jms_.count(site)) {
      jmMissingSince_.erase(site);
      continue;
    }
    double since = jmMissingSince_.try_emplace(site, now).first->second;
    auto asked = jmRequestedAt_.find(site);
    if (now - since < config_.timings.jmGraceS) {
      wakeAt(since + config_.timings.jmGraceS, now, out);
      continue;
    }
    if (asked != jmRequestedAt_.end() && now - asked->second < config_.timings.jmRequestIntervalS) {
      wakeAt(asked->second + config_.timings.jmRequestIntervalS, now, out);
      continue;
    }
    jmRequestedAt_[site] = now;
    out.startJms.push_back(site);
  }
}

size_t JobCore::unfinishedHereCount() const {
  size_t unfinished = 0;
  for (uint32_t s = 0; s < view_.stages.size(); ++s) {
    if (listed(s)) unfinished += unfinishedHere_[s].size();  // else not known yet
  }
  return unfinished;
}

void JobCore::countStealable() {
  // Other sites' tasks that are neither done nor running. While there are some, a JM keeps at
  // least a container to steal with even when it owns no task.
  size_t stealable = 0;
  if (!view_.spec.no_stealing()) {
    for (uint32_t s = 0; s < view_.stages.size(); ++s) {
      if (listed(s)) stealable += unfinishedElsewhere_[s].size();
    }
    for (const auto& [id, marker] : runningElsewhere_) {
      if (listed(id.first)) stealable -= unfinishedElsewhere_[id.first].count(id.second);
    }
  }
  stealable_ = stealable;
}

void JobCore::decideContainers(double now, Actions& out) {
  // Utilization over the Af period, weighted by time: measured CPU where the worker reported
  // it, else the occupied share.
  if (lastSample_ >= 0 && now > lastSample_ && !slots_.empty()) {
    busyArea_ += busyNow_ * (now - lastSample_);
    heldTime_ += now - lastSample_;
  }
  lastSample_ = now;
  busyNow_ = 0;
  if (!slots_.empty()) {
    double busy = 0;
    for (const auto& [k, slot] : slots_) {
      if (!slot.tasks.empty()) busy += std::min(1.0, slot.cpu >= 0 ? slot.cpu : slot.used());
    }
    busyNow_ = busy / static_cast<double>(slots_.size());
  }

  const size_t unfinished = unfinishedHereCount();
  const size_t stealable = stealable_;
  if (af_.period == 0 || now - lastAf_ >= config_.timings.afPeriodS) {
    sched::AfObservation obs;
    obs.allocation = static_cast<double>(slots_.size());
    obs.utilization = heldTime_ > 0 ? busyArea_ / heldTime_ : 0.0;
    obs.hasWaitingTasks = hadWaiting_;
    // Af's own state is not capped by the work at hand (the request below is): a stage that
    // drains must not make the next one ramp up from a single container again.
    af_ = sched::afDesire(af_, obs, config_.af);
    lastAf_ = now;
    busyArea_ = heldTime_ = 0;
    hadWaiting_ = false;
  }
  size_t useful = unfinished + std::min<size_t>(stealable, 1 + unfinished);
  auto desire = static_cast<uint32_t>(std::min<size_t>(static_cast<size_t>(sched::afContainerRequest(af_)), useful));
  // Static allocation (the baseline HOUTU compares Af against): hold N for the whole job.
  if (view_.spec.static_containers() > 0) desire = view_.spec.static_containers();
  desire_ = desire;

  ContainerRequest request;
  request.desire = desire;
  request.allOrNone = view_.spec.atomic_containers();
  request.remainingTasks = static_cast<uint32_t>(std::min<size_t>(unfinished, std::numeric_limits<uint32_t>::max()));
  // When the desire drops, give back idle containers first.
  size_t excess = slots_.size() > desire ? slots_.size() - desire : 0;
  for (auto it = slots_.begin(); it != slots_.end() && excess > 0; ++it) {
    if (it->second.tasks.empty()) {
      request.release.push_back(it->second.container.id());
      --excess;
    }
  }
  // Sent on change; repeated while the master owes us containers (a lost grant event).
  bool changed = !sentDesire_ || *sentDesire_ != desire || !request.release.empty();
  bool unmet = slots_.size() < desire && now - lastRequest_ >= config_.timings.masterRefreshS;
  // The master's queue follows the work left here, at most once per refresh period (a
  // finished task must not cost a request each).
  bool progressed = request.remainingTasks != sentRemaining_ && now - lastRequest_ >= config_.timings.masterRefreshS;
  // New leases (launches) reach the master at most once per refresh period too.
  bool leased = leasesChanged_ && now - lastRequest_ >= config_.timings.masterRefreshS;
  if (changed || unmet || progressed || leased) {
    // The leases of the containers kept, built only for a request that goes out (a step runs
    // per event; most send nothing).
    for (const auto& [key, slot] : slots_) {
      if (std::any_of(request.release.begin(), request.release.end(),
                      [&](const pb::ContainerId& id) { return slotKeyOf(id) == key; })) {
        continue;
      }
      double endsAt = now;
      for (const auto& [id, share] : slot.tasks) {
        auto launched = launchedAt_.find(id);
        const double* lease = nullptr;
        if (auto restated = restatedLeaseS_.find(id); restated != restatedLeaseS_.end()) {
          lease = &restated->second;
        } else if (auto estimated = leaseS_.find(id); estimated != leaseS_.end()) {
          lease = &estimated->second;
        }
        if (launched != launchedAt_.end() && lease) endsAt = std::max(endsAt, launched->second + *lease);
      }
      request.leases.emplace_back(slot.container.id(), endsAt - now);
    }
    lastRequest_ = now;
    out.request = std::move(request);
  }
  if (slots_.size() < desire || leasesChanged_) wakeAt(lastRequest_ + config_.timings.masterRefreshS, now, out);
  // The next Af period, while there is anything to size.
  if (!slots_.empty() || useful > 0) wakeAt(lastAf_ + config_.timings.afPeriodS, now, out);
}

void JobCore::wakeAt(double when, double now, Actions& out) const {
  if (when <= now || !std::isfinite(when)) return;
  if (!out.wakeAt || when < *out.wakeAt) out.wakeAt = when;
}

bool JobCore::inputsReady(uint32_t s, uint32_t t) const {
  if (isDatasetStage(view_.spec, s)) return true;
  for (const auto& in : view_.spec.stages(static_cast<int>(s)).inputs()) {
    const int u = job::stageIndex(view_.spec, in.stage());
    if (u < 0) return false;
    const auto& parts = view_.stages[static_cast<uint32_t>(u)].parts;
    const bool ready = in.edge() == pb::EDGE_FORWARD ? parts.count(t) > 0
                                                     : parts.size() == taskCount(view_, static_cast<uint32_t>(u));
    if (!ready) return false;
  }
  return true;
}

void JobCore::addPreferredWorkers(uint32_t s, uint32_t t, std::map<uint32_t, std::vector<std::string>>& shuffleWorkers,
                                  std::vector<std::string_view>& out) const {
  const auto& here = config_.site;
  if (isDatasetStage(view_.spec, s)) {
    const auto& part = view_.stages[s].inputs.partitions(static_cast<int>(t));
    if (part.site() != here) return;
    out.push_back(part.worker_id());
    for (const auto& r : part.replicas()) out.push_back(r.worker_id());
    return;
  }
  for (const auto& in : view_.spec.stages(static_cast<int>(s)).inputs()) {
    const auto u = static_cast<uint32_t>(job::stageIndex(view_.spec, in.stage()));
    const auto& parts = view_.stages[u].parts;
    if (in.edge() == pb::EDGE_FORWARD) {
      auto it = parts.find(t);
      if (it != parts.end() && it->second.site() == here) out.push_back(it->second.worker_id());
      continue;
    }
    // Every task of a shuffle reads a bucket of every upstream output: the same hosts for all.
    auto [cached, fresh] = shuffleWorkers.try_emplace(u);
    if (fresh) {
      std::set<std::string> workers;
      for (const auto& [ut, loc] : parts) {
        if (loc.site() == here) workers.insert(loc.worker_id());
      }
      cached->second.assign(workers.begin(), workers.end());
    }
    out.insert(out.end(), cached->second.begin(), cached->second.end());
  }
}

sched::WaitingTask& JobCore::nextParadesEntry(size_t& used) {
  if (used == paradesView_.size()) paradesView_.emplace_back();
  sched::WaitingTask& entry = paradesView_[used++];
  entry.preferredNodes.clear();  // (keeping their capacity)
  entry.preferredRacks.clear();
  return entry;
}

void JobCore::decideLaunches(double now, Actions& out) {
  // The tasks this site owns that can run now: per stage the head of the queue (launchWindow
  // tasks), inputs resolved only for the tasks that launch.
  std::vector<LaunchCandidate> candidates;
  // Per stage, its tasks here that wait to launch (ready or not; counted up to a full launch
  // window): a launch that leaves fewer than this JM's containers waiting is of the stage's
  // last wave here (RunTaskRequest.stage_tail).
  std::map<uint32_t, size_t> queued;
  bool anyWaiting = false;
  bool unlisted = false;  // a released stage is not listed yet: our own work is not known
  for (uint32_t s = 0; s < view_.stages.size(); ++s) {
    if (!listed(s)) {
      unlisted = unlisted || view_.stages[s].taskmap.has_value();
      continue;  // its done or running tasks would look waiting
    }
    std::optional<double> meanS;
    size_t inWindow = 0;
    size_t stageQueued = 0;
    const size_t stageStart = candidates.size();
    // Cursors through the backoffs and waiting times, which the walk meets in task order: a
    // step of a large stage made two tree lookups per task of its window.
    auto backoff = notBefore_.lower_bound({s, 0});
    auto since = waitingSince_.lower_bound({s, 0});
    forEachQueuedHere(s, [&](uint32_t t) {
      const TaskId id{s, t};
      ++stageQueued;
      while (backoff != notBefore_.end() && backoff->first < id) ++backoff;
      if (backoff != notBefore_.end() && backoff->first == id && now < backoff->second) {
        wakeAt(backoff->second, now, out);
        return true;
      }
      if (!inputsReady(s, t)) return true;  // an upstream output is being recomputed
      anyWaiting = true;
      if (inWindow == config_.launchWindow) {
        stageQueued = std::numeric_limits<size_t>::max();  // more than a window waits: no tail yet
        return false;
      }
      ++inWindow;
      if (!meanS) meanS = stageMeanS(s);
      while (since != waitingSince_.end() && since->first < id) ++since;
      if (since == waitingSince_.end() || since->first != id) since = waitingSince_.emplace_hint(since, id, now);
      candidates.push_back(LaunchCandidate{id, since->second, *meanS});
      return true;
    });
    if (stageQueued > 0) queued[s] = stageQueued;
    holdBackBelowMinLocality(s, candidates, stageStart, now, out);
  }
  if (anyWaiting) hadWaiting_ = true;
  // Containers we inherited that still run a task launched by our predecessor.
  std::set<std::string> busyElsewhere;
  for (const auto& [id, marker] : runningElsewhere_) busyElsewhere.insert(slotKeyOf(marker.container()));
  // Parades' view of the candidates (labels, preferred hosts: allocations per task) only when a
  // container can take one: with every container full a step launches nothing.
  const bool anyRoom = std::any_of(slots_.begin(), slots_.end(), [&](const auto& entry) {
    return !busyElsewhere.count(entry.first) && sched::hasRoom(1.0 - entry.second.used());
  });
  size_t viewed = 0;
  std::map<uint32_t, std::vector<std::string>> shuffleWorkers;  // viewed by paradesView_
  for (size_t i = 0; anyRoom && i < candidates.size(); ++i) {
    const auto [s, t] = candidates[i].id;
    sched::WaitingTask& w = nextParadesEntry(viewed);
    w.key = i;  // its candidate
    addPreferredWorkers(s, t, shuffleWorkers, w.preferredNodes);
    w.preferredRacks.push_back(config_.site);
    w.waitS = now - candidates[i].since;
    w.processingS = candidates[i].meanS;
    w.resource = taskShare(s);
  }
  std::span<sched::WaitingTask> waiting(paradesView_.data(), viewed);
  sched::sortForParades(waiting);  // once, not once per container below
  ShuffleCache shuffles;  // the lease estimates' input sources, per shuffle stage once
  size_t idle = 0;
  bool room = false;  // a container could take a task that is not allowed to launch yet
  for (auto& [key, slot] : slots_) {
    if (busyElsewhere.count(key)) continue;
    double free = std::max(0.0, 1.0 - slot.used());
    if (candidates.empty()) {
      if (slot.used() <= 0.5) ++idle;  // room for more work, and nothing of ours waits
      continue;
    }
    if (!sched::hasRoom(free)) continue;  // takes nothing, and our tasks wait: no steal for it
    // Parades on this container update: node-local first, then rack-local after τ·p, then
    // anywhere after 2τ·p; several tasks while the container has room.
    sched::ContainerUpdate update{key, slot.container.id().worker_id(), config_.site, free};
    auto decision = sched::paradesOnUpdate(waiting, update, config_.parades);
    for (const auto& launch : decision.launches) {
      const TaskId id = candidates[launch.key].id;
      auto inputs = taskInputs(view_, id.first, id.second);
      if (!inputs) continue;  // cannot happen after inputsReady, but never launch without inputs
      slot.tasks[id] = taskShare(id.first);
      running_.insert(id);
      endedUnreachableOn_.erase(id);
      launchedAt_[id] = now;
      bool fromHistory = false;
      leaseS_[id] = leaseEstimateS(id, slot.container.id().worker_id(), shuffles, &fromHistory);
      if (fromHistory) {
        leaseFromHistory_.insert(id);
        defaultLeasedOn_.erase(id);
      } else {
        leaseFromHistory_.erase(id);
        defaultLeasedOn_[id] = slot.container.id().worker_id();
      }
      restatedLeaseS_.erase(id);
      leasesChanged_ = true;
      const auto since = waitingSince_.find(id);
      const double waitedS = since == waitingSince_.end() ? 0.0 : now - since->second;
      waitingSince_.erase(id);
      notBefore_.erase(id);
      sched::dropLaunched(waiting, launch.key);

      LaunchTask task;
      task.slotKey = key;
      task.container = slot.container;
      task.task = id;
      task.attempt = ++attempts_[id];
      task.waitedS = waitedS;
      auto& req = task.request;
      const auto& stage = view_.spec.stages(static_cast<int>(id.first));
      req.set_job_id(config_.jobId);
      req.set_stage(id.first);
      req.set_task(id.second);
      req.set_attempt(task.attempt);
      *req.mutable_container() = slot.container.id();
      req.set_site(slot.container.site());
      req.set_op(stage.op());
      *req.mutable_params() = stage.params();
      for (auto& in : *inputs) *req.add_inputs() = std::move(in);
      req.set_buckets(job::outputBuckets(view_.spec, id.first));
      req.set_output_replicas(job::outputReplicas(view_.spec));
      req.set_epoch(epoch_);
      auto& left = queued[id.first];
      if (left != std::numeric_limits<size_t>::max()) --left;
      req.set_stage_tail(left < slots_.size());
      out.launches.push_back(std::move(task));
    }
    if (sched::hasRoom(decision.freeAfter)) room = true;
    if (decision.steal && slot.used() <= 0.5) ++idle;
  }
  // Tasks that wait for a locality level: step again when the next threshold passes.
  if (room) {
    for (const auto& w : waiting) {
      const double since = now - w.waitS;
      wakeAt(since + config_.parades.tau * w.processingS, now, out);
      wakeAt(since + 2 * config_.parades.tau * w.processingS, now, out);
    }
  }
  if (idle > 0 && waiting.empty() && !unlisted && stealable_ > 0 && !view_.spec.no_stealing() && !stealing_) {
    std::vector<std::string> victims;
    for (const auto& site : jms_) {
      if (site != config_.site) victims.push_back(site);
    }
    const double next = lastSteal_ + std::max(config_.timings.stealIntervalS, stealBackoffS_);
    if (!victims.empty() && now < next) {
      wakeAt(next, now, out);
    } else if (!victims.empty()) {
      std::rotate(victims.begin(), victims.begin() + static_cast<std::ptrdiff_t>(stealRound_ % victims.size()),
                  victims.end());
      stealing_ = true;
      lastSteal_ = now;
      out.steal = StealWork{static_cast<uint32_t>(idle), std::move(victims)};
    }
  }
}

}  // namespace tellus::jobcore
