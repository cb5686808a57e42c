// The job manager's decisions as scripted sequences of events and the actions they must cause.
#include <limits>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "jobcore/job_core.h"
#include "jobcore/part_listing.h"
#include "wordcount_spec.h"

using namespace tellus;
using namespace tellus::jobcore;

namespace {

// map (dataset: 4 partitions, 3 at a, 1 at b) -> reduce (2 tasks, shuffle).
pb::JobSpec wordcountSpec() { return testing::wordcountSpec(2); }

// The word count's input: a partition at each of `sites` (on its worker w1), read by the map.
std::vector<pb::StageInputs> wordcountInputsAt(const std::vector<std::string>& sites, bool pinned = false) {
  std::vector<pb::StageInputs> inputs(2);
  for (size_t p = 0; p < sites.size(); ++p) {
    auto* ref = inputs[0].add_partitions();
    ref->set_site(sites[p]);
    ref->set_worker_id(sites[p] + "-w1");
    ref->set_dataset_file("/data/part-" + std::to_string(p));
    ref->set_bytes(100);
    ref->set_residency_local(pinned);
  }
  return inputs;
}

std::vector<pb::StageInputs> wordcountInputs(bool pinned = false) { return wordcountInputsAt({"a", "a", "a", "b"}, pinned); }

pb::JobStatus running() {
  pb::JobStatus st;
  st.set_job_id("job-1");
  st.set_state(pb::JOB_RUNNING);
  // Moved-in strings: add_sites(const char*) inlined at -O3 trips GCC 12's -Wrestrict
  // false positive.
  st.add_sites(std::string("a"));
  st.add_sites(std::string("b"));
  return st;
}

pb::SiteInfo siteRecord(const std::string& site, uint32_t containers) {
  pb::SiteInfo info;
  info.set_site(site);
  info.set_containers_total(containers);
  info.set_containers_free(containers);
  return info;
}

pb::Container container(const std::string& worker, uint32_t slot, const std::string& site = "a") {
  pb::Container c;
  c.mutable_id()->set_worker_id(worker);
  c.mutable_id()->set_slot(slot);
  c.set_worker_address("127.0.0.1:9");
  c.set_site(site);
  return c;
}

// A map output of wordcountSpec (a bucket per reduce task); a reduce output has one bucket.
pb::PartitionLocation outputAt(const std::string& worker, const std::string& site = "a", uint32_t buckets = 2,
                               uint64_t bytesPerBucket = 10) {
  pb::PartitionLocation loc;
  loc.set_site(site);
  loc.set_worker_id(worker);
  loc.set_worker_address("127.0.0.1:9");
  for (uint32_t b = 0; b < buckets; ++b) loc.add_bucket_bytes(bytesPerBucket);
  loc.set_elapsed_s(1.0);
  return loc;
}

CoreConfig configAt(const std::string& site) {
  CoreConfig c;
  c.jobId = "job-1";
  c.site = site;
  return c;
}

// A loaded core with `config` that sees the job running with both sites' workers alive, but
// was not told any listing of outputs or running markers yet.
JobCore unlistedWith(const CoreConfig& config, const std::vector<pb::StageInputs>& inputs) {
  JobCore core(config);
  REQUIRE(core.onJobLoaded(wordcountSpec(), inputs));
  core.onStatus(running(), 0);
  core.onLiveWorkers("a", {"a-w1", "a-w2"});
  core.onLiveWorkers("b", {"b-w1"});
  core.onJms({"a", "b"});
  return core;
}
JobCore unlistedWith(const CoreConfig& config, bool pinned = false) {
  return unlistedWith(config, wordcountInputs(pinned));
}

// A full listing of stage s's outputs, told to the core as the changes it makes: what the core
// holds and the listing does not show is unlisted (a part no listing showed stays: our own),
// every part shown is recorded under its key.
void listParts(JobCore& core, uint32_t s, const std::map<uint32_t, pb::PartitionLocation>& parts,
               const std::map<uint32_t, std::string>& keys = {}) {
  std::vector<uint32_t> gone;
  for (const auto& [t, loc] : core.view().stages.at(s).parts) {
    if (!parts.count(t)) gone.push_back(t);
  }
  for (uint32_t t : gone) core.onPartUnlisted(s, t);
  for (const auto& [t, loc] : parts) {
    auto key = keys.find(t);
    core.onPartRecorded(s, t, loc, key == keys.end() ? std::string() : key->second);
  }
  core.onPartsListed(s);
}

// The first listings of a job that has no output and nothing running yet.
void listNothing(JobCore& core) {
  listParts(core, 0, {});
  listParts(core, 1, {});
  core.onRunningMarkers({});
}

// unlistedWith, with those listings.
JobCore loadedWith(const CoreConfig& config, bool pinned = false) {
  JobCore core = unlistedWith(config, pinned);
  listNothing(core);
  return core;
}

// At a, verifying output records (as tellus-jm does): the word count loaded and listed empty,
// `workersAtA` live at a and b-w1 at b, both sites' JMs up.
JobCore verifyingAt(const std::set<std::string>& workersAtA) {
  CoreConfig config = configAt("a");
  config.verifyOutputs = true;
  JobCore core(config);
  REQUIRE(core.onJobLoaded(wordcountSpec(), wordcountInputs()));
  core.onStatus(running(), 0);
  core.onLiveWorkers("a", workersAtA);
  core.onLiveWorkers("b", {"b-w1"});
  core.onJms({"a", "b"});
  listNothing(core);
  return core;
}

// The map stage's four finish keys as the workers make them, for listParts.
std::map<uint32_t, std::string> mapFinishKeys() {
  std::map<uint32_t, std::string> keys;
  for (uint32_t t = 0; t < 4; ++t) keys[t] = "0-" + std::to_string(t) + "-000000000" + std::to_string(t) + "-0000abcd";
  return keys;
}

// The same at `site` with the default timings, without listings / with empty ones.
JobCore unlistedAt(const std::string& site) { return unlistedWith(configAt(site)); }
JobCore loadedAt(const std::string& site, bool pinned = false) { return loadedWith(configAt(site), pinned); }

// Releases stage 0 as the primary at a and returns the released taskMap.
pb::TaskMap releaseMaps(JobCore& core, double now) {
  core.onBecamePrimary(1);
  auto first = core.step(now);
  REQUIRE(first.needSiteRecords);
  REQUIRE(first.releases.empty());
  core.onSiteRecords({siteRecord("a", 4), siteRecord("b", 4)});
  auto second = core.step(now);
  REQUIRE(second.releases.size() == 1);
  CHECK(second.releases[0].stage == 0);
  CHECK(second.releases[0].taskmap.epoch() == 1);
  core.onStageReleased(second.releases[0], true);
  return second.releases[0].taskmap;
}

// The primary at a, with stage 0 released and two containers of a-w1: the launches of one step.
Actions launchOnTwoContainers(JobCore& core, double now) {
  releaseMaps(core, 0);
  core.onGrants({container("a-w1", 0), container("a-w1", 1)});
  auto actions = core.step(now);
  REQUIRE(actions.launches.size() == 2);
  return actions;
}

// Stage 0's taskMap as released: tasks 0..2 at a, 3 at b.
pb::TaskMap mapStage() {
  pb::TaskMap m;
  for (const char* site : {"a", "a", "a", "b"}) m.add_owner_site(site);
  m.set_epoch(1);
  return m;
}

std::set<TaskId> launchedTasks(const Actions& actions) {
  std::set<TaskId> out;
  for (const auto& l : actions.launches) out.insert(l.task);
  return out;
}

}  // namespace

TEST_CASE("the primary reads the sites' records, then releases a stage where its data is", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  CHECK(core.step(0).releases.empty());  // a secondary releases nothing
  auto map = releaseMaps(core, 0);
  REQUIRE(map.owner_site_size() == 4);
  CHECK(map.owner_site(0) == "a");
  CHECK(map.owner_site(3) == "b");
  // Released once: the next step does not release it again.
  CHECK(core.step(0.1).releases.empty());
}

TEST_CASE("granted containers run this site's node-local tasks, with the epoch and an attempt number", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  auto actions = launchOnTwoContainers(core, 0.2);
  for (const auto& l : actions.launches) {
    CHECK(l.task.first == 0);
    CHECK(l.task.second < 3);  // a's tasks only
    CHECK(l.attempt == 1);
    CHECK(l.request.epoch() == 1);
    CHECK(l.request.inputs_size() == 1);
    CHECK(l.request.op() == "wordcount.map");
    CHECK(core.running(l.task));
  }
  CHECK(actions.launches[0].slotKey != actions.launches[1].slotKey);
  // Nothing is launched twice.
  CHECK(core.step(0.3).launches.empty());
}

TEST_CASE("a launch that leaves fewer of its stage waiting here than the containers held is of its last wave",
          "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  auto actions = launchOnTwoContainers(core, 0.2);  // a owns 3 tasks of stage 0; two launch
  std::vector<bool> tails;
  for (const auto& l : actions.launches) tails.push_back(l.request.stage_tail());
  CHECK(tails == std::vector<bool>{false, true});  // 2, then 1 left waiting, with 2 containers
  const auto output = outputAt("a-w1");
  core.onTaskEnded(actions.launches[0], AttemptEnd::kSucceeded, &output, "", 0.5);
  auto last = core.step(0.6);
  REQUIRE(last.launches.size() == 1);
  CHECK(last.launches[0].request.stage_tail());  // none left
}

TEST_CASE("a running marker's contents are needed only for a task owned here that we neither run nor have an output of",
          "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  auto actions = launchOnTwoContainers(core, 0.2);
  const auto& ran = actions.launches[0];
  const TaskId waiting{0, 2};  // a's third task: not launched (two containers)
  CHECK_FALSE(core.markerContentsNeeded(ran.task));  // ours, running: its marker is our executor's
  CHECK(core.markerContentsNeeded(waiting));         // someone else runs a task of ours: which container?
  CHECK_FALSE(core.markerContentsNeeded({0, 3}));    // b's task: the name is enough
  const auto output = outputAt("a-w1");
  core.onTaskEnded(ran, AttemptEnd::kSucceeded, &output, "", 0.5);
  CHECK_FALSE(core.markerContentsNeeded(ran.task));  // ended with an output: a leftover marker means nothing
  core.onTaskEnded(actions.launches[1], AttemptEnd::kTaskFailed, nullptr, "exit 1", 0.5);
  CHECK(core.markerContentsNeeded(actions.launches[1].task));  // failed: a marker there is another executor's
}

TEST_CASE("outputs complete stages; the primary releases the next stage and then ends the job", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  releaseMaps(core, 0);
  for (uint32_t t = 0; t < 3; ++t) core.onTaskMap(0, [] {
      pb::TaskMap m;
      for (const char* s : {"a", "a", "a", "b"}) m.add_owner_site(s);
      m.set_epoch(1);
      return m;
    }(), 0);
  std::map<uint32_t, pb::PartitionLocation> parts;
  for (uint32_t t = 0; t < 3; ++t) parts[t] = outputAt("a-w1");
  parts[3] = outputAt("b-w1", "b");
  listParts(core, 0, parts);
  auto actions = core.step(1);
  CHECK(actions.needSiteRecords);
  core.onSiteRecords({siteRecord("a", 4), siteRecord("b", 4)});
  actions = core.step(1);
  REQUIRE(actions.releases.size() == 1);
  CHECK(actions.releases[0].stage == 1);
  CHECK_FALSE(actions.succeed);
  core.onStageReleased(actions.releases[0], true);
  std::map<uint32_t, pb::PartitionLocation> reduceParts{{0, outputAt("a-w1")}, {1, outputAt("b-w1", "b")}};
  listParts(core, 1, reduceParts);
  actions = core.step(2);
  CHECK(actions.succeed);
  // Asked for once: the steps until the status says so do not write it again, unless the write
  // did not land.
  CHECK_FALSE(core.step(2.1).succeed);
  core.onSucceedWritten(false);
  CHECK(core.step(2.2).succeed);
  core.onSucceedWritten(true);
  CHECK_FALSE(core.step(2.3).succeed);
  // Once the status says so, every JM exits.
  auto done = running();
  done.set_state(pb::JOB_SUCCEEDED);
  core.onStatus(done, 1);
  CHECK(core.step(3).exit);
}

TEST_CASE("a stage's last outputs (at most one per site of the job to come) are listed at every change",
          "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  CHECK_FALSE(core.awaitingLastOutputs(0));  // not released yet
  releaseMaps(core, 0);
  // Four tasks over two sites: with four or three outputs to come the stage's end is not near.
  CHECK_FALSE(core.awaitingLastOutputs(0));
  std::map<uint32_t, pb::PartitionLocation> parts{{0, outputAt("a-w1")}};
  listParts(core, 0, parts);
  CHECK_FALSE(core.awaitingLastOutputs(0));
  parts[1] = outputAt("a-w2");
  listParts(core, 0, parts);
  CHECK(core.awaitingLastOutputs(0));
  // An output of our own known from its task's end counts as known.
  core.onPartRecorded(0, 2, outputAt("a-w1"));
  CHECK(core.awaitingLastOutputs(0));
  parts[2] = outputAt("a-w1");
  parts[3] = outputAt("b-w1", "b");
  listParts(core, 0, parts);
  CHECK_FALSE(core.awaitingLastOutputs(0));  // complete: nothing more to come
  // An output removed (lineage) is to come again.
  parts.erase(3);
  listParts(core, 0, parts);
  CHECK(core.awaitingLastOutputs(0));
  CHECK_FALSE(core.awaitingLastOutputs(1));  // not released
  CHECK_FALSE(core.awaitingLastOutputs(9));  // no such stage
}

TEST_CASE("worker loss waits lossSettleS: a worker back within it loses nothing, one gone past it loses its outputs",
          "[unit][jobcore]") {
  CoreConfig config = configAt("a");
  config.timings.lossSettleS = 2.0;
  JobCore core = loadedWith(config);
  releaseMaps(core, 0);
  listParts(core, 0, {{0, outputAt("a-w2")}});
  core.onLiveWorkers("a", {"a-w1"});  // a-w2's session expired: gone, or its site being cut
  auto waiting = core.step(2);
  CHECK(waiting.lostOutputs.empty());
  REQUIRE(waiting.wakeAt.has_value());
  CHECK(*waiting.wakeAt <= 4.0);  // decided again when the settle ends, without a new event
  CHECK(core.step(3.9).lostOutputs.empty());
  core.onLiveWorkers("a", {"a-w1", "a-w2"});  // back (a new session): nothing was lost
  CHECK(core.step(4.5).lostOutputs.empty());
  core.onLiveWorkers("a", {"a-w1"});  // gone again: the settle starts afresh
  CHECK(core.step(5).lostOutputs.empty());
  CHECK(core.step(6.9).lostOutputs.empty());
  auto lost = core.step(7.1);
  REQUIRE(lost.lostOutputs.size() == 1);
  CHECK(lost.lostOutputs[0].deadWorker == "a-w2");
}

TEST_CASE("worker loss: a needed output whose only copy was on a dead worker is removed, then re-run", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  releaseMaps(core, 0);
  listParts(core, 0, {{0, outputAt("a-w2")}});
  CHECK(core.step(1).lostOutputs.empty());
  core.onLiveWorkers("a", {"a-w1"});  // a-w2's VM is gone
  auto actions = core.step(2);
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{0, 0});
  CHECK(actions.lostOutputs[0].deadWorker == "a-w2");
  CHECK(actions.releases.empty());  // nothing is released on a state with known losses
  core.onLostOutputRemoved(actions.lostOutputs[0], true);
  CHECK(core.view().stages[0].parts.empty());
  listParts(core, 0, {});
  core.onGrants({container("a-w1", 0), container("a-w1", 1), container("a-w1", 2)});
  actions = core.step(3);
  bool relaunched = false;
  for (const auto& l : actions.launches) relaunched = relaunched || l.task == TaskId{0, 0};
  CHECK(relaunched);
}

