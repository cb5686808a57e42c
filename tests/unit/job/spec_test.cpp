// Job specs: YAML form, structural validation with exact messages, and the DAG helpers.

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "job/spec.h"
#include "sched/policies.h"

namespace tellus::job {
namespace {

const std::string kWordcount =
    "name: wordcount\n"              // 1
    "stages:\n"                      // 2
    "  - name: map\n"                // 3
    "    op: wordcount.map\n"        // 4
    "    input: {dataset: corpus}\n" // 5
    "  - name: reduce\n"             // 6
    "    op: wordcount.reduce\n"     // 7
    "    tasks: 4\n"                 // 8
    "    input: {stage: map}\n";     // 9

std::string specError(const std::string& yaml) {
  auto r = parseJobSpec(yaml, "job.yaml");
  REQUIRE_FALSE(r.isOk());
  CHECK(r.error().code == ErrorCode::kInvalidArgument);
  return r.message();
}

std::string replaced(std::string yaml, const std::string& from, const std::string& to) {
  const std::size_t at = yaml.find(from);
  REQUIRE(at != std::string::npos);
  return yaml.replace(at, from.size(), to);
}

pb::JobSpec parsed(const std::string& yaml) {
  auto r = parseJobSpec(yaml, "job.yaml");
  INFO((r.isOk() ? std::string() : r.message()));
  REQUIRE(r.isOk());
  return *r;
}

// A valid two-stage spec built directly, as one that arrives over RPC.
pb::JobSpec rpcSpec() {
  pb::JobSpec spec;
  spec.set_name("wc");
  spec.set_placement("tetrium");
  pb::StageSpec* map = spec.add_stages();
  map->set_name("map");
  map->set_op("wordcount.map");
  map->add_inputs()->set_dataset("corpus");
  pb::StageSpec* reduce = spec.add_stages();
  reduce->set_name("reduce");
  reduce->set_op("wordcount.reduce");
  reduce->set_tasks(4);
  reduce->add_inputs()->set_stage("map");
  return spec;
}

TEST_CASE("the wordcount spec is parsed with defaults", "[unit][job]") {
  const pb::JobSpec spec = parsed(kWordcount);
  CHECK(spec.name() == "wordcount");
  CHECK(spec.placement() == "proportional");
  CHECK(spec.max_task_attempts() == 4u);
  REQUIRE(spec.stages_size() == 2);
  const auto& map = spec.stages(0);
  CHECK(map.name() == "map");
  CHECK(map.op() == "wordcount.map");
  CHECK(map.tasks() == 0u);
  REQUIRE(map.inputs_size() == 1);
  CHECK(map.inputs(0).dataset() == "corpus");
  const auto& reduce = spec.stages(1);
  CHECK(reduce.tasks() == 4u);
  REQUIRE(reduce.inputs_size() == 1);
  CHECK(reduce.inputs(0).stage() == "map");
  CHECK(reduce.inputs(0).edge() == pb::EDGE_SHUFFLE);
  CHECK(validateJobSpec(spec).isOk());

  CHECK(stageIndex(spec, "map") == 0);
  CHECK(stageIndex(spec, "reduce") == 1);
  CHECK(stageIndex(spec, "nope") == -1);
  CHECK(downstreamStages(spec, 0) == std::vector<uint32_t>{1});
  CHECK(downstreamStages(spec, 1).empty());
  CHECK(outputBuckets(spec, 0) == 4u);
  CHECK(outputBuckets(spec, 1) == 1u);
}

TEST_CASE("a multi-input spec with params, forward edges and every top-level field", "[unit][job]") {
  const pb::JobSpec spec = parsed(
      "name: join.v2\n"
      "placement: in-place\n"
      "max_task_attempts: 2\n"
      "stages:\n"
      "  - name: scan\n"
      "    op: grep\n"
      "    inputs: [{dataset: left}, {dataset: right}]\n"
      "    params: {pattern: 'a b', regex: true}\n"
      "  - name: part\n"
      "    op: synthetic\n"
      "    params: {cpu_ms: 10, output_ratio: 0.50}\n"
      "    tasks: 3\n"
      "    inputs:\n"
      "      - stage: scan\n"
      "        edge: shuffle\n"
      "  - name: sorted\n"
      "    op: sort\n"
      "    tasks: 3\n"
      "    input: {stage: part, edge: forward}\n"
      "  - name: total\n"
      "    op: sum\n"
      "    tasks: 3\n"
      "    inputs: [{stage: sorted, edge: forward}, {stage: scan}]\n");
  CHECK(spec.placement() == "in-place");
  CHECK(spec.max_task_attempts() == 2u);
  const auto& scan = spec.stages(0);
  REQUIRE(scan.inputs_size() == 2);
  CHECK(scan.inputs(1).dataset() == "right");
  CHECK(scan.params().at("pattern") == "a b");
  CHECK(scan.params().at("regex") == "true");
  CHECK(spec.stages(1).params().at("cpu_ms") == "10");
  CHECK(spec.stages(1).params().at("output_ratio") == "0.50");  // the text as written
  CHECK(spec.stages(2).inputs(0).edge() == pb::EDGE_FORWARD);
  CHECK(downstreamStages(spec, 0) == std::vector<uint32_t>{1, 3});
  CHECK(outputBuckets(spec, 0) == 3u);  // both shuffle readers have 3 tasks
  CHECK(outputBuckets(spec, 1) == 1u);  // read with a forward edge
  CHECK(outputBuckets(spec, 2) == 1u);
  CHECK(outputBuckets(spec, 3) == 1u);
}

TEST_CASE("YAML-level errors point at the field", "[unit][job]") {
  CHECK(specError(replaced(kWordcount, "    tasks: 4\n", "    tasks: -4\n")) ==
        "job.yaml:8: stages[1].tasks: expected a non-negative integer, got '-4'");
  CHECK(specError(replaced(kWordcount, "    op: wordcount.reduce\n", "")) ==
        "job.yaml:6: stages[1].op: required field is missing");
  CHECK(specError(replaced(kWordcount, "    tasks: 4\n", "    taks: 4\n")) ==
        "job.yaml:8: stages[1].taks: unknown field (did you mean 'tasks'?)");
  CHECK(specError(replaced(kWordcount, "{stage: map}", "{stage: map, edge: broadcast}")) ==
        "job.yaml:9: stages[1].input.edge: expected shuffle or forward, got 'broadcast'");
  CHECK(specError(replaced(kWordcount, "{stage: map}", "{stage: map, dataset: corpus}")) ==
        "job.yaml:9: stages[1].input: expected exactly one of dataset or stage, got both");
  CHECK(specError(replaced(kWordcount, "{stage: map}", "{}")) ==
        "job.yaml:9: stages[1].input: expected exactly one of dataset or stage, got neither");
  CHECK(specError(replaced(kWordcount, "{dataset: corpus}", "{dataset: corpus, edge: forward}")) ==
        "job.yaml:5: stages[0].input.edge: only a stage input has an edge");
  CHECK(specError(replaced(kWordcount, "{stage: map}", "[{stage: map}]")) ==
        "job.yaml:9: stages[1].input: expected a map, got a sequence");
  CHECK(specError(kWordcount + "    inputs: [{stage: map}]\n") ==
        "job.yaml:10: stages[1].inputs: give either input (one map) or inputs (a list), not both");
  CHECK(specError(replaced(kWordcount, "    tasks: 4\n", "    params: {nested: {a: 1}}\n")) ==
        "job.yaml:8: stages[1].params.nested: expected a string, got a map");
  CHECK(specError(replaced(kWordcount, "name: wordcount\n", "")) == "job.yaml:1: name: required field is missing");
  CHECK(specError("name: x\nstages: {map: 1}\n") == "job.yaml:2: stages: expected a sequence, got a map");
  CHECK(specError("name: x\nstages: [\n").starts_with("job.yaml:3: malformed YAML: "));
  CHECK(specError(kWordcount + "max_task_attempts: 0\n") ==
        "job.yaml:10: max_task_attempts: expected a positive integer, got '0'");
}

TEST_CASE("structural errors name the stage, with the line when parsed from YAML", "[unit][job]") {
  SECTION("unknown input stage") {
    CHECK(specError(replaced(kWordcount, "{stage: map}", "{stage: mapp}")) ==
          "job.yaml:9: stage 'reduce': input stage 'mapp' is not an earlier stage");
  }
  SECTION("forward reference (stages out of order)") {
    const std::string yaml =
        "name: wc\n"
        "stages:\n"
        "  - {name: map, op: wordcount.map, input: {dataset: corpus}}\n"
        "  - {name: a, op: identity, tasks: 2, input: {stage: b}}\n"
        "  - {name: b, op: identity, tasks: 2, input: {stage: map}}\n";
    CHECK(specError(yaml) == "job.yaml:4: stage 'a': input stage 'b' is not an earlier stage");
  }
  SECTION("cycles and self references") {
    const std::string yaml =
        "name: wc\n"
        "stages:\n"
        "  - {name: a, op: identity, tasks: 2, input: {stage: b}}\n"
        "  - {name: b, op: identity, tasks: 2, input: {stage: a}}\n";
    CHECK(specError(yaml) == "job.yaml:3: stage 'a': input stage 'b' is not an earlier stage");
    CHECK(specError("name: wc\nstages:\n  - {name: a, op: identity, tasks: 1, input: {stage: a}}\n") ==
          "job.yaml:3: stage 'a': input stage 'a' is not an earlier stage");
  }
  SECTION("duplicate stage names") {
    CHECK(specError(replaced(kWordcount, "  - name: reduce\n", "  - name: map\n")) ==
          "job.yaml:6: stage 'map': duplicate stage name (also stages[0])");
  }
  SECTION("bad names") {
    CHECK(specError(replaced(kWordcount, "name: wordcount\n", "name: word count\n")) ==
          "job.yaml:1: name: expected a job name (1-128 of [A-Za-z0-9_.-], not starting with '.'), got 'word count'");
    CHECK(specError(replaced(kWordcount, "  - name: reduce\n", "  - name: re/duce\n")) ==
          "job.yaml:6: stages[1]: name: expected a stage name (1-128 of [A-Za-z0-9_.-], not starting with '.'), got 're/duce'");
    CHECK(specError(replaced(kWordcount, "{dataset: corpus}", "{dataset: 'my corpus'}")) ==
          "job.yaml:5: stage 'map': input 0: expected a dataset name (1-128 of [A-Za-z0-9_.-], not starting with '.'), got 'my corpus'");
  }
  SECTION("dataset stage with tasks") {
    CHECK(specError(replaced(kWordcount, "    op: wordcount.map\n", "    op: wordcount.map\n    tasks: 3\n")) ==
          "job.yaml:5: stage 'map': tasks: a stage that reads datasets runs one task per partition; expected tasks "
          "0 or absent, got 3");
  }
  SECTION("dataset stage that also reads a stage") {
    const std::string yaml = kWordcount +
                             "  - name: mixed\n"
                             "    op: identity\n"
                             "    inputs: [{dataset: corpus}, {stage: reduce}]\n";
    CHECK(specError(yaml) == "job.yaml:12: stage 'mixed': a stage that reads a dataset can read only datasets, but "
                             "it also reads stage 'reduce'");
  }
  SECTION("stage reading stages without tasks") {
    CHECK(specError(replaced(kWordcount, "    tasks: 4\n", "")) ==
          "job.yaml:6: stage 'reduce': tasks: expected a positive task count (only stages that read datasets, or only "
          "forward edges, may leave it out)");
  }
  SECTION("forward edge with mismatched counts") {
    const std::string yaml = kWordcount +
                             "  - name: fmt\n"
                             "    op: identity\n"
                             "    tasks: 2\n"
                             "    input: {stage: reduce, edge: forward}\n";
    CHECK(specError(yaml) == "job.yaml:13: stage 'fmt': forward edge from stage 'reduce' needs equal task counts, "
                             "but 'reduce' has 4 tasks and 'fmt' has 2 tasks");
    CHECK(specError(replaced(kWordcount, "{stage: map}", "{stage: map, edge: forward}")) ==
          "job.yaml:9: stage 'reduce': forward edge from stage 'map' needs equal task counts, but 'map' has one "
          "task per dataset partition and 'reduce' has 4 tasks");
  }
  SECTION("a stage reading only forward edges may leave tasks out: one per upstream task") {
    const std::string yaml = kWordcount +
                             "  - name: fmt\n"
                             "    op: identity\n"
                             "    input: {stage: reduce, edge: forward}\n";
    auto spec = parseJobSpec(yaml, "job.yaml");
    REQUIRE(spec.isOk());
    CHECK(spec->stages(2).tasks() == 0);
  }
  SECTION("shuffle readers of one stage with different task counts") {
    const std::string yaml = kWordcount +
                             "  - name: other\n"
                             "    op: wordcount.reduce\n"
                             "    tasks: 8\n"
                             "    input: {stage: map}\n";
    CHECK(specError(yaml) == "job.yaml:13: stage 'other': shuffles from stage 'map' with 8 tasks, but stage "
                             "'reduce' shuffles from it with 4 tasks; shuffle readers of one stage need equal task "
                             "counts");
  }
  SECTION("a stage read with both kinds of edge") {
    const std::string yaml = kWordcount +
                             "  - name: same\n"
                             "    op: identity\n"
                             "    tasks: 4\n"
                             "    input: {stage: reduce, edge: forward}\n"
                             "  - name: again\n"
                             "    op: identity\n"
                             "    tasks: 4\n"
                             "    input: {stage: reduce}\n";
    CHECK(specError(yaml) == "job.yaml:17: stage 'again': reads stage 'reduce' with a shuffle edge, but stage "
                             "'same' reads it with a forward edge; a stage's readers must all use the same kind of "
                             "edge");
  }
  SECTION("the same input twice") {
    CHECK(specError(replaced(kWordcount, "    input: {stage: map}\n", "    inputs: [{stage: map}, {stage: map}]\n")) ==
          "job.yaml:9: stage 'reduce': stage 'map' is read twice");
  }
  SECTION("unknown placement") {
    CHECK(specError(kWordcount + "placement: random\n") ==
          "job.yaml:10: placement: expected one of in-place|proportional|centralized|iridium|tetrium|max-min, got 'random'");
  }
  SECTION("empty stages") {
    CHECK(specError("name: wc\nstages: []\n") == "job.yaml:2: stages: a job needs at least one stage");
  }
  SECTION("unknown operator") {
    CHECK_THAT(specError(replaced(kWordcount, "op: wordcount.reduce", "op: wordcount.reduse")),
               Catch::StartsWith("job.yaml:7: stage 'reduce': op: unknown operator 'wordcount.reduse' (known "
                                 "operators: ") &&
                   Catch::Contains("wordcount.reduce"));
  }
  SECTION("bad operator params") {
    CHECK_THAT(specError(replaced(kWordcount, "    tasks: 4\n", "    tasks: 4\n    params: {combine: yes}\n")),
               Catch::StartsWith("job.yaml:9: stage 'reduce': params: wordcount.reduce: unknown param 'combine'"));
    CHECK_THAT(specError(replaced(kWordcount, "op: wordcount.reduce", "op: grep")),
               Catch::StartsWith("job.yaml:6: stage 'reduce': params: grep: ") && Catch::Contains("pattern"));
  }
}

TEST_CASE("every placement of the policy registry is accepted", "[unit][job]") {
  for (const std::string& placement : sched::placementNames()) {
    const pb::JobSpec spec = parsed(kWordcount + "placement: " + placement + "\n");
    CHECK(spec.placement() == placement);
  }
}

TEST_CASE("validateJobSpec checks specs that arrive over RPC", "[unit][job]") {
  CHECK(validateJobSpec(rpcSpec()).isOk());

  SECTION("an input with no source") {
    pb::JobSpec spec = rpcSpec();
    spec.mutable_stages(1)->add_inputs();
    Status st = validateJobSpec(spec);
    REQUIRE_FALSE(st.isOk());
    CHECK(st.message() == "stage 'reduce': input 1: expected exactly one of dataset or stage");
  }
  SECTION("a forward edge on a dataset input") {
    pb::JobSpec spec = rpcSpec();
    spec.mutable_stages(0)->mutable_inputs(0)->set_edge(pb::EDGE_FORWARD);
    CHECK(validateJobSpec(spec).message() == "stage 'map': dataset input 'corpus' cannot have an edge: only stage inputs do");
  }
  SECTION("empty placement is not a default") {
    pb::JobSpec spec = rpcSpec();
    spec.clear_placement();
    CHECK(validateJobSpec(spec).message() ==
          "placement: expected one of in-place|proportional|centralized|iridium|tetrium|max-min, got ''");
  }
  SECTION("no stages") {
    pb::JobSpec spec = rpcSpec();
    spec.clear_stages();
    CHECK(validateJobSpec(spec).message() == "stages: a job needs at least one stage");
  }
  SECTION("missing operator") {
    pb::JobSpec spec = rpcSpec();
    spec.mutable_stages(1)->clear_op();
    CHECK(validateJobSpec(spec).message() == "stage 'reduce': op: an operator is required");
  }
  SECTION("unknown input stage") {
    pb::JobSpec spec = rpcSpec();
    spec.mutable_stages(1)->mutable_inputs(0)->set_stage("mapp");
    CHECK(validateJobSpec(spec).message() == "stage 'reduce': input stage 'mapp' is not an earlier stage");
  }
}

TEST_CASE("DAG helpers on out-of-range and unread stages", "[unit][job]") {
  const pb::JobSpec spec = rpcSpec();
  CHECK(downstreamStages(spec, 7).empty());
  CHECK(outputBuckets(spec, 7) == 1u);
}

}  // namespace
}  // namespace tellus::job

