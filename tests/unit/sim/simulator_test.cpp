#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "config/config.h"
#include "sim/app.h"
#include "sim/output.h"
#include "sim/simulator.h"

using namespace tellus::sim;
namespace sched = tellus::sched;

namespace {

SiteSpec site(int slots, double bytesPerSecond) {
  static int next = 0;
  return SiteSpec{fmt::format("s{}", next++), slots, bytesPerSecond, bytesPerSecond};
}

StageSpec root(std::vector<int32_t> blocks, std::vector<float> seconds, double inputBytes, double outputBytes) {
  StageSpec stage;
  stage.blockSite = std::move(blocks);
  stage.taskSeconds = std::move(seconds);
  stage.inputBytes = inputBytes;
  stage.outputBytes = outputBytes;
  return stage;
}

StageSpec after(std::vector<int32_t> parents, std::vector<float> seconds, double outputBytes) {
  StageSpec stage;
  stage.parents = std::move(parents);
  stage.taskSeconds = std::move(seconds);
  stage.outputBytes = outputBytes;
  return stage;
}

JobSpec job(int64_t id, double arrival, std::vector<StageSpec> stages) {
  JobSpec spec;
  spec.id = id;
  spec.name = fmt::format("j{}", id);
  spec.arrivalSeconds = arrival;
  spec.stages = std::move(stages);
  return spec;
}

struct Collect : JobRecordSink {
  std::map<int64_t, JobRecord> records;
  void onJobFinished(const JobRecord& record) override { records[record.id] = record; }
};

RunSummary run(std::vector<SiteSpec> sites, const std::string& policy, std::vector<JobSpec> jobs, Collect& out,
               std::vector<ClusterEventSpec> events = {}) {
  SimConfig config;
  config.sites = std::move(sites);
  config.clusterEvents = std::move(events);
  auto parsed = parsePolicy(policy);
  REQUIRE(parsed.isOk());
  config.policy = parsed.value();
  VectorWorkload workload(std::move(jobs));
  auto summary = runSimulation(config, workload, &out);
  REQUIRE(summary.isOk());
  return summary.value();
}

}  // namespace

TEST_CASE("a tiny scenario matches the response times derived by hand", "[unit][sim]") {
  // Two sites, one slot each, 100 B/s up and down.
  // Job 1 (t=0): maps at site 0 (1 s) and site 1 (2 s) read 100 B each in place and write
  //   50 B each; one reduce (1 s) reads both outputs.
  // Job 2 (t=0.5): one 1 s task at site 0.
  // Site 0 runs job 1's map 0-1, then job 2's task 1-2 (response 1.5). Job 1's maps end at
  // 2; its reduce goes where the shuffle data is (50/50: ties go to site 0), starts at 2,
  // fetches 50 B from site 1 at 100 B/s (0.5 s) and computes 1 s: done at 3.5.
  Collect out;
  const RunSummary summary =
      run({site(1, 100), site(1, 100)}, "in-place+fcfs",
          {job(1, 0, {root({0, 1}, {1, 2}, 200, 100), after({0}, {1}, 0)}), job(2, 0.5, {root({0}, {1}, 0, 0)})}, out);
  REQUIRE(out.records.size() == 2);
  CHECK(out.records[1].responseSeconds == Approx(3.5));
  CHECK(out.records[1].wanBytes == Approx(50));
  // Alone: map stage needs 2 s (its longest task), the reduce max(1 s compute, 0.5 s net).
  CHECK(out.records[1].isolatedSeconds == Approx(3.0));
  CHECK(out.records[1].slowdown == Approx(3.5 / 3.0));
  CHECK(out.records[2].responseSeconds == Approx(1.5));
  CHECK(out.records[2].wanBytes == 0);
  CHECK(summary.jobs == 2);
  CHECK(summary.response.mean() == Approx(2.5));
  CHECK(summary.makespanSeconds == Approx(3.5));
  CHECK(summary.tasksLaunched == 4);
}