TEST_CASE("a cut-off site: an output whose raw input has no live copy is kept, not recomputed, until the site is back",
          "[unit][jobcore]") {
  // Issue 12 item 3: a partition takes a site's every worker out of ZooKeeper; the task that
  // wrote an output there read a partition only that site holds, so it could not run again
  // anywhere before the site is back, and when the site is back it brings the output too.
  JobCore core = loadedAt("a");
  releaseMaps(core, 0);
  std::map<uint32_t, pb::PartitionLocation> parts;
  for (uint32_t t = 0; t < 3; ++t) parts[t] = outputAt("a-w1");
  parts[3] = outputAt("b-w1", "b");
  listParts(core, 0, parts);
  core.onLiveWorkers("b", {});  // b is cut off
  auto cut = core.step(1);
  CHECK(cut.lostOutputs.empty());
  // Nothing is released on an output no live worker can serve.
  CHECK_FALSE(cut.needSiteRecords);
  CHECK(cut.releases.empty());
  CHECK_FALSE(cut.succeed);
  // Healed: the same worker serves it; the next stage is released on it, nothing re-runs.
  core.onLiveWorkers("b", {"b-w1"});
  auto healed = core.step(2);
  CHECK(healed.lostOutputs.empty());
  CHECK(healed.needSiteRecords);
  // With a replica of the input on b-w2 and b-w1 lost for good: once b-w2 is live the task
  // can run again, so the output is a loss and is recomputed.
  JobCore other(configAt("a"));
  auto inputs = wordcountInputs();
  inputs[0].mutable_partitions(3)->add_replicas()->set_worker_id("b-w2");
  REQUIRE(other.onJobLoaded(wordcountSpec(), inputs));
  other.onStatus(running(), 0);
  other.onLiveWorkers("a", {"a-w1", "a-w2"});
  other.onLiveWorkers("b", {});
  other.onJms({"a", "b"});
  listNothing(other);
  releaseMaps(other, 0);
  listParts(other, 0, parts);
  CHECK(other.step(1).lostOutputs.empty());
  other.onLiveWorkers("b", {"b-w2"});
  auto lost = other.step(2);
  REQUIRE(lost.lostOutputs.size() == 1);
  CHECK(lost.lostOutputs[0].task == TaskId{0, 3});
}

namespace {
// A core with `config` whose partition 3 (at b-w1) has a replica on b-w2; every worker live.
JobCore loadedWithReplica(const CoreConfig& config) {
  JobCore core(config);
  auto inputs = wordcountInputs();
  inputs[0].mutable_partitions(3)->add_replicas()->set_worker_id("b-w2");
  REQUIRE(core.onJobLoaded(wordcountSpec(), inputs));
  core.onStatus(running(), 0);
  core.onLiveWorkers("a", {"a-w1", "a-w2"});
  core.onLiveWorkers("b", {"b-w1", "b-w2"});
  core.onJms({"a", "b"});
  listNothing(core);
  return core;
}
JobCore loadedWithReplicaAt(const std::string& site) { return loadedWithReplica(configAt(site)); }
CoreConfig settlingAt(const std::string& site) {
  CoreConfig config = configAt(site);
  config.timings.lossSettleS = 2.0;
  return config;
}
// Stage 0 released (tasks 0-2 at a, 3 at b) and, at b, task 3 launched on b-w1/0 at t = 1.
Actions launchOwnTask(JobCore& core) {
  pb::TaskMap map;
  for (const char* site : {"a", "a", "a", "b"}) map.add_owner_site(site);
  map.set_epoch(1);
  core.onTaskMap(0, map, 0);
  core.onGrants({container("b-w1", 0, "b")});
  auto launched = core.step(1);
  REQUIRE(launched.launches.size() == 1);
  REQUIRE(launched.launches[0].task == TaskId{0, 3});
  return launched;
}
}  // namespace

TEST_CASE("a cut-off site coming back worker by worker: a worker still missing keeps its outputs for the grace",
          "[unit][jobcore]") {
  // Healing a partition, b-w2 re-registers before b-w1: b-w1's output must not be dropped
  // (and its task re-run from the replica on b-w2) in between.
  std::map<uint32_t, pb::PartitionLocation> parts;
  for (uint32_t t = 0; t < 3; ++t) parts[t] = outputAt("a-w1");
  parts[3] = outputAt("b-w1", "b");
  for (bool comesBack : {true, false}) {
    INFO((comesBack ? "b-w1 comes back within the grace" : "b-w1 does not come back"));
    JobCore core = loadedWithReplicaAt("a");
    releaseMaps(core, 0);
    listParts(core, 0, parts);
    core.onLiveWorkers("b", {});  // cut off
    CHECK(core.step(1).lostOutputs.empty());
    core.onLiveWorkers("b", {"b-w2"});  // the first one back
    auto first = core.step(2);
    CHECK(first.lostOutputs.empty());
    CHECK_FALSE(first.needSiteRecords);
    REQUIRE(first.wakeAt);
    CHECK(*first.wakeAt <= 2 + CoreTimings().siteReturnGraceS);
    if (comesBack) {
      core.onLiveWorkers("b", {"b-w1", "b-w2"});
      auto healed = core.step(3);
      CHECK(healed.lostOutputs.empty());
      CHECK(healed.needSiteRecords);
      CHECK(core.step(2 + CoreTimings().siteReturnGraceS + 1).lostOutputs.empty());
    } else {
      CHECK(core.step(3).lostOutputs.empty());
      auto lost = core.step(2 + CoreTimings().siteReturnGraceS);
      REQUIRE(lost.lostOutputs.size() == 1);
      CHECK(lost.lostOutputs[0].task == TaskId{0, 3});
    }
  }
}

TEST_CASE("an output known only from our own task's end, on a worker that died since, is forgotten and run again",
          "[unit][jobcore]") {
  // The primary drops the record of an output whose worker died (lineage), possibly before
  // the owner ever listed it: no listing would take it away, and the owner would wait on it
  // for ever.
  JobCore core = loadedWithReplicaAt("b");
  pb::TaskMap map;
  for (const char* site : {"a", "a", "a", "b"}) map.add_owner_site(site);
  map.set_epoch(1);
  core.onTaskMap(0, map, 0);
  core.onGrants({container("b-w1", 0, "b"), container("b-w2", 0, "b")});
  auto launched = core.step(1);
  REQUIRE(launched.launches.size() == 1);
  REQUIRE(launched.launches[0].task == TaskId{0, 3});
  const auto output = outputAt(launched.launches[0].container.id().worker_id(), "b");
  core.onTaskEnded(launched.launches[0], AttemptEnd::kSucceeded, &output, "", 2);
  CHECK(core.view().stages[0].parts.count(3));
  CHECK(core.step(3).launches.empty());
  // Its worker dies before any listing showed the record.
  const std::string dead = output.worker_id();
  const std::string other = dead == "b-w1" ? "b-w2" : "b-w1";
  core.onLiveWorkers("b", {other});
  core.onGrants({container(other, 0, "b")});  // the master withdrew the dead worker's container
  auto again = core.step(4);
  CHECK_FALSE(core.view().stages[0].parts.count(3));
  REQUIRE(again.launches.size() == 1);
  CHECK(again.launches[0].task == TaskId{0, 3});
  CHECK(again.launches[0].container.id().worker_id() == other);
}

TEST_CASE("our own task's output whose worker went missing is kept while a listing may still show it: no re-run on "
          "a resumed worker",
          "[unit][jobcore]") {
  // bench-chaos worker-stop: a RunTask reached a stopped worker; resumed past its session's
  // expiry, it ran the task and answered before its liveness node was back. The owner took
  // the output as lost at once and ran the task again on that same worker. It must wait
  // lossSettleS for a listing to show the output; without one (the worker died before
  // recording it, or the primary dropped the record) the task runs again, back or not.
  enum class Then { kListed, kBackUnlisted, kStaysMissing };
  for (Then then : {Then::kListed, Then::kBackUnlisted, Then::kStaysMissing}) {
    INFO("case " << static_cast<int>(then));
    const CoreConfig config = settlingAt("b");
    JobCore core = loadedWithReplica(config);
    auto launched = launchOwnTask(core);
    core.onLiveWorkers("b", {"b-w2"});  // b-w1's session expired while it was stopped
    const auto output = outputAt("b-w1", "b");
    core.onTaskEnded(launched.launches[0], AttemptEnd::kSucceeded, &output, "", 5);
    auto resumed = core.step(5);
    CHECK(resumed.launches.empty());
    CHECK(core.view().stages[0].parts.count(3));
    REQUIRE(resumed.wakeAt);
    CHECK(*resumed.wakeAt <= 5 + config.timings.lossSettleS);
    if (then != Then::kStaysMissing) core.onLiveWorkers("b", {"b-w1", "b-w2"});  // its new session published it
    if (then == Then::kListed) listParts(core, 0, {{3, output}});  // and recorded the output
    CHECK(core.step(6.9).launches.empty());
    auto settled = core.step(7.1);
    if (then == Then::kListed) {
      CHECK(settled.launches.empty());
      CHECK(core.step(20).launches.empty());
      CHECK(core.view().stages[0].parts.count(3));
    } else {
      CHECK_FALSE(core.view().stages[0].parts.count(3));
      REQUIRE(settled.launches.size() == 1);
      CHECK(settled.launches[0].task == TaskId{0, 3});
    }
  }
}

TEST_CASE("a gone worker (onWorkerGone): its unrecorded output and its session's markers hold nothing, at once",
          "[unit][jobcore][gone]") {
  enum class Case { kUnrecordedOutput, kMarker, kUnreadMarker };
  for (Case c : {Case::kUnrecordedOutput, Case::kMarker, Case::kUnreadMarker}) {
    INFO("case " << static_cast<int>(c));
    JobCore core = loadedWithReplica(settlingAt("b"));
    auto launched = launchOwnTask(core);
    pb::RunningTask marker;  // its execution's, in b-w1's ZooKeeper session
    marker.mutable_container()->set_worker_id("b-w1");
    marker.set_site("b");
    if (c == Case::kUnrecordedOutput) {
      const auto output = outputAt("b-w1", "b");
      core.onTaskEnded(launched.launches[0], AttemptEnd::kSucceeded, &output, "", 2);
      core.onRunningMarkers({});
    } else {
      // Its RunTask's connection broke; the marker outlives the worker by a session timeout.
      core.onRunningMarkers({{{0, 3}, c == Case::kMarker ? marker : pb::RunningTask()}});
      core.onTaskEnded(launched.launches[0], AttemptEnd::kWorkerUnreachable, nullptr, "connection lost", 2);
    }
    core.onGrants({container("b-w1", 1, "b"), container("b-w2", 0, "b")});
    CHECK(core.step(2.1).launches.empty());  // done, or running as far as its marker says
    core.onWorkerGone("b-w1", 2.2);
    CHECK(core.workerGone("b-w1"));
    // Its session still lists it, and the master still grants its container: dead all the same.
    core.onLiveWorkers("b", {"b-w1", "b-w2"});
    core.onGrants({container("b-w1", 1, "b"), container("b-w2", 0, "b")});
    auto again = core.step(2.3);  // not lossSettleS later
    // Its execution's marker goes first (a worker refuses a start while it is there; an
    // unrecorded output's is there until its batch lands), once.
    REQUIRE(again.clearMarkers.size() == 1);
    CHECK(again.clearMarkers[0] == std::pair<TaskId, std::string>{{0, 3}, "b-w1"});
    CHECK_FALSE(core.view().stages[0].parts.count(3));
    REQUIRE(again.launches.size() == 1);
    CHECK(again.launches[0].task == TaskId{0, 3});
    CHECK(again.launches[0].container.id().worker_id() == "b-w2");
    CHECK(core.step(2.4).clearMarkers.empty());
    // Once its liveness node is gone, a worker of that id is a new process.
    core.onLiveWorkers("b", {"b-w2"});
    CHECK_FALSE(core.workerGone("b-w1"));
    core.onLiveWorkers("b", {"b-w1", "b-w2"});
    CHECK_FALSE(core.workerGone("b-w1"));
  }
  // A worker the core does not know as live is not made gone.
  JobCore core = loadedWithReplicaAt("b");
  core.onWorkerGone("b-w9", 1);
  CHECK_FALSE(core.workerGone("b-w9"));
}

TEST_CASE("a secondary decides no lineage, releases or JM replacements", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  core.onTaskMap(0, [] {
    pb::TaskMap m;
    for (const char* s : {"a", "a", "a", "b"}) m.add_owner_site(s);
    return m;
  }(), 0);
  listParts(core, 0, {{0, outputAt("a-dead")}});
  core.onJms({"a"});
  auto actions = core.step(100);
  CHECK(actions.lostOutputs.empty());
  CHECK(actions.startJms.empty());
  CHECK_FALSE(actions.needSiteRecords);
}

TEST_CASE("a stale epoch: a primary that lost the election stops acting as one", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  core.onBecamePrimary(3);
  auto asPrimary = core.step(0);
  CHECK(asPrimary.publish);  // the role is published
  core.onPublished(core.desire(), static_cast<uint32_t>(core.granted()));
  core.onLostPrimary();
  CHECK_FALSE(core.primary());
  auto actions = core.step(1);
  CHECK_FALSE(actions.needSiteRecords);
  CHECK(actions.releases.empty());
  CHECK(actions.publish);  // and so is its loss
}

TEST_CASE("changed grant counts are published at most every publishIntervalS, a changed role at once", "[unit][jobcore]") {
  CoreConfig config = configAt("a");
  config.timings.publishIntervalS = 2.0;
  JobCore core = loadedWith(config);
  CHECK_FALSE(core.step(10).publish);  // nothing changed
  core.onGrants({container("a-w1", 0)});
  REQUIRE(core.step(10.5).publish);  // the first change goes out at once
  core.onPublished(core.desire(), static_cast<uint32_t>(core.granted()));
  core.onGrants({container("a-w1", 0), container("a-w1", 1)});
  auto early = core.step(11);
  CHECK_FALSE(early.publish);
  REQUIRE(early.wakeAt);
  CHECK(*early.wakeAt <= 12.5);  // the driver wakes when it may publish
  core.onBecamePrimary(1);
  auto promoted = core.step(11.5);
  CHECK(promoted.publish);  // a role is not held back
  core.onPublished(core.desire(), static_cast<uint32_t>(core.granted()));
  core.onGrants({container("a-w1", 0)});
  CHECK_FALSE(core.step(13).publish);
  CHECK(core.step(13.5).publish);
}

TEST_CASE("sJM loss: the primary asks for a JM after the grace period, and not again before the interval", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  releaseMaps(core, 0);
  core.onJms({"a"});  // b's JM is gone
  CHECK(core.step(1).startJms.empty());  // missing since 1
  CHECK(core.step(2.5).startJms.empty());
  auto actions = core.step(3.1);
  CHECK(actions.startJms == std::vector<std::string>{"b"});
  CHECK(core.step(4).startJms.empty());
  CHECK(core.step(8.2).startJms == std::vector<std::string>{"b"});
  core.onJms({"a", "b"});
  CHECK(core.step(20).startJms.empty());
}

TEST_CASE("retry rules: a lost worker and a missing input are not counted; task failures are, up to the limit",
          "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  releaseMaps(core, 0);
  core.onGrants({container("a-w1", 0), container("a-w2", 0)});
  auto actions = core.step(1);
  REQUIRE(actions.launches.size() == 2);
  // The worker of the first container is unreachable: its idle containers are dropped.
  auto lost = actions.launches[0];
  core.onTaskEnded(lost, AttemptEnd::kWorkerUnreachable, nullptr, "unreachable", 1.5);
  CHECK(core.attempts(lost.task) == 0);
  CHECK(core.granted() == 1);
  // An input that is not there yet: retried after the backoff, uncounted.
  auto other = actions.launches[1];
  core.onTaskEnded(other, AttemptEnd::kInputNotReady, nullptr, "no input", 1.5);
  CHECK(core.attempts(other.task) == 0);
  for (const auto& l : core.step(1.6).launches) CHECK(l.task != other.task);
  core.onGrants({container("a-w2", 0), container("a-w2", 1), container("a-w2", 2)});
  bool retried = false;
  for (const auto& l : core.step(2.1).launches) retried = retried || l.task == other.task;
  CHECK(retried);

  // Task failures count; the fourth fails the job, once.
  JobCore failing = loadedAt("a");
  releaseMaps(failing, 0);
  failing.onGrants({container("a-w1", 0)});
  std::optional<std::string> failure;
  for (int round = 0; round < 20 && !failure; ++round) {
    auto step = failing.step(10.0 + round);
    if (step.fail) failure = step.fail;
    for (const auto& l : step.launches) failing.onTaskEnded(l, AttemptEnd::kTaskFailed, nullptr, "exit 1", 10.0 + round);
  }
  REQUIRE(failure);
  CHECK(failure->find("failed 4 times: exit 1") != std::string::npos);
  CHECK_FALSE(failing.step(30).fail);
}

TEST_CASE("classifying worker.RunTask errors", "[unit][jobcore]") {
  CHECK(classifyRunTaskError(ErrorCode::kUnavailable) == AttemptEnd::kWorkerUnreachable);
  CHECK(classifyRunTaskError(ErrorCode::kDeadlineExceeded) == AttemptEnd::kWorkerUnreachable);
  CHECK(classifyRunTaskError(ErrorCode::kNotFound) == AttemptEnd::kInputNotReady);
  CHECK(classifyRunTaskError(ErrorCode::kAlreadyExists) == AttemptEnd::kInputNotReady);
  CHECK(classifyRunTaskError(ErrorCode::kInternal) == AttemptEnd::kTaskFailed);
}

