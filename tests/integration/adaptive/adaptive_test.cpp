// Adaptive execution on a real cluster (HOUTU §4): JMs with idle containers steal waiting
// tasks from a loaded site's JM, concurrent steals never run a task twice, Af raises a JM's
// desire while its tasks wait and lowers it while its containers sit idle, and steals leave
// residency-local partitions at their site. Every job's output is checked against a count
// computed here.
//
// One cluster (5 sites x 1 worker x 4 containers) is shared by the test cases; each uses its
// own datasets and jobs, and waits on real conditions with deadlines.

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>

#include "harness/eventually.h"
#include "kit/adaptive_kit.h"

namespace tellus::adaptive {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr milliseconds kJobDeadline = 150s;

struct SharedCluster {
  std::unique_ptr<harness::MiniCluster> cluster;
  std::unique_ptr<ZkView> zk;
  std::string error;
};

// Started on first use, torn down at exit: a cluster costs seconds to start, and the test
// cases do not disturb each other (own datasets and jobs, run one after another).
SharedCluster& shared() {
  static SharedCluster s = [] {
    SharedCluster c;
    harness::MiniClusterOptions options;
    options.sites = 5;
    options.workersPerSite = 1;
    options.containersPerWorker = 4;
    options.execYaml = harness::kExecEnabledYaml;  // its jobs use exec
    auto cluster = harness::MiniCluster::start(options);
    if (!cluster) {
      c.error = "cluster: " + cluster.message();
      return c;
    }
    c.cluster = std::move(cluster).value();
    auto zk = c.cluster->connectZkReader(30s);
    if (!zk) {
      c.error = "zookeeper view: " + zk.message();
      return c;
    }
    c.zk = std::move(zk).value();
    return c;
  }();
  return s;
}

// The shared cluster, or a failed test naming why it could not start.
SharedCluster& requireCluster() {
  auto& env = shared();
  INFO(env.error);
  REQUIRE(env.cluster != nullptr);
  REQUIRE(env.zk != nullptr);
  return env;
}

template <class R>
std::string whyNot(const R& r) {
  return r.isOk() ? std::string() : r.message();
}

// A three-stage word count whose first stage is slow enough (sleep per task) for idle JMs to
// find waiting tasks to steal: slow (exec over the datasets) -> map -> reduce.
std::string slowWordCountSpec(const std::string& name, const std::vector<std::string>& datasets, int containersPerSite,
                              int mapTasks, int reduceTasks) {
  std::ostringstream y;
  y << "name: " << name << "\n";
  if (containersPerSite > 0) y << "containers_per_site: " << containersPerSite << "\n";
  y << "stages:\n  - name: slow\n    op: exec\n    params: {cmd: \"sleep 0.3; cat\"}\n    inputs:\n";
  for (const auto& d : datasets) y << "      - {dataset: " << d << "}\n";
  y << "  - name: map\n    op: wordcount.map\n    tasks: " << mapTasks << "\n    input: {stage: slow}\n";
  y << "  - name: reduce\n    op: wordcount.reduce\n    tasks: " << reduceTasks << "\n    input: {stage: map}\n";
  return y.str();
}

// Runs the job to its end and checks its word count against `expected`.
void requireExactWordCount(harness::MiniCluster& cluster, const std::string& jobId, const std::string& site,
                           const std::map<std::string, uint64_t>& expected) {
  auto out = jobResult(cluster, jobId, site);
  INFO(whyNot(out));
  REQUIRE(out.isOk());
  auto counted = parseWordCounts(*out);
  INFO(whyNot(counted));
  REQUIRE(counted.isOk());
  INFO("differences: " << describeDifferences(expected, *counted));
  CHECK(counted->size() == expected.size());
  CHECK(*counted == expected);
}

// Waits for the job to succeed (fails the test otherwise, with the JM logs).
void requireSucceeded(harness::MiniCluster& cluster, ZkView& zk, const std::string& jobId) {
  auto st = waitForJobEnd(zk, jobId, kJobDeadline);
  INFO(whyNot(st) << jmLogTails(cluster, jobId) << cluster.crashedDaemons());
  REQUIRE(st.isOk());
  INFO("status: " << st->ShortDebugString());
  REQUIRE(st->state() == pb::JOB_SUCCEEDED);
}

std::string describeExecutions(const std::map<std::pair<uint32_t, uint32_t>, std::vector<std::string>>& byTask) {
  std::string out;
  for (const auto& [id, workers] : byTask) {
    out += std::to_string(id.first) + "/" + std::to_string(id.second) + ":";
    for (const auto& w : workers) out += " " + w;
    out += "; ";
  }
  return out;
}

// Loads a dataset with putDataset() or fails the test naming why.
void requirePutDataset(harness::MiniCluster& cluster, const std::string& site, const std::string& dataset,
                       const std::string& content, uint32_t partitions, bool residencyLocal = false) {
  Status put = putDataset(cluster, site, dataset, content, partitions, residencyLocal);
  INFO(put.message());
  REQUIRE(put.isOk());
}

// The job's execution audit, executors by (stage, task); fails the test if it cannot be read.
std::map<std::pair<uint32_t, uint32_t>, std::vector<std::string>> requireExecutionsByTask(ZkView& zk,
                                                                                           const std::string& jobId) {
  auto runs = readExecutions(zk, jobId);
  INFO(whyNot(runs));
  REQUIRE(runs.isOk());
  return executionsByTask(*runs);
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("a JM with an idle container steals waiting tasks from a loaded site; the word count stays exact",
          "[integration][adaptive][steal]") {
  auto& env = requireCluster();
  auto& cluster = *env.cluster;
  auto& zk = *env.zk;
  const auto& sites = cluster.sites();
  const std::string& loaded = sites[0];  // holds every partition, runs one container
  const std::string& idle = sites[1];    // the submit site: its pJM owns no task at first
  auto where = workerSites(cluster);

  std::string text = generateText(101, 2400);
  auto expected = countWords(text);
  requirePutDataset(cluster, loaded, "steal-one", text, 24);

  auto jobId = submitJob(cluster, slowWordCountSpec("steal-one", {"steal-one"}, 1, 3, 2), idle, "steal-one.yaml");
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());
  requireSucceeded(cluster, zk, *jobId);
  INFO(jmLogTails(cluster, *jobId));

  // The stage was placed with its data: every partition is at the loaded site.
  auto inputs = readStageInputs(zk, *jobId, 0);
  INFO(whyNot(inputs));
  REQUIRE(inputs.isOk());
  REQUIRE(inputs->partitions_size() == 24);
  for (const auto& p : inputs->partitions()) REQUIRE(p.site() == loaded);

  // The idle site's JM took some of them over (taskMap owner) and ran them on its own worker.
  auto taskmap = readTaskMap(zk, *jobId, 0);
  INFO(whyNot(taskmap));
  REQUIRE(taskmap.isOk());
  REQUIRE(taskmap->owner_site_size() == 24);
  auto byTask = requireExecutionsByTask(zk, *jobId);
  INFO("executions: " << describeExecutions(byTask));
  size_t stolen = 0, ranAtIdleSite = 0;
  for (uint32_t t = 0; t < 24; ++t) {
    const std::string& owner = taskmap->owner_site(static_cast<int>(t));
    if (owner == idle) ++stolen;
    const auto& workers = byTask[{0, t}];
    REQUIRE(workers.size() == 1);
    // A task runs at the site that owns it when it runs.
    CHECK(where[workers.front()] == owner);
    if (where[workers.front()] == idle) ++ranAtIdleSite;
  }
  CHECK(stolen >= 1);
  CHECK(ranAtIdleSite == stolen);
  CHECK(stolen < 24);  // the loaded site kept working too

  // The thief logged its steals from the loaded site.
  auto steals = readSteals(cluster, *jobId);
  size_t fromLoaded = 0;
  for (const auto& s : steals) {
    if (s.thiefSite == idle && s.victimSite == loaded) fromLoaded += s.tasks;
  }
  CHECK(fromLoaded >= 1);

  requireExactWordCount(cluster, *jobId, idle, expected);
  CHECK(cluster.crashedDaemons().empty());
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("concurrent steals by four idle sites never run a task twice; the word count stays exact",
          "[integration][adaptive][steal]") {
  auto& env = requireCluster();
  auto& cluster = *env.cluster;
  auto& zk = *env.zk;
  const auto& sites = cluster.sites();
  REQUIRE(sites.size() == 5);
  const std::string& loaded = sites[0];
  auto where = workerSites(cluster);

  // Most of the data at one site; one small partition at each other site, so that every site
  // has a JM for the job (a site's JM exists where the job has input, and at the submit site).
  std::map<std::string, uint64_t> expected;
  const uint32_t loadedPartitions = 40;
  std::string big = generateText(202, 4000);
  for (const auto& [w, n] : countWords(big)) expected[w] += n;
  requirePutDataset(cluster, loaded, "steal-many", big, loadedPartitions);
  for (size_t i = 1; i < sites.size(); ++i) {
    std::string small = generateText(300 + static_cast<uint32_t>(i), 30);
    for (const auto& [w, n] : countWords(small)) expected[w] += n;
    requirePutDataset(cluster, sites[i], "steal-many", small, 1);
  }

  auto jobId = submitJob(cluster, slowWordCountSpec("steal-many", {"steal-many"}, 2, 4, 4), sites[1], "steal-many.yaml");
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());
  requireSucceeded(cluster, zk, *jobId);
  INFO(jmLogTails(cluster, *jobId));

  auto inputs = readStageInputs(zk, *jobId, 0);
  INFO(whyNot(inputs));
  REQUIRE(inputs.isOk());
  const auto slowTasks = static_cast<uint32_t>(inputs->partitions_size());
  REQUIRE(slowTasks == loadedPartitions + 4);

  auto runs = readExecutions(zk, *jobId);
  INFO(whyNot(runs));
  REQUIRE(runs.isOk());
  auto byTask = executionsByTask(*runs);
  INFO("executions: " << describeExecutions(byTask));
  // Exactly one executor per task of every stage: no task ran twice, none was skipped.
  const std::map<uint32_t, uint32_t> tasksOfStage{{0, slowTasks}, {1, 4}, {2, 4}};
  size_t total = 0;
  for (const auto& [s, n] : tasksOfStage) {
    for (uint32_t t = 0; t < n; ++t) {
      INFO("stage " << s << " task " << t);
      CHECK(byTask[{s, t}].size() == 1);
    }
    total += n;
  }
  CHECK(runs->size() == total);

  // The loaded site's tasks were spread over several thieves.
  std::set<std::string> thieves;
  size_t stolen = 0;
  for (uint32_t t = 0; t < slowTasks; ++t) {
    if (inputs->partitions(static_cast<int>(t)).site() != loaded) continue;
    const auto& workers = byTask[{0, t}];
    if (workers.empty()) continue;
    const std::string& ranAt = where[workers.front()];
    if (ranAt != loaded) {
      thieves.insert(ranAt);
      ++stolen;
    }
  }
  INFO("stolen " << stolen << " of the loaded site's tasks, by " << thieves.size() << " sites");
  CHECK(thieves.size() >= 2);

  requireExactWordCount(cluster, *jobId, sites[1], expected);
  CHECK(cluster.crashedDaemons().empty());
}

// ---------------------------------------------------------------------------------------------

struct DesireSample {
  milliseconds at{0};
  uint32_t desire = 0;
  uint32_t granted = 0;
  size_t queueDone = 0;     // finished tasks of stage 0
  bool sleepyReleased = false;
  size_t sleepyDone = 0;    // finished tasks of stage 1
};

std::string describeTimeline(const std::vector<DesireSample>& samples) {
  std::string out;
  uint32_t lastDesire = UINT32_MAX, lastGranted = UINT32_MAX;
  for (const auto& s : samples) {
    if (s.desire == lastDesire && s.granted == lastGranted) continue;
    lastDesire = s.desire;
    lastGranted = s.granted;
    out += std::to_string(s.at.count()) + "ms d=" + std::to_string(s.desire) + " g=" + std::to_string(s.granted) +
           " q=" + std::to_string(s.queueDone) + (s.sleepyReleased ? " s=" + std::to_string(s.sleepyDone) : "") + "; ";
  }
  return out;
}

TEST_CASE("Af raises a JM's desire while tasks wait and lowers it while its containers sit idle",
          "[integration][adaptive][af]") {
  auto& env = requireCluster();
  auto& cluster = *env.cluster;
  auto& zk = *env.zk;
  const std::string& site = cluster.sites()[4];
  constexpr uint32_t kQueueTasks = 32, kSleepyTasks = 16;

  // Stage 0: a long queue of CPU-bound tasks (one per container): tasks wait, containers are
  // busy -> Af doubles the desire each period until the site cannot give more. Stage 1: tasks
  // that sleep: Parades packs them by their measured (near-zero) CPU, nothing waits, the
  // containers' CPU is idle -> Af halves the desire each period while the tasks still run.
  std::ostringstream spec;
  spec << "name: af-desire\nstages:\n"
       << "  - name: queue\n    op: synthetic\n    tasks: " << kQueueTasks
       << "\n    params: {cpu_ms: 200, output_bytes: 64}\n"
       << "  - name: sleepy\n    op: exec\n    tasks: " << kSleepyTasks
       << "\n    input: {stage: queue}\n    params: {cmd: \"sleep 6; cat\"}\n";
  auto jobId = submitJob(cluster, spec.str(), site, "af-desire.yaml");
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());

