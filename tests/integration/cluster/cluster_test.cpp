// End-to-end tests of jobs on a real cluster: a word count across three sites checked against
// an independent count, any master serving any job, the ZooKeeper job-state layout observed
// while a job runs, and killing a running job.
//
// Every test uses the shared cluster (cluster_test_util.h) with its own dataset names and
// jobs, and waits on real conditions with deadlines.

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>

#include "cluster_test_util.h"
#include "harness/eventually.h"
#include "jobstate/paths.h"

namespace tellus::itest {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr milliseconds kJobDeadline = 90s;

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool startsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// Word counts expected of a dataset put as a different text at each site.
struct SiteCorpora {
  std::map<std::string, uint64_t> expected;
  uint32_t partitions = 0;
};

// Puts `texts[i]` at site i as `dataset` in `parts[i]` partitions. The expected counts are
// summed per site (texts are never concatenated, so no word can straddle two sites).
SiteCorpora putAtEachSite(harness::MiniCluster& cluster, const std::string& dataset,
                          const std::vector<std::string>& texts, const std::vector<uint32_t>& parts) {
  SiteCorpora out;
  for (size_t i = 0; i < texts.size(); ++i) {
    for (const auto& [word, n] : countWords(texts[i])) out.expected[word] += n;
    Status put = cluster.putDataset(cluster.sites()[i], dataset, texts[i], parts[i]);
    INFO(cluster.sites()[i] << ": " << put.message());
    REQUIRE(put.isOk());
    out.partitions += parts[i];
  }
  REQUIRE(out.expected.size() > 100);
  return out;
}

// Submits the word count `spec` (named `name`) at `site` with --wait and checks that it
// succeeded and that its result equals `expected`; returns the job's id.
std::string runWordCount(harness::MiniCluster& cluster, const std::filesystem::path& spec, const std::string& name,
                         const std::string& site, const std::map<std::string, uint64_t>& expected) {
  auto submitted = cluster.tellus({"submit", spec.string(), "--wait"}, site, kJobDeadline);
  INFO("submit --wait: exit " << submitted.exitCode << "\nstdout: " << submitted.out << "\nstderr: " << submitted.err
                              << cluster.crashedDaemons());
  REQUIRE(submitted.exitCode == 0);
  REQUIRE(startsWith(submitted.out, "submitted job-"));
  std::string jobId = trimmed(splitLines(submitted.out).front().substr(std::string("submitted ").size()));
  CHECK(submitted.out.find(jobId + "  " + name + "  succeeded") != std::string::npos);

  auto result = cluster.tellus({"result", jobId}, site);
  INFO("result: exit " << result.exitCode << " " << result.err);
  REQUIRE(result.exitCode == 0);
  auto counted = parseWordCounts(result.out);
  INFO(whyNot(counted));
  REQUIRE(counted.isOk());
  INFO("differences: " << describeDifferences(expected, *counted));
  CHECK(counted->size() == expected.size());
  CHECK(*counted == expected);
  return jobId;
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("a word count over three sites equals an independent count", "[integration][cluster]") {
  auto& cluster = sharedCluster();
  const auto& sites = cluster.sites();
  REQUIRE(sites.size() >= 3);
  CliRunner files;

  // A different text at each site, in several partitions; the last one ends without a
  // newline.
  const auto [expected, partitions] =
      putAtEachSite(cluster, "wc-corpus", {generateCorpus(1000, 900, true), generateCorpus(1001, 1200, true),
                                           generateCorpus(1002, 1500, false)},
                    {3, 4, 5});

  auto spec = files.writeFile("wordcount.yaml", R"(name: wordcount-itest
placement: proportional
stages:
  - name: map
    op: wordcount.map
    input: {dataset: wc-corpus}
  - name: reduce
    op: wordcount.reduce
    tasks: 4
    input: {stage: map}
)");
  const std::string jobId = runWordCount(cluster, spec, "wordcount-itest", sites[0], expected);

  // The status agrees: every site took part, one map task per partition, 4 reduce tasks.
  auto status = jobStatus(cluster, jobId, sites[0]);
  INFO(whyNot(status));
  REQUIRE(status.isOk());
  CHECK(status->status().state() == pb::JOB_SUCCEEDED);
  std::set<std::string> jobSites(status->status().sites().begin(), status->status().sites().end());
  CHECK(jobSites == std::set<std::string>(sites.begin(), sites.begin() + 3));
  REQUIRE(status->stages_size() == 2);
  CHECK(status->stages(0).tasks() == partitions);
  CHECK(status->stages(0).done() == partitions);
  CHECK(status->stages(1).tasks() == 4);
  CHECK(status->stages(1).done() == 4);

  // What it cost. Where each task's output was written (its worker "<site>-wN") says which
  // sites ran tasks, independently of the usage records: each of them has container time,
  // and a reduce that ran at a site other than a map's fetched from it.
  auto placed = cluster.tellus({"--json", "status", jobId, "--tasks"}, sites[0]);
  REQUIRE(placed.exitCode == 0);
  pb::JobStatusResponse withTasks;
  REQUIRE(parseJson(placed.out, withTasks).isOk());
  REQUIRE(withTasks.stages_size() == 2);
  const auto siteOfWorker = [](const std::string& worker) { return worker.substr(0, worker.rfind("-w")); };
  std::set<std::string> mapSites, reduceSites;
  for (const auto& t : withTasks.stages(0).task_placements()) mapSites.insert(siteOfWorker(t.worker_id()));
  for (const auto& t : withTasks.stages(1).task_placements()) reduceSites.insert(siteOfWorker(t.worker_id()));
  REQUIRE_FALSE(mapSites.empty());
  REQUIRE_FALSE(reduceSites.empty());
  // Through another site's master: it prices every site with the prices that site published.
  auto costed = cluster.tellus({"--json", "cost", jobId}, sites[1]);
  INFO("tellus cost: exit " << costed.exitCode << "\nstdout: " << costed.out << "\nstderr: " << costed.err);
  REQUIRE(costed.exitCode == 0);
  pb::JobStatusResponse asJson;  // {"status": ..., "cost": ...}: the fields of a status answer
  REQUIRE(parseJson(costed.out, asJson).isOk());
  CHECK(asJson.status().job_id() == jobId);
  const pb::JobCost& cost = asJson.cost();
  CHECK(cost.unpriced_sites_size() == 0);
  std::map<std::string, pb::SiteCost> bySite;
  for (const auto& s : cost.sites()) bySite[s.site()] = s;
  double containerCost = 0;
  for (const auto& site : mapSites) {
    INFO("site " << site);
    REQUIRE(bySite.count(site) == 1);
    CHECK(bySite[site].container_seconds() > 0);
    CHECK(bySite[site].priced());
    CHECK(bySite[site].market() == "spot");
  }
  for (const auto& site : reduceSites) CHECK(bySite.count(site) == 1);
  for (const auto& [site, s] : bySite) {
    CHECK(s.container_cost() == Approx(s.container_seconds() * 0.01));
    containerCost += s.container_cost();
  }
  std::map<std::pair<std::string, std::string>, uint64_t> pairBytes;
  double egressCost = 0;
  for (const auto& p : cost.pairs()) {
    CHECK(p.from_site() != p.to_site());
    CHECK(p.egress_cost() == Approx(static_cast<double>(p.bytes()) * 0.002));
    pairBytes[{p.from_site(), p.to_site()}] = p.bytes();
    egressCost += p.egress_cost();
  }
  for (const auto& to : reduceSites) {
    uint64_t fetched = 0;
    for (const auto& from : mapSites) {
      if (from != to && pairBytes.count({from, to})) fetched += pairBytes[{from, to}];
    }
    INFO("reduce site " << to);
    if (mapSites.size() > 1 || !mapSites.count(to)) CHECK(fetched > 0);
  }
  CHECK(cost.container_cost() == Approx(containerCost));
  CHECK(cost.egress_cost() == Approx(egressCost));
  CHECK(cost.total() == Approx(containerCost + egressCost));
  // The same answer in words, and a line of `tellus status`.
  auto table = cluster.tellus({"cost", jobId}, sites[2]);
  CHECK(table.exitCode == 0);
  CHECK_THAT(table.out, Catch::Contains("container-seconds") && Catch::Contains("total "));
  for (const auto& site : mapSites) CHECK_THAT(table.out, Catch::Contains("  " + site + " "));
  auto line = cluster.tellus({"status", jobId}, sites[0]);
  CHECK(line.exitCode == 0);
  CHECK_THAT(line.out, Catch::Contains("cost so far: "));
  CHECK(cluster.crashedDaemons().empty());
}

// ---------------------------------------------------------------------------------------------

// placement: max-min (paper 002 over each stage's tasks, sched::maxMinMap/maxMinReduce) may
// move map tasks off their partition's site to balance waves: the count must stay exact.
TEST_CASE("a word count placed max-min equals an independent count", "[integration][cluster]") {
  auto& cluster = sharedCluster();
  const auto& sites = cluster.sites();
  REQUIRE(sites.size() >= 3);
  CliRunner files;

  // Uneven partitions (1, 4 and 7) so that some site has more map tasks than containers.
  const auto [expected, partitions] = putAtEachSite(
      cluster, "mm-corpus",
      {generateCorpus(3000, 500, true), generateCorpus(3001, 700, true), generateCorpus(3002, 900, true)}, {1, 4, 7});

  auto spec = files.writeFile("wordcount-maxmin.yaml", R"(name: wordcount-maxmin-itest
placement: max-min
stealing: false
stages:
  - name: map
    op: wordcount.map
    input: {dataset: mm-corpus}
  - name: reduce
    op: wordcount.reduce
    tasks: 5
    input: {stage: map}
)");
  const std::string jobId = runWordCount(cluster, spec, "wordcount-maxmin-itest", sites[0], expected);

  auto status = jobStatus(cluster, jobId, sites[0]);
  INFO(whyNot(status));
  REQUIRE(status.isOk());
  CHECK(status->status().state() == pb::JOB_SUCCEEDED);
  REQUIRE(status->stages_size() == 2);
  CHECK(status->stages(0).done() == partitions);
  CHECK(status->stages(1).done() == 5);

  // The third site holds 7 partitions for its 6 containers (2 workers x 3): a second wave there
  // costs a whole task time, moving the few KB of one partition almost nothing, so max-min runs
  // one of them elsewhere (in place would run all 7 there; without steals nothing else moves).
  auto placed = cluster.tellus({"--json", "status", jobId, "--tasks"}, sites[0]);
  REQUIRE(placed.exitCode == 0);
  pb::JobStatusResponse withTasks;
  REQUIRE(parseJson(placed.out, withTasks).isOk());
  REQUIRE(withTasks.stages_size() == 2);
  std::map<std::string, int> mapTasksAt;
  for (const auto& t : withTasks.stages(0).task_placements()) {
    ++mapTasksAt[t.worker_id().substr(0, t.worker_id().rfind("-w"))];
  }
  INFO("map tasks at " << sites[2] << ": " << mapTasksAt[sites[2]]);
  CHECK(mapTasksAt[sites[2]] <= 6);
  CHECK(cluster.crashedDaemons().empty());
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("a job submitted to a non-first site is answered for by every site's master", "[integration][cluster]") {
  auto& cluster = sharedCluster();
  const auto& sites = cluster.sites();
  REQUIRE(sites.size() >= 3);
  const std::string& submitSite = sites[2];  // neither the first site nor one the harness favours
  CliRunner files;

  // Input at the second and third sites only.
  std::vector<std::string> expected;
  for (size_t i = 1; i < 3; ++i) {
    std::string text = generateCorpus(2000 + static_cast<uint32_t>(i), 400, true);
    for (const auto& line : splitLines(text)) {
      if (line.find("ka") != std::string::npos) expected.push_back(line);
    }
    Status put = cluster.putDataset(sites[i], "grep-in", text, 2);
    INFO(put.message());
    REQUIRE(put.isOk());
  }
  std::sort(expected.begin(), expected.end());
  REQUIRE(!expected.empty());

  auto spec = files.writeFile("grep.yaml", R"(name: grep-sort-itest
stages:
  - name: grep
    op: grep
    input: {dataset: grep-in}
    params: {pattern: ka}
  - name: sort
    op: sort
    tasks: 2
    input: {stage: grep}
)");
  auto jobId = submitJob(cluster, spec, submitSite);
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());

  // Followed through the first site's master.
  pb::JobStatusResponse last;
  bool succeeded = waitForJobState(cluster, *jobId, pb::JOB_SUCCEEDED, sites[0], kJobDeadline, &last);
  INFO("last status: " << last.ShortDebugString() << cluster.crashedDaemons());
  REQUIRE(succeeded);
  CHECK(last.status().job_id() == *jobId);
  CHECK(last.status().submit_site() == submitSite);
  std::set<std::string> jobSites(last.status().sites().begin(), last.status().sites().end());
  CHECK(jobSites == std::set<std::string>{sites[1], sites[2]});

  // Listed by the second site's master.
  auto list = cluster.tellus({"--json", "list"}, sites[1]);
  REQUIRE(list.exitCode == 0);
  pb::ListJobsResponse jobs;
  REQUIRE(parseJson(list.out, jobs).isOk());
  auto listed = std::find_if(jobs.jobs().begin(), jobs.jobs().end(),
                             [&](const pb::JobStatus& j) { return j.job_id() == *jobId; });
  REQUIRE(listed != jobs.jobs().end());
  CHECK(listed->state() == pb::JOB_SUCCEEDED);
  CHECK(listed->submit_site() == submitSite);
  CHECK(listed->name() == "grep-sort-itest");

  // The result, read through the first and the second site's masters: the same bytes, the
  // matching lines, and each of the 2 sort tasks' outputs sorted (so at most one descent).
  auto resultFirst = cluster.tellus({"result", *jobId}, sites[0]);
  auto resultSecond = cluster.tellus({"result", *jobId}, sites[1]);
  INFO(resultFirst.err << resultSecond.err);
  REQUIRE(resultFirst.exitCode == 0);
  REQUIRE(resultSecond.exitCode == 0);
  CHECK(resultFirst.out == resultSecond.out);
  auto lines = splitLines(resultFirst.out);
  size_t descents = 0;
  for (size_t i = 1; i < lines.size(); ++i) descents += lines[i] < lines[i - 1] ? 1 : 0;
  CHECK(descents <= 1);
  std::sort(lines.begin(), lines.end());
  CHECK(lines.size() == expected.size());
  CHECK(lines == expected);
  CHECK(cluster.crashedDaemons().empty());
}

// ---------------------------------------------------------------------------------------------

// What the layout test saw while polling ZooKeeper.
struct LayoutObservations {
  bool sawRunning = false;
  bool sawAllJms = false;  // every involved site's JM registered, exactly one primary
  bool sawSucceeded = false;
  bool sawRunningAfterSucceeded = false;
  std::map<uint32_t, bool> sawStagePending;  // taskmap released, not all parts present yet
  std::map<std::string, pb::JmInfo> jms;     // as seen when all were registered
  std::map<uint32_t, pb::TaskMap> taskmaps;
  std::map<std::pair<uint32_t, uint32_t>, pb::PartitionLocation> parts;
  std::set<std::string> problems;  // anything malformed; must stay empty
};

// One poll of the job's znodes; returns true once the job has succeeded.
bool observeJob(ZkReader& zk, const std::string& jobId, const std::set<std::string>& jobSites,
                const std::vector<uint32_t>& stageTasks, const std::vector<uint32_t>& stageBuckets,
                LayoutObservations& seen) {
  auto& jobs = zk.jobs();
  auto read = zk.run(jobs.status(jobId));
  if (!read) {
    seen.problems.insert("status: " + read.message());
    return false;
  }
  const pb::JobStatus* status = &read->value;
  if (status->state() == pb::JOB_RUNNING) {
    seen.sawRunning = true;
    if (seen.sawSucceeded) seen.sawRunningAfterSucceeded = true;
  } else if (status->state() == pb::JOB_SUCCEEDED) {
    seen.sawSucceeded = true;
  } else {
    seen.problems.insert("unexpected job state " + pb::JobState_Name(status->state()) + ": " + status->error());
  }

  if (status->state() == pb::JOB_RUNNING) {
    auto jmSites = zk.run(jobs.jmSites(jobId));
    if (jmSites && std::set<std::string>(jmSites->begin(), jmSites->end()) == jobSites) {
      std::map<std::string, pb::JmInfo> infos;
      int primaries = 0;
      for (const auto& site : *jmSites) {
        auto info = zk.run(jobs.jm(jobId, site));
        if (!info) break;  // the JM went away between the two reads
        if (info->stat.ephemeralOwner == 0) seen.problems.insert("the JM registration of " + site + " is not ephemeral");
        primaries += info->value.role() == pb::JM_PRIMARY ? 1 : 0;
        infos[site] = info->value;
      }
      if (primaries > 1) seen.problems.insert(std::to_string(primaries) + " primary JMs at once");
      // Exactly one primary once every JM has registered (a fresh primary first registers,
      // then wins the election and re-registers with its role).
      if (infos.size() == jobSites.size() && primaries == 1 && !seen.sawAllJms) {
        seen.sawAllJms = true;
        seen.jms = infos;
      }
    }
  }

  bool allDone = true;
  for (uint32_t s = 0; s < stageTasks.size(); ++s) {
    auto tm = zk.run(jobs.taskMap(jobId, s));
    if (!tm) {
      // Not released yet, or (a problem) it does not decode.
      if (tm.error().code != ErrorCode::kNotFound) seen.problems.insert("taskmap " + std::to_string(s) + ": " + tm.message());
      allDone = false;
      continue;
    }
    const pb::TaskMap& map = tm->value;
    if (map.owner_site_size() != static_cast<int>(stageTasks[s])) {
      seen.problems.insert("stage " + std::to_string(s) + " taskmap has " + std::to_string(map.owner_site_size()) +
                           " tasks, expected " + std::to_string(stageTasks[s]));
    }
    for (const auto& owner : map.owner_site()) {
      if (!jobSites.count(owner)) seen.problems.insert("stage " + std::to_string(s) + " task owned by '" + owner + "'");
    }
    seen.taskmaps[s] = map;

    auto names = zk.run(jobs.outputTasks(jobId, s));
    if (!names) {
      seen.problems.insert("parts of stage " + std::to_string(s) + ": " + names.message());
      continue;
    }
    for (uint32_t t : *names) {
      const std::string part = "output of task " + std::to_string(s) + "-" + std::to_string(t);
      if (seen.parts.count({s, t})) continue;
      auto loc = zk.run(jobs.output(jobId, s, t));
      if (!loc) {
        seen.problems.insert(loc.message());
        continue;
      }
      if (t >= stageTasks[s]) seen.problems.insert(part + ": no such task");
      if (!jobSites.count(loc->site()) || !startsWith(loc->worker_id(), loc->site() + "-w") ||
          loc->worker_address().empty() || loc->bucket_bytes_size() != static_cast<int>(stageBuckets[s]) ||
          loc->attempt() < 1) {
        seen.problems.insert(part + " is incomplete: " + loc->ShortDebugString());
      }
      seen.parts[{s, t}] = *loc;
    }
    if (names->size() < stageTasks[s]) {
      allDone = false;
      if (status->state() == pb::JOB_RUNNING) seen.sawStagePending[s] = true;
    }
  }
  if (seen.sawSucceeded && !allDone) seen.problems.insert("job succeeded with tasks missing their output");
  return seen.sawSucceeded;
}

TEST_CASE("while a job runs, ZooKeeper holds its JMs, task maps and outputs", "[integration][cluster]") {
  using namespace jobstate;
  auto& cluster = sharedCluster();
  auto& zk = sharedZk();
  const auto& sites = cluster.sites();
  REQUIRE(sites.size() >= 3);
  const std::set<std::string> jobSites(sites.begin(), sites.begin() + 3);
  CliRunner files;

  // Every site live, published by its own master.
  for (const auto& site : jobSites) {
    auto info = zk.getProto<pb::SiteInfo>(siteLivePath(site));
    INFO(site << ": " << whyNot(info));
    REQUIRE(info.isOk());
    CHECK(info->site() == site);
    CHECK(info->master_address() == cluster.masterAddress(site));
    CHECK(info->workers() == 2);
    auto stat = zk.stat(siteLivePath(site));
    REQUIRE(stat.isOk());
    REQUIRE(stat->has_value());
    CHECK((*stat)->ephemeralOwner != 0);
  }

  // Two partitions at each site; tasks that sleep make the job slow enough to watch: about
  // 1 s per map task, then 2 s per reduce task.
  for (size_t i = 0; i < 3; ++i) {
    Status put = cluster.putDataset(sites[i], "layout-in", generateCorpus(300 + static_cast<uint32_t>(i), 40, true), 2);
    INFO(put.message());
    REQUIRE(put.isOk());
  }
  auto spec = files.writeFile("layout.yaml", R"(name: layout-itest
stages:
  - name: map
    op: exec
    input: {dataset: layout-in}
    params: {cmd: "sleep 1; cat"}
  - name: slow
    op: exec
    tasks: 3
    input: {stage: map}
    params: {cmd: "sleep 2; cat"}
)");
  const std::vector<uint32_t> stageTasks{6, 3};
  const std::vector<uint32_t> stageBuckets{3, 1};
  auto jobId = submitJob(cluster, spec, sites[1]);
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());

  // The whole job state exists as soon as the submission returns.
  auto& jobs = zk.jobs();
  auto submitted = zk.run(jobs.status(*jobId));
  INFO(whyNot(submitted));
  REQUIRE(submitted.isOk());
  auto epoch0 = zk.run(jobs.epoch(*jobId));
  REQUIRE(epoch0.isOk());
  auto spec0 = zk.run(jobs.spec(*jobId));
  REQUIRE(spec0.isOk());
  CHECK(spec0->name() == "layout-itest");
  CHECK(spec0->stages_size() == 2);
  auto inputs = zk.run(jobs.stageInputs(*jobId, 0));
  REQUIRE(inputs.isOk());
  CHECK(inputs->partitions_size() == 6);
  std::map<std::string, int> inputsBySite;
  for (const auto& p : inputs->partitions()) ++inputsBySite[p.site()];
  CHECK(inputsBySite == std::map<std::string, int>{{sites[0], 2}, {sites[1], 2}, {sites[2], 2}});

  LayoutObservations seen;
  bool finished = harness::eventually(
      [&] { return observeJob(zk, *jobId, jobSites, stageTasks, stageBuckets, seen); }, kJobDeadline, 20ms);
  std::string problems;
  for (const auto& p : seen.problems) problems += "\n  " + p;
  INFO("problems:" << problems << cluster.crashedDaemons());
  REQUIRE(finished);
  CHECK(seen.problems.empty());
  CHECK(seen.sawRunning);
  CHECK_FALSE(seen.sawRunningAfterSucceeded);
  CHECK(seen.sawStagePending[0]);  // outputs appeared as tasks finished, not all at once
  CHECK(seen.sawStagePending[1]);

  // The JMs: one per involved site, on a worker of that site, exactly one primary, whose
  // epoch is the one in the epoch node.
  REQUIRE(seen.sawAllJms);
  pb::JmInfo primary;
  for (const auto& [site, jm] : seen.jms) {
    CHECK(jm.site() == site);
    CHECK(startsWith(jm.worker_id(), site + "-w"));
    CHECK(jm.pid() > 0);
    auto colon = jm.address().rfind(':');
    REQUIRE(colon != std::string::npos);
    CHECK(jm.address().substr(0, colon) == "127.0.0.1");
    CHECK(std::stoi(jm.address().substr(colon + 1)) > 0);
    if (jm.role() == pb::JM_PRIMARY) primary = jm;
  }
  auto epoch = zk.run(jobs.epoch(*jobId));
  REQUIRE(epoch.isOk());
  CHECK(primary.epoch() >= 1);
  CHECK(epoch->value == primary.epoch());

  // Every task's output is recorded by a worker of the site that owns the task.
  for (uint32_t s = 0; s < stageTasks.size(); ++s) {
    REQUIRE(seen.taskmaps.count(s));
    const auto& map = seen.taskmaps[s];
    CHECK(map.epoch() >= 1);
    for (uint32_t t = 0; t < stageTasks[s]; ++t) {
      INFO("stage " << s << " task " << t);
      REQUIRE(seen.parts.count({s, t}));
      CHECK(seen.parts[{s, t}].site() == map.owner_site(static_cast<int>(t)));
    }
  }
  auto attempts = zk.run(jobs.attempts(*jobId));
  REQUIRE(attempts.isOk());
  CHECK(attempts->size() >= 9);

  // With the job over, every JM exits and its ephemeral node goes with it.
  bool jmsGone = harness::eventually(
      [&] {
        auto left = zk.run(zk.jobs().jmSites(*jobId));
        return left && left->empty();
      },
      20s, 50ms);
  CHECK(jmsGone);
  CHECK(cluster.crashedDaemons().empty());
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("tellus kill ends a running job and its JMs", "[integration][cluster]") {
  auto& cluster = sharedCluster();
  auto& zk = sharedZk();
  const auto& sites = cluster.sites();
  REQUIRE(sites.size() >= 3);
  CliRunner files;

  for (size_t i = 0; i < 3; ++i) {
    Status put = cluster.putDataset(sites[i], "kill-in", generateCorpus(400 + static_cast<uint32_t>(i), 20, true), 1);
    INFO(put.message());
    REQUIRE(put.isOk());
  }
  // Map tasks that run until their executor dies (and never leave an orphan behind: a
  // plain `sleep` would outlive a killed executor, as exec commands have their own process
  // group).
  auto spec = files.writeFile("kill.yaml", R"(name: kill-itest
stages:
  - name: map
    op: exec
    input: {dataset: kill-in}
    params: {cmd: "while kill -0 $PPID 2>/dev/null; do sleep 0.1; done; cat"}
  - name: reduce
    op: identity
    tasks: 2
    input: {stage: map}
)");
  auto jobId = submitJob(cluster, spec, sites[0]);
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());

  // Running for real: a JM at every site (one primary) and map tasks started.
  std::vector<pb::JmInfo> jms;
  bool underWay = harness::eventually(
      [&] {
        auto names = zk.run(zk.jobs().jmSites(*jobId));
        auto attempts = zk.run(zk.jobs().attemptCounts(*jobId));
        if (!names || names->size() != 3 || !attempts || attempts->empty()) return false;
        jms.clear();
        int primaries = 0;
        for (const auto& site : *names) {
          auto info = zk.run(zk.jobs().jm(*jobId, site));
          if (!info) return false;
          primaries += info->value.role() == pb::JM_PRIMARY ? 1 : 0;
          jms.push_back(info->value);
        }
        return primaries == 1;
      },
      30s, 20ms);
  INFO(cluster.crashedDaemons());
  REQUIRE(underWay);
  for (const auto& jm : jms) CHECK(processAlive(static_cast<pid_t>(jm.pid())));
  // The executors of its tasks (their task files lie under .../containers/<job id>/).
  const std::string executorMark = "/containers/" + *jobId + "/";
  bool executing = harness::eventually([&] { return !processesWithArgument(executorMark).empty(); }, 30s, 20ms);
  REQUIRE(executing);

  // Killed through another site's master than the one it was submitted to.
  auto killed = cluster.tellus({"kill", *jobId}, sites[2]);
  INFO("kill: exit " << killed.exitCode << " " << killed.err);
  REQUIRE(killed.exitCode == 0);
  CHECK_THAT(trimmed(killed.out), Catch::StartsWith("killed " + *jobId + ": "));

  auto status = jobStatus(cluster, *jobId, sites[1]);
  REQUIRE(status.isOk());
  CHECK(status->status().state() == pb::JOB_KILLED);
  CHECK(status->status().error().find("killed by a user") != std::string::npos);
  CHECK(status->status().finish_unix_ms() >= status->status().submit_unix_ms());

  // Every JM exits: its ephemeral node goes away and its process ends.
  bool jmsGone = harness::eventually(
      [&] {
        auto left = zk.run(zk.jobs().jmSites(*jobId));
        if (!left || !left->empty()) return false;
        return std::none_of(jms.begin(), jms.end(), [](const pb::JmInfo& jm) { return processAlive(static_cast<pid_t>(jm.pid())); });
      },
      20s, 50ms);
  CHECK(jmsGone);

  // And its tasks stop: a killed job's executors must not run on (here: forever) in
  // containers their master has already handed back to other jobs.
  bool executorsGone = harness::eventually([&] { return processesWithArgument(executorMark).empty(); }, 20s, 50ms);
  INFO("executors of " << *jobId << " still running: " << processesWithArgument(executorMark).size());
  CHECK(executorsGone);

  // Still killed afterwards (no JM overwrote the state on its way out), and final.
  auto after = zk.run(zk.jobs().status(*jobId));
  REQUIRE(after.isOk());
  CHECK(after->value.state() == pb::JOB_KILLED);
  auto again = cluster.tellus({"kill", *jobId}, sites[0]);
  CHECK(again.exitCode != 0);
  CHECK(again.err.find("already killed") != std::string::npos);
  auto result = cluster.tellus({"result", *jobId}, sites[0]);
  CHECK(result.exitCode != 0);
  CHECK(result.err.find("killed") != std::string::npos);
  CHECK(cluster.crashedDaemons().empty());
}

}  // namespace
}  // namespace tellus::itest