TEST_CASE("steal as victim: Parades on the thief's container picks, reserved until the CAS settles",
          "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  releaseMaps(core, 0);  // a owns tasks 0..2, no containers yet; the stage has no mean yet (p = 0)
  CHECK(core.offerSteal("mars", 2, 0).tasks.empty());  // not a site of this job
  CHECK(core.offerSteal("a", 2, 0).tasks.empty());     // not from itself
  auto offer = core.offerSteal("b", 2, 0);
  CHECK(offer.stage == 0);
  CHECK(offer.tasks == std::vector<uint32_t>{0, 1});  // longest waiting first, ties by index
  // Reserved: neither launched nor offered again while the CAS runs.
  core.onGrants({container("a-w1", 0), container("a-w1", 1), container("a-w1", 2)});
  auto actions = core.step(1);
  REQUIRE(actions.launches.size() == 1);
  CHECK(actions.launches[0].task == TaskId{0, 2});
  CHECK(core.offerSteal("b", 2, 1).tasks.empty());
  // The CAS moved one of them (the other was taken meanwhile).
  pb::TaskMap map;
  for (const char* s : {"a", "b", "a", "b"}) map.add_owner_site(s);
  auto moved = JobCore::moveTasks(map, offer.tasks, "a", "b");
  CHECK(moved == std::vector<uint32_t>{0});
  map.set_owner_site(1, "b");
  core.settleSteal(offer, moved, &map, 1);
  CHECK(core.view().stages[0].taskmap->owner_site(0) == "b");
  CHECK(core.step(2).launches.empty());  // the stolen tasks are the thief's now
}

namespace {

// At a, owning the four map tasks, with no container. Task 0 finished in 10 s: p = 10, τ = 0.5,
// so a task may go after 10 s of waiting (5 s for one whose input is at the thief's site).
// Tasks 1..3 wait from 100.
JobCore victimWaitingFrom100(const CoreConfig& config) {
  JobCore core = loadedWith(config);
  pb::TaskMap map;
  for (const char* s : {"a", "a", "a", "a"}) map.add_owner_site(s);
  core.onTaskMap(0, map, 0);
  pb::PartitionLocation done = outputAt("a-w1");
  done.set_elapsed_s(10);
  listParts(core, 0, {{0, done}});
  core.step(100);
  return core;
}

}  // namespace

TEST_CASE("steal as victim: a task goes only after waiting 2τ·p (τ·p with input at the thief)",
          "[unit][jobcore]") {
  JobCore core = victimWaitingFrom100(configAt("a"));
  CHECK(core.offerSteal("b", 3, 104).tasks.empty());
  auto early = core.offerSteal("b", 3, 106);  // task 3's partition is at b (see wordcountInputs)
  CHECK(early.tasks == std::vector<uint32_t>{3});
  core.settleSteal(early, {}, nullptr, -1);
  // Locality first: the task with input at the thief, then the longest waiting.
  CHECK(core.offerSteal("b", 3, 110).tasks == std::vector<uint32_t>{3, 1, 2});
}

TEST_CASE("steal as victim: Parades looks at the head of the queue only (launchWindow), as when launching",
          "[unit][jobcore]") {
  CoreConfig config = configAt("a");
  config.launchWindow = 2;
  JobCore core = victimWaitingFrom100(config);
  // No container here, so the window is the first two waiting tasks: task 3, whose input is at
  // the thief (it would go first, as above), is past it.
  CHECK(core.offerSteal("b", 3, 106).tasks.empty());
  CHECK(core.offerSteal("b", 3, 110).tasks == std::vector<uint32_t>{1, 2});
}

TEST_CASE("steal as victim: a task goes only when the thief would finish it first", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  pb::TaskMap map;
  for (const char* s : {"a", "a", "a", "a"}) map.add_owner_site(s);
  core.onTaskMap(0, map, 0);
  pb::PartitionLocation done = outputAt("a-w1");
  done.set_elapsed_s(10);  // p = 10 s
  listParts(core, 0, {{0, done}});
  core.onGrants({container("a-w1", 0)});
  auto first = core.step(100);  // one container: task 1 runs until about 110; 2 and 3 wait
  REQUIRE(first.launches.size() == 1);
  CHECK(first.launches[0].task == TaskId{0, 1});
  // At 111 both waited 2*tau*p. Task 3 reads at b (the thief's own site): it goes. Task 2's 100
  // bytes would take 100 s to reach b at 1 byte/s, while here it finishes by 121: it stays.
  // Without measured rates Parades alone decides.
  auto unmeasured = core.offerSteal("b", 2, 111);
  CHECK(unmeasured.tasks == std::vector<uint32_t>{3, 2});
  core.settleSteal(unmeasured, {}, nullptr, -1);
  auto slow = core.offerSteal("b", 2, 111, {{"a", 1.0}});
  CHECK(slow.tasks == std::vector<uint32_t>{3});
  pb::TaskMap moved = map;
  moved.set_owner_site(3, "b");
  core.settleSteal(slow, {3}, &moved, 1);
  // Only task 2 is left, refused for its transfer: ask again in about one task time.
  auto refused = core.offerSteal("b", 2, 111, {{"a", 1.0}});
  CHECK(refused.tasks.empty());
  REQUIRE(refused.retryAfterS);
  CHECK(*refused.retryAfterS == Approx(10));

  // A victim with no container at all gives it even over the slow link.
  JobCore idle = loadedAt("a");
  idle.onTaskMap(0, map, 0);
  listParts(idle, 0, {{0, done}});
  CHECK(idle.step(100).launches.empty());
  CHECK(idle.offerSteal("b", 3, 111, {{"a", 1.0}}).tasks == std::vector<uint32_t>{3, 1, 2});
}

TEST_CASE("steal as victim: the tasks of one offer share the link to the thief", "[unit][jobcore]") {
  // Seven map tasks at a, 100 bytes each; task 0 is done in 10 s (p = 10), task 1 runs on the
  // only container until 110, tasks 2-6 wait: here they would finish at 120, 130, ..., 160.
  JobCore core = unlistedWith(configAt("a"), wordcountInputsAt({"a", "a", "a", "a", "a", "a", "a"}));
  listNothing(core);
  pb::TaskMap map;
  for (int t = 0; t < 7; ++t) map.add_owner_site(std::string("a"));
  core.onTaskMap(0, map, 0);
  pb::PartitionLocation done = outputAt("a-w1");
  done.set_elapsed_s(10);
  listParts(core, 0, {{0, done}});
  core.onGrants({container("a-w1", 0)});
  REQUIRE(core.step(100).launches.size() == 1);
  // At 111 over 5 bytes/s a task alone reaches b in 20 s and is done at 141: only tasks 5 and
  // 6 would be later here. Task 6's input follows task 5's over the same link (161 > 160).
  const auto offer = core.offerSteal("b", 5, 111, {{"a", 5.0}});
  CHECK(offer.tasks == std::vector<uint32_t>{5});
}

TEST_CASE("steal as victim: a local container whose lease ends soon beats moving the input", "[unit][jobcore]") {
  pb::TaskMap map;
  for (const char* s : {"a", "a", "a", "a"}) map.add_owner_site(s);
  pb::PartitionLocation done = outputAt("a-w1");
  done.set_elapsed_s(10);  // p = 10 s
  // A victim with no container of its own, owed one (desire 1, nothing granted). Tasks 1 and 2
  // read 100 bytes at a: 100 s to reach b at 1 byte/s. Task 3 reads at b and always goes.
  auto victimWith = [&](std::vector<double> leaseEnds) {
    JobCore core = loadedAt("a");
    core.onTaskMap(0, map, 0);
    listParts(core, 0, {{0, done}});
    CHECK(core.step(100).launches.empty());
    core.onSiteLeases(std::move(leaseEnds));
    return core;
  };
  // Another job's container here frees at 105: task 1 starts at 111 (now) and ends by 121,
  // task 2 by 131, both long before the 221 s of the move: both stay.
  JobCore soon = victimWith({105, 5000});
  CHECK(soon.offerSteal("b", 3, 111, {{"a", 1.0}}).tasks == std::vector<uint32_t>{3});
  // Its lease ends only at 1000: waiting for it is worse than the move, so they go.
  JobCore late = victimWith({1000});
  CHECK(late.offerSteal("b", 3, 111, {{"a", 1.0}}).tasks == std::vector<uint32_t>{3, 1, 2});
}

// A JM at `site` with a 30 s default lease and δ = 0.5 s.
JobCore leasedAt(const std::string& site) {
  CoreConfig config = configAt(site);
  config.lease.defaultS = 30;
  config.lease.slackS = 0.5;
  return loadedWith(config);
}

TEST_CASE("leases: each launch is estimated by paper 004 eq. 1 and sent with the next request; accuracy is kept",
          "[unit][jobcore]") {
  JobCore core = leasedAt("a");
  auto actions = launchOnTwoContainers(core, 0.2);
  if (actions.request) core.onContainerRequestSent(*actions.request);
  // Nothing of stage 0 ever finished: the predefined lease, counted from each launch.
  auto withLeases = core.step(1.5);
  REQUIRE(withLeases.request);
  REQUIRE(withLeases.request->leases.size() == 2);
  for (const auto& [id, endsInS] : withLeases.request->leases) CHECK(endsInS == Approx(30 - 1.3));
  core.onContainerRequestSent(*withLeases.request);
  CHECK_FALSE(core.step(1.6).request);  // sent once until something changes

  // Task 0 ends at 2.2 after 2 s (1.5 s of it in the executor): the lease was off by 28 s.
  pb::PartitionLocation output = outputAt("a-w1");
  output.set_elapsed_s(1.5);
  core.onTaskEnded(actions.launches[0], AttemptEnd::kSucceeded, &output, "", 2.2);
  CHECK(core.leaseAccuracy().mean == 0.0);
  CHECK(core.leaseAccuracy().executions == 1);
  CHECK(core.leaseAccuracy().fromHistory == 0);
  // The next task on that worker is leased for its compute history: 1.5 s + δ.
  auto next = core.step(2.2);
  REQUIRE(next.launches.size() == 1);
  CHECK_FALSE(next.request);  // a second request within the refresh period waits for it
  REQUIRE(next.wakeAt);
  auto later = core.step(2.6);
  REQUIRE(later.request);
  std::map<std::string, double> leases;
  for (const auto& [id, endsInS] : later.request->leases) leases[slotKeyOf(id)] = endsInS;
  CHECK(leases.at(next.launches[0].slotKey) == Approx(2.0 - 0.4));
  // Task 1, leased for the default at 0.2, is restated from that history (2 s from its
  // launch: due by now), so that the site's other jobs see its container free up soon.
  CHECK(leases.at(actions.launches[1].slotKey) == Approx(0.0));
  // That one ends 1.8 s after its launch against its 2 s lease: 1 - 0.2 / 1.8.
  core.onTaskEnded(next.launches[0], AttemptEnd::kSucceeded, &output, "", 4.0);
  CHECK(core.leaseAccuracy().mean == Approx((1 - 0.2 / 1.8) / 2));
  CHECK(core.leaseAccuracy().executions == 2);
  CHECK(core.leaseAccuracy().fromHistory == 1);  // the second, from the first one's compute time
  CHECK(core.leaseAccuracy().fromHistoryMean == Approx(1 - 0.2 / 1.8));
}

TEST_CASE("leases: another site's record restates default leases, and a time from the network that is not finite "
          "counts as 0", "[unit][jobcore]") {
  JobCore core = leasedAt("a");
  auto actions = launchOnTwoContainers(core, 0.2);
  if (actions.request) core.onContainerRequestSent(*actions.request);
  // Task 3 finished at b, read nothing across sites, and claims a NaN time.
  pb::PartitionLocation hostile = outputAt("b-w1", "b");
  hostile.set_elapsed_s(std::numeric_limits<double>::quiet_NaN());
  core.onPartRecorded(0, 3, hostile, "");
  // A third container, on a worker with no history of its own: task 2 is leased from b's record.
  core.onGrants({container("a-w1", 0), container("a-w1", 1), container("a-w2", 0)});
  auto restated = core.step(1.5);
  REQUIRE(restated.launches.size() == 1);
  REQUIRE(restated.request);
  REQUIRE(restated.request->leases.size() == 3);
  // Tasks 0 and 1 restated to 0 + δ from their launch at 0.2: due by now.
  for (const auto& [id, endsInS] : restated.request->leases) {
    if (slotKeyOf(id) != restated.launches[0].slotKey) CHECK(endsInS == Approx(0.0));
  }
  // Task 2's lease was 0 + δ = 0.5 s, and it took 0.5 s: exactly right (a NaN would poison it).
  pb::PartitionLocation output = outputAt("a-w2");
  output.set_elapsed_s(0.5);
  core.onTaskEnded(restated.launches[0], AttemptEnd::kSucceeded, &output, "", 2.0);
  CHECK(core.leaseAccuracy().fromHistory == 1);
  CHECK(core.leaseAccuracy().fromHistoryMean == Approx(1.0));
}

TEST_CASE("leases taken back: the killed task runs again uncounted, on a lease twice the one that ran out",
          "[unit][jobcore]") {
  CoreConfig config = configAt("a");
  config.recordDecisions = true;
  JobCore core = loadedWith(config);
  releaseMaps(core, 0);
  core.onGrants({container("a-w1", 0)});
  auto first = core.step(1);
  REQUIRE(first.launches.size() == 1);
  const auto launch = first.launches[0];
  core.takeDecisions();
  // The master took the container back: the task's end (a killed executor) is no failure.
  core.onLeasesTakenBack({launch.container.id()});
  core.onTaskEnded(launch, AttemptEnd::kTaskFailed, nullptr, "executor killed", 40);
  CHECK(core.attempts(launch.task) == 0);
  auto decisions = core.takeDecisions();
  REQUIRE(decisions.size() == 1);
  CHECK(decisions[0].reason == kRerunLeaseTakenBack);
  // Its next launch is leased for at least 60 s (twice the default 30 s that ran out).
  core.onGrants({container("a-w1", 1), container("a-w1", 2), container("a-w2", 0)});
  auto again = core.step(41);
  std::string relaunchedOn;
  for (const auto& l : again.launches) {
    if (l.task == launch.task) relaunchedOn = l.slotKey;
  }
  REQUIRE_FALSE(relaunchedOn.empty());
  if (again.request) core.onContainerRequestSent(*again.request);
  auto stated = core.step(43);
  REQUIRE(stated.request);
  std::map<std::string, double> leases;
  for (const auto& [id, endsInS] : stated.request->leases) leases[slotKeyOf(id)] = endsInS;
  CHECK(leases.at(relaunchedOn) == Approx(60 - 2));
  for (const auto& [key, endsInS] : leases) {
    if (key != relaunchedOn) CHECK(endsInS == Approx(30 - 2));  // the others' first leases
  }
  // A container taken back that the core does not hold changes nothing.
  core.onLeasesTakenBack({container("b-w9", 3).id()});
}

TEST_CASE("min_locality: a dataset stage waits while too few of its tasks here are local, at most locality_wait",
          "[unit][jobcore]") {
  CoreConfig config = configAt("b");
  config.timings.localityWaitS = 10;
  auto spec = wordcountSpec();
  spec.set_min_locality(0.5);
  spec.set_atomic_containers(true);
  pb::TaskMap map;  // every task at b; only task 3's partition is there (1 of 4 < 0.5)
  for (const char* s : {"b", "b", "b", "b"}) map.add_owner_site(s);
  map.set_epoch(1);
  // b's JM with that stage and two idle containers.
  auto jmAtB = [&] {
    JobCore core(config);
    REQUIRE(core.onJobLoaded(spec, wordcountInputs()));
    core.onStatus(running(), 0);
    core.onLiveWorkers("a", {"a-w1", "a-w2"});
    core.onLiveWorkers("b", {"b-w1"});
    core.onJms({"a", "b"});
    listNothing(core);
    core.onTaskMap(0, map, 0);
    core.onGrants({container("b-w1", 0, "b"), container("b-w1", 1, "b")});
    return core;
  };
  JobCore core = jmAtB();
  auto held = core.step(100);
  CHECK(held.launches.empty());
  REQUIRE(held.wakeAt);
  CHECK(*held.wakeAt <= 110);
  REQUIRE(held.request);
  CHECK(held.request->allOrNone);  // the spec's atomic_containers
  // a's JM steals the tasks whose partitions are at a: what is left here is all local.
  auto offer = core.offerSteal("a", 3, 101);
  REQUIRE(offer.tasks == std::vector<uint32_t>{0, 1, 2});
  pb::TaskMap moved = map;
  JobCore::moveTasks(moved, offer.tasks, "b", "a");
  core.settleSteal(offer, offer.tasks, &moved, 1);
  auto local = core.step(101);
  REQUIRE(local.launches.size() == 1);
  CHECK(local.launches[0].task == TaskId{0, 3});

  // Never stolen: admitted anyway once it waited locality_wait.
  JobCore waiting = jmAtB();
  CHECK(waiting.step(100).launches.empty());
  CHECK(waiting.step(109.9).launches.empty());
  CHECK(waiting.step(110).launches.size() == 2);
}