  std::vector<DesireSample> samples;
  auto started = std::chrono::steady_clock::now();
  bool ended = false;
  // The first sample at which the desire had fallen to at most half of its peak during stage 1
  // while that stage still had at least as many unfinished tasks as that peak: the fall is
  // then Af's answer to idle containers (d / ρ), not the cap at the JM's own unfinished work
  // (which is what lowers the desire while stage 0 drains).
  std::optional<size_t> fallAt;
  uint32_t sleepyPeak = 0;
  harness::eventually(
      [&] {
        auto st = readJobStatus(zk, *jobId);
        if (st && st->state() != pb::JOB_RUNNING && st->state() != pb::JOB_PENDING) {
          ended = true;
          return true;
        }
        auto jm = readJmInfo(zk, *jobId, site);
        if (!jm) return false;
        DesireSample s;
        s.at = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started);
        s.desire = jm->desire();
        s.granted = jm->granted();
        auto q = finishedTasks(zk, *jobId, 0);
        s.queueDone = q ? *q : 0;
        s.sleepyReleased = readTaskMap(zk, *jobId, 1).isOk();
        auto d = s.sleepyReleased ? finishedTasks(zk, *jobId, 1) : Result<size_t>(size_t{0});
        s.sleepyDone = d ? *d : 0;
        samples.push_back(s);
        if (!s.sleepyReleased) return false;
        sleepyPeak = std::max(sleepyPeak, s.desire);
        if (sleepyPeak >= 4 && s.desire >= 1 && s.desire * 2 <= sleepyPeak && kSleepyTasks - s.sleepyDone >= sleepyPeak) {
          fallAt = samples.size() - 1;
          return true;
        }
        return false;
      },
      kJobDeadline, milliseconds(50));
  INFO("desire timeline (ms since submit: desire, granted, queue done, sleepy done): " << describeTimeline(samples));
  INFO(jmLogTails(cluster, *jobId, 1500));
  REQUIRE(!samples.empty());

  // Growth: Af starts at one container and at most doubles each period (ρ = 2) while the
  // queue waits, reaching at least 4 before the queue is done.
  std::vector<uint32_t> growth;
  for (const auto& s : samples) {
    if (s.queueDone >= kQueueTasks || s.desire == 0) continue;
    if (growth.empty() || s.desire != growth.back()) growth.push_back(s.desire);
  }
  REQUIRE(!growth.empty());
  CHECK(growth.front() <= 2);
  uint32_t queuePeak = *std::max_element(growth.begin(), growth.end());
  CHECK(queuePeak >= 4);
  for (size_t i = 1; i < growth.size(); ++i) {
    if (growth[i] > growth[i - 1]) CHECK(growth[i] <= 2 * growth[i - 1]);
  }

  // Fall: while the sleeping stage still ran, after its own peak (its first tasks wait while
  // the first wave holds whole containers, until their measured CPU lets Parades pack them).
  CHECK_FALSE(ended);
  CHECK(sleepyPeak >= 4);
  REQUIRE(fallAt.has_value());
  CHECK(samples[*fallAt].desire * 2 <= sleepyPeak);

  requireSucceeded(cluster, zk, *jobId);
  CHECK(cluster.crashedDaemons().empty());
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("steals leave residency-local partitions at their site; other tasks are stolen; the word count stays exact",
          "[integration][adaptive][steal][residency]") {
  auto& env = requireCluster();
  auto& cluster = *env.cluster;
  auto& zk = *env.zk;
  const auto& sites = cluster.sites();
  const std::string& home = sites[0];
  auto where = workerSites(cluster);

  // At the home site: a residency-local dataset and a free one; one small free partition at a
  // third site, so that two idle JMs (the submit site's and that site's) look for work.
  std::string pinned = generateText(401, 1000);
  std::string freeHome = generateText(402, 1000);
  std::string freeOther = generateText(403, 40);
  std::map<std::string, uint64_t> expected;
  for (const auto* t : {&pinned, &freeHome, &freeOther}) {
    for (const auto& [w, n] : countWords(*t)) expected[w] += n;
  }
  requirePutDataset(cluster, home, "res-pinned", pinned, 10, /*residencyLocal=*/true);
  requirePutDataset(cluster, home, "res-free", freeHome, 10);
  requirePutDataset(cluster, sites[2], "res-free", freeOther, 1);

  auto jobId =
      submitJob(cluster, slowWordCountSpec("residency", {"res-pinned", "res-free"}, 1, 3, 2), sites[1], "residency.yaml");
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());
  requireSucceeded(cluster, zk, *jobId);
  INFO(jmLogTails(cluster, *jobId));

  auto inputs = readStageInputs(zk, *jobId, 0);
  INFO(whyNot(inputs));
  REQUIRE(inputs.isOk());
  REQUIRE(inputs->partitions_size() == 21);
  auto taskmap = readTaskMap(zk, *jobId, 0);
  INFO(whyNot(taskmap));
  REQUIRE(taskmap.isOk());
  auto byTask = requireExecutionsByTask(zk, *jobId);
  INFO("executions: " << describeExecutions(byTask));

  size_t pinnedTasks = 0, freeStolen = 0;
  for (uint32_t t = 0; t < 21; ++t) {
    const auto& in = inputs->partitions(static_cast<int>(t));
    const auto& workers = byTask[{0, t}];
    INFO("task " << t << " reads " << in.site() << (in.residency_local() ? " (residency local)" : ""));
    REQUIRE(!workers.empty());
    if (in.residency_local()) {
      ++pinnedTasks;
      CHECK(in.site() == home);
      CHECK(taskmap->owner_site(static_cast<int>(t)) == home);
      for (const auto& w : workers) CHECK(where[w] == home);
    } else if (in.site() == home && where[workers.front()] != home) {
      ++freeStolen;
    }
  }
  CHECK(pinnedTasks == 10);
  // Stealing was at work in this job: some free partitions left the home site.
  CHECK(freeStolen >= 1);

  requireExactWordCount(cluster, *jobId, sites[1], expected);
  CHECK(cluster.crashedDaemons().empty());
}

