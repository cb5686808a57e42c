// `tellus logs` end to end (issue 15, item 3): a failing exec task's stderr and a JM's log come
// back through any site's master from the worker that holds them, bounded; a log whose VM is
// gone is a one-line error. Also the live progress of `submit --wait` (item 2) on a terminal
// (a pseudo-terminal from util-linux `script`) and as JSON lines. Its own two-site cluster (one
// worker per site) with exec enabled.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "harness/eventually.h"
#include "harness/files.h"
#include "proc/subprocess.h"

#include "cluster_test_util.h"

using namespace tellus;
using namespace tellus::itest;
using namespace std::chrono_literals;

namespace {

constexpr const char* kUs = "us-east";
constexpr const char* kEu = "eu-west";

harness::MiniCluster& logsCluster() {
  static Result<std::unique_ptr<harness::MiniCluster>> cluster = [] {
    harness::MiniClusterOptions options;
    options.sites = 2;
    options.workersPerSite = 1;
    options.containersPerWorker = 2;
    options.execYaml = harness::kExecEnabledYaml;  // exec is off unless a site enables it (docs/security.md)
    return harness::MiniCluster::start(options);
  }();
  INFO("starting the mini cluster: " << whyNot(cluster));
  REQUIRE(cluster.isOk());
  return **cluster;
}

std::string runJob(harness::MiniCluster& cluster, CliRunner& files, const std::string& name, const std::string& yaml,
                   const std::string& site, pb::JobState expected) {
  auto jobId = submitJob(cluster, files.writeFile(name + ".yaml", yaml), site);
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());
  pb::JobStatusResponse last;
  INFO(cluster.jmLogs(*jobId));
  REQUIRE(waitForJobState(cluster, *jobId, expected, site, 90000ms, &last));
  return *jobId;
}

// A one-stage copy of a small dataset put at us-east under `<name>-in`, run to success there.
std::string runCopyJob(harness::MiniCluster& cluster, CliRunner& files, const std::string& name) {
  REQUIRE(cluster.putDataset(kUs, name + "-in", "one two\nthree\n", 1).isOk());
  return runJob(cluster, files, name,
                fmt::format("name: {0}\nstages:\n  - name: copy\n    op: identity\n    input: {{dataset: {0}-in}}\n", name),
                kUs, pb::JOB_SUCCEEDED);
}

// A refused command: exit `code`, nothing on stdout, one line on stderr.
std::string refusal(const harness::CliResult& r, int code) {
  INFO("exit " << r.exitCode << "\nstdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exitCode == code);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  return r.err;
}

}  // namespace

TEST_CASE("a failing exec task's stderr comes back through any master", "[integration][cluster][logs]") {
  auto& cluster = logsCluster();
  CliRunner files;
  REQUIRE(cluster.putDataset(kUs, "logs-in", "alpha\nbeta\n", 1).isOk());
  const std::string jobId = runJob(cluster, files, "failing",
                                   "name: failing\nmax_task_attempts: 2\nstages:\n  - name: run\n    op: exec\n"
                                   "    params: {cmd: \"echo first-of-many-lines >&2; seq 1 30 >&2; "
                                   "echo stderr-of-a-failing-task >&2; exit 3\"}\n"
                                   "    input: {dataset: logs-in}\n",
                                   kUs, pb::JOB_FAILED);

  // Through the other site's master, which forwards to us-east's, which asks its worker. The
  // first execution: it ran to its end (the task ran again only after it). The latest may be
  // one the job's end killed before its command wrote anything.
  auto latest = cluster.tellus({"logs", jobId, "--task", "run:0", "--attempt", "1"}, kEu);
  INFO("exit " << latest.exitCode << "\nstdout: " << latest.out << "\nstderr: " << latest.err);
  REQUIRE(latest.exitCode == 0);
  CHECK_THAT(latest.out, Catch::Contains("stderr-of-a-failing-task"));
  CHECK_THAT(latest.out, Catch::Contains("exited with status 3"));
  // The command's whole stderr, not only the last lines the error message carries.
  CHECK_THAT(latest.out, Catch::StartsWith("first-of-many-lines\n1\n2\n"));

  // The same execution by stage index, through the master of its own site.
  auto first = cluster.tellus({"--json", "logs", jobId, "--task", "0:0", "--attempt", "1"}, kUs);
  INFO(first.err);
  REQUIRE(first.exitCode == 0);
  pb::LogsResponse meta;
  REQUIRE(parseJson(first.out, meta).isOk());
  CHECK(meta.attempt() == 1);
  CHECK(meta.attempts() >= 2);  // max_task_attempts: 2 failures end the job
  const uint32_t executions = meta.attempts();
  CHECK(meta.site() == kUs);
  CHECK(meta.worker_id() == cluster.workers(kUs).front());
  CHECK(meta.complete());
  CHECK(meta.size() == meta.data().size());
  CHECK(meta.data() == latest.out);
  // Without --attempt: the latest execution.
  auto newest = cluster.tellus({"--json", "logs", jobId, "--task", "run:0"}, kEu);
  INFO(newest.err);
  REQUIRE(newest.exitCode == 0);
  pb::LogsResponse newestMeta;
  REQUIRE(parseJson(newest.out, newestMeta).isOk());
  CHECK(newestMeta.attempt() == executions);
  CHECK(newestMeta.attempts() == executions);
  CHECK(newestMeta.attempt_id() != meta.attempt_id());

  // Bounded: the last 10 bytes are the end of the whole log.
  auto tail = cluster.tellus({"logs", jobId, "--task", "run:0", "--attempt", "1", "--bytes", "10"}, kEu);
  REQUIRE(tail.exitCode == 0);
  CHECK(tail.out.size() == 10);
  CHECK(latest.out.substr(latest.out.size() - 10) == tail.out);
  // --follow ends by itself once the executor has ended and everything is printed.
  auto followed = cluster.tellus({"logs", jobId, "--task", "run:0", "--attempt", "1", "--follow"}, kUs);
  CHECK(followed.exitCode == 0);
  CHECK(followed.out == latest.out);

  // Executions, tasks and stages that do not exist: one line each.
  CHECK_THAT(refusal(cluster.tellus({"logs", jobId, "--task", "run:0", "--attempt", std::to_string(executions + 1)}, kEu), 2),
             Catch::Contains(fmt::format("has run {} times: there is no attempt {}", executions, executions + 1)));
  CHECK_THAT(refusal(cluster.tellus({"logs", jobId, "--task", "run:7"}, kEu), 1),
             Catch::Contains("task run:7 of job " + jobId + " has not run"));
  CHECK_THAT(refusal(cluster.tellus({"logs", jobId, "--task", "shuffle:0"}, kEu), 2),
             Catch::Contains("has no stage 'shuffle'"));
  CHECK_THAT(refusal(cluster.tellus({"logs", "job-9999999999", "--task", "run:0"}, kEu), 1), Catch::Contains("job-9999999999"));
}