TEST_CASE("a run's usage is priced per site and site pair, and reported per policy", "[unit][sim][cost]") {
  // The tiny scenario above: site a holds a slot 1 s (map), 1 s (job 2) and 1.5 s (the
  // reduce: 0.5 s fetching 50 B from b, 1 s computing); site b 2 s (its map).
  SimConfig config;
  config.sites = {SiteSpec{"a", 1, 100, 100}, SiteSpec{"b", 1, 100, 100}};
  config.policy = parsePolicy("in-place+fcfs").value();
  tellus::cost::Prices a, b;
  a.container_hour = 3600;        // 1 per slot-second
  b.container_hour = 7200;        // 2 per slot-second
  b.egress_default_gb = 1e9;      // 1 per byte
  config.prices = {{"a", a}, {"b", b}};
  VectorWorkload workload(
      {job(1, 0, {root({0, 1}, {1, 2}, 200, 100), after({0}, {1}, 0)}), job(2, 0.5, {root({0}, {1}, 0, 0)})});
  auto summary = runSimulation(config, workload, nullptr);
  REQUIRE(summary.isOk());
  CHECK(summary->usage.containerMs == std::map<std::string, uint64_t>{{"a", 3500}, {"b", 2000}});
  REQUIRE(summary->usage.bytes.size() == 1);
  CHECK(summary->usage.bytes.at({"b", "a"}) == 50);
  CHECK(summary->cost.container_cost == Approx(3.5 + 4));
  CHECK(summary->cost.egress_cost == Approx(50));
  CHECK(summary->cost.total == Approx(57.5));
  CHECK(containerSeconds(summary->cost) == Approx(5.5));

  // Each output carries it: the table's column, the CSV's and the JSON's fields.
  const std::vector<RunSummary> runs{*summary};
  std::ostringstream table, csv;
  printSummaryTable(table, runs, 0);
  writeSummaryCsv(csv, runs, 0);
  CHECK_THAT(table.str(), Catch::Contains("cost") && Catch::Contains("57.50"));
  CHECK_THAT(csv.str(), Catch::Contains("container_seconds,container_cost,egress_cost,total_cost,") &&
                            Catch::Contains(",5.500,7.500000,50.000000,57.500000,"));
  // The locality columns follow: 3 map launches, all at their block's site.
  CHECK_THAT(csv.str(), Catch::Contains("root_launches,root_local_launches,locality\n") && Catch::Contains(",3,3,1.0000\n"));
  CHECK_THAT(summaryJson(runs, 0), Catch::Contains("\"locality\": 1.0"));
  CHECK_THAT(summaryJson(runs, 0), Catch::Contains("\"total\": 57.5"));

  // No prices: the usage is kept, every site unpriced and charged nothing.
  config.prices.clear();
  VectorWorkload again({job(1, 0, {root({0, 1}, {1, 2}, 200, 100), after({0}, {1}, 0)})});
  auto free = runSimulation(config, again, nullptr);
  REQUIRE(free.isOk());
  CHECK(free->cost.total == 0);
  CHECK(free->cost.unpriced == std::vector<std::string>{"a", "b"});
  CHECK(free->usage.bytes.at({"b", "a"}) == 50);
}

