// No silent death, self-healing job state, a kill that always works (issue 10), on a real
// ZooKeeper and real daemons: each single corruption of a running job's state is injected
// behind the daemons' backs, and the invariant is checked — within a bounded time (polled with
// a deadline) the job reaches a terminal state with a reason or makes progress to its end, no
// JM process of it is left running, and after `tellus kill` no process of the job remains.
//
// One cluster for all the faults (one job each), to keep the run short.

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>

#include "failover/scenario.h"
#include "checks.h"
#include "harness/eventually.h"
#include "harness/files.h"
#include "jobstate/job_store.h"
#include "jobstate/job_view.h"
#include "jobstate/paths.h"

namespace tellus::failover {
namespace {

using harness::processAlive;
using harness::readFile;

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr milliseconds kJobDeadline = 90s;
constexpr milliseconds kRecoveryDeadline = 30s;

// Live processes of `jobId` of this cluster: JMs (their config is under jms/<job>/) and
// executors (their task under containers/<job>/), by command line, and the commands they run,
// by working directory. "<pid> <cmdline>" each.
std::vector<std::string> jobProcesses(const std::filesystem::path& clusterDir, const std::string& jobId) {
  std::vector<std::string> found;
  const std::string root = clusterDir.string();
  const std::string job = "/" + jobId + "/";
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return {"cannot list /proc"};
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0 || !processAlive(pid)) continue;
    std::string cmdline = readFile("/proc/" + std::to_string(pid) + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    std::error_code ec;
    const std::string cwd = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/cwd", ec).string() + "/";
    const bool mine = (cmdline.find(root) != std::string::npos && cmdline.find(job) != std::string::npos) ||
                      (cwd.rfind(root, 0) == 0 && cwd.find(job) != std::string::npos);
    if (mine) found.push_back(std::to_string(pid) + " " + cmdline);
  }
  closedir(proc);
  return found;
}

// The job's first stage is under way (tasks running, some done): the moment to inject.
std::function<bool(const JobSnapshot&)> midFirstStage() {
  return [](const JobSnapshot& s) {
    auto tasks = s.stageTasks.find(0);
    if (tasks == s.stageTasks.end() || !s.settled()) return false;
    const size_t done = s.done(0);
    return done >= 1 && done * 2 <= tasks->second && !s.running.empty();
  };
}

// What a fault does to the job: it must fail with a reason containing `reason`, or heal and
// succeed (reason empty), or be gone (its state deleted).
struct Outcome {
  enum Kind { kFails, kSucceeds, kGone } kind;
  std::string reason;
};

struct Fault {
  std::string name;
  // Corrupts the job's state (through the test's own ZooKeeper session).
  std::function<Status(harness::ZkReader&, const std::string& jobId, const JobSnapshot& before)> inject;
  Outcome expected;
  bool killRightAway = false;  // `tellus kill` at once, before the daemons react
};

// Deletes the job's nodes. Its JMs re-create theirs under the walk (registration, election)
// until they see the job gone and exit: tried again until the subtree is gone.
Status removeJob(harness::ZkReader& zk, const std::string& job) {
  Status removed = makeError(ErrorCode::kInternal, "not tried");
  harness::eventually(
      [&] {
        removed = zk.removeRecursive(jobstate::jobPath(job));
        return removed.isOk() || removed.code() == ErrorCode::kNotFound;
      },
      kRecoveryDeadline, 20ms);
  return removed.code() == ErrorCode::kNotFound ? Status::ok() : removed;
}

pb::PartitionLocation forgedFrom(const JobSnapshot& before) {
  // A plausible record: a real worker of the cluster, claimed by an execution that never was.
  pb::PartitionLocation forged = before.parts.begin()->second;
  forged.set_attempt_id("2-0-0000009999");
  return forged;
}

std::vector<Fault> faults(harness::MiniCluster& cluster) {
  const std::string garbage("\xff\xfe\x01garbage", 10);
  std::vector<Fault> all;
  all.push_back({"a garbage taskMap (does not decode)",
                 [garbage](harness::ZkReader& zk, const std::string& job, const JobSnapshot&) {
                   return zk.set(jobstate::taskmapPath(job, 0), garbage);
                 },
                 {Outcome::kFails, "TaskMap"}});
  all.push_back({"a taskMap that decodes but does not match its stage",
                 [](harness::ZkReader& zk, const std::string& job, const JobSnapshot&) {
                   pb::TaskMap map;
                   map.add_owner_site("mars");
                   auto node = jobstate::encodeTaskMap(map);
                   if (!node) return node.status();
                   return zk.set(jobstate::taskmapPath(job, 0), *node);
                 },
                 {Outcome::kFails, "its taskMap"}});
  all.push_back({"a garbage status",
                 [garbage](harness::ZkReader& zk, const std::string& job, const JobSnapshot&) {
                   return zk.set(jobstate::statusPath(job), garbage);
                 },
                 {Outcome::kFails, "status"}});
  all.push_back({"a garbage status, killed at once",
                 [garbage](harness::ZkReader& zk, const std::string& job, const JobSnapshot&) {
                   return zk.set(jobstate::statusPath(job), garbage);
                 },
                 {Outcome::kFails, ""},
                 true});
  all.push_back({"the job's nodes deleted",
                 [](harness::ZkReader& zk, const std::string& job, const JobSnapshot&) { return removeJob(zk, job); },
                 {Outcome::kGone, ""}});
  all.push_back({"the job's nodes deleted, killed at once",
                 [](harness::ZkReader& zk, const std::string& job, const JobSnapshot&) { return removeJob(zk, job); },
                 {Outcome::kGone, ""},
                 true});
  // Not state but a fault: a JM that keeps dying. Its worker reports each exit, its master
  // replaces it, and after max_jm_crashes (5) fails the job with the last exit in the reason.
  all.push_back({"an sJM that keeps crashing",
                 [&cluster](harness::ZkReader& zk, const std::string& job, const JobSnapshot&) {
                   // JM processes of the job at the site (its workers' data are under
                   // <cluster>/<site>/), by command line.
                   const std::string site = cluster.sites()[1];
                   const std::string where = (cluster.dir() / site).string() + "/";
                   std::set<pid_t> killed;
                   for (int kill = 0; kill < 6; ++kill) {
                     pid_t victim = 0;
                     bool found = harness::eventually(
                         [&] {
                           auto st = zk.run(zk.jobs().status(job));
                           if (st && jobstate::isTerminal(st->value.state())) return true;  // ended meanwhile
                           for (const auto& p : jobProcesses(cluster.dir(), job)) {
                             const pid_t pid = static_cast<pid_t>(std::atoi(p.c_str()));
                             if (p.find("tellus-jm") != std::string::npos && p.find(where) != std::string::npos &&
                                 !killed.count(pid)) {
                               victim = pid;
                               return true;
                             }
                           }
                           return false;
                         },
                         kRecoveryDeadline, 20ms);
                     if (!found) return Status(makeError(ErrorCode::kDeadlineExceeded, "no JM to kill at " + site));
                     if (victim == 0) break;
                     Status st = cluster.signalJmPid(victim, SIGKILL);
                     if (!st) return st;
                     killed.insert(victim);
                   }
                   return Status::ok();
                 },
                 {Outcome::kFails, "exited with an error 6 times, last: killed by signal 9"}});
  all.push_back({"a forged (persistent) running marker for a task not started yet",
                 [garbage](harness::ZkReader& zk, const std::string& job, const JobSnapshot&) {
                   return zk.create(jobstate::runningTaskPath(job, 2, 1), garbage);
                 },
                 {Outcome::kSucceeds, ""}});
  all.push_back({"forged output records for every reduce task",
                 [](harness::ZkReader& zk, const std::string& job, const JobSnapshot& before) {
                   for (uint32_t t = 0; t < 3; ++t) {
                     pb::PartitionLocation forged = forgedFrom(before);
                     forged.set_attempt_id("2-" + std::to_string(t) + "-0000009999");
                     Status st = zk.create(jobstate::partPath(job, 2, t), forged.SerializeAsString());
                     if (!st) return st;
                   }
                   return Status::ok();
                 },
                 {Outcome::kSucceeds, ""}});
  return all;
}

}  // namespace

