#include "job/spec.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "config/values.h"
#include "config/yaml_reader.h"
#include "data/operator.h"
#include "sched/placement.h"
#include "sched/policies.h"

namespace tellus::job {

namespace {

using config::YamlMap;
using config::YamlSeq;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string placementChoices() { return sched::joinNames(sched::placementNames()); }

bool readsDataset(const pb::StageSpec& stage) {
  for (const auto& input : stage.inputs()) {
    if (input.source_case() == pb::StageInput::kDataset) return true;
  }
  return false;
}

// "one task per dataset partition" / "one task per upstream task" when tasks is 0, else the count.
std::string describeTasks(const pb::StageSpec& stage) {
  if (stage.tasks() != 0) return std::to_string(stage.tasks()) + " tasks";
  return readsDataset(stage) ? "one task per dataset partition" : "one task per upstream task";
}

// What validation found wrong, with enough position for parseJobSpec to point at a line:
// `stage`/`input` index the offending stage/input (-1 when not about one) and `field` names
// the field of the job (stage < 0) or of the stage.
struct SpecProblem {
  int stage = -1;
  int input = -1;
  std::string field;
  std::string message;
};

// The one place operators are checked against the operator registry of common/data: the
// same checks the executor applies before it runs a task, so that a bad op or param is rejected
// at submission rather than after the job has started. Returns (field, message).
std::optional<std::pair<std::string, std::string>> operatorProblem(const pb::StageSpec& stage) {
  if (stage.op().empty()) return std::pair<std::string, std::string>{"op", "op: an operator is required"};
  const data::OperatorParams params(stage.params().begin(), stage.params().end());
  Status status = data::validateOperator(stage.op(), params);
  if (status.isOk()) return std::nullopt;
  const auto known = data::operatorNames();
  const bool knownOp = std::find(known.begin(), known.end(), stage.op()) != known.end();
  // A known operator fails only on its params.
  const std::string field = knownOp ? "params" : "op";
  return std::pair<std::string, std::string>{field, field + ": " + status.message()};
}

std::optional<SpecProblem> findProblem(const pb::JobSpec& spec) {
  if (!config::isName(spec.name())) {
    return SpecProblem{-1, -1, "name",
                       "name: expected a job name (" + std::string(config::kNameForm) + "), got " + quoted(spec.name())};
  }
  if (!sched::parsePlacement(spec.placement())) {
    return SpecProblem{-1, -1, "placement",
                       "placement: expected one of " + placementChoices() + ", got " + quoted(spec.placement())};
  }
  if (!(spec.cost_weight() >= 0 && spec.cost_weight() <= sched::kMaxCostWeightSPerUnit)) {
    return SpecProblem{-1, -1, "cost_weight",
                       fmt::format("cost_weight: expected seconds per currency unit in [0, {}], got {}",
                                   sched::kMaxCostWeightSPerUnit, spec.cost_weight())};
  }
  if (spec.output_replicas() > kMaxOutputReplicas) {
    return SpecProblem{-1, -1, "output_replicas",
                       fmt::format("output_replicas: expected 0 to {}, got {}", kMaxOutputReplicas, spec.output_replicas())};
  }
  if (!(spec.min_locality() >= 0 && spec.min_locality() <= 1)) {
    return SpecProblem{-1, -1, "min_locality",
                       fmt::format("min_locality: expected a fraction of tasks in [0, 1], got {}", spec.min_locality())};
  }
  if (spec.stages().empty()) return SpecProblem{-1, -1, "stages", "stages: a job needs at least one stage"};

  struct Readers {
    int firstShuffle = -1;  // first stage that shuffles from this one
    int firstForward = -1;  // first stage that reads it with a forward edge
  };
  std::vector<Readers> readers(spec.stages_size());
  std::map<std::string, int> indexOfName;

  for (int i = 0; i < spec.stages_size(); ++i) {
    const pb::StageSpec& stage = spec.stages(i);
    const std::string where = "stage " + quoted(stage.name()) + ": ";
    if (!config::isName(stage.name())) {
      return SpecProblem{i, -1, "name",
                         "stages[" + std::to_string(i) + "]: name: expected a stage name (" +
                             std::string(config::kNameForm) + "), got " + quoted(stage.name())};
    }
    if (auto [it, inserted] = indexOfName.emplace(stage.name(), i); !inserted) {
      return SpecProblem{i, -1, "name",
                         where + "duplicate stage name (also stages[" + std::to_string(it->second) + "])"};
    }
    if (auto problem = operatorProblem(stage)) return SpecProblem{i, -1, problem->first, where + problem->second};

    const bool datasetStage = readsDataset(stage);
    std::map<std::string, int> seenInputs;  // "dataset:x" / "stage:y" -> input index
    for (int j = 0; j < stage.inputs_size(); ++j) {
      const pb::StageInput& input = stage.inputs(j);
      const std::string inputWhere = where + "input " + std::to_string(j) + ": ";
      switch (input.source_case()) {
        case pb::StageInput::SOURCE_NOT_SET:
          return SpecProblem{i, j, "", inputWhere + "expected exactly one of dataset or stage"};
        case pb::StageInput::kDataset: {
          if (!config::isName(input.dataset())) {
            return SpecProblem{i, j, "", inputWhere + "expected a dataset name (" + std::string(config::kNameForm) +
                                             "), got " + quoted(input.dataset())};
          }
          if (input.edge() != pb::EDGE_SHUFFLE) {
            return SpecProblem{i, j, "", where + "dataset input " + quoted(input.dataset()) +
                                             " cannot have an edge: only stage inputs do"};
          }
          if (auto [it, inserted] = seenInputs.emplace("dataset:" + input.dataset(), j); !inserted) {
            return SpecProblem{i, j, "", where + "dataset " + quoted(input.dataset()) + " is read twice"};
          }
          break;
        }
        case pb::StageInput::kStage: {
          const auto upstream = indexOfName.find(input.stage());
          // Stages are listed in topological order, so a reference to the stage itself or to a
          // later one (a cycle or a forward reference) is the same error as a missing stage.
          if (upstream == indexOfName.end() || upstream->second >= i) {
            return SpecProblem{i, j, "", where + "input stage " + quoted(input.stage()) + " is not an earlier stage"};
          }
          if (datasetStage) {
            return SpecProblem{i, j, "", where + "a stage that reads a dataset can read only datasets, but it also "
                                             "reads stage " + quoted(input.stage())};
          }
          if (auto [it, inserted] = seenInputs.emplace("stage:" + input.stage(), j); !inserted) {
            return SpecProblem{i, j, "", where + "stage " + quoted(input.stage()) + " is read twice"};
          }
          break;
        }
      }
    }

    if (datasetStage && stage.tasks() != 0) {
      return SpecProblem{i, -1, "tasks", where + "tasks: a stage that reads datasets runs one task per partition; "
                                                 "expected tasks 0 or absent, got " + std::to_string(stage.tasks())};
    }
    // tasks 0 on a stage that reads only forward edges: one task per upstream task.
    bool onlyForward = stage.inputs_size() > 0;
    for (const auto& in : stage.inputs()) onlyForward = onlyForward && in.has_stage() && in.edge() == pb::EDGE_FORWARD;
    if (!datasetStage && stage.tasks() == 0 && !onlyForward) {
      return SpecProblem{i, -1, "tasks", where + "tasks: expected a positive task count (only stages that read "
                                                 "datasets, or only forward edges, may leave it out)"};
    }

    for (int j = 0; j < stage.inputs_size(); ++j) {
      const pb::StageInput& input = stage.inputs(j);
      if (input.source_case() != pb::StageInput::kStage) continue;
      const int u = indexOfName.at(input.stage());
      const pb::StageSpec& upstream = spec.stages(u);
      Readers& r = readers[u];
      if (input.edge() == pb::EDGE_FORWARD) {
        if (stage.tasks() != 0 && upstream.tasks() != stage.tasks()) {
          return SpecProblem{i, j, "", where + "forward edge from stage " + quoted(upstream.name()) +
                                           " needs equal task counts, but " + quoted(upstream.name()) + " has " +
                                           describeTasks(upstream) + " and " + quoted(stage.name()) + " has " +
                                           describeTasks(stage)};
        }
        if (r.firstForward < 0) r.firstForward = i;
      } else {
        // Every task of the upstream stage writes one bucket per task of its shuffle reader, so
        // all its shuffle readers must agree on that count.
        if (r.firstShuffle >= 0 && spec.stages(r.firstShuffle).tasks() != stage.tasks()) {
          const pb::StageSpec& other = spec.stages(r.firstShuffle);
          return SpecProblem{i, j, "", where + "shuffles from stage " + quoted(upstream.name()) + " with " +
                                           describeTasks(stage) + ", but stage " + quoted(other.name()) +
                                           " shuffles from it with " + describeTasks(other) +
                                           "; shuffle readers of one stage need equal task counts"};
        }
        if (r.firstShuffle < 0) r.firstShuffle = i;
      }
      if (r.firstShuffle >= 0 && r.firstForward >= 0) {
        const int other = input.edge() == pb::EDGE_FORWARD ? r.firstShuffle : r.firstForward;
        return SpecProblem{i, j, "", where + "reads stage " + quoted(upstream.name()) + " with a " +
                                         (input.edge() == pb::EDGE_FORWARD ? "forward" : "shuffle") +
                                         " edge, but stage " + quoted(spec.stages(other).name()) +
                                         " reads it with a " +
                                         (input.edge() == pb::EDGE_FORWARD ? "shuffle" : "forward") +
                                         " edge; a stage's readers must all use the same kind of edge"};
      }
    }
  }
  return std::nullopt;
}

pb::StageInput readInput(YamlMap& m) {
  pb::StageInput input;
  const bool hasDataset = m.has("dataset");
  const bool hasStage = m.has("stage");
  const std::string dataset = m.optional<std::string>("dataset", "");
  const std::string stage = m.optional<std::string>("stage", "");
  const std::string edge = m.optional<std::string>("edge", "shuffle");
  if (hasDataset == hasStage) {
    m.failHere(std::string("expected exactly one of dataset or stage, got ") + (hasDataset ? "both" : "neither"));
  } else if (hasDataset) {
    input.set_dataset(dataset);
    if (m.has("edge")) m.fail("edge", "only a stage input has an edge");
  } else {
    input.set_stage(stage);
  }
  if (edge == "forward") {
    input.set_edge(pb::EDGE_FORWARD);
  } else if (edge != "shuffle") {
    m.fail("edge", "expected shuffle or forward, got " + quoted(edge));
  }
  return input;
}

}  // namespace

Result<pb::JobSpec> parseJobSpec(const std::string& yaml, const std::string& file) {
  auto parsed = config::parseYamlDocument(yaml, file);
  if (!parsed.isOk()) return parsed.error();
  YamlMap& root = *parsed;

  pb::JobSpec spec;
  spec.set_name(root.required<std::string>("name"));
  spec.set_placement(root.optional<std::string>("placement", "proportional"));
  spec.set_max_task_attempts(root.optional<uint32_t>("max_task_attempts", 4, config::atLeast<uint32_t>(1)));
  spec.set_static_containers(root.optional<uint32_t>("containers_per_site", 0));
  spec.set_no_stealing(!root.optional<bool>("stealing", true));
  spec.set_cost_weight(root.optional<double>("cost_weight", 0, config::between<double>(0, sched::kMaxCostWeightSPerUnit)));
  spec.set_output_replicas(root.optional<uint32_t>("output_replicas", kDefaultOutputReplicas,
                                                   config::between<uint32_t>(0, kMaxOutputReplicas)));
  spec.set_min_locality(root.optional<double>("min_locality", 0, config::between<double>(0, 1)));
  spec.set_atomic_containers(root.optional<bool>("atomic_containers", false));

  // Kept to point validation problems at their lines.
  std::vector<YamlMap> stageMaps;
  std::vector<std::vector<YamlMap>> inputMaps;

  YamlSeq stages = root.sequence("stages");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    YamlMap m = stages.map(i);
    pb::StageSpec* stage = spec.add_stages();
    stage->set_name(m.required<std::string>("name"));
    stage->set_op(m.required<std::string>("op"));
    stage->set_tasks(m.optional<uint32_t>("tasks", 0));
    if (auto params = m.optionalMap("params")) {
      for (const std::string& key : params->keys()) (*stage->mutable_params())[key] = params->required<std::string>(key);
    }
    std::vector<YamlMap> inputs;
    if (m.has("input") && m.has("inputs")) m.fail("inputs", "give either input (one map) or inputs (a list), not both");
    if (m.has("input")) {
      inputs.push_back(m.map("input"));
    } else {
      YamlSeq list = m.optionalSequence("inputs");
      for (std::size_t j = 0; j < list.size(); ++j) inputs.push_back(list.map(j));
    }
    for (YamlMap& input : inputs) *stage->add_inputs() = readInput(input);
    stageMaps.push_back(m);
    inputMaps.push_back(std::move(inputs));
  }
  TELLUS_RETURN_IF_ERROR(root.finish());

