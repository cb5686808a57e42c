// The decision records of the differential test: their one-line JSON form, and which of the
// core's callbacks record what (CoreConfig::recordDecisions).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "jobcore/decision.h"
#include "jobcore/job_core.h"
#include "wordcount_spec.h"

using namespace tellus;
using namespace tellus::jobcore;

namespace {

// map (dataset: 3 partitions, 2 at a, 1 at b) -> reduce (1 task).
pb::JobSpec spec() { return testing::wordcountSpec(1); }

std::vector<pb::StageInputs> inputs() {
  std::vector<pb::StageInputs> in(2);
  for (const std::string site : {"a", "a", "b"}) {
    auto* ref = in[0].add_partitions();
    ref->set_site(site);
    ref->set_worker_id(fmt::format("{}-w1", site));  // not `site + "-w1"`: GCC 12 -O3 -Wrestrict
    ref->set_dataset_file("/data/part");
    ref->set_bytes(100);
  }
  return in;
}

pb::SiteInfo siteRecord(const std::string& site) {
  pb::SiteInfo info;
  info.set_site(site);
  info.set_containers_total(4);
  info.set_containers_free(4);
  return info;
}

pb::Container container(const std::string& worker, uint32_t slot) {
  pb::Container c;
  c.mutable_id()->set_worker_id(worker);
  c.mutable_id()->set_slot(slot);
  c.set_worker_address("127.0.0.1:9");
  c.set_site("a");
  return c;
}

// The primary at a, recording, with stage 0 released: returns its release.
ReleaseStage released(JobCore& core) {
  pb::JobStatus st;
  st.set_job_id("job-1");
  st.set_state(pb::JOB_RUNNING);
  st.add_sites(std::string("a"));
  st.add_sites(std::string("b"));
  REQUIRE(core.onJobLoaded(spec(), inputs()));
  core.onStatus(st, 0);
  core.onLiveWorkers("a", {"a-w1", "a-w2"});
  core.onLiveWorkers("b", {"b-w1", "b-w2"});
  core.onJms({"a", "b"});
  core.onPartsListed(0);
  core.onPartsListed(1);
  core.onRunningMarkers({});
  core.onBecamePrimary(1);
  REQUIRE(core.step(0).needSiteRecords);
  core.onSiteRecords({siteRecord("a"), siteRecord("b")});
  auto actions = core.step(0);
  REQUIRE(actions.releases.size() == 1);
  return actions.releases[0];
}

CoreConfig recording(bool on = true) {
  CoreConfig c;
  // Built, then moved in: assigning a short literal trips GCC 12's -Wrestrict at -O3.
  c.jobId = std::string("job-1");
  c.site = std::string("a");
  c.recordDecisions = on;
  return c;
}

}  // namespace

TEST_CASE("decision records: one JSON line each, parsed back to the same record", "[unit][jobcore][decision]") {
  const Decision place{Decision::Kind::kPlace, 1, {3}, "eu-west", "", ""};
  CHECK(formatDecision(place) == R"({"kind":"place","stage":1,"tasks":[3],"site":"eu-west"})");
  const Decision steal{Decision::Kind::kSteal, 0, {2, 5, 9}, "us-east", "ap-south", ""};
  CHECK(formatDecision(steal) == R"({"kind":"steal","stage":0,"tasks":[2,5,9],"site":"us-east","from":"ap-south"})");
  const Decision rerun{Decision::Kind::kRerun, 0, {4}, "us-east", "", std::string(kRerunLostOutput)};
  CHECK(formatDecision(rerun) == R"({"kind":"rerun","stage":0,"tasks":[4],"site":"us-east","reason":"lost-output"})");
  for (const auto& d : {place, steal, rerun}) {
    auto parsed = parseDecision(formatDecision(d));
    REQUIRE(parsed);
    CHECK(*parsed == d);
  }
}

TEST_CASE("decision records: what is not a record is refused with the reason", "[unit][jobcore][decision]") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "not a JSON object"},
      {"[1]", "not a JSON object"},
      {R"({"kind":"place","stage":1,"tasks":[3],"site":"a")", "not a JSON object"},
      {R"({"kind":"move","stage":1,"tasks":[3],"site":"a"})", "unknown kind"},
      {R"({"kind":"place","stage":-1,"tasks":[3],"site":"a"})", "stage"},
      {R"({"kind":"place","stage":4294967296,"tasks":[3],"site":"a"})", "stage"},
      {R"({"kind":"place","stage":1,"tasks":[],"site":"a"})", "tasks"},
      {R"({"kind":"place","stage":1,"tasks":[3,4],"site":"a"})", "one task"},
      {R"({"kind":"steal","stage":1,"tasks":[4,3],"site":"a","from":"b"})", "sorted"},
      {R"({"kind":"steal","stage":1,"tasks":[3,3],"site":"a","from":"b"})", "sorted"},
      {R"({"kind":"steal","stage":1,"tasks":[3],"site":"a"})", "\"from\""},
      {R"({"kind":"place","stage":1,"tasks":[3],"site":"a","from":"b"})", "does not belong"},
      {R"({"kind":"place","stage":1,"tasks":[3],"site":""})", "\"site\""},
      {R"({"kind":"rerun","stage":1,"tasks":[3],"site":"a"})", "\"reason\""},
      {R"({"kind":"place","stage":1,"tasks":[3],"site":"a","extra":1})", "unknown fields"},
  };
  for (const auto& [line, why] : bad) {
    INFO(line);
    auto parsed = parseDecision(line);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.message().find(why) != std::string::npos);
  }
  CHECK_FALSE(parseDecision(std::string(kMaxDecisionLineBytes + 1, ' ')));
}