namespace tellus::job {
namespace {

config::LimitsConfig smallLimits() {
  config::LimitsConfig l;
  l.max_stages_per_job = 3;
  l.max_tasks_per_stage = 10;
  l.max_tasks_per_job = 15;
  l.max_spec_bytes = 4096;
  l.max_output_bytes = 1000;
  return l;
}

pb::StageSpec* addSynthetic(pb::JobSpec& spec, const std::string& name, uint32_t tasks, const std::string& outputBytes) {
  auto* s = spec.add_stages();
  s->set_name(name);
  s->set_op("synthetic");
  s->set_tasks(tasks);
  (*s->mutable_params())["output_bytes"] = outputBytes;
  return s;
}

}  // namespace

TEST_CASE("limits: a spec within the limits passes; each limit is refused in one line naming it", "[unit][job]") {
  const auto limits = smallLimits();
  CHECK(validateJobSpec(rpcSpec(), limits).isOk());

  auto refused = [&](const pb::JobSpec& spec, const std::string& limitName) {
    Status st = validateJobSpec(spec, limits);
    REQUIRE_FALSE(st.isOk());
    CHECK(st.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::EndsWith("(limits." + limitName + ")"));
    CHECK(st.message().find('\n') == std::string::npos);
  };
  SECTION("tasks per stage: the issue's tasks 1000000000") {
    pb::JobSpec spec = rpcSpec();
    spec.mutable_stages(1)->set_tasks(1000000000);
    refused(spec, "max_tasks_per_stage");
  }
  SECTION("tasks per job") {
    pb::JobSpec spec;
    spec.set_name("big");
    spec.set_placement("proportional");
    addSynthetic(spec, "a", 10, "1");
    addSynthetic(spec, "b", 10, "1");
    refused(spec, "max_tasks_per_job");
  }
  SECTION("stages per job, before anything else is walked") {
    pb::JobSpec spec;
    spec.set_name("many");
    spec.set_placement("proportional");
    for (int i = 0; i < 4; ++i) addSynthetic(spec, fmt::format("s{}", i), 1, "1");
    refused(spec, "max_stages_per_job");
  }
  SECTION("spec bytes") {
    pb::JobSpec spec = rpcSpec();
    (*spec.mutable_stages(1)->mutable_params())["pad"] = std::string(8192, 'x');
    refused(spec, "max_spec_bytes");
  }
  SECTION("synthetic output_bytes: the issue's 1 TiB") {
    pb::JobSpec spec;
    spec.set_name("tib");
    spec.set_placement("proportional");
    addSynthetic(spec, "write", 1, "1099511627776");
    refused(spec, "max_output_bytes");
    CHECK(validateJobSpec(spec).isOk() == false);  // over the default 16 GiB too
  }
}

TEST_CASE("limits: resolved task counts (dataset partitions, forward edges) are checked at Submit", "[unit][job]") {
  const auto limits = smallLimits();
  pb::JobSpec spec = rpcSpec();  // map reads a dataset, reduce has 4 tasks
  CHECK(checkResolvedTasks(spec, {{0, 10}}, limits).isOk());
  Status perStage = checkResolvedTasks(spec, {{0, 11}}, limits);
  REQUIRE_FALSE(perStage.isOk());
  CHECK(perStage.message() == "stage 'map': tasks 11 is over the limit of 10 (limits.max_tasks_per_stage)");
  // A forward stage with tasks 0 has its upstream's count: 8 + 8 > 15.
  pb::JobSpec forward = rpcSpec();
  forward.mutable_stages(1)->set_tasks(0);
  forward.mutable_stages(1)->mutable_inputs(0)->set_edge(pb::EDGE_FORWARD);
  CHECK(checkResolvedTasks(forward, {{0, 7}}, limits).isOk());
  Status perJob = checkResolvedTasks(forward, {{0, 8}}, limits);
  REQUIRE_FALSE(perJob.isOk());
  CHECK(perJob.message() == "job: total tasks 16 is over the limit of 15 (limits.max_tasks_per_job)");
}

TEST_CASE("cost_weight: seconds per currency unit, default 0, bounded", "[unit][job][cost]") {
  CHECK(parsed(kWordcount).cost_weight() == 0.0);
  CHECK(parsed(kWordcount + "cost_weight: 250.5\n").cost_weight() == 250.5);
  CHECK(specError(kWordcount + "cost_weight: -1\n") == "job.yaml:10: cost_weight: expected a number in [0, 1000000], got '-1'");
  CHECK(specError(kWordcount + "cost_weight: 2e6\n").starts_with("job.yaml:10: cost_weight: expected "));
  CHECK(specError(kWordcount + "cost_weight: .nan\n").starts_with("job.yaml:10: cost_weight: expected "));
  CHECK(specError(kWordcount + "cost_weight: cheap\n").starts_with("job.yaml:10: cost_weight: expected "));
  // Over RPC the spec is validated again: out of range or not a number is refused, naming the field.
  pb::JobSpec spec = rpcSpec();
  spec.set_cost_weight(1e6);
  CHECK(validateJobSpec(spec).isOk());
  for (double bad : {-0.5, 1e6 * 1.5, std::numeric_limits<double>::infinity(), std::nan("")}) {
    spec.set_cost_weight(bad);
    const Status status = validateJobSpec(spec);
    REQUIRE_FALSE(status.isOk());
    CHECK(status.message().starts_with("cost_weight: expected seconds per currency unit in [0, 1000000]"));
  }
}

TEST_CASE("output_replicas: one copy by default, 0 turns it off, bounded", "[unit][job][replication]") {
  CHECK(parsed(kWordcount).output_replicas() == 1);
  CHECK(outputReplicas(parsed(kWordcount)) == 1);
  CHECK(outputReplicas(parsed(kWordcount + "output_replicas: 0\n")) == 0);
  CHECK(specError(kWordcount + "output_replicas: 2\n").starts_with("job.yaml:10: output_replicas: expected "));
  CHECK(specError(kWordcount + "output_replicas: -1\n").starts_with("job.yaml:10: output_replicas: expected "));
  // A spec built in code or stored before the knob has none: the default.
  pb::JobSpec spec = rpcSpec();
  CHECK_FALSE(spec.has_output_replicas());
  CHECK(outputReplicas(spec) == kDefaultOutputReplicas);
  spec.set_output_replicas(0);
  CHECK(outputReplicas(spec) == 0);
  CHECK(validateJobSpec(spec).isOk());
  spec.set_output_replicas(kMaxOutputReplicas + 1);
  const Status status = validateJobSpec(spec);
  REQUIRE_FALSE(status.isOk());
  CHECK(status.message() == "output_replicas: expected 0 to 1, got 2");
}

}  // namespace tellus::job
