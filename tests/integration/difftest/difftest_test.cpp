// The differential test (issue 9 item 6): one scenario — a 3-site, 2-stage job with a steal
// and a worker loss — run by the daemons on a mini cluster and by tellus-sim's driver of the
// same JobCore; the two decision logs (jobcore/decision.h: each JM's placements, steals given
// and re-runs) must agree: every task placed at the same site, the same tasks stolen from the
// same site by the same site, the same tasks run again because their output was lost.
//
// Why the comparison is exact although the daemons run on real time. Every decision compared
// is forced by the scenario's structure, not by how fast anything ran:
//  - Sites (each 2 workers x 2 containers; every JM holds 2, containers_per_site): us-east
//    submits and holds no data (its JM, the primary, has two idle containers from the start);
//    eu-west holds 2 residency-local partitions, ap-south 2 residency-local and 2 free ones.
//  - Map placement is in place (each task at its partition's site); the reduce's (3 tasks,
//    in-place: spread over the sites' containers, 4 each) depends only on the sites' container
//    counts, the same in both runs.
//  - Steal: us-east is the only JM with idle containers while map tasks wait (the others run
//    their own two at once). ap-south's two free partitions are all that can be stolen
//    (residency-local tasks never are), and they are beyond what ap-south's own containers
//    start (its two residency-local tasks come first by index), whether or not ap-south holds
//    its containers yet when asked; the victim decides by Parades alone (no stage mean yet, and
//    no link rates measured on a fresh cluster: the simulation runs `unmeasured`). The map
//    tasks take 4 s, far longer than it takes the thief to ask. So both runs steal exactly
//    those two, from ap-south to us-east (in one steal or two: compared as a set).
//  - Worker loss: once the map stage is complete the test kills the eu-west worker that does
//    not run that site's JM (SIGKILL, with its executors); the simulation loses the same worker
//    at the same logical point. eu-west's two map tasks ran at once, one per container, and
//    the master grants a JM's containers interleaved over the workers: the lost worker held
//    exactly the output of the task its container ran. The reduce (12 s per task) is still
//    running when the primary sees the worker gone (session timeout and lossSettleS later), so
//    that output is still needed and lineage re-runs it; its raw input has a copy on the
//    surviving worker (tellus put keeps two).
//  - Not compared: re-runs of attempts that were running on the dying worker (which attempts
//    those are depends on when exactly the kill lands), and the order of the records.

#include <algorithm>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "harness/eventually.h"
#include "jobcore/decision.h"
#include "kit/adaptive_kit.h"
#include "sim/simulator.h"

