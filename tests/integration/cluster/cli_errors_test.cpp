// Every bad-input path of the `tellus` CLI, run as a process: each must end with a non-zero
// exit and one line on stderr that says what is wrong, within its deadline, and must not
// change the cluster (a rejected submission creates no job).

#include <catch2/catch.hpp>
#include <regex>

#include "cluster_test_util.h"
#include "harness/eventually.h"
#include "jobstate/paths.h"
#include "proc/ports.h"

namespace tellus::itest {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

size_t countOf(const std::string& s, char c) { return static_cast<size_t>(std::count(s.begin(), s.end(), c)); }

// A failed command: non-zero exit, nothing on stdout, exactly one "tellus: ..." line on stderr
// containing `reason`.
void checkOneLineError(int exitCode, const std::string& out, const std::string& err, const std::string& reason) {
  INFO("exit " << exitCode << "\nstdout: " << out << "\nstderr: " << err);
  CHECK(exitCode != 0);
  CHECK(out.empty());
  CHECK(err.rfind("tellus: ", 0) == 0);
  CHECK(countOf(err, '\n') == 1);
  CHECK((!err.empty() && err.back() == '\n'));
  CHECK(err.find(reason) != std::string::npos);
}

void checkOneLineError(const CliRun& r, const std::string& reason) {
  INFO("finished " << r.finished << " in " << r.elapsed.count() << " ms");
  REQUIRE(r.finished);
  checkOneLineError(r.exitCode, r.out, r.err, reason);
}

void checkOneLineError(const harness::CliResult& r, const std::string& reason) {
  checkOneLineError(r.exitCode, r.out, r.err, reason);
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("tellus fails fast and clearly when no master answers", "[integration][cli]") {
  CliRunner cli;
  // The daemons' environment must not leak into these runs.
  // These runs test transport failures, not TLS: plaintext keeps them independent of certificates.
  const std::vector<std::pair<std::string, std::string>> noEnvMaster{{"TELLUS_MASTER", ""}, {"TELLUS_INSECURE", "1"}};

  SECTION("no --master and no TELLUS_MASTER: usage error") {
    auto r = cli.run({"list"}, noEnvMaster);
    checkOneLineError(r, "no master");
    CHECK(r.exitCode == 2);
  }

  SECTION("a --master that is not HOST:PORT: usage error") {
    auto r = cli.run({"--master", "not-an-address", "list"}, noEnvMaster);
    checkOneLineError(r, "--master");
    CHECK(r.exitCode == 2);
  }

  SECTION("a master port where nothing listens: a one-line reason, quickly") {
    auto port = proc::findFreePort();  // free a moment ago and never bound here: refused
    REQUIRE(port.isOk());
    std::string master = "127.0.0.1:" + std::to_string(*port);
    for (const std::vector<std::string>& command :
         {std::vector<std::string>{"list"}, {"sites"}, {"status", "job-0000000001"}, {"kill", "job-0000000001"}}) {
      std::vector<std::string> args{"--master", master, "--timeout-ms", "3000"};
      args.insert(args.end(), command.begin(), command.end());
      auto r = cli.run(args, noEnvMaster);
      INFO(command.front());
      checkOneLineError(r, master);
      CHECK(r.exitCode == 1);
      CHECK(r.elapsed < 3000ms + 2000ms);
    }
  }

  SECTION("--timeout-ms bounds a call to a master that accepts but never answers") {
    auto silent = SilentServer::start();
    REQUIRE(silent.isOk());
    for (uint32_t timeoutMs : {300u, 1500u}) {
      auto r = cli.run({"--master", (*silent)->address(), "--timeout-ms", std::to_string(timeoutMs), "list"}, noEnvMaster,
                       milliseconds(timeoutMs) + 20s);
      INFO("timeout " << timeoutMs << " ms, returned after " << r.elapsed.count() << " ms");
      checkOneLineError(r, "deadline");
      CHECK(r.exitCode == 1);
      // It waited for the deadline (the server never refused), and not much longer.
      CHECK(r.elapsed >= milliseconds(timeoutMs));
      CHECK(r.elapsed < milliseconds(timeoutMs) + 2000ms);
    }
  }

  SECTION("a --timeout-ms out of range: usage error") {
    auto r = cli.run({"--master", "127.0.0.1:1", "--timeout-ms", "0", "list"}, noEnvMaster);
    REQUIRE(r.finished);
    CHECK(r.exitCode == 2);
    CHECK(r.err.find("timeout-ms") != std::string::npos);
  }
}

// ---------------------------------------------------------------------------------------------

// A malformed spec: where the error must point, and what it must say.
struct BadSpec {
  const char* what;
  const char* yaml;
  int line;
  const char* reason;
};

TEST_CASE("tellus rejects bad requests to a live cluster with a clear error and changes nothing",
          "[integration][cli]") {
  using namespace jobstate;
  auto& cluster = sharedCluster();
  auto& zk = sharedZk();
  const auto& sites = cluster.sites();
  CliRunner cli;
  const std::string unknownJob = "job-9999999999";

  auto before = jobIds(cluster, sites[0]);
  INFO(whyNot(before));
  REQUIRE(before.isOk());

  SECTION("TELLUS_MASTER stands in for --master") {
    auto env = cluster.cliEnv();
    env.emplace_back("TELLUS_MASTER", cluster.masterAddress(sites[1]));
    auto r = cli.run({"list"}, env);
    INFO(r.err);
    CHECK(r.exitCode == 0);
  }

  SECTION("malformed job specs exit 2 with FILE:LINE and submit nothing") {
    const BadSpec specs[] = {
        {"bad YAML syntax", "name: broken\nstages:\n  - name: map\n    op: wordcount.map\n    input: {dataset: corpus\n",
         5, "malformed YAML"},
        {"unknown field",
         "name: typo\nstages:\n  - name: map\n    op: wordcount.map\n    input: {dataset: corpus}\n"
         "  - name: reduce\n    op: wordcount.reduce\n    taks: 4\n    input: {stage: map}\n",
         8, "unknown field"},
        {"unknown operator",
         "name: badop\nstages:\n  - name: map\n    op: wordcount.map\n    input: {dataset: corpus}\n"
         "  - name: reduce\n    op: wordcount.reduse\n    tasks: 4\n    input: {stage: map}\n",
         7, "unknown operator 'wordcount.reduse'"},
        {"unknown input stage",
         "name: badref\nstages:\n  - name: map\n    op: wordcount.map\n    input: {dataset: corpus}\n"
         "  - name: reduce\n    op: wordcount.reduce\n    tasks: 4\n    input: {stage: mapp}\n",
         9, "input stage 'mapp' is not an earlier stage"},
    };
    int index = 0;
    for (const auto& bad : specs) {
      auto path = cli.writeFile("spec-" + std::to_string(index++) + ".yaml", bad.yaml);
      auto r = cluster.tellus({"submit", path.string()}, sites[0]);
      INFO(bad.what << ": exit " << r.exitCode << " stderr " << r.err);
      checkOneLineError(r, bad.reason);
      CHECK(r.exitCode == 2);
      // "tellus: FILE:LINE: message"; a syntax error may be reported a line or so after the
      // unclosed brace, but never before it.
      std::smatch m;
      std::string err = r.err;
      REQUIRE(std::regex_search(err, m, std::regex("^tellus: (.+):([0-9]+): ")));
      CHECK(m[1].str() == path.string());
      if (std::string(bad.what) == "bad YAML syntax") {
        CHECK(std::stoi(m[2].str()) >= bad.line);
      } else {
        CHECK(std::stoi(m[2].str()) == bad.line);
      }
    }
    auto missing = cluster.tellus({"submit", (cli.dir() / "no-such-spec.yaml").string()}, sites[0]);
    checkOneLineError(missing, "no-such-spec.yaml");
    CHECK(missing.exitCode == 2);
    auto after = jobIds(cluster, sites[0]);
    REQUIRE(after.isOk());
    CHECK(*after == *before);
  }

  SECTION("a dataset no site holds is rejected at submission") {
    auto path = cli.writeFile("nodata.yaml",
                              "name: nodata\nstages:\n  - name: map\n    op: wordcount.map\n"
                              "    input: {dataset: no-such-dataset}\n");
    auto r = cluster.tellus({"submit", path.string()}, sites[1]);
    checkOneLineError(r, "dataset 'no-such-dataset' is not held by any live site");
    auto after = jobIds(cluster, sites[0]);
    REQUIRE(after.isOk());
    CHECK(*after == *before);
  }

  SECTION("status, result and kill of an unknown job") {
    for (const auto& command : {"status", "result", "kill"}) {
      auto r = cluster.tellus({command, unknownJob}, sites[1]);
      INFO(command);
      checkOneLineError(r, "no job " + unknownJob);
    }
    // Not a job id at all (it would escape /jobs in ZooKeeper).
    auto r = cluster.tellus({"status", "../sites"}, sites[0]);
    checkOneLineError(r, "bad job id");
  }

  SECTION("put to an unknown site, or of a missing file") {
    auto file = cli.writeFile("put.txt", "some words\n");
    auto r = cluster.tellus({"put", file.string(), "--dataset", "put-bad", "--site", "mars"}, sites[0]);
    checkOneLineError(r, "mars");
    auto missing = cluster.tellus({"put", (cli.dir() / "no-such-input.txt").string(), "--dataset", "put-bad",
                                   "--site", sites[0]},
                                  sites[0]);
    checkOneLineError(missing, "no-such-input.txt");
    CHECK(missing.exitCode == 2);
    // Nothing was stored anywhere under that name.
    for (const auto& site : sites) {
      auto there = zk.exists(siteDatasetsPath(site) + "/put-bad");
      REQUIRE(there.isOk());
      CHECK_FALSE(*there);
    }
  }

  SECTION("put of a dataset name with '../': one line naming the dataset, and the master stays up") {
    // The site's workers refuse the name. The master's error path used to read the worker id
    // after freeing it and answered "basic_string::_M_create" (or crashed).
    auto file = cli.writeFile("escape.txt", "some words\n");
    for (const std::string dataset : {"../../etc", "put-escape/../../etc"}) {
      INFO(dataset);
      auto r = cluster.tellus({"put", file.string(), "--dataset", dataset, "--site", sites[1]}, sites[1]);
      checkOneLineError(r, "dataset '" + dataset + "'");
      CHECK(r.err.find("_M_create") == std::string::npos);
      // The same master answers the next request.
      auto listed = cluster.tellus({"sites"}, sites[1]);
      INFO(listed.err);
      CHECK(listed.exitCode == 0);
      CHECK(listed.out.find(sites[1] + "  master ") != std::string::npos);
    }
  }

  SECTION("result of a running or failed job, kill of a finished one") {
    // Runs until killed below (its command ends when its executor does: no orphan).
    auto runningSpec = cli.writeFile("running.yaml",
                                     "name: long\nstages:\n  - name: wait\n    op: exec\n    tasks: 1\n"
                                     "    params: {cmd: \"while kill -0 $PPID 2>/dev/null; do sleep 0.1; done\"}\n");
    // Fails at its first (and only) attempt.
    auto failingSpec = cli.writeFile("failing.yaml",
                                     "name: failing\nmax_task_attempts: 1\nstages:\n  - name: boom\n    op: exec\n"
                                     "    tasks: 1\n    params: {cmd: \"echo broken >&2; exit 3\"}\n");
    auto quickSpec = cli.writeFile("quick.yaml",
                                   "name: quick\nstages:\n  - name: hello\n    op: exec\n    tasks: 1\n"
                                   "    params: {cmd: \"echo hello\"}\n");

    auto running = submitJob(cluster, runningSpec, sites[0]);
    auto failing = submitJob(cluster, failingSpec, sites[1]);
    auto quick = submitJob(cluster, quickSpec, sites[2]);
    INFO(whyNot(running) << whyNot(failing) << whyNot(quick));
    REQUIRE(running.isOk());
    REQUIRE(failing.isOk());
    REQUIRE(quick.isOk());

    auto runningResult = cluster.tellus({"result", *running}, sites[1]);
    checkOneLineError(runningResult, "it is running");

    pb::JobStatusResponse last;
    bool failed = waitForJobState(cluster, *failing, pb::JOB_FAILED, sites[0], 60s, &last);
    INFO("failing job: " << last.ShortDebugString());
    REQUIRE(failed);
    CHECK(last.status().error().find("exit") != std::string::npos);
    auto failedResult = cluster.tellus({"result", *failing}, sites[2]);
    // cli.h: "Errors are one line on `err`", also when the job's error quotes the several
    // lines of its task's stderr.
    checkOneLineError(failedResult, "it is failed (task 0/0 failed 1 times");
    CHECK(failedResult.err.find("broken") != std::string::npos);  // the task's stderr
    auto failedKill = cluster.tellus({"kill", *failing}, sites[2]);
    checkOneLineError(failedKill, "already failed");

    bool succeeded = waitForJobState(cluster, *quick, pb::JOB_SUCCEEDED, sites[0], 60s, &last);
    INFO("quick job: " << last.ShortDebugString());
    REQUIRE(succeeded);
    auto quickResult = cluster.tellus({"result", *quick}, sites[0]);
    CHECK(quickResult.exitCode == 0);
    CHECK(quickResult.out == "hello\n");
    auto succeededKill = cluster.tellus({"kill", *quick}, sites[1]);
    checkOneLineError(succeededKill, "already succeeded");
    auto stillSucceeded = jobStatus(cluster, *quick, sites[2]);
    REQUIRE(stillSucceeded.isOk());
    CHECK(stillSucceeded->status().state() == pb::JOB_SUCCEEDED);

    // Still running: the failures above did not disturb it. Then it is killed.
    auto stillRunning = jobStatus(cluster, *running, sites[2]);
    REQUIRE(stillRunning.isOk());
    CHECK(stillRunning->status().state() == pb::JOB_RUNNING);
    auto kill = cluster.tellus({"kill", *running}, sites[2]);
    CHECK(kill.exitCode == 0);
  }
  CHECK(cluster.crashedDaemons().empty());
}

}  // namespace
}  // namespace tellus::itest
