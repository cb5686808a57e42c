#pragma once
// Job specs: YAML in, validated pb::JobSpec out. A spec that passes validateJobSpec is a DAG
// whose stages are topologically ordered, whose operators exist with valid parameters, and
// whose edges are consistent; the master rejects anything else at submission.
//
// YAML form (docs/jobs.md):
//   name: wordcount
//   placement: proportional        # sched/policies.h: in-place | proportional | centralized | iridium | tetrium | max-min
//   max_task_attempts: 4
//   stages:
//     - name: map
//       op: wordcount.map
//       input: {dataset: corpus}    # or: inputs: [{dataset: a}, {stage: x, edge: forward}]
//     - name: reduce
//       op: wordcount.reduce
//       tasks: 4
//       input: {stage: map}         # edge: shuffle (default) | forward
//       params: {key: value}

#include <string>
#include <vector>

#include <map>

#include "config/config.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::job {

// A job spec's output_replicas: copies of each finished output on other workers of its site.
// One copy covers a single VM loss; more would only multiply the copying (issue 12).
inline constexpr uint32_t kDefaultOutputReplicas = 1;
inline constexpr uint32_t kMaxOutputReplicas = 1;
// The spec's value, its default when absent (specs from before the knob, or built in code).
inline uint32_t outputReplicas(const pb::JobSpec& spec) {
  return spec.has_output_replicas() ? spec.output_replicas() : kDefaultOutputReplicas;
}

Result<pb::JobSpec> parseJobSpec(const std::string& yaml, const std::string& file);
Result<pb::JobSpec> loadJobSpec(const std::string& path);

// Structural checks (no cluster knowledge): names unique and well-formed, inputs refer to
// earlier stages, dataset stages have tasks == 0 and only dataset inputs, other stages
// tasks >= 1, forward edges join stages with equal task counts, operators and params valid,
// placement known, at least one stage. Also applied to specs that arrive over RPC, then with
// the master's limits: encoded size, stages, explicit task counts (per stage and summed) and
// `synthetic` output_bytes. The first problem is the one-line error.
Status validateJobSpec(const pb::JobSpec& spec, const config::LimitsConfig& limits = {});

// Limits on one stage's operator and params (`synthetic` output_bytes), for the spec check and
// for a worker's RunTask (whose op and params come over the network, from a JM or anyone).
Status checkOperatorLimits(const std::string& stageName, const std::string& op,
                           const google::protobuf::Map<std::string, std::string>& params,
                           const config::LimitsConfig& limits);

// The task counts a valid spec resolves to once the dataset stages' partitions are known
// (`datasetTasks`: stage index -> partitions it reads); a stage with tasks 0 that reads only
// forward edges has its upstream's count. Checked against max_tasks_per_stage and
// max_tasks_per_job: the master calls it at Submit before it writes anything.
Status checkResolvedTasks(const pb::JobSpec& spec, const std::map<uint32_t, uint32_t>& datasetTasks,
                          const config::LimitsConfig& limits);

// Stages that read stage `s` (by index), for release and lineage.
std::vector<uint32_t> downstreamStages(const pb::JobSpec& spec, uint32_t s);
// Index of the stage named `name`, or -1.
int stageIndex(const pb::JobSpec& spec, const std::string& name);
// Buckets each task of stage `s` writes: the task count of the stage that shuffles from it
// (1 when nothing reads it or the edge is forward).
uint32_t outputBuckets(const pb::JobSpec& spec, uint32_t s);

}  // namespace tellus::job