TEST_CASE("min_locality: a thief sees how long each task waited, local ones put first or not", "[unit][jobcore]") {
  // Five map tasks at b; 0 and 1 read partitions at a, 2-4 at b. Under min_locality b's JM
  // lists its local tasks first when it offers work ([2, 3, 0, 1]): the waiting times must
  // still be those of the tasks, not of their neighbours in task order.
  CoreConfig config = configAt("b");
  auto spec = wordcountSpec();
  spec.set_min_locality(0.5);
  JobCore core(config);
  REQUIRE(core.onJobLoaded(spec, wordcountInputsAt({"a", "a", "b", "b", "b"})));
  core.onStatus(running(), 0);
  core.onLiveWorkers("a", {"a-w1"});
  core.onLiveWorkers("b", {"b-w1"});
  core.onJms({"a", "b"});
  listNothing(core);
  pb::TaskMap map;
  for (int p = 0; p < 5; ++p) map.add_owner_site(std::string("b"));
  map.set_epoch(1);
  core.onTaskMap(0, map, 0);
  // Task 4 is done in 10 s: p = 10, so a task may go to the site of its input after τ·p = 5 s.
  auto done = outputAt("b-w1", "b");
  done.set_elapsed_s(10);
  core.onPartRecorded(0, 4, done);
  CHECK(core.step(100).launches.empty());  // no container: tasks 0-3 wait from 100
  CHECK(core.offerSteal("a", 2, 104).tasks.empty());  // 4 s < τ·p
  CHECK(core.offerSteal("a", 2, 106).tasks == std::vector<uint32_t>{0, 1});
}

TEST_CASE("steal races: an offer whose CAS failed gives its tasks back", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  releaseMaps(core, 0);
  auto offer = core.offerSteal("b", 3, 0);
  REQUIRE(offer.tasks.size() == 3);
  core.settleSteal(offer, {}, nullptr, -1);
  core.onGrants({container("a-w1", 0), container("a-w1", 1), container("a-w1", 2)});
  CHECK(core.step(1).launches.size() == 3);
}

TEST_CASE("residency: pinned raw partitions are never offered to a thief", "[unit][jobcore]") {
  JobCore core = loadedAt("a", /*pinned=*/true);
  releaseMaps(core, 0);
  CHECK(core.offerSteal("b", 3, 0).tasks.empty());
}

TEST_CASE("steal as thief: idle containers with nothing to run ask the other JMs, one steal at a time", "[unit][jobcore]") {
  JobCore core = loadedAt("b");
  pb::TaskMap map;
  for (const char* s : {"a", "a", "a", "b"}) map.add_owner_site(s);
  core.onTaskMap(0, map, 0);
  listParts(core, 0, {{3, outputAt("b-w1", "b")}});  // b's own task is done
  core.onGrants({container("b-w1", 0, "b")});
  auto actions = core.step(1);
  REQUIRE(actions.steal);
  CHECK(actions.steal->maxTasks == 1);
  CHECK(actions.steal->victims == std::vector<std::string>{"a"});
  CHECK_FALSE(core.step(2).steal);  // one in flight
  core.onStealEnded(false);
  CHECK(core.step(2.1).steal);
  core.onStealEnded(true);
  CHECK_FALSE(core.step(2.2).steal);  // at most one per interval
}

TEST_CASE("grant revocation: a revoked container goes once its task is done", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  auto actions = launchOnTwoContainers(core, 1);
  core.onGrants({container("a-w1", 1)});  // slot 0 revoked while busy
  CHECK(core.granted() == 2);
  const auto& onZero = actions.launches[0].slotKey == "a-w1/0" ? actions.launches[0] : actions.launches[1];
  auto loc = outputAt("a-w1");
  core.onTaskEnded(onZero, AttemptEnd::kSucceeded, &loc, "", 2);
  core.onGrants({container("a-w1", 1)});
  CHECK(core.granted() == 1);
  CHECK(core.view().stages[0].parts.count(onZero.task.second) == 1);
}

TEST_CASE("container requests are sent when the desire changes, not on every step", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  releaseMaps(core, 0);
  auto first = core.step(1);
  REQUIRE(first.request);
  CHECK(first.request->desire == 1);  // Af starts at one container
  core.onContainerRequestSent(*first.request);
  core.onGrants({container("a-w1", 0)});
  auto launched = core.step(1.1);
  CHECK_FALSE(launched.request);
  // The container is busy and tasks wait: the next Af period doubles the desire.
  auto next = core.step(2.2);
  REQUIRE(next.request);
  CHECK(next.request->desire == 2);
}

TEST_CASE("container requests carry the tasks left here, repeated when they change, once per refresh", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  const pb::TaskMap map = releaseMaps(core, 0);
  uint32_t ours = 0;
  for (const auto& owner : map.owner_site()) ours += owner == "a" ? 1 : 0;
  REQUIRE(ours > 0);
  auto first = core.step(1);
  REQUIRE(first.request);
  CHECK(first.request->remainingTasks == ours);
  core.onContainerRequestSent(*first.request);
  core.onGrants({container("a-w1", 0)});
  auto launched = core.step(1.1);
  REQUIRE(launched.launches.size() == 1);
  CHECK_FALSE(launched.request);
  // The task finishes: one fewer left, reported at the next refresh (masterRefreshS = 1 s),
  // not at once.
  auto loc = outputAt("a-w1");
  core.onTaskEnded(launched.launches[0], AttemptEnd::kSucceeded, &loc, "", 1.2);
  listParts(core, 0, {{launched.launches[0].task.second, loc}});
  auto soon = core.step(1.3);
  CHECK_FALSE((soon.request && soon.request->remainingTasks == ours - 1));
  auto later = core.step(2.05);
  REQUIRE(later.request);
  CHECK(later.request->remainingTasks == ours - 1);
}

TEST_CASE("a job whose status is terminal makes every JM exit, and nothing else", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  auto killed = running();
  killed.set_state(pb::JOB_KILLED);
  core.onStatus(killed, 3);
  auto actions = core.step(1);
  CHECK(actions.exit);
  CHECK(actions.launches.empty());
  CHECK_FALSE(actions.request);
}

TEST_CASE("a spec without stages, or without inputs for a dataset stage, is refused", "[unit][jobcore]") {
  JobCore core(configAt("a"));
  CHECK_FALSE(core.onJobLoaded(pb::JobSpec(), {}));
  CHECK_FALSE(core.onJobLoaded(wordcountSpec(), {}));
  CHECK(core.step(1).empty());
}

TEST_CASE("a failure whose status write did not land is asked for again", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  core.failJob("boom");
  auto first = core.step(1);
  REQUIRE(first.fail);
  CHECK(*first.fail == "boom");
  CHECK_FALSE(core.step(2).fail);  // in flight
  core.onFailWritten(false);
  auto again = core.step(3);
  REQUIRE(again.fail);
  core.onFailWritten(true);
  CHECK_FALSE(core.step(4).fail);
}

TEST_CASE("ownership as the taskMap says, unknown counting as ours", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  CHECK(core.ownedHereOrUnknown({0, 3}));  // not released yet
  releaseMaps(core, 0);
  CHECK(core.ownedHereOrUnknown({0, 0}));
  CHECK_FALSE(core.ownedHereOrUnknown({0, 3}));  // b's
  CHECK(core.ownedHereOrUnknown({7, 0}));        // no such stage
}

// ---- corrupt or inconsistent job state: the job fails with a reason or heals, never hangs ----

namespace {

pb::TaskMap ownedBy(std::initializer_list<const char*> owners) {
  pb::TaskMap m;
  for (const char* s : owners) m.add_owner_site(s);
  m.set_epoch(1);
  return m;
}

}  // namespace

TEST_CASE("corrupt status: unreadable or inconsistent fails the job with the reason, once", "[unit][jobcore][corrupt]") {
  JobCore unreadable = loadedAt("b");
  unreadable.onStatusUnreadable("malformed tellus.pb.JobStatus in /jobs/job-1/status");
  auto actions = unreadable.step(1);
  REQUIRE(actions.fail);
  CHECK_THAT(*actions.fail, Catch::Contains("status is unreadable: malformed"));
  CHECK_FALSE(unreadable.step(2).fail);  // asked once; again only if the write did not land
  unreadable.onFailWritten(false);
  CHECK(unreadable.step(3).fail);

  // Decodes, but makes no sense: an unknown state, no sites, another job's id.
  for (int variant = 0; variant < 3; ++variant) {
    JobCore core = loadedAt("a");
    pb::JobStatus bad = running();
    if (variant == 0) bad.set_state(static_cast<pb::JobState>(77));
    if (variant == 1) bad.clear_sites();
    if (variant == 2) bad.set_job_id("job-2");
    core.onStatus(bad, 3);
    auto step = core.step(1);
    INFO("variant " << variant);
    REQUIRE(step.fail);
    CHECK_THAT(*step.fail, Catch::Contains("status is inconsistent"));
    CHECK(core.status().sites_size() == 2);  // the bad reading was not applied
  }

  // The fail write replaced the node: a terminal status ends every JM, whatever else it says.
  JobCore core = loadedAt("a");
  pb::JobStatus failed;
  failed.set_state(pb::JOB_FAILED);
  core.onStatus(failed, 4);
  auto end = core.step(5);
  CHECK(end.exit);
  CHECK_THAT(end.exitReason, Catch::Contains("is over (failed)"));
}

TEST_CASE("corrupt taskMap: a map that does not match its stage fails the job instead of hanging it",
          "[unit][jobcore][corrupt]") {
  // Unreadable.
  JobCore unreadable = loadedAt("a");
  unreadable.onTaskMapUnreadable(0, "malformed tellus.pb.TaskMap in /jobs/job-1/stages/0/taskmap");
  auto failed = unreadable.step(1);
  REQUIRE(failed.fail);
  CHECK_THAT(*failed.fail, Catch::Contains("stage 0: malformed"));

  // Decodes (garbage often does, e.g. an empty node), but: too few tasks, or an owner that is
  // not a site of the job. Not applied: no task of it runs on a bad map.
  for (const auto& bad : {pb::TaskMap(), ownedBy({"a", "a", "a"}), ownedBy({"a", "a", "mars", "b"})}) {
    JobCore core = loadedAt("a");
    core.onGrants({container("a-w1", 0)});
    core.onTaskMap(0, bad, 2);
    CHECK_FALSE(core.view().stages[0].taskmap.has_value());
    auto step = core.step(1);
    REQUIRE(step.fail);
    CHECK_THAT(*step.fail, Catch::Contains("stage map: its taskMap"));
    CHECK(step.launches.empty());
  }

  // Garbage at a stage's taskmap before its release (the primary's create finds a node): the
  // watch's reading decides, and the job fails rather than waiting for a release forever.
  JobCore primary = loadedAt("a");
  releaseMaps(primary, 0);
  primary.onTaskMap(1, pb::TaskMap(), 0);
  auto step = primary.step(2);
  REQUIRE(step.fail);
  CHECK_THAT(*step.fail, Catch::Contains("stage reduce: its taskMap has 0 tasks, the stage 2"));
}

TEST_CASE("deleted job: every JM exits, with the reason", "[unit][jobcore][corrupt]") {
  JobCore core = loadedAt("a");
  releaseMaps(core, 0);
  core.onJobDeleted();
  auto actions = core.step(1);
  CHECK(actions.exit);
  CHECK_THAT(actions.exitReason, Catch::Contains("job-1 was deleted"));
  CHECK(actions.releases.empty());
  CHECK_FALSE(actions.fail);
  // Also before the job was ever loaded (its nodes went first).
  JobCore early(configAt("b"));
  early.onJobDeleted();
  CHECK(early.step(0).exit);
}

TEST_CASE("a JM started at a site the job does not run at exits without acting, with the reason",
          "[unit][jobcore][corrupt]") {
  JobCore core = loadedAt("mars");  // the job runs at a and b
  core.onBecamePrimary(1);
  auto actions = core.step(1);
  CHECK(actions.exit);
  CHECK_THAT(actions.exitReason, Catch::Contains("site mars is not one of job job-1's sites"));
  CHECK(actions.releases.empty());
  CHECK(actions.launches.empty());
  CHECK_FALSE(actions.fail);
  // At one of its sites the same core acts.
  CHECK_FALSE(loadedAt("b").step(1).exit);
}

TEST_CASE("forged output records: the primary confirms each against its stage's finish records; an unconfirmed one "
          "is removed and re-run, and nothing is released or succeeds on it",
          "[unit][jobcore][corrupt]") {
  JobCore core = verifyingAt({"a-w1", "a-w2"});
  releaseMaps(core, 0);

  // The map stage's four records, as listed, with their finish keys.
  std::map<uint32_t, pb::PartitionLocation> parts;
  for (uint32_t t = 0; t < 4; ++t) parts[t] = t == 3 ? outputAt("b-w1", "b") : outputAt("a-w1");
  auto keys = mapFinishKeys();
  listParts(core, 0, parts, keys);
  // Complete but not confirmed: one read of the finish records, nothing released meanwhile.
  auto actions = core.step(1);
  CHECK(actions.readFinishRecords == std::vector<uint32_t>{0});
  CHECK(actions.releases.empty());
  CHECK_FALSE(actions.needSiteRecords);
  CHECK(core.step(1.1).readFinishRecords.empty());  // not asked twice while reading
  core.onFinishRecords(0, {keys[0], keys[1], keys[2], keys[3]});
  actions = core.step(1.2);
  CHECK(actions.lostOutputs.empty());
  CHECK(actions.needSiteRecords);  // confirmed: the reduce stage may be released
  core.onSiteRecords({siteRecord("a", 4), siteRecord("b", 4)});
  actions = core.step(1.3);
  REQUIRE(actions.releases.size() == 1);
  core.onStageReleased(actions.releases[0], true);

  // Records for both reduce tasks appear without a finished execution behind one of them.
  std::map<uint32_t, std::string> reduceKeys{{0, "1-0-0000000007-11111111"}, {1, "1-1-0000000042-22222222"}};
  listParts(core, 1, {{0, outputAt("a-w1", "a", 1)}, {1, outputAt("b-w1", "b", 1)}}, reduceKeys);
  actions = core.step(2);
  CHECK_FALSE(actions.succeed);
  REQUIRE(actions.readFinishRecords == std::vector<uint32_t>{1});
  core.onFinishRecords(1, {reduceKeys[0]});  // task 1's record names no finished execution
  actions = core.step(2.1);
  CHECK_FALSE(actions.succeed);
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{1, 1});
  CHECK_THAT(actions.lostOutputs[0].why, Catch::Contains("forged"));
  core.onLostOutputRemoved(actions.lostOutputs[0], true);
  listParts(core, 1, {{0, outputAt("a-w1", "a", 1)}}, {{0, reduceKeys[0]}});
  CHECK_FALSE(core.step(2.2).succeed);

  // Its owner runs it again; the new record is confirmed, and only then does the job succeed.
  const std::string rerun = "1-1-0000000050-33333333";
  listParts(core, 1, {{0, outputAt("a-w1", "a", 1)}, {1, outputAt("b-w1", "b", 1)}}, {{0, reduceKeys[0]}, {1, rerun}});
  actions = core.step(3);
  CHECK_FALSE(actions.succeed);
  REQUIRE(actions.readFinishRecords == std::vector<uint32_t>{1});
  core.onFinishRecords(1, {reduceKeys[0], rerun});
  CHECK(core.step(3.1).succeed);
}

TEST_CASE("forged output records: a failed read of the finish records is asked again, and confirms nothing",
          "[unit][jobcore][corrupt]") {
  JobCore core = verifyingAt({"a-w1"});
  releaseMaps(core, 0);
  std::map<uint32_t, pb::PartitionLocation> parts;
  std::map<uint32_t, std::string> keys;
  for (uint32_t t = 0; t < 4; ++t) {
    parts[t] = outputAt("a-w1");
    keys[t] = fmt::format("k{}", t);
  }
  listParts(core, 0, parts, keys);
  REQUIRE(core.step(1).readFinishRecords.size() == 1);
  core.onFinishRecordsUnread(0);
  auto again = core.step(1.5);
  CHECK(again.readFinishRecords == std::vector<uint32_t>{0});
  CHECK(again.lostOutputs.empty());
  CHECK_FALSE(again.needSiteRecords);
}

