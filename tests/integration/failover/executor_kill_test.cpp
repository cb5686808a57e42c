// A container's long-lived executor killed with SIGKILL in the middle of a task (issue 16):
// its worker sees the death through the executor's pidfd, fails the task in flight with the
// exit status, its JM runs the task again (a new executor serves the container), and the job
// ends with the exact word count; only tasks running at the kill may have run twice, and the
// killed one did. The command the task ran (exec) dies with its executor.
//
// The failover scenario's word count (harness/failover) on real processes over a real
// ZooKeeper; every wait is on a condition with a deadline.

#include <dirent.h>
#include <signal.h>

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "failover/scenario.h"
#include "checks.h"
#include "harness/eventually.h"
#include "harness/files.h"

namespace tellus::failover {
namespace {

using harness::processAlive;
using harness::readFile;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr milliseconds kJobDeadline = 120s;
constexpr milliseconds kRecoveryDeadline = 45s;

pid_t parentOf(pid_t pid) {
  // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so from the last ')'.
  const std::string stat = readFile(fmt::format("/proc/{}/stat", pid));
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

std::vector<pid_t> allPids() {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid > 0) out.push_back(pid);
  }
  closedir(proc);
  return out;
}

// Live executors of `jobId` in this cluster (their directory is under the cluster's
// <worker>/containers/<job>/), each with its child processes (an exec task's /bin/sh).
std::map<pid_t, std::vector<pid_t>> executorsOf(const std::filesystem::path& clusterDir, const std::string& jobId) {
  std::map<pid_t, std::vector<pid_t>> out;
  const auto pids = allPids();
  for (pid_t pid : pids) {
    std::string cmdline = readFile(fmt::format("/proc/{}/cmdline", pid));
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find("tellus-executor --serve " + clusterDir.string()) == std::string::npos) continue;
    if (cmdline.find("/containers/" + jobId + "/") == std::string::npos || !processAlive(pid)) continue;
    out[pid];
  }
  for (pid_t pid : pids) {
    const pid_t parent = parentOf(pid);
    if (out.count(parent) && processAlive(pid)) out[parent].push_back(pid);
  }
  return out;
}

TEST_CASE("a long-lived executor killed mid-task: its task runs again and the job comes out exact",
          "[integration][failover][executor]") {
  ScenarioOptions options;
  // Long enough map tasks that the kill lands inside one, and that the command would visibly
  // outlive its executor if it did not die with it.
  options.taskSleepS = 4;
  auto started = Scenario::start(options);
  INFO("starting the scenario: " << (started.isOk() ? "" : started.message()));
  REQUIRE(started.isOk());
  auto& sc = **started;
  auto& cluster = sc.cluster();
  auto jobId = sc.submit(cluster.sites()[0]);
  INFO((jobId.isOk() ? "" : jobId.message()));
  REQUIRE(jobId.isOk());

  // An executor running a task (it has a child: the task's /bin/sh), while the first stage is
  // under way and settled.
  pid_t victim = 0;
  std::vector<pid_t> commands;
  auto before = sc.waitFor(
      *jobId,
      [&](const JobSnapshot& s) {
        auto tasks = s.stageTasks.find(0);
        if (tasks == s.stageTasks.end() || !s.settled() || s.running.empty()) return false;
        for (const auto& [pid, children] : executorsOf(cluster.dir(), *jobId)) {
          if (children.empty()) continue;
          victim = pid;
          commands = children;
          return true;
        }
        return false;
      },
      kJobDeadline);
  INFO("waiting for a busy executor: " << (before.isOk() ? "" : before.message() + sc.diagnostics(*jobId)));
  REQUIRE(before.isOk());
  REQUIRE(victim > 0);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  auto after = sc.snapshot(*jobId);
  REQUIRE(after.isOk());

  // Its command does not outlive it (it would sleep for seconds more otherwise).
  bool commandsGone = harness::eventually(
      [&] { return std::none_of(commands.begin(), commands.end(), [](pid_t p) { return processAlive(p); }); }, 2s, 20ms);
  CHECK(commandsGone);
  // Nor its private directory (exec's work_dir is /tmp here): the worker removes what a dead
  // executor's commands left, by the executor's pid in the name.
  const auto leftBy = [](pid_t pid) {
    std::vector<std::string> left;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/tmp", ec)) {
      if (e.path().filename().string().rfind(fmt::format("tellus-exec-{}-", pid), 0) == 0) left.push_back(e.path());
    }
    return left;
  };
  bool dirsGone = harness::eventually([&] { return leftBy(victim).empty(); }, 10s, 20ms);
  INFO("left by the killed executor:" << joined(leftBy(victim)));
  CHECK(dirsGone);

  auto end = sc.waitForEnd(*jobId, kJobDeadline);
  INFO("waiting for the end: " << (end.isOk() ? "" : end.message() + sc.diagnostics(*jobId)));
  REQUIRE(end.isOk());
  INFO("final state: " << end->describe() << "\nerror: " << end->status.error());
  REQUIRE(end->status.state() == pb::JOB_SUCCEEDED);
  Status result = sc.checkResult(*jobId, cluster.sites()[0]);
  INFO("result: " << (result.isOk() ? "" : result.message()));
  CHECK(result.isOk());

  // Only a task running at the kill may have run twice, and one did: the killed executor's.
  std::set<TaskId> running;
  for (const auto* snap : {&*before, &*after}) {
    for (const auto& [id, marker] : snap->running) running.insert(id);
  }
  auto problems = checkExecutions(*end, running);
  INFO("execution audit:" << joined(problems));
  CHECK(problems.empty());
  std::vector<TaskId> reran;
  for (const auto& [id, n] : end->executions) {
    if (n > 1) reran.push_back(id);
  }
  CHECK(reran.size() == 1);

  // The task failed with the executor's death, named by its worker (and its JM logged it).
  const std::string why = fmt::format("executor (pid {}) killed by signal 9", victim);
  const std::string logs = cluster.jmLogs(*jobId, 1 << 20);
  INFO("JM logs:\n" << logs.substr(0, 4000));
  CHECK(logs.find(why) != std::string::npos);
  INFO("invariants:" << joined(sc.invariants().violations()));
  CHECK(sc.invariants().violations().empty());
  CHECK(cluster.crashedDaemons().empty());
}

}  // namespace
}  // namespace tellus::failover