  if (auto problem = findProblem(spec)) {
    int line = root.line(problem->field);
    if (problem->stage >= 0 && problem->input >= 0) {
      line = inputMaps[problem->stage][problem->input].line();
    } else if (problem->stage >= 0) {
      line = stageMaps[problem->stage].line(problem->field);
    }
    return makeError(ErrorCode::kInvalidArgument, file + ":" + std::to_string(line) + ": " + problem->message);
  }
  return spec;
}

Result<pb::JobSpec> loadJobSpec(const std::string& path) {
  auto text = config::readTextFile(path);
  if (!text.isOk()) return text.error();
  return parseJobSpec(*text, path);
}

namespace {

Error tooLarge(const std::string& what, uint64_t got, uint64_t limit, const std::string& limitName) {
  return makeError(ErrorCode::kInvalidArgument, what + " " + std::to_string(got) + " is over the limit of " +
                                                    std::to_string(limit) + " (limits." + limitName + ")");
}

// Size checks that need no cluster knowledge; the resolved task counts are checked at Submit.
Status checkLimits(const pb::JobSpec& spec, const config::LimitsConfig& limits) {
  const size_t bytes = spec.ByteSizeLong();
  if (bytes > limits.max_spec_bytes) return tooLarge("job spec: encoded size", bytes, limits.max_spec_bytes, "max_spec_bytes");
  if (static_cast<uint64_t>(spec.stages_size()) > limits.max_stages_per_job) {
    return tooLarge("job spec: stage count", static_cast<uint64_t>(spec.stages_size()), limits.max_stages_per_job,
                    "max_stages_per_job");
  }
  uint64_t total = 0;
  for (const auto& stage : spec.stages()) {
    if (stage.tasks() > limits.max_tasks_per_stage) {
      return tooLarge("stage " + quoted(stage.name()) + ": tasks", stage.tasks(), limits.max_tasks_per_stage,
                      "max_tasks_per_stage");
    }
    total += stage.tasks();
    TELLUS_RETURN_IF_ERROR(checkOperatorLimits(stage.name(), stage.op(), stage.params(), limits));
  }
  if (total > limits.max_tasks_per_job) return tooLarge("job spec: total tasks", total, limits.max_tasks_per_job, "max_tasks_per_job");
  return Status::ok();
}

}  // namespace

