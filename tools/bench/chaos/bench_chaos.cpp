// bench-chaos: a bounded chaos run (issue 12, item 5) on a mini cluster of real processes over
// a real 3-voter ZooKeeper ensemble: a stream of word count and multi-stage jobs submitted to
// random masters while a seeded schedule injects one fault at a time (worker VM kills, JM
// kills, JMs and workers stopped past the session timeout, master restarts, a ZooKeeper voter
// kill, a region partition). At the end every job must have succeeded with the exact output,
// re-run only what a fault allowed, never shown two primaries of one epoch, and no job may be
// stuck. One JSON document on stdout; exit 0 only without a violation. See README.md.

#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "failover/scenario.h"
#include "harness/eventually.h"
#include "jobstate/paths.h"
#include "util/log.h"

namespace tellus::failover {
namespace {

using std::chrono::milliseconds;
using Json = nlohmann::json;

const std::vector<std::string> kFaultKinds = {"vm-kill",        "jm-kill",       "jm-stop",  "worker-stop",
                                              "master-restart", "zk-voter-kill", "partition"};
constexpr milliseconds kPoll{200};
// How long a fault's own steps may wait for the cluster (a session to expire, a daemon to come
// back) before that is reported as a violation.
constexpr milliseconds kStepDeadline{60000};

struct BenchOptions {
  double minutes = 10;
  std::optional<uint64_t> seed;
  int sites = 4;
  uint32_t maxInFlight = 3;
  double submitEveryS = 2.0;
  uint32_t sessionTimeoutMs = 4000;
  double faultGapMinS = 4;
  double faultGapMaxS = 10;
  uint32_t partitionsPerSite = 6;
  double taskSleepS = 1.0;
  std::vector<std::string> faultKinds = kFaultKinds;
};

int64_t unixMs() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double secondsSince(Clock::time_point from, Clock::time_point to = Clock::now()) {
  return std::chrono::duration<double>(to - from).count();
}

struct Job {
  std::string id;
  std::string kind;  // "wordcount" or "multistage"
  std::string site;  // submitted through its master
  std::optional<JobSnapshot> last;
  std::optional<JobSnapshot> end;  // the first terminal snapshot
  bool checked = false;
  // Executions beyond one each task may have: one per fault that could make it run again.
  std::map<TaskId, uint32_t> extraRuns;
};

struct Fault {
  std::string kind;
  std::string target;  // worker id, "JM pid N of <job> at <site>", site, or "voter i"
  std::string site;    // the one site it hits
  Clock::time_point at;
  int64_t atUnixMs = 0;
  double atS = 0;  // since the run began
  std::optional<double> overS;  // injection -> the harness undid it and the daemon is back
  std::vector<std::string> jobsInFlight;
  // Jobs whose primary this fault took down, with the epoch it held; and when a round first
  // read a newer epoch of each (a takeover).
  std::map<std::string, uint64_t> primaryHit;
  std::map<std::string, double> newPrimaryS;
  std::string error;  // not injected (e.g. its JM had gone meanwhile)
};

class Chaos {
 public:
  Chaos(BenchOptions options, uint64_t seed)
      : options_(std::move(options)), seed_(seed), faultRng_(seed), jobRng_(seed ^ 0x5DEECE66DULL) {}

  Status run();
  Json report() const;
  bool passed() const { return violations_.empty(); }

 private:
  harness::MiniCluster& cluster() { return sc_->cluster(); }
  void violation(std::string what) {
    std::cerr << "bench-chaos: VIOLATION " << what << "\n";
    violations_.push_back(std::move(what));
  }
  // One round: snapshot every job in flight (through the invariant watch), note new
  // primaries, check jobs that ended (when no fault is on), submit when there is room.
  void tick();
  // Ticks until `condition` holds or `deadline` passes.
  bool waitUntil(const std::function<bool()>& condition, milliseconds deadline);
  void checkEnded();
  void maybeSubmit();
  std::vector<std::string> inFlight() const;
  size_t draw(std::mt19937_64& rng, size_t n) { return static_cast<size_t>(rng() % n); }
  // Injects one fault and undoes it; false when it could not be injected (its target left).
  bool runFault(const std::string& kind);
  // The JSON record of a fault with its recovery time (from the jobs' final state).
  Json faultJson(const Fault& f) const;
  std::optional<double> recoveryS(const Fault& f) const;
  Result<std::vector<std::string>> siteWorkersUp(const std::string& site);