TEST_CASE("per-site prices from a prices file: each site and site pair at its own price", "[unit][sim][cost]") {
  // The tiny scenario again, its sites named as tellus-sim names them: site0 holds a slot for
  // 3.5 s, site1 for 2 s, and site1 sends 50 B to site0. The file prices them differently:
  //   site0: 36 per hour = 0.01 per slot-second -> 0.035; it sends nothing.
  //   site1: 720 per hour = 0.2 per slot-second -> 0.4; 50 B to site0 at 2e7 per GB (its
  //          price for site0, not its default) -> 50 / 1e9 * 2e7 = 1.0.
  // Total 0.035 + 0.4 + 1.0 = 1.435.
  auto file = tellus::config::parseSitePrices(
      "site0: {container_hour: 36, market: spot, egress_gb: {site1: 1000}}\n"
      "site1: {container_hour: 720, egress_gb: {site0: 2e7, default: 1}}\n",
      "prices.yaml");
  REQUIRE(file.isOk());
  SimOptions options;
  options.prices.container_hour = 3600;  // the flags' price: replaced for both sites
  options.sitePrices = *file;
  const std::vector<SiteSpec> sites{SiteSpec{"site0", 1, 100, 100}, SiteSpec{"site1", 1, 100, 100}};
  auto prices = pricesBySite(options, sites);
  REQUIRE(prices.isOk());

  SimConfig config;
  config.sites = sites;
  config.policy = parsePolicy("in-place+fcfs").value();
  config.prices = *prices;
  VectorWorkload workload(
      {job(1, 0, {root({0, 1}, {1, 2}, 200, 100), after({0}, {1}, 0)}), job(2, 0.5, {root({0}, {1}, 0, 0)})});
  auto summary = runSimulation(config, workload, nullptr);
  REQUIRE(summary.isOk());
  REQUIRE(summary->cost.sites.size() == 2);
  CHECK(summary->cost.sites[0].container_cost == Approx(0.035));
  CHECK(summary->cost.sites[0].market == "spot");
  CHECK(summary->cost.sites[1].container_cost == Approx(0.4));
  CHECK(summary->cost.sites[1].market == "on-demand");
  REQUIRE(summary->cost.pairs.size() == 1);
  CHECK(summary->cost.pairs[0].from == "site1");
  CHECK(summary->cost.pairs[0].egress_cost == Approx(1.0));
  CHECK(summary->cost.total == Approx(1.435));
  CHECK(summary->cost.unpriced.empty());

  // A site the file leaves out keeps the flags' price.
  options.sitePrices.erase("site0");
  auto partly = pricesBySite(options, sites);
  REQUIRE(partly.isOk());
  CHECK(partly->at("site0").container_hour == 3600);
  CHECK(partly->at("site1").container_hour == 720);

  // A site the cluster does not have, as an entry or as an egress destination, is refused.
  options.sitePrices = {{"site2", {}}};
  auto unknown = pricesBySite(options, sites);
  REQUIRE_FALSE(unknown.isOk());
  CHECK(unknown.message() == "--prices: 'site2' is not a simulated site (they are site0..site1)");
  tellus::cost::Prices toNowhere;
  toNowhere.egress_gb["site9"] = 1;
  options.sitePrices = {{"site0", toNowhere}};
  auto nowhere = pricesBySite(options, sites);
  REQUIRE_FALSE(nowhere.isOk());
  CHECK(nowhere.message() == "--prices: egress_gb of site0: 'site9' is not a simulated site (they are site0..site1)");
}

TEST_CASE("tellus-sim prices every policy's run with the per-site prices", "[unit][sim][cost]") {
  // Two uniform sites, a few synthetic jobs, two policies: each run's cost is its own usage
  // priced with the per-site prices (site1's slots cost 10x site0's, its bytes 3x), so the
  // prices given reach every run and each policy is charged for what it used.
  SimOptions options;
  options.workload = "exponential";
  options.cluster.shape = ClusterShape::kUniform;
  options.cluster.sites = 2;
  options.cluster.uniformSlots = 4;
  options.jobs = 6;
  options.utilization = 0.5;
  options.policies = {"in-place", "centralized"};
  auto file = tellus::config::parseSitePrices(
      "site0: {container_hour: 1, egress_gb: {default: 1}}\nsite1: {container_hour: 10, market: spot, egress_gb: {site0: 3}}\n",
      "prices.yaml");
  REQUIRE(file.isOk());
  options.sitePrices = *file;
  std::ostringstream log;
  auto runs = runPolicies(options, log);
  REQUIRE(runs.isOk());
  REQUIRE(runs->size() == 2);
  for (const auto& run : *runs) {
    INFO(run.policy);
    const auto expected = tellus::cost::price(run.usage, *file);
    CHECK(run.cost.total == Approx(expected.total));
    CHECK(run.cost.total > 0);
    CHECK(run.cost.unpriced.empty());
    double byHand = 0;
    for (const auto& [site, ms] : run.usage.containerMs) byHand += ms / 1000.0 / 3600.0 * (site == "site0" ? 1 : 10);
    for (const auto& [pair, bytes] : run.usage.bytes) byHand += bytes / 1e9 * (pair.first == "site0" ? 1 : 3);
    CHECK(run.cost.total == Approx(byHand));
  }
}