Status checkOperatorLimits(const std::string& stageName, const std::string& op,
                           const google::protobuf::Map<std::string, std::string>& params,
                           const config::LimitsConfig& limits) {
  if (op != "synthetic") return Status::ok();
  auto it = params.find("output_bytes");
  if (it == params.end()) return Status::ok();
  uint64_t outputBytes = 0;
  const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), outputBytes);
  // Not a number: the operator's own validation names the problem; too large is ours.
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && outputBytes > limits.max_output_bytes)) {
    return makeError(ErrorCode::kInvalidArgument,
                     "stage " + quoted(stageName) + ": output_bytes " + it->second + " is over the limit of " +
                         std::to_string(limits.max_output_bytes) + " (limits.max_output_bytes)");
  }
  (void)end;
  return Status::ok();
}

Status validateJobSpec(const pb::JobSpec& spec, const config::LimitsConfig& limits) {
  // Size first: a huge spec is refused before the structural walk over it.
  if (spec.ByteSizeLong() > limits.max_spec_bytes || static_cast<uint64_t>(spec.stages_size()) > limits.max_stages_per_job) {
    return checkLimits(spec, limits);
  }
  if (auto problem = findProblem(spec)) return makeError(ErrorCode::kInvalidArgument, problem->message);
  return checkLimits(spec, limits);
}