namespace tellus::difftest {
namespace {

using namespace std::chrono_literals;
using jobcore::Decision;

constexpr uint32_t kMapS = 4;
constexpr uint32_t kReduceS = 12;
constexpr uint32_t kReduceTasks = 3;

// What the two runs must agree on.
struct Outcome {
  std::map<std::pair<uint32_t, uint32_t>, std::string> placed;                       // (stage, task) -> site
  std::map<std::tuple<uint32_t, std::string, std::string>, std::set<uint32_t>> stolen;  // (stage, from, to)
  std::map<std::pair<uint32_t, std::string>, std::set<uint32_t>> rerun;               // (stage, reason)
  std::vector<std::string> conflicts;  // a task placed twice at different sites
};

Outcome summarize(const std::vector<Decision>& decisions) {
  Outcome out;
  for (const auto& d : decisions) {
    switch (d.kind) {
      case Decision::Kind::kPlace: {
        const auto [it, fresh] = out.placed.try_emplace({d.stage, d.tasks[0]}, d.site);
        if (!fresh && it->second != d.site) {
          out.conflicts.push_back(fmt::format("task {}/{} placed at {} and at {}", d.stage, d.tasks[0], it->second, d.site));
        }
        break;
      }
      case Decision::Kind::kSteal:
        out.stolen[{d.stage, d.from, d.site}].insert(d.tasks.begin(), d.tasks.end());
        break;
      case Decision::Kind::kRerun:
        // See the file comment: an attempt killed with its worker is timing, not a decision.
        if (d.reason != jobcore::kRerunWorkerLost) out.rerun[{d.stage, d.reason}].insert(d.tasks[0]);
        break;
    }
  }
  return out;
}

std::string tasksText(const std::set<uint32_t>& tasks) {
  // (fmt, not "," + std::to_string: GCC 12's -Wrestrict misfires on the latter at -O3.)
  std::string out;
  for (uint32_t t : tasks) out += out.empty() ? fmt::format("{}", t) : fmt::format(",{}", t);
  return fmt::format("{{{}}}", out);
}

// Every key either side has whose values differ, a line each: `name(key)`, then what the
// daemons had and what the simulation had (`missing` where a side has no value).
template <class Key, class Value, class Name, class Text>
void differing(const std::map<Key, Value>& daemons, const std::map<Key, Value>& sim, const Value& missing, Name name,
               Text text, std::ostringstream& out) {
  std::set<Key> keys;
  for (const auto& [key, value] : daemons) keys.insert(key);
  for (const auto& [key, value] : sim) keys.insert(key);
  for (const auto& key : keys) {
    const auto d = daemons.find(key);
    const auto s = sim.find(key);
    const Value& dv = d == daemons.end() ? missing : d->second;
    const Value& sv = s == sim.end() ? missing : s->second;
    if (dv != sv) out << name(key) << ": daemons " << text(dv) << ", simulation " << text(sv) << "\n";
  }
}

// A readable difference ("" when equal), line by line: what the daemons did, what the
// simulation did.
std::string differences(const Outcome& daemons, const Outcome& sim) {
  std::ostringstream out;
  for (const auto& c : daemons.conflicts) out << "daemons: " << c << "\n";
  for (const auto& c : sim.conflicts) out << "simulation: " << c << "\n";
  const auto asIs = [](const std::string& site) { return site; };
  differing(
      daemons.placed, sim.placed, std::string("(not placed)"),
      [](const auto& id) { return fmt::format("place {}/{}", id.first, id.second); }, asIs, out);
  differing(
      daemons.stolen, sim.stolen, std::set<uint32_t>{},
      [](const auto& key) {
        return fmt::format("steal stage {} {} -> {}", std::get<0>(key), std::get<1>(key), std::get<2>(key));
      },
      tasksText, out);
  differing(
      daemons.rerun, sim.rerun, std::set<uint32_t>{},
      [](const auto& key) { return fmt::format("rerun stage {} ({})", key.first, key.second); }, tasksText, out);
  return out.str();
}

std::string describe(const Outcome& o) {
  std::ostringstream out;
  for (const auto& [id, site] : o.placed) out << "  place " << id.first << "/" << id.second << " " << site << "\n";
  for (const auto& [key, t] : o.stolen) {
    out << "  steal stage " << std::get<0>(key) << " " << std::get<1>(key) << " -> " << std::get<2>(key) << " "
        << tasksText(t) << "\n";
  }
  for (const auto& [key, t] : o.rerun) out << "  rerun stage " << key.first << " (" << key.second << ") " << tasksText(t) << "\n";
  return out.str();
}

// Every decision the job's JMs logged, on every worker of the cluster (each JM appends to
// <data_dir>/jms/<job>/decisions.jsonl); a line that does not parse fails the test.
std::vector<Decision> readDaemonDecisions(const harness::MiniCluster& cluster, const std::string& jobId) {
  std::vector<Decision> out;
  for (const auto& site : cluster.sites()) {
    for (const auto& worker : cluster.workers(site)) {
      const auto path = cluster.dir() / site / worker / "jms" / jobId / "decisions.jsonl";
      std::ifstream in(path);
      std::string line;
      while (std::getline(in, line)) {
        auto d = jobcore::parseDecision(line);
        INFO(path.string() << ": " << line << ": " << (d ? "" : d.message()));
        REQUIRE(d.isOk());
        out.push_back(*d);
      }
    }
  }
  return out;
}

struct Collect : sim::DecisionSink {
  std::vector<Decision> all;
  void onDecision(int64_t, const std::string&, const Decision& d) override { all.push_back(d); }
};

// The same scenario in the simulator: the sites in the order tellus-master lists a job's sites
// (by name), the map's tasks in the order of the spec's datasets, the same worker lost when
// the map stage is complete.
std::vector<Decision> simulate(int lostWorker) {
  sim::SimConfig config;
  for (const std::string name : {"ap-south", "eu-west", "us-east"}) {
    config.sites.push_back(sim::SiteSpec{name, 4, 1e9, 1e9, 2});
  }
  auto policy = sim::parsePolicy("in-place+static+static=2+steal+unmeasured");
  REQUIRE(policy.isOk());
  config.policy = *policy;
  sim::ClusterEventSpec loss;
  loss.site = 1;  // eu-west
  loss.loseWorker = lostWorker;
  loss.whenStageDone = 0;
  config.clusterEvents.push_back(loss);
  Collect decisions;
  config.decisions = &decisions;

  sim::StageSpec map;
  map.blockSite = {1, 1, 0, 0, 0, 0};  // bpin (eu-west), cpin, cfree (ap-south)
  map.pinned = {true, true, true, true, false, false};
  map.taskSeconds.assign(6, static_cast<float>(kMapS));
  map.inputBytes = 6000;
  map.outputBytes = 6000;
  sim::StageSpec reduce;
  reduce.parents = {0};
  reduce.taskSeconds.assign(kReduceTasks, static_cast<float>(kReduceS));
  reduce.outputBytes = 300;
  sim::JobSpec job;
  job.id = 1;
  job.name = "difftest";
  job.submitSite = 2;  // us-east
  job.stages = {map, reduce};
  sim::VectorWorkload workload({job});
  auto summary = sim::runSimulation(config, workload, nullptr);
  INFO((summary ? "" : summary.message()));
  REQUIRE(summary.isOk());
  REQUIRE(summary->jobs == 1);
  return decisions.all;
}

std::string specYaml() {
  // exec sleeps: the tasks take their time whatever else runs on the machine (a CPU-burning
  // operator would stretch with the load). The cluster's masters count exec as derived, so its
  // output is not pinned in meaning (only the raw residency-local partitions are).
  return fmt::format(
      "name: difftest\n"
      "placement: in-place\n"
      "containers_per_site: 2\n"
      // The simulator models no output copies (tools/sim): the daemons make none either, so
      // the lost worker's output is lost in both and lineage re-runs it in both.
      "output_replicas: 0\n"
      "stages:\n"
      "  - name: map\n"
      "    op: exec\n"
      "    params: {{cmd: \"sleep {}; cat\"}}\n"
      "    inputs:\n"
      "      - {{dataset: bpin}}\n"
      "      - {{dataset: cpin}}\n"
      "      - {{dataset: cfree}}\n"
      "  - name: reduce\n"
      "    op: exec\n"
      "    params: {{cmd: \"sleep {}; wc -l\"}}\n"
      "    tasks: {}\n"
      "    input: {{stage: map}}\n",
      kMapS, kReduceS, kReduceTasks);
}

TEST_CASE("differential: a 3-site, 2-stage job with a steal and a worker loss decides the same in the daemons and "
          "in the simulator",
          "[integration][difftest]") {
  harness::MiniClusterOptions options;
  options.sites = 3;
  options.workersPerSite = 2;
  options.containersPerWorker = 2;
  options.execYaml = harness::kExecEnabledYaml;
  options.masterExtraYaml = "derived_operators: [exec]\n";
  for (const auto& site : harness::MiniCluster::siteNames(3)) {
    options.workerExtraYaml[site] = "jm:\n  decision_log_max_bytes: 1048576\n";
  }
  auto started = harness::MiniCluster::start(options);
  INFO((started ? "" : started.message()));
  REQUIRE(started.isOk());
  auto& cluster = **started;
  REQUIRE(cluster.sites() == std::vector<std::string>{"us-east", "eu-west", "ap-south"});
  auto zkView = cluster.connectZkReader(30s);
  REQUIRE(zkView.isOk());
  auto& zk = **zkView;

  for (const auto& [site, dataset, pinned] : {std::tuple{"eu-west", "bpin", true}, std::tuple{"ap-south", "cpin", true},
                                              std::tuple{"ap-south", "cfree", false}}) {
    Status put = adaptive::putDataset(cluster, site, dataset, adaptive::generateText(7, 40), 2, pinned);
    INFO(put.message());
    REQUIRE(put.isOk());
  }
  auto job = adaptive::submitJob(cluster, specYaml(), "us-east", "difftest.yaml");
  INFO((job ? "" : job.message()));
  REQUIRE(job.isOk());

  // The logical point: the map stage complete (all six outputs recorded).
  const bool mapsDone = harness::eventually(
      [&] {
        auto n = adaptive::finishedTasks(zk, *job, 0);
        return n.isOk() && *n == 6;
      },
      60s, 20ms);
  INFO(adaptive::jmLogTails(cluster, *job));
  REQUIRE(mapsDone);
  auto jm = adaptive::readJmInfo(zk, *job, "eu-west");
  INFO((jm ? "" : jm.message()));
  REQUIRE(jm.isOk());
  const auto workers = cluster.workers("eu-west");
  REQUIRE(workers.size() == 2);
  const int lost = workers[0] == jm->worker_id() ? 1 : 0;
  REQUIRE(cluster.killWorker(workers[static_cast<size_t>(lost)]).isOk());

  auto end = adaptive::waitForJobEnd(zk, *job, 120s);
  INFO((end ? end->ShortDebugString() : end.message()));
  REQUIRE(end.isOk());
  REQUIRE(end->state() == pb::JOB_SUCCEEDED);

  const Outcome daemons = summarize(readDaemonDecisions(cluster, *job));
  const Outcome simulated = summarize(simulate(lost));
  INFO("daemons:\n" << describe(daemons) << "simulation:\n" << describe(simulated));
  // The scenario did what it is for: a steal and a lineage re-run happened (in both, below).
  CHECK(daemons.placed.size() == 6 + kReduceTasks);
  CHECK_FALSE(daemons.stolen.empty());
  CHECK(daemons.rerun.count({0, std::string(jobcore::kRerunLostOutput)}) == 1);
  const std::string diff = differences(daemons, simulated);
  INFO("differences:\n" << diff);
  CHECK(diff.empty());
}

}  // namespace
}  // namespace tellus::difftest