TEST_CASE("residency in meaning: a stage reading raw records copied from pinned data is never stolen",
          "[unit][jobcore]") {
  // Stage 0 copies (identity) or aggregates (wordcount.map) a's pinned partitions; stage 1
  // reads its output. Only in the copying job must stage 1 stay at a.
  auto offerFor = [](const std::string& firstOp) {
    auto spec = wordcountSpec();
    spec.mutable_stages(0)->set_op(firstOp);
    auto inputs = wordcountInputs();
    for (int p = 0; p < 3; ++p) inputs[0].mutable_partitions(p)->set_residency_local(true);  // a's, not b's
    JobCore core(configAt("a"));
    REQUIRE(core.onJobLoaded(spec, inputs));
    core.onStatus(running(), 0);
    core.onLiveWorkers("a", {"a-w1", "a-w2"});
    core.onLiveWorkers("b", {"b-w1"});
    core.onJms({"a", "b"});
    listNothing(core);
    pb::TaskMap maps;
    for (const char* s : {"a", "a", "a", "b"}) maps.add_owner_site(s);
    core.onTaskMap(0, maps, 0);
    listParts(core, 0, {{0, outputAt("a-w1")}, {1, outputAt("a-w1")}, {2, outputAt("a-w2")}, {3, outputAt("b-w1", "b")}});
    pb::TaskMap reduces;
    for (const char* s : {"a", "a"}) reduces.add_owner_site(s);
    core.onTaskMap(1, reduces, 0);
    return core.offerSteal("b", 2, 0);
  };
  CHECK(offerFor("identity").tasks.empty());
  const auto control = offerFor("wordcount.map");
  CHECK(control.stage == 1);
  CHECK(control.tasks.size() == 2);
}

TEST_CASE("an output its worker still holds in a batch: done here, its container free, nothing released on it until "
          "the batch is recorded",
          "[unit][jobcore][batch]") {
  JobCore core = verifyingAt({"a-w1", "a-w2"});
  auto actions = launchOnTwoContainers(core, 0);
  const LaunchTask first = actions.launches[0];
  const LaunchTask second = actions.launches[1];
  // Both end; their running markers stay until the worker writes the batch that records them.
  std::map<TaskId, pb::RunningTask> markers;
  for (const auto& launch : {first, second}) {
    pb::RunningTask marker;
    *marker.mutable_container() = launch.container.id();
    marker.set_site("a");
    markers[launch.task] = marker;
  }
  core.onRunningMarkers(markers);
  const pb::PartitionLocation here = outputAt("a-w1");
  core.onTaskEnded(first, AttemptEnd::kSucceeded, &here, "", 1);
  core.onTaskEnded(second, AttemptEnd::kSucceeded, &here, "", 1);
  actions = core.step(1.1);
  // The site's third task runs in a container the held tasks freed; neither runs again.
  REQUIRE(actions.launches.size() == 1);
  const LaunchTask third = actions.launches[0];
  CHECK(third.task != first.task);
  CHECK(third.task != second.task);
  CHECK(third.task.first == 0);
  CHECK(core.step(1.2).launches.empty());

  // The stage is complete here (b's task listed with its batch), but three records are not
  // in ZooKeeper yet: nothing is read, released or succeeded on them.
  core.onTaskEnded(third, AttemptEnd::kSucceeded, &here, "", 2);
  listParts(core, 0, {{3, outputAt("b-w1", "b")}}, {{3, "batch b-0000000001"}});
  actions = core.step(2.1);
  CHECK(actions.readFinishRecords.empty());
  CHECK_FALSE(actions.needSiteRecords);
  CHECK(actions.releases.empty());
  CHECK(actions.lostOutputs.empty());

  // The worker writes the batch (markers gone, records listed): confirmed, then released.
  core.onRunningMarkers({});
  std::map<uint32_t, pb::PartitionLocation> parts{{3, outputAt("b-w1", "b")}};
  std::map<uint32_t, std::string> keys{{3, "batch b-0000000001"}};
  for (const auto& launch : {first, second, third}) {
    parts[launch.task.second] = here;
    keys[launch.task.second] = "batch b-0000000002";
  }
  listParts(core, 0, parts, keys);
  actions = core.step(3);
  REQUIRE(actions.readFinishRecords == std::vector<uint32_t>{0});
  core.onFinishRecords(0, {"batch b-0000000001", "batch b-0000000002"});
  actions = core.step(3.1);
  CHECK(actions.lostOutputs.empty());
  CHECK(actions.needSiteRecords);
}

// ---- first listings (JobCore::listed) -----------------------------------------------------
// A JM (a replacement sJM above all) may step before its watches delivered a stage's outputs
// or the job's running markers: until it has been told both, a task that is done or running
// elsewhere looks waiting, and must not be launched.

TEST_CASE("first listings: nothing of a stage is launched before its outputs are listed; then a done task is not",
          "[unit][jobcore][listed]") {
  JobCore core = unlistedAt("a");
  core.onTaskMap(0, mapStage(), 0);
  core.onGrants({container("a-w1", 0), container("a-w1", 1)});
  core.onRunningMarkers({});
  CHECK_FALSE(core.listed(0));
  CHECK(core.step(1).launches.empty());
  CHECK(core.step(2).launches.empty());
  // Task 0 was done before this JM started (its predecessor ran it).
  listParts(core, 0, {{0, outputAt("a-w1")}});
  CHECK(core.listed(0));
  CHECK(launchedTasks(core.step(3)) == std::set<TaskId>{{0, 1}, {0, 2}});
}

TEST_CASE("first listings: nothing is launched before the running markers are listed; then a running task is not",
          "[unit][jobcore][listed]") {
  JobCore core = unlistedAt("a");
  core.onTaskMap(0, mapStage(), 0);
  core.onGrants({container("a-w1", 0), container("a-w1", 1)});
  listParts(core, 0, {});
  CHECK_FALSE(core.listed(0));
  CHECK(core.step(1).launches.empty());
  // Task 1 still runs, launched by this site's previous JM in a container not granted to us.
  pb::RunningTask marker;
  marker.mutable_container()->set_worker_id("a-w2");
  marker.mutable_container()->set_slot(0);
  marker.set_site("a");
  core.onRunningMarkers({{{0, 1}, marker}});
  CHECK(core.listed(0));
  CHECK(launchedTasks(core.step(2)) == std::set<TaskId>{{0, 0}, {0, 2}});
}

TEST_CASE("first listings: a task reported by onPartRecorded alone does not open its stage", "[unit][jobcore][listed]") {
  JobCore core = unlistedAt("a");
  core.onTaskMap(0, mapStage(), 0);
  core.onGrants({container("a-w1", 0), container("a-w1", 1)});
  core.onRunningMarkers({});
  core.onPartRecorded(0, 2, outputAt("a-w1"));
  CHECK(core.step(1).launches.empty());
  listParts(core, 0, {{2, outputAt("a-w1")}});
  CHECK(launchedTasks(core.step(2)) == std::set<TaskId>{{0, 0}, {0, 1}});
}

TEST_CASE("first listings: a victim offers no task of a stage it has not listed", "[unit][jobcore][listed]") {
  JobCore core = unlistedAt("a");
  core.onTaskMap(0, mapStage(), 0);
  core.onRunningMarkers({});
  CHECK(core.offerSteal("b", 2, 0).tasks.empty());  // listed, with p = 0 all would go at once
  listParts(core, 0, {{0, outputAt("a-w1")}});
  core.step(1);  // the tasks start waiting (no container here)
  auto offer = core.offerSteal("b", 2, 100);
  CHECK(offer.stage == 0);
  CHECK(offer.tasks == std::vector<uint32_t>{1, 2});  // not the done task 0
}

TEST_CASE("first listings: a thief asks for no work while a released stage of its own is not listed",
          "[unit][jobcore][listed]") {
  JobCore core = unlistedAt("b");
  core.onTaskMap(0, mapStage(), 0);
  pb::TaskMap reduces;
  reduces.add_owner_site(std::string("b"));
  reduces.add_owner_site(std::string("b"));
  core.onTaskMap(1, reduces, 0);
  core.onGrants({container("b-w1", 0, "b")});
  core.onRunningMarkers({});
  // Stage 0 listed: b's own task is done, a's three are stealable. Stage 1 is b's, unlisted.
  listParts(core, 0, {{3, outputAt("b-w1", "b")}});
  CHECK_FALSE(core.step(1).steal);
  listParts(core, 1, {});  // nothing of it runnable yet (its shuffle input is not complete)
  CHECK(core.step(2).steal);
}

TEST_CASE("first listings: the primary releases nothing on, and does not succeed on, a stage it has not listed",
          "[unit][jobcore][listed]") {
  JobCore core = unlistedAt("a");
  core.onBecamePrimary(1);
  core.onRunningMarkers({});
  core.onTaskMap(0, mapStage(), 0);
  core.onSiteRecords({siteRecord("a", 4), siteRecord("b", 4)});
  // Stage 0 looks done from records reported one by one, but was never listed: one of them
  // may have been removed since (lineage).
  std::map<uint32_t, pb::PartitionLocation> parts;
  for (uint32_t t = 0; t < 4; ++t) {
    parts[t] = outputAt(t == 3 ? "b-w1" : "a-w1", t == 3 ? "b" : "a");
    core.onPartRecorded(0, t, parts[t]);
  }
  auto early = core.step(1);
  CHECK(early.releases.empty());
  CHECK_FALSE(early.needSiteRecords);
  listParts(core, 0, parts);
  auto released = core.step(2);
  REQUIRE(released.releases.size() == 1);
  CHECK(released.releases[0].stage == 1);
  core.onStageReleased(released.releases[0], true);
  // Stage 1 done as far as its own tasks' ends say; the job succeeds only once it is listed.
  core.onPartRecorded(1, 0, outputAt("a-w1"));
  core.onPartRecorded(1, 1, outputAt("b-w1", "b"));
  CHECK_FALSE(core.step(3).succeed);
  listParts(core, 1, {{0, outputAt("a-w1")}, {1, outputAt("b-w1", "b")}});
  CHECK(core.step(4).succeed);
}

TEST_CASE("first listings: no lineage on outputs whose released reader stage is not listed", "[unit][jobcore][listed]") {
  JobCore core = unlistedAt("a");
  core.onBecamePrimary(1);
  core.onRunningMarkers({});
  core.onTaskMap(0, mapStage(), 0);
  pb::TaskMap reduces;
  reduces.add_owner_site(std::string("a"));
  reduces.add_owner_site(std::string("b"));
  core.onTaskMap(1, reduces, 0);
  std::map<uint32_t, pb::PartitionLocation> parts;
  for (uint32_t t = 0; t < 4; ++t) parts[t] = outputAt(t == 0 ? "a-w2" : "a-w1");
  listParts(core, 0, parts);
  core.onLiveWorkers("a", {"a-w1"});  // a-w2 is gone with task 0's output
  // Whether stage 1 still needs it is not known: it may be done already.
  CHECK(core.step(1).lostOutputs.empty());
  listParts(core, 1, {});
  auto lost = core.step(2);
  REQUIRE(lost.lostOutputs.size() == 1);
  CHECK(lost.lostOutputs[0].task == TaskId{0, 0});
}

// ---- takeover by heartbeats (issue 12) ---------------------------------------------------------

namespace {

constexpr double kMissS = 0.6;  // heartbeat_interval_ms 200 × heartbeat_misses 3

// A secondary next in line in the election (the primary leads it).
JobCore heartbeatCoreAt(const std::string& site) {
  CoreConfig c = configAt(site);
  c.timings.primaryMissS = kMissS;
  JobCore core = loadedWith(c);
  core.onElectionPosition(1);
  return core;
}

// The same for a job running at sites a, b and c.
JobCore heartbeatCoreOfThreeSitesAt(const std::string& site) {
  JobCore core = heartbeatCoreAt(site);
  pb::JobStatus status = running();
  status.add_sites(std::string("c"));
  core.onStatus(status, 1);
  core.onLiveWorkers("c", {"c-w1"});
  core.onJms({"a", "b", "c"});
  return core;
}

// The epoch node as ZooKeeper holds it: a bump lands only from the epoch it expects (the
// driver's conditional write, JobStore::bumpEpoch).
struct EpochNode {
  uint64_t value = 1;
  std::optional<uint64_t> bump(uint64_t expected) {
    if (value != expected) return std::nullopt;
    return ++value;
  }
};

}  // namespace

TEST_CASE("takeover: a secondary that heard the primary and then misses it for the window takes over from that epoch",
          "[unit][jobcore][takeover]") {
  JobCore core = heartbeatCoreAt("b");
  CHECK_FALSE(core.onEpoch(1, 0));
  core.onPrimaryHeartbeat("a", 1, 0.2);
  auto quiet = core.step(0.7);
  CHECK_FALSE(quiet.takeOver);
  REQUIRE(quiet.wakeAt);
  CHECK(*quiet.wakeAt == Approx(0.2 + kMissS));
  auto missed = core.step(0.2 + kMissS + 0.01);
  REQUIRE(missed.takeOver);
  CHECK(missed.takeOver->expectedEpoch == 1);
  CHECK(missed.takeOver->byHeartbeats);
  CHECK(missed.takeOver->primarySite == "a");
  // One takeover at a time.
  CHECK_FALSE(core.step(1.0).takeOver);
  core.onBecamePrimary(2);
  core.onTakeOverEnded(true, 1.0);
  CHECK(core.primary());
  CHECK(core.epoch() == 2);
  // Its own epoch read back from the watch does not fence it.
  CHECK_FALSE(core.onEpoch(2, 1.1));
  CHECK(core.primary());
  CHECK(core.step(1.2).needSiteRecords);  // and it acts as primary
}

TEST_CASE("takeover by heartbeats: the new primary asks for a JM at the silent primary's site at once, once",
          "[unit][jobcore][takeover]") {
  JobCore core = heartbeatCoreAt("b");
  CHECK_FALSE(core.onEpoch(1, 0));
  core.onPrimaryHeartbeat("a", 1, 0.2);
  auto missed = core.step(0.2 + kMissS + 0.01);
  REQUIRE(missed.takeOver);
  core.onBecamePrimary(2);
  core.onTakeOverEnded(true, 1.0);
  // a's JM is still registered (its node expires with its session), yet a JM is asked for now.
  std::vector<std::string> asked;
  for (double now : {1.0, 1.1, 1.2, 1.3}) {
    auto actions = core.step(now);
    asked.insert(asked.end(), actions.startJms.begin(), actions.startJms.end());
    if (actions.needSiteRecords) core.onSiteRecords({siteRecord("a", 4), siteRecord("b", 4)});
  }
  CHECK(asked == std::vector<std::string>{"a"});
  // A takeover by the election (the primary's session expired) asks as before: not at once.
  JobCore elected = heartbeatCoreAt("b");
  CHECK_FALSE(elected.onEpoch(1, 0));
  elected.onElectionPosition(0);
  auto leader = elected.step(0.2 + kMissS + 0.01);
  REQUIRE(leader.takeOver);
  CHECK_FALSE(leader.takeOver->byHeartbeats);
  elected.onBecamePrimary(2);
  elected.onTakeOverEnded(true, 1.0);
  for (double now : {1.0, 1.1}) {
    auto actions = elected.step(now);
    CHECK(actions.startJms.empty());
    if (actions.needSiteRecords) elected.onSiteRecords({siteRecord("a", 4), siteRecord("b", 4)});
  }
}

TEST_CASE("worker probes: a worker a launch could not reach is asked after that launch's end, one holding a "
          "predecessor's execution of our task once; a gone or dead one is not",
          "[unit][jobcore][gone]") {
  JobCore core = loadedAt("a");
  core.onLiveWorkers("a", {"a-w1", "a-w2", "a-w3"});
  auto actions = launchOnTwoContainers(core, 1);
  core.onTaskEnded(actions.launches[0], AttemptEnd::kWorkerUnreachable, nullptr, "connection lost", 2);
  auto asked = core.step(2);
  REQUIRE(asked.probeWorkers.size() == 1);
  CHECK(asked.probeWorkers[0].site == "a");
  CHECK(asked.probeWorkers[0].worker == "a-w1");
  CHECK(core.step(2.05).probeWorkers.empty());  // asked 0.05 s ago, for nothing new
  // Another launch there ends unreachable after that probe: asked again at once.
  core.onTaskEnded(actions.launches[1], AttemptEnd::kWorkerUnreachable, nullptr, "connection lost", 2.1);
  CHECK(core.step(2.1).probeWorkers.size() == 1);
  CHECK(core.step(2.15).probeWorkers.empty());
  // A predecessor's execution of a task of ours, on a-w2: its worker is asked once.
  pb::RunningTask marker;
  marker.mutable_container()->set_worker_id("a-w2");
  marker.set_site("a");
  core.onRunningMarkers({{{0, 2}, marker}});
  asked = core.step(2.2);
  REQUIRE(asked.probeWorkers.size() == 1);
  CHECK(asked.probeWorkers[0].worker == "a-w2");
  core.onRunningMarkers({{{0, 2}, marker}});
  CHECK(core.step(10).probeWorkers.empty());
  // An output of ours no listing shows probeRetryS after its task's end: its worker is asked,
  // at the address its record names.
  pb::PartitionLocation output = outputAt("a-w3");
  output.set_worker_address("127.0.0.1:7");
  LaunchTask launch = actions.launches[0];
  core.onTaskEnded(launch, AttemptEnd::kSucceeded, &output, "", 20);
  CHECK(core.step(20.5).probeWorkers.empty());
  asked = core.step(21.1);
  REQUIRE(asked.probeWorkers.size() == 1);
  CHECK(asked.probeWorkers[0].worker == "a-w3");
  CHECK(asked.probeWorkers[0].address == "127.0.0.1:7");
  listParts(core, 0, {{launch.task.second, output}});  // listed: nothing more to ask
  CHECK(core.step(30).probeWorkers.empty());
  // A worker that is not live, or found gone, is not asked.
  core.onWorkerGone("a-w2", 11);
  core.onLiveWorkers("a", {"a-w1", "a-w2", "a-w3"});
  marker.mutable_container()->set_worker_id("a-w4");
  core.onRunningMarkers({{{0, 2}, marker}});
  CHECK(core.step(12).probeWorkers.empty());
}