Status checkResolvedTasks(const pb::JobSpec& spec, const std::map<uint32_t, uint32_t>& datasetTasks,
                          const config::LimitsConfig& limits) {
  std::vector<uint64_t> tasks(static_cast<size_t>(spec.stages_size()), 0);
  uint64_t total = 0;
  for (int i = 0; i < spec.stages_size(); ++i) {
    const auto& stage = spec.stages(i);
    if (stage.tasks() != 0) {
      tasks[i] = stage.tasks();
    } else if (auto it = datasetTasks.find(static_cast<uint32_t>(i)); it != datasetTasks.end()) {
      tasks[i] = it->second;
    } else {
      for (const auto& in : stage.inputs()) {
        const int u = in.has_stage() ? stageIndex(spec, in.stage()) : -1;
        if (u >= 0 && u < i) {
          tasks[i] = tasks[u];
          break;
        }
      }
    }
    if (tasks[i] > limits.max_tasks_per_stage) {
      return tooLarge("stage " + quoted(stage.name()) + ": tasks", tasks[i], limits.max_tasks_per_stage,
                      "max_tasks_per_stage");
    }
    total += tasks[i];
  }
  if (total > limits.max_tasks_per_job) return tooLarge("job: total tasks", total, limits.max_tasks_per_job, "max_tasks_per_job");
  return Status::ok();
}