TEST_CASE("concurrent fetches from one site share its uplink", "[unit][sim]") {
  // Centralized placement sends every task to the strongest site (site 1, 2 slots). Each job
  // has one 1 s task whose 100 B block sits at site 0 (uplink 100 B/s). Alone: 1 s fetch +
  // 1 s compute. Together: two flows at 50 B/s each, 2 s fetch + 1 s compute.
  Collect alone;
  run({site(1, 100), site(2, 1000)}, "centralized", {job(1, 0, {root({0}, {1}, 100, 0)})}, alone);
  CHECK(alone.records[1].responseSeconds == Approx(2.0));
  Collect both;
  run({site(1, 100), site(2, 1000)}, "centralized",
      {job(1, 0, {root({0}, {1}, 100, 0)}), job(2, 0, {root({0}, {1}, 100, 0)})}, both);
  CHECK(both.records[1].responseSeconds == Approx(3.0));
  CHECK(both.records[2].responseSeconds == Approx(3.0));
}

TEST_CASE("Tetrium and max-min move work off a compute-starved site, in-place does not", "[unit][sim]") {
  // Ten 10 s tasks with tiny inputs at site 0 (1 slot); site 1 has 10 slots.
  std::vector<int32_t> blocks(10, 0);
  std::vector<float> seconds(10, 10.0f);
  const std::vector<SiteSpec> sites = {site(1, 1e9), site(10, 1e9)};
  Collect inPlace;
  run(sites, "in-place", {job(1, 0, {root(blocks, seconds, 10000, 0)})}, inPlace);
  CHECK(inPlace.records[1].responseSeconds == Approx(100.0));
  Collect tetrium;
  run(sites, "tetrium", {job(1, 0, {root(blocks, seconds, 10000, 0)})}, tetrium);
  CHECK(tetrium.records[1].responseSeconds < 25.0);
  CHECK(tetrium.records[1].wanBytes > 0);
  // Each task's 1000 B move in microseconds over 1 GB/s, a second wave at site 0 costs 10 s:
  // max-min (sched::maxMinMap, as the JMs run it) keeps one task home and runs nine at site 1,
  // all in the first wave.
  Collect maxMin;
  run(sites, "max-min", {job(1, 0, {root(blocks, seconds, 10000, 0)})}, maxMin);
  CHECK(maxMin.records[1].responseSeconds == Approx(10.0).margin(0.001));
  CHECK(maxMin.records[1].wanBytes == Approx(9000.0));
}

TEST_CASE("static job managers hold their containers; Af + Parades steals", "[unit][sim]") {
  // Eight 10 s tasks at site 0 and one at site 1 (4 slots each). Static: site 0's manager
  // holds 4 containers, two waves: 20 s. With Af+Parades the manager at site 1 finishes its
  // task and steals waiting tasks from site 0 once they waited 2τ·p.
  std::vector<int32_t> blocks = {0, 0, 0, 0, 0, 0, 0, 0, 1};
  std::vector<float> seconds(9, 10.0f);
  const std::vector<SiteSpec> sites = {site(4, 1e9), site(4, 1e9)};
  Collect staticOut;
  const RunSummary staticRun = run(sites, "decent-stat", {job(1, 0, {root(blocks, seconds, 0, 0)})}, staticOut);
  CHECK(staticOut.records[1].responseSeconds == Approx(20.0));
  CHECK(staticRun.tasksStolen == 0);
  Collect afOut;
  const RunSummary afRun = run(sites, "houtu", {job(1, 0, {root(blocks, seconds, 0, 0)})}, afOut);
  CHECK(afRun.tasksStolen > 0);
  CHECK(afOut.records.size() == 1);
  Collect noSteal;
  const RunSummary noStealRun = run(sites, "houtu+nosteal", {job(1, 0, {root(blocks, seconds, 0, 0)})}, noSteal);
  CHECK(noStealRun.tasksStolen == 0);
}