TEST_CASE("takeover: only the next in line takes over by heartbeats; one further back waits for its turn",
          "[unit][jobcore][takeover]") {
  JobCore core = heartbeatCoreAt("b");
  core.onElectionPosition(2);
  core.onEpoch(1, 0);
  core.onPrimaryHeartbeat("a", 1, 0.2);
  CHECK_FALSE(core.step(5).takeOver);
  core.onElectionPosition(std::nullopt);  // no node (a new session)
  CHECK_FALSE(core.step(5).takeOver);
  core.onElectionPosition(1);  // the JM ahead of it left
  auto next = core.step(5);
  REQUIRE(next.takeOver);
  CHECK(next.takeOver->expectedEpoch == 1);
}

TEST_CASE("takeover: heartbeats within the window keep the primary; nothing is taken over", "[unit][jobcore][takeover]") {
  JobCore core = heartbeatCoreAt("b");
  core.onEpoch(1, 0);
  for (int i = 1; i <= 50; ++i) {
    const double now = 0.2 * i;
    core.onPrimaryHeartbeat("a", 1, now);
    // A lost heartbeat or two is no takeover either.
    CHECK_FALSE(core.step(now + 0.45).takeOver);
  }
  CHECK_FALSE(core.primary());
}

TEST_CASE("takeover: a primary never heard is left to the election; its leader takes over once the primary is silent",
          "[unit][jobcore][takeover]") {
  JobCore core = heartbeatCoreAt("b");
  core.onEpoch(1, 0);
  // Heartbeats blocked (or this JM is new): no takeover on silence alone.
  CHECK_FALSE(core.step(10).takeOver);
  // Leading the election (the old primary's session expired): the silence counts.
  core.onElectionPosition(0);
  auto elected = core.step(10);
  REQUIRE(elected.takeOver);
  CHECK(elected.takeOver->expectedEpoch == 1);
  CHECK_FALSE(elected.takeOver->byHeartbeats);
  core.onTakeOverEnded(false, 10);  // ZooKeeper busy: asked again after takeOverRetryS
  CHECK_FALSE(core.step(10.1).takeOver);
  CHECK(core.step(10.25).takeOver);
}

TEST_CASE("takeover: the election's leader does not take over from a primary that is heard (a heartbeat takeover "
          "happened before the old primary's session expired)",
          "[unit][jobcore][takeover]") {
  JobCore core = heartbeatCoreAt("b");
  core.onEpoch(1, 0);
  core.onPrimaryHeartbeat("a", 1, 0.2);
  core.onEpoch(2, 0.9);  // c took over
  core.onElectionPosition(0);  // a's election node went with its session
  CHECK_FALSE(core.step(1.0).takeOver);
  for (int i = 0; i < 10; ++i) {
    const double now = 1.0 + 0.2 * i;  // the last at 2.8
    core.onPrimaryHeartbeat("c", 2, now);
    CHECK_FALSE(core.step(now + 0.1).takeOver);
  }
  // c dies: the leader takes over from epoch 2 once it is silent for the window.
  CHECK_FALSE(core.step(3.2).takeOver);
  auto silent = core.step(2.8 + kMissS + 0.01);
  REQUIRE(silent.takeOver);
  CHECK(silent.takeOver->expectedEpoch == 2);
}

TEST_CASE("takeover: the first primary takes over at once when elected, without waiting for heartbeats",
          "[unit][jobcore][takeover]") {
  JobCore core = heartbeatCoreAt("a");
  core.onEpoch(0, 0);
  core.onElectionPosition(0);
  auto first = core.step(0);
  REQUIRE(first.takeOver);
  CHECK(first.takeOver->expectedEpoch == 0);
}

TEST_CASE("takeover: heartbeats off (primaryMissS 0) take over only by the election, at once", "[unit][jobcore][takeover]") {
  JobCore core = loadedAt("b");
  core.onEpoch(1, 0);
  core.onPrimaryHeartbeat("a", 1, 0);
  CHECK_FALSE(core.step(100).takeOver);
  core.onElectionPosition(0);
  CHECK(core.step(100).takeOver);
}

TEST_CASE("takeover: a heartbeat of an older or an unconfirmed newer epoch does not count", "[unit][jobcore][takeover]") {
  JobCore core = heartbeatCoreAt("b");
  core.onEpoch(2, 0);
  core.onPrimaryHeartbeat("a", 1, 0.1);  // the fenced primary
  core.onPrimaryHeartbeat("c", 7, 0.1);  // not in ZooKeeper (yet)
  CHECK_FALSE(core.step(5).takeOver);    // nothing heard of epoch 2's primary: left to the election
  core.onPrimaryHeartbeat("c", 2, 5);
  CHECK_FALSE(core.step(5.5).takeOver);
  CHECK(core.step(5 + kMissS + 0.01).takeOver);
}

TEST_CASE("takeover: a primary that sees a newer epoch steps down and acts no more", "[unit][jobcore][takeover]") {
  JobCore core = heartbeatCoreAt("a");
  core.onEpoch(0, 0);
  core.onBecamePrimary(1);
  CHECK_FALSE(core.onEpoch(1, 0.1));
  auto acting = core.step(0.2);
  CHECK(acting.needSiteRecords);
  REQUIRE(acting.publish);
  core.onPublished(core.desire(), static_cast<uint32_t>(core.granted()));
  core.onSiteRecords({siteRecord("a", 4), siteRecord("b", 4)});
  // Paused (SIGSTOP) past the window: b took over meanwhile; the epoch watch tells on resume.
  CHECK(core.onEpoch(2, 5));
  CHECK_FALSE(core.primary());
  auto after = core.step(5);
  CHECK(after.releases.empty());
  CHECK_FALSE(after.needSiteRecords);
  CHECK_FALSE(after.succeed);
  CHECK_FALSE(after.takeOver);  // it never heard b: no takeover from it on silence
  CHECK(after.publish);         // its role changed
}

// Two deciders at once: both next in line by their (stale) reading of the election, or the
// leader and the next in line when the silent primary's session expires just then.
TEST_CASE("takeover: two secondaries miss the primary at once; the conditional bump lets exactly one win, the other "
          "stays secondary and keeps the winner",
          "[unit][jobcore][takeover]") {
  EpochNode zk;
  JobCore b = heartbeatCoreOfThreeSitesAt("b");
  JobCore c = heartbeatCoreOfThreeSitesAt("c");
  for (JobCore* core : {&b, &c}) {
    core->onEpoch(1, 0);
    core->onPrimaryHeartbeat("a", 1, 0.2);
  }
  auto bDecides = b.step(1.0);
  auto cDecides = c.step(1.0);
  REQUIRE(bDecides.takeOver);
  REQUIRE(cDecides.takeOver);
  // Both bump from epoch 1: the first write lands, the second finds epoch 2 and fails.
  auto bWon = zk.bump(bDecides.takeOver->expectedEpoch);
  auto cWon = zk.bump(cDecides.takeOver->expectedEpoch);
  REQUIRE(bWon);
  CHECK_FALSE(cWon);
  b.onBecamePrimary(*bWon);
  b.onTakeOverEnded(true, 1.0);
  c.onTakeOverEnded(false, 1.0);
  CHECK_FALSE(c.onEpoch(zk.value, 1.05));  // the watch shows b's epoch
  CHECK(b.primary());
  CHECK_FALSE(c.primary());
  // b heartbeats c: c never takes over from it, nor bumps from the stale epoch again.
  for (double now = 1.1; now < 4; now += 0.2) {
    c.onPrimaryHeartbeat("b", 2, now);
    auto step = c.step(now + 0.1);
    CHECK_FALSE(step.takeOver);
  }
  CHECK(zk.value == 2);
}

// ---- a lost site's movable tasks (issue 12 item 3) --------------------------------------------

namespace {

constexpr double kSiteLostS = 5.0;

// The primary at a with stage 0 done (every output on a's workers: b's task was stolen) and
// stage 1's two tasks owned by b, none running: b's tasks can run anywhere.
JobCore primaryWithReduceAtB(bool primary = true) {
  CoreConfig config = configAt("a");
  config.timings.siteLostS = kSiteLostS;
  JobCore core = loadedWith(config);
  if (primary) {
    releaseMaps(core, 0);
  } else {
    core.onTaskMap(0, mapStage(), 0);
  }
  std::map<uint32_t, pb::PartitionLocation> parts;
  for (uint32_t t = 0; t < 4; ++t) parts[t] = outputAt(t % 2 == 0 ? "a-w1" : "a-w2");
  listParts(core, 0, parts);
  pb::TaskMap reduce;
  reduce.add_owner_site(std::string("b"));
  reduce.add_owner_site(std::string("b"));
  reduce.set_epoch(1);
  core.onTaskMap(1, reduce, 0);
  listParts(core, 1, {});
  return core;
}

// The JMs of `sites` registered, this core primary, and stage 0 released and done (every
// output on a-w1).
void primaryWithMapsDoneAtA(JobCore& core, const std::set<std::string>& sites) {
  core.onJms(sites);
  core.onBecamePrimary(1);
  core.onRunningMarkers({});
  core.onTaskMap(0, mapStage(), 0);
  std::map<uint32_t, pb::PartitionLocation> parts;
  for (uint32_t t = 0; t < 4; ++t) parts[t] = outputAt("a-w1");
  listParts(core, 0, parts);
}

// b's JM and workers vanish (their sessions expired).
void cutOffB(JobCore& core) {
  core.onLiveWorkers("b", {});
  core.onJms({"a"});
}

// The taskMap as the driver's compare-and-set writes it.
pb::TaskMap applied(const JobCore& core, const ReassignTasks& r) {
  pb::TaskMap map = *core.view().stages[r.stage].taskmap;
  for (const auto& [to, tasks] : r.to) JobCore::moveTasks(map, tasks, r.from, to);
  return map;
}

}  // namespace

TEST_CASE("lost site: after the window the primary gives its waiting tasks to the live sites, not before",
          "[unit][jobcore][sitelost]") {
  JobCore core = primaryWithReduceAtB();
  cutOffB(core);
  auto gone = core.step(10);
  CHECK(gone.reassignments.empty());
  REQUIRE(gone.wakeAt);
  CHECK(*gone.wakeAt <= 10 + kSiteLostS);
  CHECK(core.step(10 + kSiteLostS - 0.1).reassignments.empty());
  auto lost = core.step(10 + kSiteLostS);
  REQUIRE(lost.reassignments.size() == 1);
  const auto& r = lost.reassignments[0];
  CHECK(r.stage == 1);
  CHECK(r.from == "b");
  REQUIRE(r.to.size() == 1);
  CHECK(r.to.at("a") == std::vector<uint32_t>{0, 1});
  // Not decided again while the write is in flight.
  CHECK(core.step(10 + kSiteLostS + 1).reassignments.empty());
  // Written: the tasks are ours, and they run here.
  const pb::TaskMap written = applied(core, r);
  core.onTasksReassigned(r, &written, 1);
  CHECK(core.view().stages[1].taskmap->owner_site(0) == "a");
  CHECK(core.view().stages[1].taskmap->owner_site(1) == "a");
  core.onGrants({container("a-w1", 0), container("a-w1", 1)});
  auto run = core.step(10 + kSiteLostS + 2);
  CHECK(run.reassignments.empty());
  CHECK(launchedTasks(run) == std::set<TaskId>{{1, 0}, {1, 1}});
}

TEST_CASE("lost site: tasks are spread evenly over the live sites", "[unit][jobcore][sitelost]") {
  // Three sites: c is cut off, a (the primary) and b share its four waiting tasks.
  CoreConfig config = configAt("a");
  config.timings.siteLostS = kSiteLostS;
  JobCore core(config);
  auto spec = wordcountSpec();
  spec.mutable_stages(1)->set_tasks(4);
  REQUIRE(core.onJobLoaded(spec, wordcountInputs()));
  auto status = running();
  status.add_sites(std::string("c"));
  core.onStatus(status, 0);
  core.onLiveWorkers("a", {"a-w1", "a-w2"});
  core.onLiveWorkers("b", {"b-w1"});
  core.onLiveWorkers("c", {"c-w1"});
  primaryWithMapsDoneAtA(core, {"a", "b", "c"});
  pb::TaskMap reduce;
  for (int t = 0; t < 4; ++t) reduce.add_owner_site(std::string("c"));
  core.onTaskMap(1, reduce, 0);
  listParts(core, 1, {});
  core.onLiveWorkers("c", {});
  core.onJms({"a", "b"});
  CHECK(core.step(1).reassignments.empty());
  auto lost = core.step(1 + kSiteLostS);
  REQUIRE(lost.reassignments.size() == 1);
  const auto& to = lost.reassignments[0].to;
  REQUIRE(to.size() == 2);
  CHECK(to.at("a").size() == 2);
  CHECK(to.at("b").size() == 2);
}

TEST_CASE("lost site: running and recorded tasks stay where they are", "[unit][jobcore][sitelost]") {
  JobCore core = primaryWithReduceAtB();
  SECTION("running: its marker is still listed") {
    pb::RunningTask marker;
    marker.set_site("b");
    *marker.mutable_container() = container("b-w1", 0, "b").id();
    core.onRunningMarkers({{TaskId{1, 0}, marker}});
  }
  SECTION("recorded") { listParts(core, 1, {{0, outputAt("a-w1")}}); }
  cutOffB(core);
  CHECK(core.step(1).reassignments.empty());
  auto lost = core.step(1 + kSiteLostS);
  REQUIRE(lost.reassignments.size() == 1);
  CHECK(lost.reassignments[0].to.at("a") == std::vector<uint32_t>{1});
}

TEST_CASE("lost site: tasks pinned by residency, or whose input only the lost site holds, wait for it",
          "[unit][jobcore][sitelost]") {
  CoreConfig config = configAt("a");
  config.timings.siteLostS = kSiteLostS;
  SECTION("raw input on the lost site's workers only: it could not run elsewhere") {
    JobCore core = loadedWith(config);
    releaseMaps(core, 0);  // task 3 reads b-w1's partition
    cutOffB(core);
    CHECK(core.step(1).reassignments.empty());
    CHECK(core.step(1 + kSiteLostS).reassignments.empty());
  }
  SECTION("a readable copy elsewhere: the task moves, unless its partition is residency-local") {
    for (const bool pinned : {false, true}) {
      auto inputs = wordcountInputs(pinned);
      inputs[0].mutable_partitions(3)->add_replicas()->set_worker_id("a-w2");
      JobCore core = unlistedWith(config, inputs);
      listNothing(core);
      releaseMaps(core, 0);
      cutOffB(core);
      CHECK(core.step(1).reassignments.empty());
      auto lost = core.step(1 + kSiteLostS);
      INFO("residency-local: " << pinned);
      CHECK(lost.reassignments.size() == (pinned ? 0u : 1u));
    }
  }
  SECTION("a stage pinned in meaning (it reads raw records copied from pinned data) stays") {
    // identity copies b's pinned records: stage 1 is pinned at b; wordcount.map aggregates them.
    for (const std::string op : {"identity", "wordcount.map"}) {
      JobCore core(config);
      auto spec = wordcountSpec();
      spec.mutable_stages(0)->set_op(op);
      auto inputs = wordcountInputs();
      inputs[0].mutable_partitions(3)->set_residency_local(true);
      REQUIRE(core.onJobLoaded(spec, inputs));
      core.onStatus(running(), 0);
      core.onLiveWorkers("a", {"a-w1", "a-w2"});
      core.onLiveWorkers("b", {"b-w1"});
      // Every input of stage 1 readable from a live worker: only the pinning keeps it at b.
      primaryWithMapsDoneAtA(core, {"a", "b"});
      pb::TaskMap reduce;
      reduce.add_owner_site(std::string("b"));
      reduce.add_owner_site(std::string("b"));
      core.onTaskMap(1, reduce, 0);
      listParts(core, 1, {});
      cutOffB(core);
      CHECK(core.step(1).reassignments.empty());
      INFO("stage 0's op: " << op);
      CHECK(core.step(1 + kSiteLostS).reassignments.size() == (op == "identity" ? 0u : 1u));
    }
  }
}