TEST_CASE("a JM's log comes back through another site's master", "[integration][cluster][logs]") {
  auto& cluster = logsCluster();
  CliRunner files;
  const std::string jobId = runCopyJob(cluster, files, "jm-log");
  // The JM has exited (the job is over) and its registration is gone: the site's master finds
  // the worker that holds its log.
  auto log = cluster.tellus({"logs", jobId, "--jm", kUs, "--follow"}, kEu);
  INFO("exit " << log.exitCode << "\nstderr: " << log.err);
  REQUIRE(log.exitCode == 0);
  CHECK_THAT(log.out, Catch::Contains("JM of job " + jobId + " at site us-east"));
  CHECK_THAT(log.out, Catch::Contains("job " + jobId + " succeeded"));
  // No JM of the job ran at eu-west.
  CHECK_THAT(refusal(cluster.tellus({"logs", jobId, "--jm", kEu}, kUs), 1),
             Catch::Contains("no live worker of site eu-west holds a JM log of job " + jobId));
  CHECK_THAT(refusal(cluster.tellus({"logs", jobId, "--jm", "../us-east"}, kUs), 2), Catch::Contains("site"));
}

TEST_CASE("submit --wait draws bars on a terminal and prints JSON lines with --json", "[integration][cluster][progress]") {
  auto& cluster = logsCluster();
  CliRunner files;
  REQUIRE(cluster.putDataset(kUs, "progress-in", "a b\nc d\ne f\ng h\n", 2).isOk());
  const auto spec = files.writeFile("progress.yaml",
                                    "name: progress\nstages:\n  - name: map\n    op: wordcount.map\n"
                                    "    input: {dataset: progress-in}\n  - name: reduce\n    op: wordcount.reduce\n"
                                    "    tasks: 2\n    input: {stage: map}\n");
  // On a terminal: `script` runs the CLI on a pseudo-terminal and copies what it draws.
  std::string command = "'" + (cluster.binDir() / "tellus").string() + "' --master " + cluster.masterAddress(kUs) +
                        " submit '" + spec.string() + "' --wait";
  proc::SpawnOptions options;
  options.argv = {"script", "--quiet", "--return", "--command", command, "/dev/null"};
  options.extraEnv = cluster.cliEnv();
  options.extraEnv.emplace_back("SHELL", "/bin/sh");
  options.stdoutFile = files.dir() / "tty.out";
  options.stderrFile = files.dir() / "tty.err";
  options.dieWithParent = true;
  auto run = proc::Subprocess::spawn(options);
  REQUIRE(run.isOk());
  auto exit = run->waitFor(120s);
  const std::string drawn = harness::readFile(files.dir() / "tty.out");
  INFO("terminal output:\n" << drawn << "\nstderr: " << harness::readFile(files.dir() / "tty.err"));
  REQUIRE(exit.isOk());
  CHECK(exit->exited);
  CHECK(exit->code == 0);
  CHECK_THAT(drawn, Catch::Contains("\x1b[2K"));  // lines cleared and redrawn in place
  CHECK_THAT(drawn, Catch::Contains("\x1b[3A"));  // up over the last frame: header + 2 stages
  CHECK_THAT(drawn, Catch::Contains("[####################]     2/2     100%  done"));
  CHECK_THAT(drawn, Catch::Contains("us-east 2/2"));
  CHECK_THAT(drawn, Catch::Contains("progress  succeeded"));

  // --json: one status per line, the last one final.
  auto json = cluster.tellus({"--json", "submit", spec.string(), "--wait"}, kUs);
  INFO(json.err);
  REQUIRE(json.exitCode == 0);
  std::vector<std::string> lines;
  for (size_t at = 0; at < json.out.size();) {
    const size_t end = json.out.find('\n', at);
    REQUIRE(end != std::string::npos);
    lines.push_back(json.out.substr(at, end - at));
    at = end + 1;
  }
  REQUIRE(!lines.empty());
  for (const auto& line : lines) {
    pb::JobStatusResponse st;
    INFO(line);
    REQUIRE(parseJson(line, st).isOk());
    CHECK(st.stages_size() == 2);
  }
  pb::JobStatusResponse last;
  REQUIRE(parseJson(lines.back(), last).isOk());
  CHECK(last.status().state() == pb::JOB_SUCCEEDED);
}