TEST_CASE("the job managers are the daemon's core: a steal must beat the victim's queue", "[unit][sim]") {
  // Twelve 10 s tasks at site 0, one at site 1, 4 containers each. Over a fast WAN site 1's
  // job manager steals and the job ends sooner than without stealing; over a 1 kB/s link
  // moving a task's 1 MB input would take 1000 s, so nothing is stolen.
  std::vector<int32_t> blocks(12, 0);
  blocks.push_back(1);
  std::vector<float> seconds(13, 10.0f);
  const double input = 13e6;  // 1 MB per task
  auto response = [&](double bytesPerSecond, const std::string& policy, int64_t* stolen) {
    Collect out;
    const RunSummary summary = run({site(4, bytesPerSecond), site(4, bytesPerSecond)}, policy,
                                   {job(1, 0, {root(blocks, seconds, input, 0)})}, out);
    *stolen = summary.tasksStolen;
    return out.records[1].responseSeconds;
  };
  int64_t stolen = 0, none = 0;
  const double fast = response(1e10, "houtu", &stolen);
  CHECK(stolen > 0);
  CHECK(fast < response(1e10, "houtu+nosteal", &none));
  CHECK(none == 0);
  const double slow = response(1e3, "houtu", &stolen);
  CHECK(stolen == 0);
  CHECK(slow == Approx(response(1e3, "houtu+nosteal", &none)));
}

TEST_CASE("a spot-VM loss kills tasks, which are re-run", "[unit][sim]") {
  // Four 10 s tasks on 4 slots. At t=5 half the slots die for 100 s: the two most recently
  // launched (all started together: the first two by index) are killed and re-run on the
  // surviving slots after the others finish at 10: done at 20.
  ClusterEventSpec loss;
  loss.timeSeconds = 5;
  loss.site = 0;
  loss.slotLoss = 0.5;
  loss.durationSeconds = 100;
  loss.killsTasks = true;
  Collect out;
  const RunSummary summary =
      run({site(4, 1e9)}, "in-place", {job(1, 0, {root({0, 0, 0, 0}, {10, 10, 10, 10}, 0, 0)})}, out, {loss});
  CHECK(summary.tasksKilled == 2);
  CHECK(out.records[1].responseSeconds == Approx(20.0));
}

TEST_CASE("k-site re-assignment moves queued tasks after a drop", "[unit][sim]") {
  std::vector<int32_t> blocks(40, 0);
  std::vector<float> seconds(40, 10.0f);
  ClusterEventSpec drop;
  drop.timeSeconds = 1;
  drop.site = 1;
  drop.slotLoss = 0.75;
  drop.bandwidthLoss = 0.5;
  const std::vector<SiteSpec> sites = {site(2, 1e9), site(8, 1e9), site(8, 1e9)};
  Collect out;
  const RunSummary summary = run(sites, "tetrium+k=2", {job(1, 0, {root(blocks, seconds, 40000, 0)})}, out, {drop});
  CHECK(summary.tasksReassigned > 0);
  CHECK(out.records.size() == 1);
  Collect none;
  const RunSummary without = run(sites, "tetrium", {job(1, 0, {root(blocks, seconds, 40000, 0)})}, none, {drop});
  CHECK(without.tasksReassigned == 0);
  CHECK(out.records[1].responseSeconds <= none.records[1].responseSeconds);
}

TEST_CASE("same seed, same output, byte for byte", "[unit][sim]") {
  auto runOnce = [](const std::string& policy, uint64_t seed) {
    SyntheticOptions options;
    options.jobs = 40;
    options.sites = 6;
    options.totalSlots = 60;
    options.sizes = JobSizeModel::kFacebook;
    SyntheticWorkload workload(options, Rng(seed));
    SimConfig config;
    for (int i = 0; i < 6; ++i) config.sites.push_back(SiteSpec{fmt::format("s{}", i), 10, 1e8, 1e8});
    config.policy = parsePolicy(policy).value();
    std::ostringstream csv;
    CsvJobWriter writer(csv, policy);
    auto summary = runSimulation(config, workload, &writer);
    REQUIRE(summary.isOk());
    return csv.str();
  };
  for (const char* policy : {"swag", "independent-srpt-reordering", "houtu"}) {
    const std::string first = runOnce(policy, 7);
    CHECK(first == runOnce(policy, 7));
    CHECK(first != runOnce(policy, 8));
    CHECK(first.size() > 200);
  }
}

