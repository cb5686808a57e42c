#include "jobstate/job_view.h"

#include <algorithm>

#include "job/spec.h"

namespace tellus::jobstate {

bool isTerminal(pb::JobState state) {
  return state == pb::JOB_SUCCEEDED || state == pb::JOB_FAILED || state == pb::JOB_KILLED;
}

std::string jobStateName(pb::JobState state) {
  switch (state) {
    case pb::JOB_PENDING: return "pending";
    case pb::JOB_RUNNING: return "running";
    case pb::JOB_SUCCEEDED: return "succeeded";
    case pb::JOB_FAILED: return "failed";
    case pb::JOB_KILLED: return "killed";
    default: return "unknown";
  }
}

bool isDatasetStage(const pb::JobSpec& spec, uint32_t s) {
  const auto& st = spec.stages(static_cast<int>(s));
  return st.inputs_size() > 0 && st.inputs(0).has_dataset();
}

uint32_t taskCount(const JobView& job, uint32_t s) {
  if (isDatasetStage(job.spec, s)) return static_cast<uint32_t>(job.stages[s].inputs.partitions_size());
  const auto& stage = job.spec.stages(static_cast<int>(s));
  if (stage.tasks() == 0 && stage.inputs_size() > 0) {
    // Reads only forward edges: one task per task of its (first) upstream stage.
    int u = job::stageIndex(job.spec, stage.inputs(0).stage());
    if (u >= 0 && static_cast<uint32_t>(u) < s) return taskCount(job, static_cast<uint32_t>(u));
  }
  return stage.tasks();
}

bool stageDone(const JobView& job, uint32_t s) {
  const auto& st = job.stages[s];
  return st.taskmap.has_value() && st.parts.size() == taskCount(job, s);
}

bool jobDone(const JobView& job) {
  for (uint32_t s = 0; s < job.stages.size(); ++s) {
    if (!stageDone(job, s)) return false;
  }
  return !job.stages.empty();
}

std::vector<uint32_t> releasableStages(const JobView& job) {
  std::vector<uint32_t> out;
  for (uint32_t s = 0; s < job.stages.size(); ++s) {
    if (job.stages[s].taskmap) continue;
    bool ready = true;
    for (const auto& in : job.spec.stages(static_cast<int>(s)).inputs()) {
      if (in.has_stage()) {
        int u = job::stageIndex(job.spec, in.stage());
        if (u < 0 || !stageDone(job, static_cast<uint32_t>(u))) ready = false;
      }
    }
    if (ready) out.push_back(s);
  }
  return out;
}

namespace {

pb::InputRef partitionRef(const std::string& jobId, uint32_t stage, uint32_t task, uint32_t bucket,
                          const pb::PartitionLocation& loc) {
  pb::InputRef ref;
  ref.set_site(loc.site());
  ref.set_worker_id(loc.worker_id());
  ref.set_worker_address(loc.worker_address());
  auto* key = ref.mutable_partition();
  key->set_job_id(jobId);
  key->set_stage(stage);
  key->set_task(task);
  key->set_bucket(bucket);
  // A record without this bucket is malformed (an executor reports every bucket it was asked
  // for): the primary does not trust it (JobCore::onPartRecorded) and releases nothing on it.
  if (static_cast<int>(bucket) < loc.bucket_bytes_size()) ref.set_bytes(loc.bucket_bytes(static_cast<int>(bucket)));
  // The output's other copies, tried in order when its worker cannot serve it.
  *ref.mutable_replicas() = loc.replicas();
  return ref;
}

}  // namespace

Result<std::vector<pb::InputRef>> taskInputs(const JobView& job, uint32_t s, uint32_t t) {
  std::vector<pb::InputRef> refs;
  if (isDatasetStage(job.spec, s)) {
    const auto& parts = job.stages[s].inputs.partitions();
    if (static_cast<int>(t) >= parts.size()) {
      return makeError(ErrorCode::kNotFound, "stage " + std::to_string(s) + " has no input partition " + std::to_string(t));
    }
    refs.push_back(parts[static_cast<int>(t)]);
    return refs;
  }
  for (const auto& in : job.spec.stages(static_cast<int>(s)).inputs()) {
    int ui = job::stageIndex(job.spec, in.stage());
    if (ui < 0) return makeError(ErrorCode::kInvalidArgument, "unknown input stage " + in.stage());
    auto u = static_cast<uint32_t>(ui);
    const auto& upstream = job.stages[u];
    auto need = [&](uint32_t task, uint32_t bucket) -> Status {
      auto it = upstream.parts.find(task);
      if (it == upstream.parts.end()) {
        return makeError(ErrorCode::kNotFound, "output of stage " + std::to_string(u) + " task " + std::to_string(task) + " is missing");
      }
      refs.push_back(partitionRef(job.jobId, u, task, bucket, it->second));
      return {};
    };
    if (in.edge() == pb::EDGE_FORWARD) {
      TELLUS_RETURN_IF_ERROR(need(t, 0));
    } else {
      for (uint32_t ut = 0; ut < taskCount(job, u); ++ut) TELLUS_RETURN_IF_ERROR(need(ut, t));
    }
  }
  return refs;
}

bool outputEmpty(const pb::PartitionLocation& loc) {
  return loc.bucket_bytes_size() > 0 &&
         std::all_of(loc.bucket_bytes().begin(), loc.bucket_bytes().end(), [](uint64_t b) { return b == 0; });
}

std::map<std::string, double> inputBytesBySite(const JobView& job, uint32_t s) {
  std::map<std::string, double> bytes;
  if (isDatasetStage(job.spec, s)) {
    for (const auto& p : job.stages[s].inputs.partitions()) bytes[p.site()] += static_cast<double>(p.bytes());
    return bytes;
  }
  for (const auto& in : job.spec.stages(static_cast<int>(s)).inputs()) {
    int u = job::stageIndex(job.spec, in.stage());
    if (u < 0) continue;
    for (const auto& [task, loc] : job.stages[static_cast<uint32_t>(u)].parts) {
      double total = 0;
      for (auto b : loc.bucket_bytes()) total += static_cast<double>(b);
      bytes[loc.site()] += total;
    }
  }
  return bytes;
}

std::vector<uint32_t> unfinishedTasks(const JobView& job, uint32_t s, const std::string& site) {
  std::vector<uint32_t> out;
  const auto& st = job.stages[s];
  if (!st.taskmap) return out;
  for (int t = 0; t < st.taskmap->owner_site_size(); ++t) {
    if (st.taskmap->owner_site(t) == site && !st.parts.count(static_cast<uint32_t>(t))) {
      out.push_back(static_cast<uint32_t>(t));
    }
  }
  return out;
}

}  // namespace tellus::jobstate