TEST_CASE("a log whose VM is gone is a one-line error", "[integration][cluster][logs]") {
  auto& cluster = logsCluster();
  CliRunner files;
  REQUIRE(cluster.putDataset(kEu, "logs-gone-in", "x\ny\n", 1).isOk());
  const std::string jobId = runJob(cluster, files, "gone",
                                   "name: gone\nstages:\n  - name: copy\n    op: identity\n"
                                   "    input: {dataset: logs-gone-in}\n",
                                   kEu, pb::JOB_SUCCEEDED);
  const std::string worker = cluster.workers(kEu).front();
  // While the worker lives, its (empty) stderr of the task is there.
  auto before = cluster.tellus({"--json", "logs", jobId, "--task", "copy:0"}, kUs);
  INFO(before.err);
  REQUIRE(before.exitCode == 0);
  pb::LogsResponse meta;
  REQUIRE(parseJson(before.out, meta).isOk());
  CHECK(meta.worker_id() == worker);

  REQUIRE(cluster.killWorker(worker).isOk());
  const std::string task = refusal(cluster.tellus({"logs", jobId, "--task", "copy:0"}, kUs), 1);
  CHECK_THAT(task, Catch::Contains(worker) && Catch::Contains("gone"));
  const std::string jm = refusal(cluster.tellus({"logs", jobId, "--jm", kEu}, kUs), 1);
  CHECK_THAT(jm, Catch::Contains("no live worker of site eu-west holds a JM log"));
}

TEST_CASE("a finished job's task and JM logs are deleted after the worker's log_retention_ms",
          "[integration][cluster][logs]") {
  harness::MiniClusterOptions options;
  options.sites = 1;
  options.workersPerSite = 1;
  options.containersPerWorker = 2;
  options.workerExtraYaml[kUs] = "log_retention_ms: 1500\n";
  auto started = harness::MiniCluster::start(options);
  INFO("starting the mini cluster: " << whyNot(started));
  REQUIRE(started.isOk());
  auto& cluster = **started;
  CliRunner files;
  const std::string jobId = runCopyJob(cluster, files, "retained");
  const auto worker = cluster.dir() / kUs / cluster.workers(kUs).front();
  const auto taskLogs = worker / "logs" / jobId;
  const auto jmDir = worker / "jms" / jobId;
  // Deleted (the worker says so: they existed), not just absent.
  const auto workerLog = cluster.daemonLog(cluster.workers(kUs).front());
  const bool gone = harness::eventually(
      [&] {
        const std::string said = harness::readFile(workerLog);
        return said.find("log retention: deleted " + taskLogs.string()) != std::string::npos &&
               said.find("log retention: deleted " + jmDir.string()) != std::string::npos &&
               !std::filesystem::exists(taskLogs) && !std::filesystem::exists(jmDir);
      },
      30s, 200ms);
  INFO(harness::readFile(workerLog));
  CHECK(gone);
  // What is gone is said so in one line, as for a VM that is gone.
  auto log = cluster.tellus({"logs", jobId, "--jm", kUs}, kUs);
  CHECK(log.exitCode != 0);
  CHECK(std::count(log.err.begin(), log.err.end(), '\n') == 1);
  CHECK(cluster.crashedDaemons().empty());
}