TEST_CASE("a DAG workload under Tetrium's rounds is deterministic too", "[unit][sim]") {
  auto runOnce = [](uint64_t seed) {
    DagOptions options;
    options.jobs = 6;
    options.sites = 4;
    options.maxStages = 4;
    options.minInputBytes = 1e9;
    options.maxInputBytes = 4e9;
    DagWorkload workload(options, Rng(seed));
    SimConfig config;
    for (int i = 0; i < 4; ++i) config.sites.push_back(SiteSpec{fmt::format("s{}", i), 10 * (i + 1), 1e8, 1e8});
    config.policy = parsePolicy("tetrium+eps=0.5").value();
    std::ostringstream csv;
    CsvJobWriter writer(csv, "t");
    auto summary = runSimulation(config, workload, &writer);
    REQUIRE(summary.isOk());
    CHECK(summary->jobs == 6);
    return csv.str();
  };
  CHECK(runOnce(3) == runOnce(3));
}

TEST_CASE("refresh=S: a job order is recomputed at most every S seconds; a job that came since ranks last",
          "[unit][sim][order]") {
  // One slot. Job 1 (t=0): three 1 s tasks. Job 2 (t=0.5): one 1 s task. Global-SRPT ranks job
  // 2 first as it arrives, so it runs 1-2; with the order 10 s stale it waits for job 1: 3-4.
  const auto jobs = [] { return std::vector<JobSpec>{job(1, 0, {root({0, 0, 0}, {1, 1, 1}, 0, 0)}), job(2, 0.5, {root({0}, {1}, 0, 0)})}; };
  Collect fresh, stale;
  const RunSummary now = run({site(1, 100)}, "in-place+global-srpt", jobs(), fresh);
  const RunSummary late = run({site(1, 100)}, "in-place+global-srpt+refresh=10", jobs(), stale);
  CHECK(fresh.records[2].responseSeconds == Approx(1.5));
  CHECK(stale.records[2].responseSeconds == Approx(3.5));
  CHECK(stale.records[1].responseSeconds == Approx(3.0));
  CHECK(late.ordersComputed < now.ordersComputed);
  CHECK(parsePolicy("swag+refresh=2.5")->orderRefreshSeconds == 2.5);
  CHECK_FALSE(parsePolicy("swag+refresh=-1").isOk());
}

TEST_CASE("policy names: presets, overrides, knobs and clear errors", "[unit][sim]") {
  auto tetrium = parsePolicy("tetrium+swag+af");
  REQUIRE(tetrium.isOk());
  CHECK(tetrium->placement == sched::Placement::kTetrium);
  CHECK(tetrium->order == sched::JobOrder::kSwag);
  CHECK(tetrium->resources == sched::Resources::kAf);
  auto knobs = parsePolicy("tetrium+rho=0.25+k=5");
  REQUIRE(knobs.isOk());
  CHECK(knobs->wanBudgetRho == 0.25);
  CHECK(knobs->reassignK == 5);
  CHECK(knobs->order == sched::JobOrder::kTetrium);
  CHECK(parsePolicy("tetrium+eps=0.5")->tetriumRounds);
  // The registry's names, the same as job specs and `tellus plan` use.
  auto named = parsePolicy("place=tetrium+order=global-srpt-reordering+static");
  REQUIRE(named.isOk());
  CHECK(named->placement == sched::Placement::kTetrium);
  CHECK(named->order == sched::JobOrder::kGlobalSrptReordering);
  CHECK(named->resources == sched::Resources::kStatic);
  for (const auto& name : sched::placementNames()) {
    if (name != "tetrium") CHECK(parsePolicy(name)->placement == sched::parsePlacement(name));
  }
  for (const auto& name : sched::jobOrderNames()) {
    if (name != "tetrium") CHECK(parsePolicy(name)->order == sched::parseJobOrder(name));
  }
  auto badName = parsePolicy("order=gsrpt");
  REQUIRE_FALSE(badName.isOk());
  CHECK_THAT(badName.message(), Catch::Contains("unknown job order") && Catch::Contains("global-srpt"));

  auto unknown = parsePolicy("in-place+teleport");
  REQUIRE_FALSE(unknown.isOk());
  CHECK_THAT(unknown.message(), Catch::Contains("unknown token 'teleport'"));
  auto twice = parsePolicy("in-place+iridium");
  REQUIRE_FALSE(twice.isOk());
  CHECK_THAT(twice.message(), Catch::Contains("two different placements"));
  auto range = parsePolicy("tetrium+rho=2");
  REQUIRE_FALSE(range.isOk());
  CHECK_THAT(range.message(), Catch::Contains("rho must be in"));
  auto notNumber = parsePolicy("tetrium+rho=abc");
  REQUIRE_FALSE(notNumber.isOk());
  CHECK_THAT(notNumber.message(), Catch::Contains("must be a number"));
  CHECK_FALSE(parsePolicy("swag+eps=0.5").isOk());
  CHECK_FALSE(parsePolicy("").isOk());
  CHECK_FALSE(parsePolicy("swag++fcfs").isOk());
}

