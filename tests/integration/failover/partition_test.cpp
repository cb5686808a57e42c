// Issue 12 items 3 and 4, on real ZooKeeper ensembles and real daemons as processes:
//   - a region partition: every process of one site (its master, its workers with their JMs
//     and executors, and its ZooKeeper voter) is stopped with SIGSTOP for longer than the
//     session timeout, then resumed; meanwhile its movable tasks run at the other sites and
//     its residency-pinned ones wait for it;
//   - ZooKeeper quorum lost and regained: two of the three voters are stopped for longer than
//     the session timeout, then resumed;
//   - a worker stopped past its session timeout with a task request in its socket: the
//     request's sender took the worker for lost, so the worker refuses it when it resumes.
// Each time the job must end with the exact word count, no finished task may run again, no
// write of a stale primary may land, and (quorum) the daemons hold still while ZooKeeper is
// away and say so once. Every wait is on a real condition with a deadline.

#include <signal.h>

#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "failover/scenario.h"
#include "checks.h"
#include "harness/eventually.h"
#include "harness/files.h"
#include "jobstate/paths.h"
#include "net/methods.h"
#include "net/rpc_client.h"

namespace tellus::failover {
namespace {

using harness::readFile;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr milliseconds kJobDeadline = 180s;
constexpr milliseconds kRecoveryDeadline = 90s;
// A healed site's JMs may rejoin the election after the end: the epoch may move then.
const EndChecks kEnd{kJobDeadline, kRecoveryDeadline, false};
// Sessions long enough for a loaded 2-core machine not to expire them by itself; the faults
// below outlast them on purpose, which the tests establish from what the daemons report.
constexpr uint32_t kSessionTimeoutMs = 4000;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) ++n;
  return n;
}

// A daemon's log and how much of it existed when the fault began.
struct LogMark {
  std::string name;
  std::filesystem::path path;
  size_t offset = 0;
  std::string since() const {
    std::string text = readFile(path);
    return text.size() > offset ? text.substr(offset) : std::string();
  }
};

// Every daemon log of the cluster (masters, workers) and the JM logs of `jobId`, marked now.
std::vector<LogMark> markLogs(harness::MiniCluster& cluster, const std::string& jobId) {
  std::vector<LogMark> marks;
  auto add = [&](std::string name, std::filesystem::path path) {
    marks.push_back({std::move(name), path, readFile(path).size()});
  };
  for (const auto& site : cluster.sites()) {
    add("master-" + site, cluster.daemonLog("master-" + site));
    for (const auto& id : cluster.workers(site)) {
      add(id, cluster.daemonLog(id));
      auto jm = cluster.dir() / site / id / "jms" / jobId / "jm.log";
      if (std::filesystem::exists(jm)) add("JM of " + jobId + " on " + id, jm);
    }
  }
  return marks;
}

// Sends SIGCONT to a paused site however the test ends.
class ResumeSiteOnExit {
 public:
  ResumeSiteOnExit(harness::MiniCluster& cluster, std::string site) : cluster_(cluster), site_(std::move(site)) {}
  ~ResumeSiteOnExit() {
    if (armed_) (void)cluster_.resumeSite(site_);
  }
  Status resume() {
    armed_ = false;
    return cluster_.resumeSite(site_);
  }

 private:
  harness::MiniCluster& cluster_;
  std::string site_;
  bool armed_ = true;
};

// Resumes paused ZooKeeper voters however the test ends.
class ResumeVotersOnExit {
 public:
  ResumeVotersOnExit(harness::ZkEnsemble& ensemble, std::vector<size_t> voters)
      : ensemble_(ensemble), voters_(std::move(voters)) {}
  ~ResumeVotersOnExit() {
    if (armed_) (void)resume();
  }
  Status resume() {
    armed_ = false;
    Status result;
    for (size_t v : voters_) {
      Status st = ensemble_.server(v).resume();
      if (!st && result) result = st;
    }
    return result;
  }

 private:
  harness::ZkEnsemble& ensemble_;
  std::vector<size_t> voters_;
  bool armed_ = true;
};

// ---------------------------------------------------------------------------------------------