TEST_CASE("lost site: only the primary reassigns, and one fenced meanwhile stops", "[unit][jobcore][sitelost]") {
  SECTION("a secondary") {
    JobCore core = primaryWithReduceAtB(/*primary=*/false);
    cutOffB(core);
    CHECK(core.step(1).reassignments.empty());
    CHECK(core.step(1 + kSiteLostS).reassignments.empty());
  }
  SECTION("a primary that learns of a newer epoch") {
    JobCore core = primaryWithReduceAtB();
    cutOffB(core);
    CHECK(core.step(1).reassignments.empty());
    CHECK(core.onEpoch(2, 2));  // fenced: it steps down
    CHECK(core.step(1 + kSiteLostS).reassignments.empty());
  }
  SECTION("a write refused by the fence changes nothing") {
    JobCore core = primaryWithReduceAtB();
    cutOffB(core);
    CHECK(core.step(1).reassignments.empty());
    auto lost = core.step(1 + kSiteLostS);
    REQUIRE(lost.reassignments.size() == 1);
    core.onTasksReassigned(lost.reassignments[0], nullptr, -1);
    core.onLostPrimary();
    CHECK(core.view().stages[1].taskmap->owner_site(0) == "b");
    CHECK(core.view().stages[1].taskmap->owner_site(1) == "b");
    CHECK(core.step(2 + kSiteLostS).reassignments.empty());
    // Primary again later: the window starts afresh.
    core.onBecamePrimary(3);
    CHECK(core.step(3 + kSiteLostS).reassignments.empty());
    CHECK(core.step(3 + 2 * kSiteLostS).reassignments.size() == 1);
  }
}

TEST_CASE("lost site: a site back before the window keeps its tasks, and the window starts afresh",
          "[unit][jobcore][sitelost]") {
  JobCore core = primaryWithReduceAtB();
  cutOffB(core);
  CHECK(core.step(1).reassignments.empty());
  SECTION("its workers back") { core.onLiveWorkers("b", {"b-w1"}); }
  SECTION("its JM back") { core.onJms({"a", "b"}); }
  CHECK(core.step(3).reassignments.empty());
  CHECK(core.step(1 + kSiteLostS).reassignments.empty());
  cutOffB(core);
  CHECK(core.step(4).reassignments.empty());
  CHECK(core.step(4 + kSiteLostS - 0.1).reassignments.empty());
  CHECK(core.step(4 + kSiteLostS).reassignments.size() == 1);
}

// ---- the incremental listing of a stage's record nodes (PartListing, the JM's path) ----------

namespace {

std::map<uint32_t, ListedPart> recorded(std::initializer_list<std::pair<const uint32_t, pb::PartitionLocation>> parts,
                                        const std::string& key) {
  std::map<uint32_t, ListedPart> out;
  for (const auto& [t, loc] : parts) out[t] = ListedPart{loc, key};
  return out;
}

std::vector<std::string> names(std::initializer_list<const char*> list) { return {list.begin(), list.end()}; }

// The stage's parts by task: the worker each is on.
std::map<uint32_t, std::string> partWorkers(const JobCore& core, uint32_t s) {
  std::map<uint32_t, std::string> out;
  for (const auto& [t, loc] : core.view().stages.at(s).parts) out[t] = loc.worker_id();
  return out;
}

// A core at a with every stage listed empty through `listings` (the first listing opens each).
JobCore listedThrough(const CoreConfig& config, std::vector<PartListing>& listings) {
  JobCore core = unlistedWith(config);
  core.onRunningMarkers({});
  listings.resize(2);
  for (uint32_t s = 0; s < 2; ++s) {
    CHECK_FALSE(core.listed(s));
    CHECK(listings[s].relist({}).empty());
    listings[s].apply(core, s);
    CHECK(core.listed(s));
  }
  return core;
}

}  // namespace

TEST_CASE("listing: a new batch is read alone and records its tasks; the stage completes on them", "[unit][jobcore]") {
  std::vector<PartListing> listings;
  JobCore core = listedThrough(configAt("a"), listings);
  releaseMaps(core, 0);
  auto& map = listings[0];
  CHECK(map.relist({"b-0000000001"}) == names({"b-0000000001"}));
  map.add("b-0000000001", recorded({{0, outputAt("a-w1")}, {1, outputAt("a-w2")}}, "batch b-0000000001"));
  map.apply(core, 0);
  CHECK(partWorkers(core, 0) == std::map<uint32_t, std::string>{{0, "a-w1"}, {1, "a-w2"}});
  CHECK_FALSE(core.step(1).needSiteRecords);  // tasks 2 and 3 are not done

  // Only the new node is read; the held one stays as it was.
  CHECK(map.relist({"b-0000000001", "b-0000000002"}) == names({"b-0000000002"}));
  map.add("b-0000000002", recorded({{2, outputAt("a-w1")}, {3, outputAt("b-w1", "b")}}, "batch b-0000000002"));
  map.apply(core, 0);
  CHECK(partWorkers(core, 0) ==
        std::map<uint32_t, std::string>{{0, "a-w1"}, {1, "a-w2"}, {2, "a-w1"}, {3, "b-w1"}});
  CHECK(core.step(2).needSiteRecords);  // complete: the reduce stage is to be released

  // A listing that changes nothing tells the core nothing, and a record for a task the stage
  // does not have is ignored (it would make the stage look complete).
  CHECK(map.relist({"b-0000000001", "b-0000000002", "b-0000000003"}) == names({"b-0000000003"}));
  map.add("b-0000000003", recorded({{9, outputAt("a-w1")}}, "batch b-0000000003"));
  map.apply(core, 0);
  CHECK(core.view().stages[0].parts.size() == 4);
  CHECK(map.nodes() == 3);
}

TEST_CASE("listing: a batch lineage replaced forgets the tasks its replacement does not keep, but not our own "
          "task's output recorded since",
          "[unit][jobcore]") {
  std::vector<PartListing> listings;
  JobCore core = listedThrough(configAt("a"), listings);
  releaseMaps(core, 0);
  auto& map = listings[0];
  map.relist({"b-0000000001"});
  map.add("b-0000000001", recorded({{0, outputAt("a-w2")}, {1, outputAt("a-w1")}, {3, outputAt("b-w1", "b")}},
                                   "batch b-0000000001"));
  map.apply(core, 0);
  // a-w2 dies: the primary removes task 0's output, and runs it again here with task 2.
  core.onLiveWorkers("a", {"a-w1"});
  auto actions = core.step(1);
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{0, 0});
  core.onLostOutputRemoved(actions.lostOutputs[0], true);
  core.onGrants({container("a-w1", 0), container("a-w1", 1)});
  actions = core.step(2);
  REQUIRE(launchedTasks(actions) == std::set<TaskId>{{0, 0}, {0, 2}});
  const auto own = outputAt("a-w1");
  for (const auto& l : actions.launches) core.onTaskEnded(l, AttemptEnd::kSucceeded, &own, "", 2.5);

  // Only now does a listing show b-1 replaced, by b-2 keeping task 3 alone: task 1's output is
  // forgotten (no listing shows it), task 0's is our own since and stays, as does task 2's.
  CHECK(map.relist({"b-0000000002"}) == names({"b-0000000002"}));
  map.add("b-0000000002", recorded({{3, outputAt("b-w1", "b")}}, "batch b-0000000002"));
  map.apply(core, 0);
  CHECK(partWorkers(core, 0) == std::map<uint32_t, std::string>{{0, "a-w1"}, {2, "a-w1"}, {3, "b-w1"}});
  actions = core.step(3);
  CHECK(launchedTasks(actions) == std::set<TaskId>{{0, 1}});  // waiting again
  CHECK_FALSE(actions.needSiteRecords);

  // A batch that goes with nothing in its place takes its tasks away.
  map.relist({});
  map.apply(core, 0);
  CHECK(partWorkers(core, 0) == std::map<uint32_t, std::string>{{0, "a-w1"}, {2, "a-w1"}});
}

TEST_CASE("listing: a task recorded in a batch and in a per-task node is the batch's, whichever came first",
          "[unit][jobcore][corrupt]") {
  std::vector<PartListing> listings;
  JobCore core = listedThrough(configAt("a"), listings);
  auto& map = listings[0];
  // A per-task node (the layout before batches, or forged) names a-w2 for task 3.
  CHECK(map.relist({"3"}) == names({"3"}));
  map.add("3", recorded({{3, outputAt("a-w2")}}, "unconfirmed 3"));
  map.apply(core, 0);
  CHECK(partWorkers(core, 0) == std::map<uint32_t, std::string>{{3, "a-w2"}});
  // A batch records it too: its record wins, though "3" sorts before "b-...".
  CHECK(map.relist({"3", "b-0000000001"}) == names({"b-0000000001"}));
  map.add("b-0000000001", recorded({{3, outputAt("b-w1", "b")}}, "batch b-0000000001"));
  map.apply(core, 0);
  CHECK(partWorkers(core, 0) == std::map<uint32_t, std::string>{{3, "b-w1"}});
  // A later per-task node does not take it from the batch either.
  map.relist({"3", "b-0000000001", "4"});
  map.add("4", recorded({{3, outputAt("a-w1")}}, "unconfirmed 4"));
  map.apply(core, 0);
  CHECK(partWorkers(core, 0) == std::map<uint32_t, std::string>{{3, "b-w1"}});
  // The batch gone, the first per-task node by name holds it again; all gone, it is forgotten.
  map.relist({"3", "4"});
  map.apply(core, 0);
  CHECK(partWorkers(core, 0) == std::map<uint32_t, std::string>{{3, "a-w2"}});
  map.relist({});
  map.apply(core, 0);
  CHECK(core.view().stages[0].parts.empty());
}

TEST_CASE("listing with verifyOutputs: the primary checks each part's finish key as listed; a batch that takes a "
          "task from a forged per-task node is checked afresh",
          "[unit][jobcore][corrupt]") {
  CoreConfig config = configAt("a");
  config.verifyOutputs = true;
  std::vector<PartListing> listings;
  JobCore core = listedThrough(config, listings);
  releaseMaps(core, 0);
  auto& map = listings[0];
  map.relist({"3", "b-0000000001"});
  map.add("b-0000000001",
          recorded({{0, outputAt("a-w1")}, {1, outputAt("a-w1")}, {2, outputAt("a-w1")}}, "batch b-0000000001"));
  map.add("3", recorded({{3, outputAt("b-w1", "b")}}, "unconfirmed 3"));
  map.apply(core, 0);
  auto actions = core.step(1);
  REQUIRE(actions.readFinishRecords == std::vector<uint32_t>{0});
  CHECK_FALSE(actions.needSiteRecords);
  // The finish records name the batch, not the per-task node: task 3's record is not trusted.
  core.onFinishRecords(0, {"batch b-0000000001"});
  actions = core.step(2);
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{0, 3});
  CHECK_FALSE(actions.needSiteRecords);

  // Task 3's real execution is recorded in a batch: under its new key it is checked afresh.
  map.relist({"3", "b-0000000001", "b-0000000002"});
  map.add("b-0000000002", recorded({{3, outputAt("b-w1", "b")}}, "batch b-0000000002"));
  map.apply(core, 0);
  actions = core.step(3);
  CHECK(actions.lostOutputs.empty());
  REQUIRE(actions.readFinishRecords == std::vector<uint32_t>{0});
  CHECK_FALSE(actions.needSiteRecords);
  core.onFinishRecords(0, {"batch b-0000000001", "batch b-0000000002"});
  actions = core.step(4);
  CHECK(actions.lostOutputs.empty());
  CHECK(actions.needSiteRecords);  // confirmed: the reduce stage may be released
}

namespace {

pb::PartitionLocation outputWithCopy(const std::string& worker, const std::string& copy) {
  auto loc = outputAt(worker);
  auto* r = loc.add_replicas();
  r->set_worker_id(copy);
  r->set_worker_address("127.0.0.1:8");
  return loc;
}

// A reduce task's launch as the core made it, for telling the core how it ended.
LaunchTask reduceLaunch(uint32_t task) {
  LaunchTask launch;
  launch.slotKey = "a-w1/0";
  launch.container = container("a-w1", 0);
  launch.task = TaskId{1, task};
  launch.attempt = 1;
  return launch;
}

pb::PartitionKey keyOf(uint32_t stage, uint32_t task, const std::string& job = "job-1") {
  pb::PartitionKey key;
  key.set_job_id(job);
  key.set_stage(stage);
  key.set_task(task);
  return key;
}

// The primary at a, a-w1..3 live, stage 0 released, task 0's output on a-w2 with a copy on a-w3.
JobCore primaryWithCopiedOutput() {
  JobCore core = loadedAt("a");
  core.onLiveWorkers("a", {"a-w1", "a-w2", "a-w3"});
  releaseMaps(core, 0);
  listParts(core, 0, {{0, outputWithCopy("a-w2", "a-w3")}});
  return core;
}

}  // namespace

TEST_CASE("output copies: an output is kept while a copy's worker lives, removed once every copy's is dead",
          "[unit][jobcore][replication]") {
  JobCore core = loadedAt("a");
  core.onLiveWorkers("a", {"a-w1", "a-w2", "a-w3"});
  releaseMaps(core, 0);
  listParts(core, 0, {{0, outputWithCopy("a-w2", "a-w3")}, {1, outputAt("a-w2")}});
  CHECK(core.step(1).lostOutputs.empty());
  core.onLiveWorkers("a", {"a-w1", "a-w3"});  // a-w2's VM is gone: task 1's only copy with it
  auto actions = core.step(2);
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{0, 1});
  CHECK_THAT(actions.lostOutputs[0].why, Catch::Contains("only copy"));
  core.onLostOutputRemoved(actions.lostOutputs[0], true);
  CHECK(core.step(3).lostOutputs.empty());  // task 0 is served by its copy on a-w3
  CHECK(core.view().stages[0].parts.count(0) == 1);
  core.onLiveWorkers("a", {"a-w1"});  // and now a-w3 too
  actions = core.step(4);
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{0, 0});
  CHECK(actions.lostOutputs[0].deadWorker == "a-w2");
  CHECK_THAT(actions.lostOutputs[0].why, Catch::Contains("every copy"));
}

TEST_CASE("empty outputs: one whose every bucket is empty is never lost with its worker, and is read as empty",
          "[unit][jobcore][replication]") {
  JobCore core = loadedAt("a");
  core.onLiveWorkers("a", {"a-w1", "a-w2"});
  releaseMaps(core, 0);
  // Task 0 wrote nothing (no copy was made of it); task 1 wrote 10 bytes per bucket.
  listParts(core, 0, {{0, outputAt("a-w2", "a", 2, 0)}, {1, outputAt("a-w2")}, {2, outputAt("a-w1")}, {3, outputAt("a-w1")}});
  CHECK(core.step(1).lostOutputs.empty());
  // Its readers are told its buckets hold 0 bytes (a worker reads them without a fetch).
  auto inputs = jobstate::taskInputs(core.view(), 1, 1);
  REQUIRE(inputs);
  REQUIRE(inputs->size() == 4);
  CHECK(inputs->at(0).partition().task() == 0);
  CHECK(inputs->at(0).bytes() == 0);
  CHECK(inputs->at(1).bytes() == 10);
  core.onLiveWorkers("a", {"a-w1"});  // a-w2's VM is gone
  auto actions = core.step(2);
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{0, 1});
  core.onLostOutputRemoved(actions.lostOutputs[0], true);
  CHECK(core.step(3).lostOutputs.empty());
  CHECK(core.view().stages[0].parts.count(0) == 1);
}

TEST_CASE("a record of another bucket count than its stage writes is not trusted: removed and re-run",
          "[unit][jobcore][corrupt]") {
  JobCore core = verifyingAt({"a-w1"});
  releaseMaps(core, 0);
  // Task 2's record has one bucket where the map stage writes one per reduce task (2): a
  // reader would take the missing one as empty. Its finish key is genuine.
  std::map<uint32_t, pb::PartitionLocation> parts;
  for (uint32_t t = 0; t < 4; ++t) parts[t] = t == 3 ? outputAt("b-w1", "b") : outputAt("a-w1", "a", t == 2 ? 1 : 2, 0);
  auto keys = mapFinishKeys();
  listParts(core, 0, parts, keys);
  auto actions = core.step(1);
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{0, 2});
  CHECK_THAT(actions.lostOutputs[0].why, Catch::Contains("forged or inconsistent"));
  CHECK(actions.releases.empty());
  // Also when it comes with a genuine finish record: never confirmed, nothing released.
  JobCore other = verifyingAt({"a-w1"});
  releaseMaps(other, 0);
  parts[2] = outputAt("a-w1");
  listParts(other, 0, parts, keys);
  REQUIRE(other.step(1).readFinishRecords == std::vector<uint32_t>{0});
  parts[2] = outputAt("a-w1", "a", 3);
  listParts(other, 0, parts, keys);  // the same key, now with three buckets
  other.onFinishRecords(0, {keys[0], keys[1], keys[2], keys[3]});
  actions = other.step(1.2);
  CHECK_FALSE(actions.needSiteRecords);
  CHECK(actions.releases.empty());
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{0, 2});
}