TEST_CASE("recorded decisions: a written release places every task, a settled steal moves what moved",
          "[unit][jobcore][decision]") {
  JobCore core(recording());
  const ReleaseStage release = released(core);
  CHECK(core.takeDecisions().empty());  // decided, not written yet
  core.onStageReleased(release, true);
  const std::vector<Decision> places = core.takeDecisions();
  REQUIRE(places.size() == 3);
  for (uint32_t t = 0; t < 3; ++t) {
    CHECK(places[t] == Decision{Decision::Kind::kPlace, 0, {t}, release.taskmap.owner_site(static_cast<int>(t)), "", ""});
  }
  CHECK(core.takeDecisions().empty());  // taken once

  // A steal of two offered tasks, of which the compare-and-set moved one.
  auto offer = core.offerSteal("b", 2, 0);
  REQUIRE(offer.tasks == std::vector<uint32_t>{0, 1});
  pb::TaskMap map = release.taskmap;
  map.set_owner_site(0, std::string("b"));  // moved in (GCC 12 -O3 -Wrestrict)
  core.settleSteal(offer, {0}, &map, 1);
  CHECK(core.takeDecisions() == std::vector<Decision>{{Decision::Kind::kSteal, 0, {0}, "b", "a", ""}});
  // One that moved nothing is no decision.
  auto none = core.offerSteal("b", 1, 0);
  REQUIRE(none.tasks == std::vector<uint32_t>{1});
  core.settleSteal(none, {}, nullptr, -1);
  CHECK(core.takeDecisions().empty());
}

TEST_CASE("recorded decisions: a removed lost output and a failed or lost attempt run again",
          "[unit][jobcore][decision]") {
  JobCore core(recording());
  core.onStageReleased(released(core), true);
  (void)core.takeDecisions();
  core.onGrants({container("a-w1", 0), container("a-w2", 0)});
  auto actions = core.step(1);
  REQUIRE(actions.launches.size() == 2);
  const auto first = actions.launches[0];
  const auto second = actions.launches[1];
  core.onTaskEnded(first, AttemptEnd::kTaskFailed, nullptr, "exit 1", 2);
  core.onTaskEnded(second, AttemptEnd::kWorkerUnreachable, nullptr, "gone", 2);
  CHECK(core.takeDecisions() ==
        std::vector<Decision>{{Decision::Kind::kRerun, 0, {first.task.second}, "a", "", std::string(kRerunFailed)},
                              {Decision::Kind::kRerun, 0, {second.task.second}, "a", "", std::string(kRerunWorkerLost)}});
  // An input not ready is a retry, not a re-run.
  auto again = core.step(3);
  REQUIRE_FALSE(again.launches.empty());
  core.onTaskEnded(again.launches[0], AttemptEnd::kInputNotReady, nullptr, "not yet", 3);
  CHECK(core.takeDecisions().empty());

  // Task 2 (at b) finished on b-w2, which then died (its input is still on b-w1): the primary
  // removes the output (lineage).
  pb::PartitionLocation out;
  out.set_site("b");
  out.set_worker_id("b-w2");
  out.set_worker_address("127.0.0.1:9");
  out.add_bucket_bytes(10);
  core.onPartRecorded(0, 2, out);
  core.onPartsListed(0);
  core.onLiveWorkers("b", {"b-w1"});
  auto lost = core.step(4);
  REQUIRE(lost.lostOutputs.size() == 1);
  core.onLostOutputRemoved(lost.lostOutputs[0], false);  // not written: no decision
  CHECK(core.takeDecisions().empty());
  core.onLostOutputRemoved(lost.lostOutputs[0], true);
  CHECK(core.takeDecisions() ==
        std::vector<Decision>{{Decision::Kind::kRerun, 0, {2}, "b", "", std::string(kRerunLostOutput)}});
}

TEST_CASE("recorded decisions: off by default, nothing is kept", "[unit][jobcore][decision]") {
  JobCore core(recording(false));
  core.onStageReleased(released(core), true);
  CHECK(core.takeDecisions().empty());
}
