// Residency in meaning: which stages' tasks and outputs are pinned, and where a result may be
// read. Each leak of issue 11 is crafted here as a job and must be refused or pinned.
#include <catch2/catch.hpp>

#include "jobstate/placement.h"
#include "jobstate/residency.h"

using namespace tellus;
using namespace tellus::jobstate;

namespace {

struct StageDef {
  std::string name;
  std::string op;
  std::vector<std::string> inputs;  // "ds:<name>" for a dataset, else a stage name
  uint32_t tasks = 0;
};

// Dataset partitions: `pinned` at eu (residency: local), `open` at us (residency: any).
JobView makeJob(const std::vector<StageDef>& stages) {
  JobView job;
  job.jobId = "job-1";
  job.stages.resize(stages.size());
  for (size_t s = 0; s < stages.size(); ++s) {
    auto* st = job.spec.add_stages();
    st->set_name(stages[s].name);
    st->set_op(stages[s].op);
    st->set_tasks(stages[s].tasks);
    for (const auto& in : stages[s].inputs) {
      if (in.rfind("ds:", 0) != 0) {
        st->add_inputs()->set_stage(in);
        continue;
      }
      const std::string ds = in.substr(3);
      st->add_inputs()->set_dataset(ds);
      for (int p = 0; p < 2; ++p) {
        auto* ref = job.stages[s].inputs.add_partitions();
        ref->set_site(ds == "pinned" ? "eu" : (ds == "pinned-us" ? "us" : "us"));
        ref->set_residency_local(ds != "open");
        ref->set_worker_id(ref->site() + "-w1");
        ref->set_dataset_file("/data/" + ds + "-" + std::to_string(p));
        ref->set_bytes(100);
      }
    }
  }
  return job;
}

std::vector<StagePinning> pinsOf(const JobView& job) {
  auto pins = stagePinning(job);
  INFO(pins.status().message());
  REQUIRE(pins.isOk());
  return *pins;
}

}  // namespace

TEST_CASE("residency: identity over pinned data keeps its output at the data's site", "[unit][jobstate]") {
  // The leak of issue 11: identity over eu's pinned dataset, result read through us.
  auto job = makeJob({{"copy", "identity", {"ds:pinned"}}});
  auto pins = pinsOf(job);
  CHECK(pins[0].outputAt == std::set<std::string>{"eu"});
  CHECK(checkResultSite(job, pins, "eu").isOk());
  const auto refused = checkResultSite(job, pins, "us");
  REQUIRE_FALSE(refused.isOk());
  CHECK(refused.message() ==
        "the result of stage 'copy' (identity) holds raw records pinned at eu (residency: local) and may not leave it "
        "through site us; use eu's master, or end the job with an aggregation (wordcount.map, wordcount.reduce, sum, "
        "or a site's derived_operators)");
  CHECK(refused.message().find('\n') == std::string::npos);
}

TEST_CASE("residency: grep, sort and exec copy raw records too", "[unit][jobstate]") {
  for (const char* op : {"grep", "sort", "exec"}) {
    auto job = makeJob({{"s", op, {"ds:pinned"}}});
    INFO(op);
    CHECK_FALSE(checkResultSite(job, pinsOf(job), "us").isOk());
  }
}

TEST_CASE("residency: an aggregation releases pinned data", "[unit][jobstate]") {
  auto job = makeJob({{"map", "wordcount.map", {"ds:pinned"}}, {"reduce", "wordcount.reduce", {"map"}, 2}});
  auto pins = pinsOf(job);
  CHECK(pins[0].outputAt.empty());
  CHECK(pins[1].tasksAt.empty());
  CHECK(checkResultSite(job, pins, "us").isOk());
}

TEST_CASE("residency: pinning is transitive through non-derived stages", "[unit][jobstate]") {
  // identity at eu, then a shuffle into grep, then a forward into sum: the grep must run at eu
  // (it reads raw records), its output stays there, and only the sum may leave.
  auto job = makeJob({{"copy", "identity", {"ds:pinned"}}, {"filter", "grep", {"copy"}, 3},
                      {"total", "sum", {"filter"}, 1}});
  auto pins = pinsOf(job);
  CHECK(pins[1].tasksAt == "eu");
  CHECK(pins[1].outputAt == std::set<std::string>{"eu"});
  CHECK(pins[2].tasksAt == "eu");
  CHECK(pins[2].outputAt.empty());
  CHECK(checkResultSite(job, pins, "us").isOk());
  // Without the sum, the result is the grep's raw lines.
  auto leaky = makeJob({{"copy", "identity", {"ds:pinned"}}, {"filter", "grep", {"copy"}, 3}});
  CHECK_FALSE(checkResultSite(leaky, pinsOf(leaky), "us").isOk());
}

TEST_CASE("residency: a configured derived operator releases pinned data", "[unit][jobstate]") {
  auto job = makeJob({{"digest", "exec", {"ds:pinned"}}});
  CHECK_FALSE(checkResultSite(job, pinsOf(job), "us").isOk());
  job.spec.add_derived_operators("exec");
  CHECK(checkResultSite(job, pinsOf(job), "us").isOk());
}

TEST_CASE("residency: open data is never pinned", "[unit][jobstate]") {
  auto job = makeJob({{"copy", "identity", {"ds:open"}}, {"again", "identity", {"copy"}, 2}});
  auto pins = pinsOf(job);
  CHECK(pins[0].outputAt.empty());
  CHECK(pins[1].tasksAt.empty());
  CHECK(checkResultSite(job, pins, "eu").isOk());
}

TEST_CASE("residency: a stage needing raw records of two sites is refused", "[unit][jobstate]") {
  auto job = makeJob({{"a", "identity", {"ds:pinned"}}, {"b", "identity", {"ds:pinned-us"}}, {"join", "sort", {"a", "b"}, 1}});
  auto pins = stagePinning(job);
  REQUIRE_FALSE(pins.isOk());
  CHECK(pins.status().message() ==
        "stage 'join' would read raw records pinned at eu and us (residency: local); aggregate each site's data with a "
        "derived operator first");
}

TEST_CASE("residency: placement puts every task reading pinned records at their site", "[unit][jobstate]") {
  auto job = makeJob({{"copy", "identity", {"ds:pinned"}}, {"filter", "grep", {"copy"}, 4}});
  pb::PartitionLocation loc;
  loc.set_site("eu");
  loc.set_worker_id("eu-w1");
  loc.add_bucket_bytes(100);
  for (uint32_t t = 0; t < 2; ++t) job.stages[0].parts[t] = loc;
  // us is much stronger: without residency every policy would send work there.
  const std::vector<SiteCapacity> sites{{"eu", 1, 1.0, 1.0, 1.0}, {"us", 100, 100.0, 100.0, 1.0}};
  for (auto policy : {sched::Placement::kProportional, sched::Placement::kInPlace, sched::Placement::kCentralized,
                      sched::Placement::kTetrium, sched::Placement::kIridium, sched::Placement::kMaxMin}) {
    auto map = initialTaskMap(job, 1, policy, sites);
    INFO(map.status().message());
    REQUIRE(map.isOk());
    REQUIRE(map->owner_site_size() == 4);
    for (const auto& owner : map->owner_site()) CHECK(owner == "eu");
  }
}