TEST_CASE("bad configurations are rejected with a message", "[unit][sim]") {
  SimConfig config;
  config.policy = parsePolicy("in-place").value();
  VectorWorkload empty({});
  CHECK_FALSE(runSimulation(config, empty, nullptr).isOk());  // no sites
  config.sites = {SiteSpec{"a", 1, 1, 1}};
  VectorWorkload outside({job(1, 0, {root({3}, {1}, 0, 0)})});
  auto result = runSimulation(config, outside, nullptr);
  REQUIRE_FALSE(result.isOk());
  CHECK_THAT(result.message(), Catch::Contains("site 3"));
  VectorWorkload unsorted({job(1, 5, {root({0}, {1}, 0, 0)}), job(2, 1, {root({0}, {1}, 0, 0)})});
  auto order = runSimulation(config, unsorted, nullptr);
  REQUIRE_FALSE(order.isOk());
  CHECK_THAT(order.message(), Catch::Contains("sorted"));
}

TEST_CASE("tetrium with a cost weight trades response time for money on a priced cluster", "[unit][sim][cost]") {
  // Site a holds 7 of the 8 blocks of a map-only job (10 s tasks) but has 1 slot; b has 8
  // slots, fast links and dear containers. Time alone moves most tasks to b; at cost=1000 (a
  // second is worth 1/1000 of a currency unit) every task runs at a, where a slot-second costs
  // a tenth. With job managers (af) stealing is off: it moves tasks by time alone.
  tellus::cost::Prices cheap, dear;
  cheap.container_hour = 3600;   // 1 per slot-second
  dear.container_hour = 36000;   // 10 per slot-second
  for (const std::string resources : {"", "+af+nosteal"}) {
    auto simulate = [&](const std::string& policy) {
      SimConfig config;
      config.sites = {SiteSpec{"a", 1, 1e9, 1e9}, SiteSpec{"b", 8, 1e9, 1e9}};
      config.prices = {{"a", cheap}, {"b", dear}};
      auto parsed = parsePolicy(policy + resources);
      REQUIRE(parsed.isOk());
      config.policy = parsed.value();
      VectorWorkload workload({job(1, 0, {root({0, 0, 0, 0, 0, 0, 0, 1}, {10, 10, 10, 10, 10, 10, 10, 10}, 8000, 0)})});
      auto summary = runSimulation(config, workload, nullptr);
      REQUIRE(summary.isOk());
      return summary.value();
    };
    const RunSummary fast = simulate("place=tetrium");
    const RunSummary cheapRun = simulate("place=tetrium+cost=1000");
    INFO("resources" << resources);
    CHECK(fast.usage.containerMs.count("b") == 1);  // time alone uses b's slots
    CHECK(cheapRun.usage.containerMs.count("b") == 0);
    CHECK(cheapRun.cost.total == Approx(80).epsilon(1e-4));  // 8 tasks x 10 s at a (and 1 ms fetching b's block)
    CHECK(cheapRun.cost.total < fast.cost.total);
    CHECK(cheapRun.response.mean() > fast.response.mean());
  }
  // The knob is validated like the others.
  CHECK_FALSE(parsePolicy("tetrium+cost=-1").isOk());
  CHECK_FALSE(parsePolicy("tetrium+cost=1e7").isOk());
  CHECK(parsePolicy("tetrium+cost=0.5").value().costWeight == 0.5);
}

