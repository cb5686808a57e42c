#pragma once
// Job specs: YAML in, validated pb::JobSpec out. A spec that passes validateJobSpec is a DAG
// whose stages are topologically ordered, whose operators exist with valid parameters, and
// whose edges are consistent; the master rejects anything else at submission.
//
// YAML form (docs/jobs.md):
//   name: wordcount
//   placement: proportional        # sched/policies.h: in-place | proportional | centralized | iridium | tetrium
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

#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::job {

Result<pb::JobSpec> parseJobSpec(const std::string& yaml, const std::string& file);
Result<pb::JobSpec> loadJobSpec(const std::string& path);

// Structural checks (no cluster knowledge): names unique and well-formed, inputs refer to
// earlier stages, dataset stages have tasks == 0 and only dataset inputs, other stages
// tasks >= 1, forward edges join stages with equal task counts, operators and params valid,
// placement known, at least one stage. Also applied to specs that arrive over RPC.
Status validateJobSpec(const pb::JobSpec& spec);

// Stages that read stage `s` (by index), for release and lineage.
std::vector<uint32_t> downstreamStages(const pb::JobSpec& spec, uint32_t s);
// Index of the stage named `name`, or -1.
int stageIndex(const pb::JobSpec& spec, const std::string& name);
// Buckets each task of stage `s` writes: the task count of the stage that shuffles from it
// (1 when nothing reads it or the edge is forward).
uint32_t outputBuckets(const pb::JobSpec& spec, uint32_t s);

}  // namespace tellus::job
