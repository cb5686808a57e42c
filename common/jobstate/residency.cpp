#include "jobstate/residency.h"

#include <fmt/format.h>

#include "data/operator.h"
#include "job/spec.h"

namespace tellus::jobstate {

namespace {

std::string joinSites(const std::set<std::string>& sites) { return fmt::format("{}", fmt::join(sites, " and ")); }

}  // namespace

Result<std::vector<StagePinning>> stagePinning(const JobView& job) {
  const auto& spec = job.spec;
  const std::vector<std::string> extraDerived(spec.derived_operators().begin(), spec.derived_operators().end());
  std::vector<StagePinning> pins(static_cast<size_t>(spec.stages_size()));
  for (uint32_t s = 0; s < pins.size(); ++s) {
    const auto& stage = spec.stages(static_cast<int>(s));
    // Sites whose pinned raw records this stage reads.
    std::set<std::string> reads;
    if (isDatasetStage(spec, s)) {
      if (s < job.stages.size()) {
        for (const auto& p : job.stages[s].inputs.partitions()) {
          if (p.residency_local()) reads.insert(p.site());
        }
      }
    } else {
      for (const auto& in : stage.inputs()) {
        const int u = job::stageIndex(spec, in.stage());
        // Inputs refer to earlier stages (validateJobSpec); anything else is not ours to judge.
        if (u < 0 || static_cast<uint32_t>(u) >= s) continue;
        reads.insert(pins[static_cast<size_t>(u)].outputAt.begin(), pins[static_cast<size_t>(u)].outputAt.end());
      }
      if (reads.size() > 1) {
        return makeError(ErrorCode::kInvalidArgument,
                         fmt::format("stage '{}' would read raw records pinned at {} (residency: local); aggregate "
                                     "each site's data with a derived operator first",
                                     stage.name(), joinSites(reads)));
      }
      if (!reads.empty()) pins[s].tasksAt = *reads.begin();
    }
    if (!data::isDerivedOperator(stage.op(), extraDerived)) pins[s].outputAt = std::move(reads);
  }
  return pins;
}

Status checkResultSite(const JobView& job, const std::vector<StagePinning>& pinning, const std::string& site) {
  if (pinning.empty() || job.spec.stages_size() == 0) return Status::ok();
  const auto& last = pinning.back();
  std::set<std::string> elsewhere = last.outputAt;
  elsewhere.erase(site);
  if (elsewhere.empty()) return Status::ok();
  const auto& stage = job.spec.stages(job.spec.stages_size() - 1);
  return makeError(ErrorCode::kInvalidArgument,
                   fmt::format("the result of stage '{}' ({}) holds raw records pinned at {} (residency: local) and "
                               "may not leave it through site {}; use {}'s master, or end the job with an "
                               "aggregation (wordcount.map, wordcount.reduce, sum, or a site's derived_operators)",
                               stage.name(), stage.op(), joinSites(last.outputAt), site, joinSites(elsewhere)));
}

}  // namespace tellus::jobstate