namespace {

struct Decisions : DecisionSink {
  std::vector<std::pair<std::string, tellus::jobcore::Decision>> all;  // (JM's site, decision)
  void onDecision(int64_t, const std::string& site, const tellus::jobcore::Decision& d) override { all.emplace_back(site, d); }
  std::set<uint32_t> reruns(uint32_t stage, std::string_view reason) const {
    std::set<uint32_t> out;
    for (const auto& [site, d] : all) {
      if (d.kind == tellus::jobcore::Decision::Kind::kRerun && d.stage == stage && d.reason == reason) out.insert(d.tasks[0]);
    }
    return out;
  }
};

}  // namespace

TEST_CASE("a lost worker loses the outputs stored on it: the primary's lineage runs them again", "[unit][sim][lineage]") {
  using tellus::jobcore::Decision;
  // Site a: 4 slots on 2 workers, holding the 4 map blocks (2 s each); b: 2 slots. The reduce
  // (2 tasks, 10 s) reads every map output. a-w2 is lost when the map stage is complete: the
  // master granted a's containers interleaved over the workers, so 2 maps ran there.
  auto simulate = [](bool lose, Decisions& decisions) {
    SimConfig config;
    config.sites = {SiteSpec{"a", 4, 1e9, 1e9, 2}, SiteSpec{"b", 2, 1e9, 1e9}};
    config.policy = parsePolicy("in-place+static+static=4").value();
    config.decisions = &decisions;
    if (lose) {
      ClusterEventSpec loss;
      loss.site = 0;
      loss.loseWorker = 1;
      loss.whenStageDone = 0;
      config.clusterEvents.push_back(loss);
    }
    VectorWorkload workload({job(1, 0, {root({0, 0, 0, 0}, {2, 2, 2, 2}, 4000, 4000), after({0}, {10, 10}, 100)})});
    auto summary = runSimulation(config, workload, nullptr);
    REQUIRE(summary.isOk());
    return summary.value();
  };
  Decisions calm;
  const RunSummary plain = simulate(false, calm);
  CHECK(plain.jobs == 1);
  CHECK(calm.reruns(0, tellus::jobcore::kRerunLostOutput).empty());
  size_t places = 0;
  for (const auto& [site, d] : calm.all) {
    if (d.kind != Decision::Kind::kPlace) continue;
    ++places;
    CHECK(site == "a");  // the primary (the submit site) places
    if (d.stage == 0) CHECK(d.site == "a");  // in place: where the blocks are
  }
  CHECK(places == 6);

  Decisions lossy;
  const RunSummary lost = simulate(true, lossy);
  CHECK(lost.jobs == 1);
  const auto rerun = lossy.reruns(0, tellus::jobcore::kRerunLostOutput);
  CHECK(rerun.size() == 2);  // the maps whose outputs were on a-w2, and only those
  for (const auto& [site, d] : lossy.all) {
    if (d.kind == Decision::Kind::kRerun && d.reason == tellus::jobcore::kRerunLostOutput) CHECK(d.site == "a");
  }
  // Each ran twice; a reduce running on a-w2 when it died ran again too.
  const size_t killed = lossy.reruns(1, tellus::jobcore::kRerunWorkerLost).size();
  CHECK(lost.tasksLaunched == plain.tasksLaunched + 2 + static_cast<int64_t>(killed));
  CHECK(lossy.reruns(0, tellus::jobcore::kRerunWorkerLost).empty());  // no map ran any more

  // A worker the site does not have is refused.
  SimConfig bad;
  bad.sites = {SiteSpec{"a", 4, 1e9, 1e9, 2}};
  bad.policy = parsePolicy("in-place+static").value();
  ClusterEventSpec loss;
  loss.loseWorker = 2;
  bad.clusterEvents.push_back(loss);
  VectorWorkload none({});
  CHECK_FALSE(runSimulation(bad, none, nullptr).isOk());
  bad.sites = {SiteSpec{"a", 4, 1e9, 1e9}};  // its only worker: never lost
  bad.clusterEvents[0].loseWorker = 0;
  CHECK_FALSE(runSimulation(bad, none, nullptr).isOk());
}