TEST_CASE("every single corruption of a running job's state ends it with a reason or heals it; nothing of it "
          "spins, and a kill leaves no process of it",
          "[integration][failover][corruption]") {
  ScenarioOptions options;
  options.taskSleepS = 2.0;  // the first stage lasts long enough for a JM to crash six times
  // The kills below are an operator's: a job whose status is garbage or gone records no owner,
  // and such a job is an admin's to kill (docs/security.md, "Job owners").
  options.cluster.masterExtraYaml = "admins: [harness]\n";
  auto started = Scenario::start(options);
  INFO("starting the scenario: " << (started ? std::string() : started.message()));
  REQUIRE(started.isOk());
  auto& sc = **started;
  auto& cluster = sc.cluster();
  auto& zk = cluster.zkReader();
  const std::string site = cluster.sites()[0];

  std::string endedJob;  // the last fault's job, over when the loop ends
  for (const auto& fault : faults(cluster)) {
    INFO("fault: " << fault.name);
    auto jobId = sc.submit(site);
    INFO("submit: " << (jobId ? std::string() : jobId.message()));
    REQUIRE(jobId.isOk());
    endedJob = *jobId;
    INFO("job " << *jobId);
    auto before = sc.waitFor(*jobId, midFirstStage(), kJobDeadline);
    INFO("waiting for the first stage: " << (before ? std::string() : before.message() + sc.diagnostics(*jobId)));
    REQUIRE(before.isOk());
    std::vector<pid_t> jmPids;
    for (const auto& [s, jm] : before->jms) jmPids.push_back(static_cast<pid_t>(jm.pid()));
    REQUIRE(jmPids.size() == 3);

    Status injected = fault.inject(zk, *jobId, *before);
    INFO("injecting: " << whyNot(injected));
    REQUIRE(injected.isOk());
    if (fault.killRightAway) {
      auto killed = cluster.tellus({"kill", *jobId}, cluster.sites()[1], 20s);
      INFO("kill: " << killed.exitCode << " " << killed.out << killed.err);
      // Killed; or, when the JMs were quicker, failed or deleted already: a one-line reason
      // (the processes are stopped either way, checked below).
      CHECK((killed.exitCode == 0 || killed.err.find("no job") != std::string::npos ||
             killed.err.find("has already") != std::string::npos));
    }

    // The job ends with a reason, or heals and succeeds, or (deleted) its processes go.
    std::optional<pb::JobStatus> last;
    std::string lastError;
    bool ended = harness::eventually(
        [&] {
          auto status = zk.run(zk.jobs().status(*jobId));
          if (!status) {
            lastError = status.message();
            return fault.expected.kind == Outcome::kGone && status.error().code == ErrorCode::kNotFound;
          }
          last = status->value;
          return jobstate::isTerminal(status->value.state());
        },
        kJobDeadline, 100ms);
    INFO("last status: " << (last ? last->ShortDebugString() : lastError) << sc.diagnostics(*jobId));
    REQUIRE(ended);
    switch (fault.expected.kind) {
      case Outcome::kFails:
        REQUIRE(last);
        CHECK((last->state() == pb::JOB_FAILED || (fault.killRightAway && last->state() == pb::JOB_KILLED)));
        CHECK_FALSE(last->error().empty());
        CHECK_THAT(last->error(), Catch::Contains(fault.expected.reason));
        break;
      case Outcome::kSucceeds: {
        REQUIRE(last);
        REQUIRE(last->state() == pb::JOB_SUCCEEDED);
        Status result = sc.checkResult(*jobId, site);
        INFO("result: " << whyNot(result));
        CHECK(result.isOk());
        // The forged records were not taken for work done: every reduce task really ran.
        auto end = sc.snapshot(*jobId);
        REQUIRE(end.isOk());
        for (uint32_t t = 0; t < 3; ++t) {
          INFO("reduce task " << t);
          CHECK(end->executions[{2, t}] >= 1);
          CHECK(end->parts.at({2, t}).attempt_id() != "2-" + std::to_string(t) + "-0000009999");
        }
        break;
      }
      case Outcome::kGone:
        break;
    }

    // No JM of the job is left running (a JM of a deleted job exits too).
    bool jmsGone = harness::eventually(
        [&] {
          for (pid_t pid : jmPids) {
            if (processAlive(pid)) return false;
          }
          return true;
        },
        kRecoveryDeadline, 50ms);
    INFO("processes of the job:" << joined(jobProcesses(cluster.dir(), *jobId)) << cluster.jmLogs(*jobId));
    CHECK(jmsGone);

    // A kill (again) works whatever state is left, and nothing of the job remains.
    auto killed = cluster.tellus({"kill", *jobId}, site, 20s);
    INFO("kill: " << killed.exitCode << " " << killed.out << killed.err);
    CHECK(killed.err.find('\n') == killed.err.rfind('\n'));  // one line, if any
    bool nothingLeft = harness::eventually([&] { return jobProcesses(cluster.dir(), *jobId).empty(); },
                                           kRecoveryDeadline, 50ms);
    INFO("left:" << joined(jobProcesses(cluster.dir(), *jobId)));
    CHECK(nothingLeft);
  }

  // A job whose status does not decode stays visible: `tellus list` shows it as corrupt with
  // the reason, `tellus status` says why in one line, and `tellus kill` still works. An ended
  // job's status: no JM is left to repair it meanwhile.
  {
    REQUIRE_FALSE(endedJob.empty());
    INFO("job " << endedJob);
    REQUIRE(zk.set(jobstate::statusPath(endedJob), std::string("\xff\xfe\x01garbage", 10)).isOk());
    auto list = cluster.tellus({"list"}, cluster.sites()[1], 20s);
    INFO("list: " << list.exitCode << "\n" << list.out << list.err);
    CHECK(list.exitCode == 0);
    CHECK_THAT(list.out, Catch::Contains(endedJob + "  corrupt  malformed tellus.pb.JobStatus in /jobs/" + endedJob +
                                         "/status"));
    auto json = cluster.tellus({"list", "--json"}, site, 20s);
    INFO("list --json: " << json.exitCode << "\n" << json.out << json.err);
    CHECK(json.exitCode == 0);
    CHECK_THAT(json.out, Catch::Contains("\"corrupt\":[{\"job_id\":\"" + endedJob + "\""));
    auto status = cluster.tellus({"status", endedJob}, site, 20s);
    INFO("status: " << status.exitCode << "\n" << status.out << status.err);
    CHECK(status.exitCode != 0);
    CHECK(std::count(status.err.begin(), status.err.end(), '\n') == 1);
    CHECK_THAT(status.err, Catch::Contains("job " + endedJob + " is corrupt: malformed tellus.pb.JobStatus"));
    auto killed = cluster.tellus({"kill", endedJob}, site, 20s);
    INFO("kill: " << killed.exitCode << " " << killed.out << killed.err);
    CHECK(killed.exitCode == 0);
    auto after = zk.run(zk.jobs().status(endedJob));
    INFO("status after the kill: " << (after ? after->value.ShortDebugString() : after.message()));
    REQUIRE(after.isOk());
    CHECK(after->value.state() == pb::JOB_KILLED);
  }

  INFO(cluster.crashedDaemons());
  CHECK(cluster.crashedDaemons().empty());
}

}  // namespace tellus::failover