// ---------------------------------------------------------------------------------------------

// Hidden until fixed (see the report of issue 5's tests): under Af (no containers_per_site),
// exchangeWithMaster() caps a JM's desire at its own unfinished tasks, so a JM whose site owns
// no task of the running stage asks for 0 containers, holds none, and never reaches Parades'
// STEAL (launchTasks() steals only with an idle container); idle containers beyond the JM's own
// unfinished tasks are released in the same loop before launchTasks() runs. Stealing therefore
// works with static allocation only (and under Af only in containers that packing left empty).
TEST_CASE("under Af, a JM whose site has no task of the stage gets a container and steals from a loaded site",
          "[integration][adaptive][steal][af]") {
  auto& env = requireCluster();
  auto& cluster = *env.cluster;
  auto& zk = *env.zk;
  const auto& sites = cluster.sites();
  const std::string& loaded = sites[0];
  const std::string& idle = sites[1];
  auto where = workerSites(cluster);

  requirePutDataset(cluster, loaded, "af-steal", generateText(501, 2000), 40);
  // CPU-bound tasks: a queue forms at the loaded site (they are not packed ten to a container).
  const std::string spec = R"(name: af-steal
stages:
  - name: burn
    op: synthetic
    input: {dataset: af-steal}
    params: {cpu_ms: 300, output_bytes: 64}
  - name: sum
    op: identity
    tasks: 2
    input: {stage: burn}
)";
  auto jobId = submitJob(cluster, spec, idle, "af-steal.yaml");
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());

  uint32_t idleMaxGranted = 0, idleMaxDesire = 0, loadedMaxDesire = 0;
  bool ended = harness::eventually(
      [&] {
        if (auto jm = readJmInfo(zk, *jobId, idle)) {
          idleMaxGranted = std::max(idleMaxGranted, jm->granted());
          idleMaxDesire = std::max(idleMaxDesire, jm->desire());
        }
        if (auto jm = readJmInfo(zk, *jobId, loaded)) loadedMaxDesire = std::max(loadedMaxDesire, jm->desire());
        auto st = readJobStatus(zk, *jobId);
        return st && st->state() != pb::JOB_RUNNING && st->state() != pb::JOB_PENDING;
      },
      kJobDeadline, milliseconds(50));
  REQUIRE(ended);
  requireSucceeded(cluster, zk, *jobId);
  INFO(jmLogTails(cluster, *jobId));
  INFO("idle site's JM: max desire " << idleMaxDesire << ", max granted " << idleMaxGranted
                                     << "; loaded site's JM: max desire " << loadedMaxDesire);
  CHECK(loadedMaxDesire >= 4);  // the loaded site had a queue

  auto runs = readExecutions(zk, *jobId);
  INFO(whyNot(runs));
  REQUIRE(runs.isOk());
  size_t atIdle = 0;
  for (const auto& r : *runs) {
    if (r.stage == 0 && where[r.workerId] == idle) ++atIdle;
  }
  CHECK(idleMaxGranted >= 1);
  CHECK(atIdle >= 1);
}

}  // namespace
}  // namespace tellus::adaptive
