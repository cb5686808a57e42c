#pragma once
// Residency in meaning (docs/jobs.md, "Residency"): raw records of a residency-local dataset
// leave its site only through an aggregation. A task that reads pinned data runs at that data's
// site; if its operator is not derived (data::isDerivedOperator: it may copy raw records), its
// output is pinned there too, transitively. Pure: placement, stealing, submission and result
// reads all ask the same function.

#include <set>
#include <string>
#include <vector>

#include "jobstate/job_view.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::jobstate {

struct StagePinning {
  // Non-dataset stages: the site every task must run at ("" = anywhere). Dataset stages pin
  // task by task (InputRef.residency_local) and leave this empty.
  std::string tasksAt;
  // Sites whose pinned raw records this stage's output may contain (empty: it may leave).
  std::set<std::string> outputAt;
};

// One entry per stage of job.spec, from the spec (operators, edges, spec.derived_operators)
// and the dataset stages' inputs. kInvalidArgument when a stage would need raw records pinned
// at two sites ("stage 'join' reads raw records pinned at eu-west and us-east; aggregate ...").
Result<std::vector<StagePinning>> stagePinning(const JobView& job);

// Whether the job's result (its last stage's output) may be returned at `site`: ok, or
// kInvalidArgument with a one-line reason naming the stage and the site holding the data.
Status checkResultSite(const JobView& job, const std::vector<StagePinning>& pinning, const std::string& site);

}  // namespace tellus::jobstate