TEST_CASE("a region cut off past the session timeout and healed: the job ends exact, its movable tasks run at the "
          "other sites, pinned tasks wait for their site, nothing runs twice, the stale primary and master rejoin "
          "without a stale write",
          "[integration][partition]") {
  ScenarioOptions options;
  options.cluster.zkServers = 3;
  options.cluster.sessionTimeoutMs = kSessionTimeoutMs;
  // exec is declared an aggregation here, so that only the first stage's tasks at the cut
  // site read pinned records: the stages after it may run anywhere.
  options.cluster.masterExtraYaml = "derived_operators: [exec]\n";
  options.residencyLocalSites = {"us-east"};
  // Stage 1 reads nothing: released with the first stage and spread over the sites, the cut
  // site's share of it is movable work the others must take over while it is away.
  options.sideTasks = 24;
  options.sideSleepS = 2.0;
  constexpr uint32_t kSideStage = 1;
  auto started = Scenario::start(options);
  INFO("starting the scenario: " << whyNot(started));
  REQUIRE(started.isOk());
  auto sc = std::move(started).value();
  auto& cluster = sc->cluster();
  const std::string cut = cluster.sites()[0];  // the pJM's site; holds ZooKeeper voter 0
  REQUIRE(cut == "us-east");
  REQUIRE(cluster.siteVoter(cut) == std::optional<size_t>(0));
  const auto cutWorkerList = cluster.workers(cut);
  const std::set<std::string> cutWorkers(cutWorkerList.begin(), cutWorkerList.end());

  auto jobId = sc->submit(cut);
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());
  // The side stage's tasks the cut site owns that neither ran nor run: what it must give up.
  const auto waitingSideTasksOfCut = [&](const JobSnapshot& s) {
    std::set<TaskId> waiting;
    auto map = s.taskmaps.find(kSideStage);
    if (map == s.taskmaps.end()) return waiting;
    for (uint32_t t = 0; t < static_cast<uint32_t>(map->second.owner_site_size()); ++t) {
      const TaskId id{kSideStage, t};
      if (map->second.owner_site(static_cast<int>(t)) == cut && !s.parts.count(id) && !s.running.count(id)) {
        waiting.insert(id);
      }
    }
    return waiting;
  };
  // The first stage under way, with outputs already recorded at the site to cut and a task
  // running there, and side tasks waiting there.
  auto before = sc->waitFor(*jobId, [&](const JobSnapshot& s) {
    auto tasks = s.stageTasks.find(0);
    if (tasks == s.stageTasks.end() || !s.settled() || s.done(0) * 2 > tasks->second) return false;
    bool recordedThere = false, runningThere = false;
    for (const auto& [id, loc] : s.parts) recordedThere = recordedThere || loc.site() == cut;
    for (const auto& [id, m] : s.running) runningThere = runningThere || m.site() == cut;
    return recordedThere && runningThere && !waitingSideTasksOfCut(s).empty();
  }, kJobDeadline);
  INFO("waiting for the first stage: " << failureReport(before, *sc, *jobId));
  REQUIRE(before.isOk());
  const pb::JmInfo old = *before->currentPrimary();
  REQUIRE(old.site() == cut);

  ResumeSiteOnExit resumeOnExit(cluster, cut);
  REQUIRE(cluster.pauseSite(cut).isOk());
  auto after = sc->snapshot(*jobId);
  REQUIRE(after.isOk());
  const auto masterMark = markLogs(cluster, *jobId);
  // Read with the site stopped: what it owned at the cut and had not started.
  const std::set<TaskId> movable = waitingSideTasksOfCut(*after);
  INFO("movable tasks of the cut site at the cut: " << movable.size());
  REQUIRE(!movable.empty());

  // The rest of the system sees the site go: its JM's and workers' sessions expire, another
  // site's JM becomes primary under a new epoch.
  auto elected = sc->waitFor(*jobId, [&](const JobSnapshot& s) {
    auto p = s.currentPrimary();
    if (!p || p->epoch() <= old.epoch() || p->site() == cut || s.jms.count(cut)) return false;
    auto workers = cluster.zkReader().children(jobstate::siteWorkersPath(cut));
    return workers && workers->empty();
  }, kRecoveryDeadline);
  INFO("waiting for the cut to be seen: " << failureReport(elected, *sc, *jobId));
  REQUIRE(elected.isOk());
  const pb::JmInfo primary = *elected->currentPrimary();

  // The other sites finish their share of the first stage; the cut site's pinned tasks wait,
  // and its recorded outputs are kept (they cannot be recomputed anywhere else).
  const pb::TaskMap firstMap = before->taskmaps.at(0);
  auto progressed = sc->waitFor(*jobId, [&](const JobSnapshot& s) {
    for (uint32_t t = 0; t < static_cast<uint32_t>(firstMap.owner_site_size()); ++t) {
      if (firstMap.owner_site(static_cast<int>(t)) != cut && !s.parts.count({0, t})) return false;
    }
    return true;
  }, kJobDeadline);
  INFO("the other sites' share during the cut: " << failureReport(progressed, *sc, *jobId));
  REQUIRE(progressed.isOk());
  for (uint32_t t = 0; t < static_cast<uint32_t>(firstMap.owner_site_size()); ++t) {
    if (firstMap.owner_site(static_cast<int>(t)) != cut) continue;
    INFO("pinned task 0/" << t << " of the cut site");
    // Recorded before the cut: still recorded. Not recorded: nobody else ran it.
    CHECK(progressed->parts.count({0, t}) == before->parts.count({0, t}));
  }
  CHECK(progressed->terminal() == false);
  // Its movable tasks are given to the other sites (the primary rewrites the taskMap once the
  // site has been gone for site_lost_after_ms) and recorded there, while it is still away.
  auto taken = sc->waitFor(*jobId, [&](const JobSnapshot& s) {
    for (const auto& id : movable) {
      auto part = s.parts.find(id);
      if (part == s.parts.end() || part->second.site() == cut) return false;
    }
    return true;
  }, kJobDeadline);
  INFO("the cut site's movable tasks during the cut: " << failureReport(taken, *sc, *jobId));
  REQUIRE(taken.isOk());
  for (const auto& id : movable) {
    INFO("movable task " << taskName(id));
    CHECK(taken->taskmaps.at(kSideStage).owner_site(static_cast<int>(id.second)) != cut);
  }
  for (uint32_t t = 0; t < static_cast<uint32_t>(firstMap.owner_site_size()); ++t) {
    if (firstMap.owner_site(static_cast<int>(t)) != cut) continue;
    INFO("pinned task 0/" << t << " of the cut site, once its movable tasks ran elsewhere");
    CHECK(taken->parts.count({0, t}) == before->parts.count({0, t}));
  }
  CHECK(taken->terminal() == false);

  // Heal.
  REQUIRE(resumeOnExit.resume().isOk());
  // The site is back in ZooKeeper with its master and both workers, and the job has a JM
  // there again under the same primary.
  auto healed = sc->waitFor(*jobId, [&](const JobSnapshot& s) {
    auto workers = cluster.zkReader().children(jobstate::siteWorkersPath(cut));
    auto live = cluster.zkReader().exists(jobstate::siteLivePath(cut));
    return s.jms.count(cut) && workers && workers->size() == cutWorkers.size() && live && *live;
  }, kRecoveryDeadline);
  INFO("waiting for the site to rejoin: " << failureReport(healed, *sc, *jobId));
  REQUIRE(healed.isOk());
  if (auto p = healed->currentPrimary()) CHECK(p->pid() == primary.pid());
  CHECK(healed->jms.at(cut).role() == pb::JM_SECONDARY);

  // Tasks running at the cut site when it was cut may run again (their markers went with
  // the workers' sessions), and so may side tasks recorded there (their outputs' only copy
  // was on a cut worker, and they read nothing pinned: lineage recomputes them); nothing
  // else may, its pinned outputs and the movable tasks it gave up included.
  std::set<TaskId> mayRunTwice = runningOn({&*before, &*after}, cutWorkers);
  for (const auto& [id, loc] : after->parts) {
    if (id.first == kSideStage && cutWorkers.count(loc.worker_id())) mayRunTwice.insert(id);
  }
  const auto end = requireCorrectEnd(*sc, *jobId, mayRunTwice, cluster.sites()[1], kEnd);
  for (const auto& id : movable) {
    INFO("movable task " << taskName(id));
    REQUIRE(end.parts.count(id));
    CHECK(end.parts.at(id).site() != cut);
  }

  // The pinned tasks ran at their site.
  for (uint32_t t = 0; t < static_cast<uint32_t>(firstMap.owner_site_size()); ++t) {
    if (firstMap.owner_site(static_cast<int>(t)) != cut) continue;
    INFO("pinned task 0/" << t);
    REQUIRE(end.parts.count({0, t}));
    CHECK(end.parts.at({0, t}).site() == cut);
  }
  // No write of the stale primary landed: every stage released after the cut carries the new
  // primary's epoch (the InvariantWatch checked every snapshot for releases under a stale
  // one), and the old primary, resumed, stepped down and never acted as primary again.
  size_t releasedAfter = 0;
  for (const auto& [s, map] : end.taskmaps) {
    if (after->taskmaps.count(s)) continue;
    ++releasedAfter;
    CHECK(map.epoch() == primary.epoch());
  }
  CHECK(releasedAfter >= 1);
  const std::string oldLog =
      readFile(cluster.dir() / cut / old.worker_id() / "jms" / *jobId / "jm.log");
  const size_t steppedDown = oldLog.find("no longer primary");
  INFO("the old primary's log:\n" << oldLog.substr(oldLog.size() > 6000 ? oldLog.size() - 6000 : 0));
  REQUIRE(steppedDown != std::string::npos);
  const std::string afterStepDown = oldLog.substr(steppedDown);
  CHECK(afterStepDown.find("primary of job") == std::string::npos);
  CHECK(afterStepDown.find("released stage") == std::string::npos);
  CHECK(afterStepDown.find("succeeded in") == std::string::npos);
  // The cut site's master, resumed, knew it had not run: it did not declare its (equally
  // stopped) workers dead nor start replacement JMs on that account.
  std::string masterLog;
  for (const auto& mark : masterMark) {
    if (mark.name == "master-" + cut) masterLog = mark.since();
  }
  INFO("master log of " << cut << " since the cut:\n" << masterLog);
  CHECK(masterLog.find("did not run for") != std::string::npos);
  CHECK(masterLog.find("missed heartbeats") == std::string::npos);
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("ZooKeeper quorum lost past the session timeout and regained: the daemons hold still, say so once, "
          "resume, and the job ends exact",
          "[integration][quorum]") {
  ScenarioOptions options;
  options.cluster.zkServers = 3;
  options.cluster.sessionTimeoutMs = kSessionTimeoutMs;
  auto started = Scenario::start(options);
  INFO("starting the scenario: " << whyNot(started));
  REQUIRE(started.isOk());
  auto sc = std::move(started).value();
  auto& cluster = sc->cluster();
  auto& ensemble = *cluster.zkEnsemble();

  auto jobId = sc->submit(cluster.sites()[0]);
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());
  auto before = sc->waitFor(*jobId, [](const JobSnapshot& s) {
    auto tasks = s.stageTasks.find(0);
    return tasks != s.stageTasks.end() && s.settled() && s.done(0) >= 2 && s.done(0) * 2 <= tasks->second &&
           !s.running.empty();
  }, kJobDeadline);
  INFO("waiting for the first stage: " << failureReport(before, *sc, *jobId));
  REQUIRE(before.isOk());

  // Two voters of three stop: the third has no quorum and serves no one.
  auto leader = ensemble.leaderIndex();
  REQUIRE(leader.isOk());
  const std::vector<size_t> stopped{*leader, (*leader + 1) % 3};
  auto atPause = sc->snapshot(*jobId);
  REQUIRE(atPause.isOk());
  const auto marks = markLogs(cluster, *jobId);
  ResumeVotersOnExit resumeOnExit(ensemble, stopped);
  for (size_t v : stopped) REQUIRE(ensemble.server(v).pause().isOk());

  // Every daemon notices, and the outage outlasts the session timeout: each one's session
  // expires (locally: no server can expire it without a quorum).
  std::string waitingFor;
  bool outage = harness::eventually(
      [&] {
        for (const auto& mark : marks) {
          std::string text = mark.since();
          if (text.find("ZooKeeper unavailable") == std::string::npos || text.find(" expired: ") == std::string::npos) {
            waitingFor = mark.name;
            return false;
          }
        }
        return true;
      },
      kRecoveryDeadline, 100ms);
  INFO("waiting for every daemon to see the outage past its session timeout; still waiting for " << waitingFor);
  REQUIRE(outage);

  REQUIRE(resumeOnExit.resume().isOk());
  REQUIRE(ensemble.waitForQuorum(std::chrono::steady_clock::now() + kRecoveryDeadline).isOk());
  bool resumed = harness::eventually(
      [&] {
        for (const auto& mark : marks) {
          if (mark.since().find("ZooKeeper available again") == std::string::npos) {
            waitingFor = mark.name;
            return false;
          }
        }
        return true;
      },
      kRecoveryDeadline, 100ms);
  INFO("waiting for every daemon to resume; still waiting for " << waitingFor);
  REQUIRE(resumed);

  // What each daemon logged while ZooKeeper was away: the outage once, and no line repeated
  // (nothing logged per retry); the JMs launched nothing and wrote nothing meanwhile.
  const std::regex variable("[0-9a-fx]+");
  for (const auto& mark : marks) {
    const std::string text = mark.since();
    const size_t from = text.find("ZooKeeper unavailable");
    const size_t to = text.find("ZooKeeper available again");
    INFO(mark.name << " since the voters stopped:\n" << text.substr(0, 8000));
    CHECK(count(text, "ZooKeeper unavailable") == 1);
    CHECK(count(text, "ZooKeeper available again") == 1);
    REQUIRE(from < to);
    const std::string window = text.substr(from, to - from);
    std::map<std::string, int> seen;
    std::istringstream lines(window);
    for (std::string line; std::getline(lines, line);) {
      if (line.size() < 24) continue;
      const char level = line[24];  // "YYYY-mm-dd HH:MM:SS.mmm L [name] message"
      if (level != 'W' && level != 'E' && level != 'C') continue;
      ++seen[std::regex_replace(line.substr(24), variable, "#")];
    }
    for (const auto& [line, n] : seen) {
      INFO("logged " << n << " times: " << line);
      CHECK(n == 1);
    }
    if (mark.name.rfind("JM of", 0) == 0) {
      CHECK(window.find(" attempt ") == std::string::npos);  // "task 0/3 attempt 1 on ..."
      CHECK(window.find("released stage") == std::string::npos);
      CHECK(window.find("registering JM") == std::string::npos);
      CHECK(window.find("asking its master") == std::string::npos);
    }
  }

  // Tasks running when the voters stopped may run again (their markers may have gone with
  // their workers' sessions); nothing else.
  std::set<std::string> allWorkers;
  for (const auto& site : cluster.sites()) {
    for (const auto& id : cluster.workers(site)) allWorkers.insert(id);
  }
  requireCorrectEnd(*sc, *jobId, runningOn({&*before, &*atPause}, allWorkers), cluster.sites()[0], kEnd);
}