  BenchOptions options_;
  uint64_t seed_;
  std::mt19937_64 faultRng_;  // the fault schedule: kinds, gaps, targets
  std::mt19937_64 jobRng_;    // the job stream: kinds, submit sites
  std::unique_ptr<Scenario> sc_;
  Clock::time_point started_;
  Clock::time_point chaosEnd_;
  std::map<std::string, Job> jobs_;
  std::vector<std::string> order_;
  std::vector<Fault> faults_;
  std::optional<size_t> active_;  // index of the fault in progress
  std::vector<std::string> submitErrors_;
  std::vector<std::string> violations_;
  Clock::time_point nextSubmit_;
  uint32_t submitted_ = 0;
  size_t resultChecks_ = 0;
  size_t snapshotErrors_ = 0;
  double wallS_ = 0;
};

std::vector<std::string> Chaos::inFlight() const {
  std::vector<std::string> out;
  for (const auto& id : order_) {
    if (!jobs_.at(id).end) out.push_back(id);
  }
  return out;
}

void Chaos::tick() {
  for (const auto& id : inFlight()) {
    Job& job = jobs_.at(id);
    auto snap = sc_->snapshot(id);
    if (!snap) {
      ++snapshotErrors_;  // ZooKeeper away for a moment (a voter killed): the next round reads it
      continue;
    }
    sc_->invariants().observe(*snap);
    // The takeover is the new primary's epoch bump (it may come after the fault was undone);
    // a job may end before a round sees the new primary registered, never before its epoch
    // moved.
    for (auto& f : faults_) {
      auto hit = f.primaryHit.find(id);
      if (hit != f.primaryHit.end() && !f.newPrimaryS.count(id) && snap->epoch > hit->second) {
        f.newPrimaryS[id] = secondsSince(f.at);
      }
    }
    if (snap->terminal()) job.end = *snap;
    job.last = std::move(snap).value();
  }
  if (!active_) checkEnded();
  maybeSubmit();
}

bool Chaos::waitUntil(const std::function<bool()>& condition, milliseconds deadline) {
  return harness::eventually(
      [&] {
        tick();
        return condition();
      },
      deadline, kPoll);
}

// Results are read as soon as a job ends and no fault is on: a later VM kill may take a
// result partition with it (results live as long as their partitions).
void Chaos::checkEnded() {
  for (const auto& id : order_) {
    Job& job = jobs_.at(id);
    if (!job.end || job.checked) continue;
    job.checked = true;
    if (job.end->status.state() != pb::JOB_SUCCEEDED) {
      violation(fmt::format("{} ({}) ended {}: {}", id, job.kind, pb::JobState_Name(job.end->status.state()),
                            job.end->status.error()));
      continue;
    }
    const auto& sites = cluster().sites();
    const std::string& site = sites[resultChecks_++ % sites.size()];
    Status exact = sc_->checkResult(id, site);
    if (!exact) violation(fmt::format("{} ({}) result through {}: {}", id, job.kind, site, exact.message()));
    for (const auto& problem : checkExecutions(*job.end, job.extraRuns)) {
      violation(fmt::format("{} ({}) execution audit: {}", id, job.kind, problem));
    }
  }
}

void Chaos::maybeSubmit() {
  auto now = Clock::now();
  if (now >= chaosEnd_ || now < nextSubmit_ || inFlight().size() >= options_.maxInFlight) return;
  nextSubmit_ = now + milliseconds(static_cast<int64_t>(options_.submitEveryS * 1000));
  // Through a master the fault in progress leaves alone (a stopped or dead one cannot answer).
  std::vector<std::string> sites;
  for (const auto& s : cluster().sites()) {
    if (!active_ || faults_[*active_].site != s) sites.push_back(s);
  }
  const std::string kind = draw(jobRng_, 2) == 0 ? "wordcount" : "multistage";
  const std::string site = sites[draw(jobRng_, sites.size())];
  ++submitted_;
  const std::string name = fmt::format("chaos-wordcount-{}", submitted_);
  // multistage: exec 'sleep S; cat' per raw partition -> wordcount.map -> wordcount.reduce.
  auto id = kind == "multistage" ? sc_->submit(site) : sc_->submitYaml(site, name, fmt::format(R"(name: {}
placement: proportional
stages:
  - name: map
    op: wordcount.map
    input: {{dataset: corpus}}
  - name: reduce
    op: wordcount.reduce
    tasks: 3
    input: {{stage: map}}
)", name));
  if (!id) {
    submitErrors_.push_back(fmt::format("{} through {} at {:.1f}s: {}", kind, site, secondsSince(started_), id.message()));
    return;
  }
  jobs_[*id] = Job{*id, kind, site, std::nullopt, std::nullopt, false, {}};
  order_.push_back(*id);
}

Result<std::vector<std::string>> Chaos::siteWorkersUp(const std::string& site) {
  auto workers = cluster().zkReader().children(jobstate::siteWorkersPath(site));
  if (!workers && workers.error().code == ErrorCode::kNotFound) return std::vector<std::string>{};
  return workers;
}

bool Chaos::runFault(const std::string& kind) {
  auto& c = cluster();
  const auto& sites = c.sites();
  // A fault lands while a job runs with its primary registered (else it tells nothing about
  // recovery); everything that ended is checked first, before a fault may take its result away.
  waitUntil([&] {
    for (const auto& id : inFlight()) {
      const auto& last = jobs_.at(id).last;
      if (last && last->currentPrimary()) return true;
    }
    return Clock::now() >= chaosEnd_;
  }, kStepDeadline);
  checkEnded();
  std::map<std::string, JobSnapshot> before;
  for (const auto& id : inFlight()) {
    if (jobs_.at(id).last) before.emplace(id, *jobs_.at(id).last);
  }
  Fault f;
  f.kind = kind;
  // Whether the fault takes a job's primary down, from what was known just before it.
  std::function<bool(const pb::JmInfo&)> hitsPrimary = [](const pb::JmInfo&) { return false; };
  std::set<std::string> lostWorkers;     // VM killed: its outputs are gone too
  std::set<std::string> expiredWorkers;  // sessions expired: their running markers go
  int64_t stoppedJm = 0;
  std::string jmJob;

  if (kind == "vm-kill" || kind == "worker-stop") {
    f.site = sites[draw(faultRng_, sites.size())];
    auto workers = c.workers(f.site);
    f.target = workers[draw(faultRng_, workers.size())];
    hitsPrimary = [w = f.target](const pb::JmInfo& p) { return p.worker_id() == w; };
    (kind == "vm-kill" ? lostWorkers : expiredWorkers).insert(f.target);
  } else if (kind == "jm-kill" || kind == "jm-stop") {
    // A JM of a job in flight, signalled below (drawn again when it left meanwhile).
    std::vector<std::pair<std::string, std::string>> candidates;  // (job, site)
    for (const auto& id : inFlight()) {
      const auto& last = jobs_.at(id).last;
      if (!last) continue;
      for (const auto& [site, jm] : last->jms) candidates.emplace_back(id, site);
    }
    if (candidates.empty()) {
      f.error = "no JM registered to hit";
      f.at = Clock::now();
      f.atS = secondsSince(started_, f.at);
      faults_.push_back(f);
      return false;
    }
    auto [job, site] = candidates[draw(faultRng_, candidates.size())];
    jmJob = job;
    f.site = site;
  } else if (kind == "master-restart") {
    f.site = sites[draw(faultRng_, sites.size())];
    f.target = "master-" + f.site;
  } else if (kind == "zk-voter-kill") {
    size_t voter = draw(faultRng_, c.zkEnsemble()->size());
    f.target = fmt::format("voter {}", voter);
    f.site = sites[voter];  // voter i stands in site i's region
    // Never lose quorum: every voter serves before one goes.
    Status quorum = c.zkEnsemble()->waitForQuorum(Clock::now() + kStepDeadline);
    if (!quorum) violation("ZooKeeper ensemble without quorum before a voter kill: " + quorum.message());
  } else if (kind == "partition") {
    f.site = sites[draw(faultRng_, sites.size())];
    f.target = f.site;
    hitsPrimary = [s = f.site](const pb::JmInfo& p) { return p.site() == s; };
    for (const auto& w : c.workers(f.site)) expiredWorkers.insert(w);
  }

  // Inject.
  Status injected;
  if (kind == "vm-kill") {
    injected = c.killWorker(f.target);
  } else if (kind == "worker-stop") {
    injected = c.pauseWorker(f.target);
  } else if (kind == "jm-kill" || kind == "jm-stop") {
    auto jm = c.signalJm(jmJob, f.site, kind == "jm-kill" ? SIGKILL : SIGSTOP);
    if (jm) {
      stoppedJm = jm->pid();
      f.target = fmt::format("JM pid {} of {} at {}", jm->pid(), jmJob, f.site);
      hitsPrimary = [pid = jm->pid()](const pb::JmInfo& p) { return p.pid() == pid; };
    } else {
      injected = jm.error();
    }
  } else if (kind == "master-restart") {
    injected = c.killMaster(f.site);
  } else if (kind == "zk-voter-kill") {
    injected = c.zkEnsemble()->server(static_cast<size_t>(std::stoul(f.target.substr(6)))).kill();
  } else if (kind == "partition") {
    injected = c.pauseSite(f.site);
  }
  f.at = Clock::now();
  f.atUnixMs = unixMs();
  f.atS = secondsSince(started_, f.at);
  if (!injected) {
    f.error = injected.message();
    faults_.push_back(f);
    return false;
  }
  std::cerr << fmt::format("bench-chaos: {:.1f}s {} {} ({})\n", f.atS, kind, f.target, f.site);
  for (const auto& [id, snap] : before) {
    f.jobsInFlight.push_back(id);
    if (auto p = snap.currentPrimary(); p && hitsPrimary(*p)) f.primaryHit[id] = p->epoch();
  }
  faults_.push_back(f);
  active_ = faults_.size() - 1;
  Fault& fault = faults_.back();

  // What the fault may make run again, job by job: read right after it too, since a task may
  // have started between the last round and the fault (its marker outlives the fault until
  // the session expires).
  if (!lostWorkers.empty() || !expiredWorkers.empty()) {
    for (const auto& [id, snap] : before) {
      std::optional<JobSnapshot> after;
      harness::eventually([&] {
        auto now = sc_->snapshot(id);
        if (now) after = std::move(now).value();
        return after.has_value();
      }, kStepDeadline, kPoll);
      const JobSnapshot& a = after ? *after : snap;
      std::set<TaskId> may = lostWorkers.empty() ? runningOn({&snap, &a}, expiredWorkers)
                                                 : mayRerun(snap, a, lostWorkers);
      for (const auto& task : may) ++jobs_.at(id).extraRuns[task];
    }
  }

  // Hold the fault until it has done its work (a session expired, a leader elected), undo it,
  // and wait for the daemon to be back. Each wait is bounded; a miss is a violation.
  auto step = [&](const std::string& what, const std::function<bool()>& condition) {
    bool ok = waitUntil(condition, kStepDeadline);
    if (!ok) violation(fmt::format("{} {} at {:.1f}s: {} not within {}s", kind, fault.target, fault.atS, what,
                                   kStepDeadline.count() / 1000));
    return ok;
  };
  auto workerGone = [&](const std::string& w) {
    return [this, site = fault.site, w] {
      auto up = siteWorkersUp(site);
      return up && std::find(up->begin(), up->end(), w) == up->end();
    };
  };
  auto workerBack = [&](const std::string& w) {
    return [this, site = fault.site, w] {
      auto up = siteWorkersUp(site);
      return up && std::find(up->begin(), up->end(), w) != up->end();
    };
  };
  auto keep = [&](const Status& st, const std::string& what) {
    if (!st) violation(fmt::format("{} {}: {}: {}", kind, fault.target, what, st.message()));
  };
  if (kind == "vm-kill") {
    step("the killed worker's session expiring", workerGone(fault.target));
    keep(c.restartWorker(fault.target), "restarting the worker");
    step("the restarted worker registering", workerBack(fault.target));
  } else if (kind == "worker-stop") {
    step("the stopped worker's session expiring", workerGone(fault.target));
    keep(c.resumeWorker(fault.target), "resuming the worker");
    step("the resumed worker registering again", workerBack(fault.target));
  } else if (kind == "jm-kill") {
    step("a new JM of the job at the site (or the job's end)", [&] {
      const Job& job = jobs_.at(jmJob);
      if (job.end) return true;
      if (!job.last) return false;
      auto jm = job.last->jms.find(fault.site);
      return jm != job.last->jms.end() && jm->second.pid() != stoppedJm;
    });
  } else if (kind == "jm-stop") {
    // Past the session timeout: its registration goes with its session (or a replacement
    // took the site).
    step("the stopped JM's session expiring", [&] {
      auto info = c.jmInfo(jmJob, fault.site);
      if (!info) return info.error().code == ErrorCode::kNotFound;
      return info->pid() != stoppedJm;
    });
    // Its worker may have ended it meanwhile (SIGKILL reaches a stopped process): the job
    // ended, or the JM was replaced. Nothing is left to resume then.
    Status resumed = c.signalJmPid(static_cast<pid_t>(stoppedJm), SIGCONT);
    if (!resumed && resumed.code() == ErrorCode::kNotFound) {
      std::cerr << fmt::format("bench-chaos: {} {}: the JM was ended by its worker while stopped\n", kind, fault.target);
    } else {
      keep(resumed, "resuming the JM");
    }
  } else if (kind == "master-restart") {
    auto live = [&] { return c.zkReader().exists(jobstate::siteLivePath(fault.site)); };
    step("the killed master's site record going", [&] {
      auto up = live();
      return up && !*up;
    });
    keep(c.restartMaster(fault.site), "restarting the master");
    step("the restarted master publishing its site", [&] {
      auto up = live();
      return up && *up;
    });
  } else if (kind == "zk-voter-kill") {
    auto& ensemble = *c.zkEnsemble();
    step("a leader among the remaining voters", [&] { return ensemble.leaderIndex().isOk(); });
    auto& server = ensemble.server(static_cast<size_t>(std::stoul(fault.target.substr(6))));
    keep(server.restart(), "restarting the voter");
    keep(ensemble.waitForQuorum(Clock::now() + kStepDeadline), "the ensemble serving again");
  } else if (kind == "partition") {
    step("the cut site's workers' sessions expiring", [&] {
      auto up = siteWorkersUp(fault.site);
      return up && up->empty();
    });
    keep(c.resumeSite(fault.site), "healing the partition");
    step("the healed site's master and workers back", [&] {
      auto up = siteWorkersUp(fault.site);
      auto live = c.zkReader().exists(jobstate::siteLivePath(fault.site));
      return up && up->size() == c.workers(fault.site).size() && live && *live;
    });
  }
  fault.overS = secondsSince(fault.at);
  active_.reset();
  return true;
}

Status Chaos::run() {
  ScenarioOptions options;
  options.cluster.sites = options_.sites;
  options.cluster.zkServers = 3;
  options.cluster.sessionTimeoutMs = options_.sessionTimeoutMs;
  options.partitionsPerSite = options_.partitionsPerSite;
  options.linesPerPartition = 40;
  options.taskSleepS = options_.taskSleepS;
  options.mapTasks = 4;
  options.reduceTasks = 2;
  auto sc = Scenario::start(options);
  if (!sc) return sc.error();
  sc_ = std::move(sc).value();
  started_ = Clock::now();
  const auto total = milliseconds(static_cast<int64_t>(options_.minutes * 60000));
  // The last quarter (at most a minute) is for draining: no new job, no new fault.
  const auto drain = std::min(milliseconds(60000), total / 4);
  chaosEnd_ = started_ + total - drain;
  nextSubmit_ = started_;

  std::vector<std::string> round;
  while (Clock::now() < chaosEnd_) {
    std::uniform_real_distribution<double> gapS(options_.faultGapMinS, options_.faultGapMaxS);
    auto gapEnd = Clock::now() + milliseconds(static_cast<int64_t>(gapS(faultRng_) * 1000));
    // The gap between faults: the cluster works undisturbed (jobs run, end, are checked).
    waitUntil([&] { return Clock::now() >= gapEnd || Clock::now() >= chaosEnd_; }, total);
    if (Clock::now() >= chaosEnd_) break;
    // Every kind once per round, in a seeded order.
    if (round.empty()) {
      round = options_.faultKinds;
      std::shuffle(round.begin(), round.end(), faultRng_);
    }
    std::string kind = round.back();
    round.pop_back();
    // A JM that left between the draw and the signal (its job ended): the kind comes again.
    if (!runFault(kind)) round.push_back(kind);
  }

  // Drain: every job ends, at least 30 s granted after the last fault.
  auto drainDeadline = std::max(started_ + total, Clock::now() + milliseconds(30000));
  waitUntil([&] { return inFlight().empty(); },
            std::chrono::duration_cast<milliseconds>(drainDeadline - Clock::now()));
  for (const auto& id : inFlight()) {
    const auto& last = jobs_.at(id).last;
    violation(fmt::format("{} ({}) stuck: not ended {:.0f}s into the run; last: {}{}", id, jobs_.at(id).kind,
                          secondsSince(started_), last ? last->describe() : "no snapshot", sc_->diagnostics(id)));
  }
  checkEnded();
  // Every finished job's JMs leave.
  std::string lingering;
  bool left = harness::eventually([&] {
    lingering.clear();
    for (const auto& id : order_) {
      auto jms = cluster().jms(id);
      if (jms && !jms->empty()) lingering += " " + id;
    }
    return lingering.empty();
  }, milliseconds(30000), milliseconds(500));
  if (!left) violation("JMs still registered after the end of jobs:" + lingering);
  if (auto crashed = cluster().crashedDaemons(); !crashed.empty()) violation("daemons died:" + crashed);
  for (const auto& v : sc_->invariants().violations()) violation("invariant: " + v);
  wallS_ = secondsSince(started_);
  return {};
}

std::optional<double> Chaos::recoveryS(const Fault& f) const {
  // Per job in flight at the fault: the first output recorded of a task that began after it
  // (finish - elapsed > fault), or the job's end if it launched nothing more; the fault's
  // recovery is the slowest job's.
  std::optional<double> worst;
  for (const auto& id : f.jobsInFlight) {
    const Job& job = jobs_.at(id);
    if (!job.end) return std::nullopt;  // stuck: no recovery
    std::optional<int64_t> first;
    for (const auto& [task, loc] : job.end->parts) {
      int64_t finish = loc.finish_unix_ms();
      int64_t start = finish - static_cast<int64_t>(loc.elapsed_s() * 1000.0);
      if (start > f.atUnixMs && (!first || finish < *first)) first = finish;
    }
    int64_t at = first.value_or(static_cast<int64_t>(job.end->status.finish_unix_ms()));
    double s = std::max(0.0, static_cast<double>(at - f.atUnixMs) / 1000.0);
    worst = std::max(worst.value_or(s), s);
  }
  return worst;
}

Json Chaos::faultJson(const Fault& f) const {
  Json j{{"kind", f.kind}, {"target", f.target}, {"site", f.site}, {"at_s", f.atS}};
  if (!f.error.empty()) {
    j["not_injected"] = f.error;
    return j;
  }
  j["undone_and_back_s"] = f.overS ? Json(*f.overS) : Json(nullptr);
  j["jobs_in_flight"] = f.jobsInFlight.size();
  auto r = recoveryS(f);
  j["recovery_s"] = r ? Json(*r) : Json(nullptr);
  if (!f.primaryHit.empty()) {
    std::optional<double> worst;
    for (const auto& [id, epoch] : f.primaryHit) {
      auto it = f.newPrimaryS.find(id);
      if (it != f.newPrimaryS.end()) worst = std::max(worst.value_or(it->second), it->second);
    }
    j["primaries_hit"] = f.primaryHit.size();
    j["takeovers_seen"] = f.newPrimaryS.size();
    j["new_primary_s"] = worst ? Json(*worst) : Json(nullptr);
  }
  return j;
}

Json Chaos::report() const {
  Json out;
  out["seed"] = seed_;
  out["options"] = {{"minutes", options_.minutes},
                    {"sites", options_.sites},
                    {"max_in_flight", options_.maxInFlight},
                    {"submit_every_s", options_.submitEveryS},
                    {"session_timeout_ms", options_.sessionTimeoutMs},
                    {"fault_gap_s", {options_.faultGapMinS, options_.faultGapMaxS}},
                    {"partitions_per_site", options_.partitionsPerSite},
                    {"task_sleep_s", options_.taskSleepS},
                    {"zookeeper_voters", 3},
                    {"fault_kinds", options_.faultKinds}};
  Json perKind = Json::object();
  for (const auto& k : options_.faultKinds) perKind[k] = 0;
  Json faults = Json::array();
  std::optional<double> worst, worstPrimary;
  Json worstFault = nullptr;
  for (const auto& f : faults_) {
    Json j = faultJson(f);
    if (f.error.empty()) perKind[f.kind] = perKind[f.kind].get<int>() + 1;
    if (j.contains("recovery_s") && j["recovery_s"].is_number() && (!worst || j["recovery_s"].get<double>() > *worst)) {
      worst = j["recovery_s"].get<double>();
      worstFault = {{"kind", f.kind}, {"target", f.target}, {"at_s", f.atS}};
    }
    if (j.contains("new_primary_s") && j["new_primary_s"].is_number()) {
      worstPrimary = std::max(worstPrimary.value_or(0.0), j["new_primary_s"].get<double>());
    }
    faults.push_back(std::move(j));
  }
  out["faults_per_kind"] = perKind;
  out["faults"] = faults;
  out["worst_recovery_s"] = worst ? Json(*worst) : Json(nullptr);
  out["worst_recovery_fault"] = worstFault;
  out["worst_new_primary_s"] = worstPrimary ? Json(*worstPrimary) : Json(nullptr);
  size_t succeeded = 0, extra = 0, rerunTasks = 0;
  Json byKind = Json::object();
  for (const auto& id : order_) {
    const Job& job = jobs_.at(id);
    byKind[job.kind] = byKind.value(job.kind, 0) + 1;
    if (!job.end) continue;
    if (job.end->status.state() == pb::JOB_SUCCEEDED) ++succeeded;
    for (const auto& [task, n] : job.end->executions) {
      if (n > 1) {
        extra += n - 1;
        ++rerunTasks;
      }
    }
  }
  out["jobs"] = {{"submitted", order_.size()},
                 {"succeeded", succeeded},
                 {"by_kind", byKind},
                 {"tasks_run_more_than_once", rerunTasks},
                 {"extra_executions", extra},
                 {"submit_errors", submitErrors_}};
  out["snapshot_read_errors"] = snapshotErrors_;
  out["wall_s"] = wallS_;
  out["violations"] = violations_;
  return out;
}

}  // namespace
}  // namespace tellus::failover

int main(int argc, char** argv) {
  using namespace tellus::failover;
  BenchOptions bench;
  uint64_t seed = 0;
  CLI::App app{"bench-chaos: jobs under a seeded schedule of faults on a mini cluster (JSON on stdout)"};
  app.add_option("--minutes", bench.minutes, "the run's length after the cluster is up (the last quarter drains)")
      ->check(CLI::Range(0.5, 600.0));
  auto* seedOption = app.add_option("--seed", seed, "the fault schedule's and job stream's seed (default: random)");
  app.add_option("--sites", bench.sites, "sites (ZooKeeper voters stand in the first three)")->check(CLI::Range(3, 6));
  app.add_option("--max-in-flight", bench.maxInFlight, "jobs running at once at most")->check(CLI::Range(1u, 20u));
  app.add_option("--submit-every-s", bench.submitEveryS, "seconds between submissions at least")
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--session-timeout-ms", bench.sessionTimeoutMs, "ZooKeeper session timeout of the daemons")
      ->check(CLI::Range(1000u, 60000u));
  app.add_option("--fault-gap-min-s", bench.faultGapMinS, "undisturbed seconds between faults, at least")
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--fault-gap-max-s", bench.faultGapMaxS, "undisturbed seconds between faults, at most")
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--partitions-per-site", bench.partitionsPerSite, "raw partitions of the corpus per site")
      ->check(CLI::Range(1u, 64u));
  app.add_option("--task-sleep-s", bench.taskSleepS, "seconds each first-stage task of a multi-stage job sleeps")
      ->check(CLI::Range(0.0, 30.0));
  app.add_option("--faults", bench.faultKinds, "the fault kinds to draw from (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember(kFaultKinds));
  CLI11_PARSE(app, argc, argv);
  if (bench.faultGapMaxS < bench.faultGapMinS) {
    std::cerr << "bench-chaos: --fault-gap-max-s below --fault-gap-min-s\n";
    return 2;
  }
  if (seedOption->count() == 0) seed = (static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
  tellus::initLogging("bench-chaos", "warn");
  std::cerr << "bench-chaos: seed " << seed << "\n";
  if (tellus::Status found = tellus::harness::useOwnBuildDir(); !found) {
    std::cerr << "bench-chaos: " << found.message() << "\n";
    return 2;
  }
  Chaos chaos(bench, seed);
  tellus::Status ran = chaos.run();
  nlohmann::json out = chaos.report();
  if (!ran) out["violations"].push_back("the run did not complete: " + ran.message());
  std::cout << out.dump(2) << "\n";
  return ran && chaos.passed() ? 0 : 1;
}