TEST_CASE("output copies: tasks ask for the spec's copies and read every copy of their inputs",
          "[unit][jobcore][replication]") {
  JobCore core = loadedAt("a");
  auto actions = launchOnTwoContainers(core, 1);
  for (const auto& l : actions.launches) CHECK(l.request.output_replicas() == 1);  // the default
  // A reduce task's inputs name the map outputs' copies, in order after their own worker.
  jobstate::JobView view = core.view();
  view.stages[0].taskmap = mapStage();
  for (uint32_t t = 0; t < 4; ++t) view.stages[0].parts[t] = t == 2 ? outputWithCopy("a-w2", "a-w1") : outputAt("a-w2");
  auto inputs = jobstate::taskInputs(view, 1, 0);
  REQUIRE(inputs.isOk());
  REQUIRE(inputs->size() == 4);
  CHECK((*inputs)[0].replicas_size() == 0);
  REQUIRE((*inputs)[2].replicas_size() == 1);
  CHECK((*inputs)[2].worker_id() == "a-w2");
  CHECK((*inputs)[2].replicas(0).worker_id() == "a-w1");
}

TEST_CASE("output copies: an input a reader found on no copy is re-run once its own worker is dead, not before",
          "[unit][jobcore][replication]") {
  JobCore core = primaryWithCopiedOutput();
  // A claim while the output's own worker lives removes nothing: its holders are asked (below).
  core.onInputLost(reduceLaunch(0), keyOf(0, 0), "no copy", 1);
  CHECK(core.attempts({1, 0}) == 0);  // not counted, as any missing input
  CHECK(core.step(1).lostOutputs.empty());
  // Its worker dies with the copy never made: kept (a copy lives) until a reader says so.
  core.onLiveWorkers("a", {"a-w1", "a-w3"});
  auto kept = core.step(2);
  for (const auto& l : kept.lostOutputs) UNSCOPED_INFO(l.task.first << "/" << l.task.second << ": " << l.why);
  CHECK(kept.lostOutputs.empty());
  // Claims the core does not act on: another job's partition, a stage the task does not read,
  // an output the stage does not have.
  core.onInputLost(reduceLaunch(0), keyOf(0, 0, "job-2"), "no copy", 3);
  core.onInputLost(reduceLaunch(0), keyOf(1, 0), "no copy", 3);
  core.onInputLost(reduceLaunch(0), keyOf(0, 3), "no copy", 3);
  CHECK(core.step(3).lostOutputs.empty());
  // The reader found it on no copy: its task runs again.
  core.onInputLost(reduceLaunch(1), keyOf(0, 0), "no copy", 4);
  auto actions = core.step(4);
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{0, 0});
  CHECK_THAT(actions.lostOutputs[0].why, Catch::Contains("found no other copy"));
  core.onLostOutputRemoved(actions.lostOutputs[0], true);
  CHECK(core.view().stages[0].parts.empty());
  CHECK(core.step(5).lostOutputs.empty());
}

TEST_CASE("output copies: a claim about an output whose worker lives asks its holders; dropped only when they say "
          "they hold it no longer",
          "[unit][jobcore][replication]") {
  JobCore core = loadedAt("a");
  core.onLiveWorkers("a", {"a-w1", "a-w2", "a-w3"});
  releaseMaps(core, 0);
  listParts(core, 0, {{0, outputWithCopy("a-w2", "a-w3")}, {1, outputAt("a-w2", "a", 2, 0)}});
  auto missed = keyOf(0, 0);
  missed.set_bucket(1);
  core.onInputLost(reduceLaunch(1), missed, "no copy", 1);
  auto actions = core.step(1);
  CHECK(actions.lostOutputs.empty());
  REQUIRE(actions.probes.size() == 1);
  const ProbeOutput probe = actions.probes[0];
  CHECK(probe.task == TaskId{0, 0});
  CHECK(probe.bucket == 1);  // the bucket the reader missed
  CHECK(probe.location.worker_id() == "a-w2");
  CHECK(core.step(1.5).probes.empty());  // one probe at a time
  // A holder has it: nothing is dropped, and nothing more is asked until a reader claims again.
  core.onOutputProbed(probe, {HolderAnswer::kNotHeld, HolderAnswer::kServed}, 2);
  actions = core.step(2);
  CHECK(actions.lostOutputs.empty());
  CHECK(actions.probes.empty());
  CHECK(core.step(10).probes.empty());

  // No clear answer (the copy's worker lives but did not answer): asked again after probeRetryS.
  core.onInputLost(reduceLaunch(1), missed, "no copy", 11);
  REQUIRE(core.step(11).probes.size() == 1);
  core.onOutputProbed(probe, {HolderAnswer::kNotHeld, HolderAnswer::kUnreachable}, 11.1);
  actions = core.step(11.2);
  CHECK(actions.probes.empty());
  CHECK(actions.lostOutputs.empty());
  REQUIRE(actions.wakeAt);
  CHECK(*actions.wakeAt <= 11.1 + configAt("a").timings.probeRetryS + 1e-9);
  REQUIRE(core.step(12.2).probes.size() == 1);
  // Every holder says it holds it no longer: dropped, and its task runs again.
  core.onOutputProbed(probe, {HolderAnswer::kNotHeld, HolderAnswer::kNotHeld}, 12.3);
  actions = core.step(12.4);
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{0, 0});
  CHECK_THAT(actions.lostOutputs[0].why, Catch::Contains("lives but holds it no longer"));
  core.onLostOutputRemoved(actions.lostOutputs[0], true);
  CHECK(core.view().stages[0].parts.count(0) == 0);
  actions = core.step(13);
  CHECK(actions.lostOutputs.empty());
  CHECK(actions.probes.empty());

  // An output whose every bucket is empty is read by no one: a claim about it asks nothing.
  core.onInputLost(reduceLaunch(1), keyOf(0, 1), "no copy", 14);
  CHECK(core.step(14).probes.empty());
}

TEST_CASE("output copies: a probe's answer about a record that changed since, or a dead copy's silence",
          "[unit][jobcore][replication]") {
  JobCore core = primaryWithCopiedOutput();
  core.onInputLost(reduceLaunch(0), keyOf(0, 0), "no copy", 1);
  auto actions = core.step(1);
  REQUIRE(actions.probes.size() == 1);
  const ProbeOutput stale = actions.probes[0];
  // Re-recorded on another worker meanwhile: the answer about the old record drops nothing.
  listParts(core, 0, {{0, outputWithCopy("a-w3", "a-w2")}});
  core.onOutputProbed(stale, {HolderAnswer::kNotHeld, HolderAnswer::kNotHeld}, 2);
  actions = core.step(2);
  CHECK(actions.lostOutputs.empty());
  CHECK(actions.probes.empty());
  CHECK(core.view().stages[0].parts.count(0) == 1);

  // Its own worker says it is gone and the copy's worker is dead: no copy serves it.
  core.onInputLost(reduceLaunch(0), keyOf(0, 0), "no copy", 3);
  actions = core.step(3);
  REQUIRE(actions.probes.size() == 1);
  core.onLiveWorkers("a", {"a-w1", "a-w3"});
  core.onOutputProbed(actions.probes[0], {HolderAnswer::kNotHeld, HolderAnswer::kUnreachable}, 3.5);
  actions = core.step(4);
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{0, 0});
  // An answer that came without being asked is ignored.
  core.onOutputProbed(stale, {HolderAnswer::kNotHeld}, 5);
}

TEST_CASE("output copies: a secondary reports claims about live workers' outputs for the primary to ask, and "
          "forgets them after kClaimLifeS",
          "[unit][jobcore][replication]") {
  JobCore secondary = loadedAt("b");
  secondary.onLiveWorkers("a", {"a-w1", "a-w2", "a-w3"});
  listParts(secondary, 0, {{0, outputWithCopy("a-w2", "a-w3")}});
  secondary.onInputLost(reduceLaunch(0), keyOf(0, 0), "no copy", 1);
  auto actions = secondary.step(1);
  CHECK(actions.probes.empty());  // only the primary asks
  CHECK(actions.lostOutputs.empty());
  CHECK(secondary.lostInputClaims() == std::vector<TaskId>{{0, 0}});
  CHECK(secondary.step(1 + JobCore::kClaimLifeS / 2).probes.empty());
  CHECK(secondary.lostInputClaims() == std::vector<TaskId>{{0, 0}});
  secondary.step(2 + JobCore::kClaimLifeS);
  CHECK(secondary.lostInputClaims().empty());
}

TEST_CASE("output copies: a secondary's reader's claim is re-run by the primary, once it finds the worker dead too",
          "[unit][jobcore][replication]") {
  JobCore secondary = loadedAt("b");
  secondary.onLiveWorkers("a", {"a-w1", "a-w3"});
  listParts(secondary, 0, {{0, outputWithCopy("a-w2", "a-w3")}});
  CHECK(secondary.lostInputClaims().empty());
  secondary.onInputLost(reduceLaunch(0), keyOf(0, 0), "no copy", 1);
  CHECK(secondary.step(2).lostOutputs.empty());  // a secondary re-runs nothing itself
  const std::vector<TaskId> claims = secondary.lostInputClaims();
  REQUIRE(claims == std::vector<TaskId>{{0, 0}});
  secondary.onLostInputsReported(claims, 2);  // a secondary hears no claims either
  CHECK(secondary.step(3).lostOutputs.empty());

  JobCore primary = loadedAt("a");
  primary.onLiveWorkers("a", {"a-w1", "a-w2", "a-w3"});
  releaseMaps(primary, 0);
  listParts(primary, 0, {{0, outputWithCopy("a-w2", "a-w3")}});
  // Claims the primary does not take as losses: the output's worker lives here (its holders are
  // asked); outputs and stages the job does not have.
  primary.onLostInputsReported({{0, 0}, {0, 3}, {7, 0}, {UINT32_MAX, UINT32_MAX}}, 1);
  auto asked = primary.step(1);
  CHECK(asked.lostOutputs.empty());
  REQUIRE(asked.probes.size() == 1);
  CHECK(asked.probes[0].task == TaskId{0, 0});
  primary.onLiveWorkers("a", {"a-w1", "a-w3"});
  CHECK(primary.step(2).lostOutputs.empty());  // the earlier claim was not kept; a copy lives
  primary.onLostInputsReported(claims, 3);
  auto actions = primary.step(3);
  REQUIRE(actions.lostOutputs.size() == 1);
  CHECK(actions.lostOutputs[0].task == TaskId{0, 0});
  CHECK_THAT(actions.lostOutputs[0].why, Catch::Contains("found no other copy"));
  // Re-run: the claim goes with the output, at both.
  primary.onLostOutputRemoved(actions.lostOutputs[0], true);
  CHECK(primary.lostInputClaims().empty());
  listParts(secondary, 0, {});
  CHECK(secondary.lostInputClaims().empty());
}

TEST_CASE("output copies: a secondary reports at most kMaxReportedLostInputs claims", "[unit][jobcore][replication]") {
  constexpr uint32_t kOutputs = JobCore::kMaxReportedLostInputs + 10;
  JobCore secondary = unlistedWith(configAt("b"), wordcountInputsAt(std::vector<std::string>(kOutputs, "a")));
  listNothing(secondary);
  secondary.onLiveWorkers("a", {"a-w1"});
  std::map<uint32_t, pb::PartitionLocation> parts;
  for (uint32_t t = 0; t < kOutputs; ++t) parts[t] = outputWithCopy("a-w2", "a-w3");
  listParts(secondary, 0, parts);
  for (uint32_t t = 0; t < kOutputs; ++t) secondary.onInputLost(reduceLaunch(0), keyOf(0, t), "no copy", 1);
  CHECK(secondary.lostInputClaims().size() == JobCore::kMaxReportedLostInputs);
}

TEST_CASE("a taskMap that moves tasks here and away: only the unfinished tasks owned here launch", "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  releaseMaps(core, 0);  // tasks 0..2 at a, 3 at b
  listParts(core, 0, {{2, outputAt("a-w1")}});
  core.onGrants({container("a-w1", 0), container("a-w1", 1), container("a-w1", 2), container("a-w1", 3)});
  // What launches by `now` and long after (task 3 reads at b: it waits for Parades' levels).
  auto launchedBy = [&](double now) {
    auto out = launchedTasks(core.step(now));
    for (const auto& id : launchedTasks(core.step(now + 1000))) out.insert(id);
    return out;
  };
  // Tasks move as steals and reassignments do, one taskMap after another (each applied by
  // moving only the tasks whose owner changed).
  core.onTaskMap(0, ownedBy({"b", "a", "b", "a"}), 1);
  CHECK(launchedBy(1) == std::set<TaskId>{{0, 1}, {0, 3}});
  // Task 0 comes back; task 2, done, comes back too but has its output: it does not run again.
  core.onTaskMap(0, ownedBy({"a", "a", "a", "a"}), 2);
  CHECK(launchedBy(2000) == std::set<TaskId>{{0, 0}});
  // Task 2's output is lost while b owns it: b runs it, not us.
  core.onTaskMap(0, ownedBy({"a", "a", "b", "a"}), 3);
  listParts(core, 0, {});
  CHECK(launchedBy(4000).empty());
  // ... until it is ours again.
  core.onTaskMap(0, ownedBy({"a", "a", "a", "a"}), 4);
  CHECK(launchedBy(6000) == std::set<TaskId>{{0, 2}});
}

TEST_CASE("corrupt taskMap: a later map that gives one task to a site not of the job fails it, and is not applied",
          "[unit][jobcore][corrupt]") {
  // Only the owners that changed are checked against the job's sites: the others were checked
  // when they came. The changed one still is.
  JobCore core = loadedAt("a");
  releaseMaps(core, 0);  // tasks 0..2 at a, 3 at b
  core.onTaskMap(0, ownedBy({"a", "mars", "a", "b"}), 1);
  CHECK(core.view().stages[0].taskmap->owner_site(1) == "a");
  auto step = core.step(1);
  REQUIRE(step.fail);
  CHECK_THAT(*step.fail, Catch::Contains("gives task 1 to 'mars', not a site of the job"));
}

TEST_CASE("a taskMap told with the tasks it moved: only those are checked and applied, as a full comparison would",
          "[unit][jobcore]") {
  JobCore told = loadedAt("a");
  releaseMaps(told, 0);  // tasks 0..2 at a, 3 at b
  // Tasks 1 and 3 change owner (a duplicate and a task out of range are ignored).
  const std::vector<uint32_t> moved = {3, 1, 1, 9};
  told.onTaskMap(0, ownedBy({"a", "b", "a", "a"}), 1, &moved);
  CHECK(told.view().stages[0].taskmap->owner_site(1) == "b");
  CHECK(told.view().stages[0].taskmap->owner_site(3) == "a");
  told.onGrants({container("a-w1", 0), container("a-w1", 1), container("a-w1", 2)});
  std::set<TaskId> launched;
  for (const auto& launch : told.step(1).launches) launched.insert(launch.task);
  CHECK(launched == std::set<TaskId>{{0, 0}, {0, 2}, {0, 3}});
  // A moved owner that is not a site of the job still fails it.
  const std::vector<uint32_t> toMars = {2};
  told.onTaskMap(0, ownedBy({"a", "b", "mars", "a"}), 2, &toMars);
  CHECK(told.view().stages[0].taskmap->owner_site(2) == "a");
  auto failed = told.step(2);
  REQUIRE(failed.fail);
  CHECK_THAT(*failed.fail, Catch::Contains("gives task 2 to 'mars', not a site of the job"));
}

TEST_CASE("a task that starts waiting while every container is full waits from then: Parades' levels and its wait "
          "count from that step",
          "[unit][jobcore]") {
  JobCore core = loadedAt("a");
  releaseMaps(core, 0);                          // tasks 0..2 at a (input on a-w1), 3 at b
  listParts(core, 0, {{2, outputAt("a-w1")}});  // a stage mean of 1 s: rack-local after 0.5 s
  core.onGrants({container("a-w1", 0)});
  auto first = core.step(0);
  REQUIRE(first.launches.size() == 1);
  CHECK(first.launches[0].task == TaskId{0, 0});
  // Task 3 becomes ours while the only container is full: nothing launches, but it waits now.
  core.onTaskMap(0, ownedBy({"a", "a", "a", "a"}), 1);
  CHECK(core.step(1).launches.empty());
  const auto output = outputAt("a-w1");
  core.onTaskEnded(first.launches[0], AttemptEnd::kSucceeded, &output, "", 5);
  auto second = core.step(5);  // node-local first
  REQUIRE(second.launches.size() == 1);
  CHECK(second.launches[0].task == TaskId{0, 1});
  core.onTaskEnded(second.launches[0], AttemptEnd::kSucceeded, &output, "", 7);
  auto third = core.step(7);
  REQUIRE(third.launches.size() == 1);
  CHECK(third.launches[0].task == TaskId{0, 3});
  CHECK(third.launches[0].waitedS == Approx(6.0));  // since t=1, not since the container freed
}