std::vector<uint32_t> downstreamStages(const pb::JobSpec& spec, uint32_t s) {
  std::vector<uint32_t> result;
  if (s >= static_cast<uint32_t>(spec.stages_size())) return result;
  const std::string& name = spec.stages(static_cast<int>(s)).name();
  for (int t = 0; t < spec.stages_size(); ++t) {
    for (const auto& input : spec.stages(t).inputs()) {
      if (input.source_case() == pb::StageInput::kStage && input.stage() == name) {
        result.push_back(static_cast<uint32_t>(t));
        break;
      }
    }
  }
  return result;
}

int stageIndex(const pb::JobSpec& spec, const std::string& name) {
  for (int i = 0; i < spec.stages_size(); ++i) {
    if (spec.stages(i).name() == name) return i;
  }
  return -1;
}

uint32_t outputBuckets(const pb::JobSpec& spec, uint32_t s) {
  for (uint32_t t : downstreamStages(spec, s)) {
    const pb::StageSpec& reader = spec.stages(static_cast<int>(t));
    for (const auto& input : reader.inputs()) {
      if (input.source_case() == pb::StageInput::kStage && input.stage() == spec.stages(static_cast<int>(s)).name() &&
          input.edge() == pb::EDGE_SHUFFLE) {
        return std::max<uint32_t>(reader.tasks(), 1);
      }
    }
  }
  return 1;
}

}  // namespace tellus::job