TEST_CASE("a task request that waited in a stopped worker's socket past its session expiry is refused on resume; "
          "the worker takes tasks again once its session is confirmed",
          "[failover][partition][pause]") {
  harness::MiniClusterOptions options;
  options.sites = 1;
  options.workersPerSite = 1;
  options.sessionTimeoutMs = kSessionTimeoutMs;
  options.tls = false;  // the test sends RunTask itself, as a JM would
  auto started = harness::MiniCluster::start(options);
  REQUIRE(started.isOk());
  auto& cluster = **started;
  const std::string site = cluster.sites().front();
  const std::string id = cluster.workers(site).front();
  auto worker = net::Endpoint::parse(cluster.workerAddress(id));
  REQUIRE(worker.isOk());
  // A request for a job that does not exist: whatever the worker decides, nothing can run.
  pb::RunTaskRequest run;
  run.set_job_id("job-0000000042");
  run.set_op("synthetic");
  run.mutable_container()->set_worker_id(id);
  run.mutable_container()->set_slot(0);
  run.set_site(site);
  auto refusedAsPaused = [](const Result<pb::RunTaskResponse>& r) {
    return !r.isOk() && r.error().code == ErrorCode::kUnavailable &&
           r.message().find("was stopped") != std::string::npos;
  };
  auto before = net::callBlocking<rpc::Worker::RunTask>(*worker, run, 10000ms);
  INFO(before.message());
  CHECK_FALSE(before.isOk());
  CHECK_FALSE(refusedAsPaused(before));

  const auto logOffset = readFile(cluster.daemonLog(id)).size();
  REQUIRE(cluster.pauseWorker(id).isOk());
  // Sent to the stopped worker: the request waits in its socket.
  std::optional<Result<pb::RunTaskResponse>> stale;
  std::thread sender([&] { stale = net::callBlocking<rpc::Worker::RunTask>(*worker, run, 120000ms); });
  // Its session expires: ZooKeeper removes its liveness node, and a JM would take it for lost.
  const bool expired = harness::eventually(
      [&] {
        auto live = cluster.zkReader().exists(jobstate::siteWorkerPath(site, id));
        return live.isOk() && !*live;
      },
      60s, 50ms);
  Status resumed = cluster.resumeWorker(id);
  sender.join();
  REQUIRE(expired);
  REQUIRE(resumed.isOk());
  REQUIRE(stale.has_value());
  INFO(stale->message());
  CHECK(refusedAsPaused(*stale));
  // Re-registered under a new session, it takes requests again.
  CHECK(harness::eventually(
      [&] { return !refusedAsPaused(net::callBlocking<rpc::Worker::RunTask>(*worker, run, 10000ms)); }, 60s, 100ms));
  const std::string log = readFile(cluster.daemonLog(id)).substr(logOffset);
  CHECK(count(log, "refusing task starts until its ZooKeeper session is confirmed") == 1);
  CHECK(count(log, "ZooKeeper session confirmed after the pause") == 1);
}

}  // namespace
}  // namespace tellus::failover
