#include "jobstate/job_store.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "coord/election.h"
#include "jobstate/job_view.h"
#include "jobstate/paths.h"
#include "util/log.h"
#include "util/names.h"

namespace tellus::jobstate {

using boost::asio::awaitable;

namespace {

Status checkJobId(const std::string& jobId) {
  if (isJobId(jobId)) return Status::ok();
  return makeError(ErrorCode::kInvalidArgument, "bad job id '" + jobId + "'");
}

int64_t nowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A site name as it may appear in a path: one path component.
Status checkSite(const std::string& site) {
  if (!site.empty() && site.find('/') == std::string::npos && site != "." && site != "..") return Status::ok();
  return makeError(ErrorCode::kInvalidArgument, "bad site name '" + site + "'");
}

}  // namespace

std::optional<uint64_t> parseEpoch(std::string_view text) {
  uint64_t epoch = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), epoch);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return epoch;
}

std::set<uint32_t> JobStore::outputTaskIds(const std::vector<std::string>& names, const std::string& where) {
  std::set<uint32_t> tasks;
  for (const auto& name : names) {
    auto task = parsePartName(name);
    if (!task) {
      spdlog::warn("ignoring a malformed output node {}/{}", where, name);
      continue;
    }
    tasks.insert(*task);
  }
  return tasks;
}

std::vector<TaskId> JobStore::taskIds(const std::vector<std::string>& names, const std::string& where) {
  std::vector<TaskId> tasks;
  for (const auto& name : names) {
    auto id = parseTaskName(name);
    if (!id) {
      spdlog::warn("ignoring a malformed node {}/{}", where, name);
      continue;
    }
    tasks.push_back(*id);
  }
  return tasks;
}

std::string JobStore::finishRecordName(const std::string& attemptId, const std::string& recordBytes) {
  const auto crc = static_cast<uint32_t>(::crc32(0L, reinterpret_cast<const Bytef*>(recordBytes.data()),
                                                 static_cast<uInt>(recordBytes.size())));
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc);
  return attemptId + "-" + hex;
}

std::string JobStore::electionPath(const std::string& jobId) { return jobstate::electionPath(jobId); }

template <class M>
awaitable<Result<Versioned<M>>> JobStore::read(std::string path) {
  auto node = co_await zk_.get(path);
  if (!node) co_return node.error();
  auto value = decodeNode<M>(node->data, path);
  if (!value) co_return value.error();
  co_return Versioned<M>{std::move(value).value(), node->stat};
}

awaitable<void> JobStore::awaitReconnect() { (void)co_await zk_.waitConnected(retry_.reconnectWait); }

// ---- creating and listing jobs ---------------------------------------------------------------

awaitable<Status> JobStore::ensureJobsRoot() {
  Status st = co_await zk_.ensurePath(jobsPath());
  co_return st;
}

Result<size_t> createJobBytes(const pb::JobSpec& spec, const pb::JobStatus& status,
                              const std::map<uint32_t, pb::StageInputs>& inputs) {
  // Per op: its path (job-NNNNNNNNNN/stages/<s>/inputs is under 64 bytes under /jobs) and
  // ZooKeeper's per-op framing and ACL, both well under 256 bytes.
  constexpr size_t kPerOp = 256;
  size_t total = spec.ByteSizeLong() + status.ByteSizeLong() + (8 + 2 * static_cast<size_t>(spec.stages_size())) * kPerOp;
  size_t largest = 0;
  uint32_t largestStage = 0;
  for (const auto& [s, stageInputs] : inputs) {
    const size_t bytes = stageInputs.ByteSizeLong() + kPerOp;
    total += bytes;
    if (bytes > largest) largest = bytes, largestStage = s;
  }
  if (total > kMaxCreateJobBytes) {
    std::string biggest = largest > spec.ByteSizeLong()
                              ? fmt::format("stage {}'s inputs ({} partitions, {} bytes)", largestStage,
                                            inputs.at(largestStage).partitions_size(), largest)
                              : fmt::format("the spec ({} bytes)", spec.ByteSizeLong());
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("the job's state would be {} bytes, over the {} ZooKeeper takes in one write; the "
                                 "largest part is {}: read fewer or larger partitions",
                                 total, kMaxCreateJobBytes, biggest));
  }
  return total;
}

awaitable<Result<std::string>> JobStore::createJob(pb::JobSpec spec, pb::JobStatus status,
                                                   std::map<uint32_t, pb::StageInputs> inputs) {
  if (auto fits = createJobBytes(spec, status, inputs); !fits) co_return fits.error();
  auto jobNode = co_await zk_.create(jobPrefix(), "", coord::CreateMode::kPersistentSequential);
  if (!jobNode) co_return jobNode.error().prepend("allocating a job id");
  std::string jobId = jobNode->substr(jobNode->rfind('/') + 1);
  status.set_job_id(jobId);

  std::vector<coord::ZkOp> ops;
  ops.push_back(coord::ZkOp::create(specPath(jobId), spec.SerializeAsString()));
  ops.push_back(coord::ZkOp::create(epochPath(jobId), "0"));
  ops.push_back(coord::ZkOp::create(jmsPath(jobId), ""));
  ops.push_back(coord::ZkOp::create(jobstate::electionPath(jobId), ""));
  ops.push_back(coord::ZkOp::create(attemptsPath(jobId), ""));
  ops.push_back(coord::ZkOp::create(runningPath(jobId), ""));
  ops.push_back(coord::ZkOp::create(stagesPath(jobId), ""));
  for (uint32_t s = 0; s < static_cast<uint32_t>(spec.stages_size()); ++s) {
    ops.push_back(coord::ZkOp::create(stagePath(jobId, s), ""));
    ops.push_back(coord::ZkOp::create(partsPath(jobId, s), ""));
    ops.push_back(coord::ZkOp::create(finishedPath(jobId, s), ""));
  }
  for (const auto& [s, stageInputs] : inputs) {
    ops.push_back(coord::ZkOp::create(inputsPath(jobId, s), stageInputs.SerializeAsString()));
  }
  // The status goes last: a job is visible to JMs only once its whole state exists.
  ops.push_back(coord::ZkOp::create(statusPath(jobId), status.SerializeAsString()));
  auto written = co_await zk_.multi(std::move(ops));
  if (!written) co_return written.error().prepend("writing job " + jobId);
  co_return jobId;
}

awaitable<Result<std::vector<std::string>>> JobStore::listJobs() {
  auto names = co_await zk_.children(jobsPath());
  if (!names) co_return names.error();
  std::vector<std::string> ids;
  for (auto& name : *names) {
    if (!isJobId(name)) {
      spdlog::warn("ignoring a malformed job node {}/{}", jobsPath(), name);
      continue;
    }
    ids.push_back(std::move(name));
  }
  co_return ids;
}

// ---- reads -------------------------------------------------------------------------------------

awaitable<Result<Versioned<pb::JobStatus>>> JobStore::status(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto status = co_await read<pb::JobStatus>(statusPath(jobId));
  if (!status && status.error().code == ErrorCode::kNotFound) co_return makeError(ErrorCode::kNotFound, "no job " + jobId);
  co_return status;
}

awaitable<Result<pb::JobSpec>> JobStore::spec(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto spec = co_await read<pb::JobSpec>(specPath(jobId));
  if (!spec) co_return spec.error();
  co_return std::move(spec->value);
}

awaitable<Result<pb::StageInputs>> JobStore::stageInputs(std::string jobId, uint32_t stage) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto inputs = co_await read<pb::StageInputs>(inputsPath(jobId, stage));
  if (!inputs) co_return inputs.error();
  co_return std::move(inputs->value);
}

awaitable<Result<LoadedJob>> JobStore::load(std::string jobId) {
  auto spec = co_await this->spec(jobId);
  if (!spec) co_return spec.error().prepend("job " + jobId);
  LoadedJob job;
  job.spec = std::move(spec).value();
  job.inputs.resize(static_cast<size_t>(job.spec.stages_size()));
  for (uint32_t s = 0; s < job.inputs.size(); ++s) {
    if (!isDatasetStage(job.spec, s)) continue;
    auto inputs = co_await stageInputs(jobId, s);
    if (!inputs) co_return inputs.error().prepend("inputs of stage " + std::to_string(s));
    job.inputs[s] = std::move(inputs).value();
  }
  co_return job;
}

awaitable<Result<Versioned<pb::TaskMap>>> JobStore::taskMap(std::string jobId, uint32_t stage) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto map = co_await read<pb::TaskMap>(taskmapPath(jobId, stage));
  co_return map;
}

awaitable<Result<std::set<uint32_t>>> JobStore::outputTasks(std::string jobId, uint32_t stage) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto names = co_await zk_.children(partsPath(jobId, stage));
  if (!names) co_return names.error();
  co_return outputTaskIds(*names, partsPath(jobId, stage));
}

awaitable<Result<pb::PartitionLocation>> JobStore::output(std::string jobId, uint32_t stage, uint32_t task) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto location = co_await read<pb::PartitionLocation>(partPath(jobId, stage, task));
  if (!location) co_return location.error();
  co_return std::move(location->value);
}

awaitable<Result<RecordedOutput>> JobStore::recordedOutput(std::string jobId, uint32_t stage, uint32_t task) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  const std::string path = partPath(jobId, stage, task);
  auto node = co_await zk_.get(path);
  if (!node) co_return node.error();
  auto location = decodeNode<pb::PartitionLocation>(node->data, path);
  if (!location) co_return location.error();
  std::string key = finishRecordName(location->attempt_id(), node->data);
  co_return RecordedOutput{std::move(location).value(), std::move(key)};
}

awaitable<Result<std::set<std::string>>> JobStore::finishRecords(std::string jobId, uint32_t stage) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto names = co_await zk_.children(finishedPath(jobId, stage));
  if (!names) co_return names.error();
  co_return std::set<std::string>(names->begin(), names->end());
}

awaitable<Result<std::vector<TaskId>>> JobStore::runningTasks(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto names = co_await zk_.children(runningPath(jobId));
  if (!names) co_return names.error();
  co_return taskIds(*names, runningPath(jobId));
}

awaitable<Result<pb::RunningTask>> JobStore::runningMarker(std::string jobId, TaskId task) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  const std::string path = runningTaskPath(jobId, task.first, task.second);
  auto marker = co_await read<pb::RunningTask>(path);
  if (!marker) co_return marker.error();
  // A worker's marker is ephemeral (it goes with the worker): a persistent one is not ours.
  if (marker->stat.ephemeralOwner == 0) co_return makeError(ErrorCode::kInternal, path + " is not a worker's marker (persistent)");
  co_return std::move(marker->value);
}

awaitable<Result<std::map<TaskId, uint32_t>>> JobStore::attemptCounts(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto names = co_await zk_.children(attemptsPath(jobId));
  if (!names) co_return names.error();
  std::map<TaskId, uint32_t> counts;
  for (const auto& id : taskIds(*names, attemptsPath(jobId))) ++counts[id];
  co_return counts;
}

awaitable<Result<std::vector<Attempt>>> JobStore::attempts(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  const std::string dir = attemptsPath(jobId);
  auto names = co_await zk_.children(dir);
  if (!names) co_return names.error();
  std::vector<Attempt> out;
  for (const auto& name : *names) {
    auto id = parseTaskName(name);
    if (!id) {
      spdlog::warn("ignoring a malformed node {}/{}", dir, name);
      continue;
    }
    auto node = co_await zk_.get(dir + "/" + name);
    if (!node) co_return node.error().prepend("reading " + dir + "/" + name);
    if (node->data.size() > kMaxNodeBytes) co_return makeError(ErrorCode::kInternal, dir + "/" + name + " is too large");
    out.push_back(Attempt{*id, node->data});
  }
  co_return out;
}

awaitable<Result<std::vector<std::string>>> JobStore::taskAttempts(std::string jobId, TaskId task) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  const std::string dir = attemptsPath(jobId);
  auto names = co_await zk_.children(dir);
  if (!names) co_return names.error();
  const std::string prefix = runningTaskName(task.first, task.second) + "-";
  std::vector<std::string> out;
  for (const auto& name : *names) {
    if (name.rfind(prefix, 0) == 0 && parseTaskName(name) == task) out.push_back(name);
  }
  // Sequence numbers in decimal: shorter is smaller, then digit by digit.
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  co_return out;
}

awaitable<Result<std::string>> JobStore::attemptWorker(std::string jobId, std::string attemptId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  if (!parseTaskName(attemptId) || std::count(attemptId.begin(), attemptId.end(), '-') != 2) {
    co_return makeError(ErrorCode::kInvalidArgument, "bad attempt id '" + attemptId.substr(0, 64) + "'");
  }
  const std::string path = attemptsPath(jobId) + "/" + attemptId;
  auto node = co_await zk_.get(path);
  if (!node) co_return node.error().prepend("reading " + path);
  if (!isName(node->data)) co_return makeError(ErrorCode::kInvalidArgument, path + " does not name a worker");
  co_return node->data;
}

awaitable<Result<std::vector<std::string>>> JobStore::jmSites(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto names = co_await zk_.children(jmsPath(jobId));
  co_return names;
}

awaitable<Result<Versioned<pb::JmInfo>>> JobStore::jm(std::string jobId, std::string site) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  if (auto st = checkSite(site); !st) co_return st.error();
  auto info = co_await read<pb::JmInfo>(jmPath(jobId, site));
  co_return info;
}

awaitable<Result<Versioned<uint64_t>>> JobStore::epoch(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto node = co_await zk_.get(epochPath(jobId));
  if (!node) co_return node.error();
  auto epoch = parseEpoch(node->data);
  if (!epoch) co_return makeError(ErrorCode::kInternal, "malformed epoch in " + epochPath(jobId));
  co_return Versioned<uint64_t>{*epoch, node->stat};
}

awaitable<Result<std::vector<std::string>>> JobStore::electionCandidates(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  const std::string dir = jobstate::electionPath(jobId);
  auto names = co_await zk_.children(dir);
  if (!names) co_return names.error();
  std::vector<std::string> candidates;
  for (const auto& name : coord::electionOrder(*names)) {
    auto node = co_await zk_.get(dir + "/" + name);
    if (node) candidates.push_back(node->data);  // a candidate that left meanwhile is not one
  }
  co_return candidates;
}

// ---- status transitions -------------------------------------------------------------------

awaitable<Status> JobStore::endJob(std::string jobId, pb::JobState state, std::string reason) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  constexpr int kTries = 10;  // each lost try means another writer changed the status meanwhile
  for (int attempt = 0; attempt < kTries; ++attempt) {
    auto node = co_await zk_.get(statusPath(jobId));
    if (!node) {
      if (node.error().code == ErrorCode::kNotFound) co_return makeError(ErrorCode::kNotFound, "no job " + jobId);
      co_return node.status();
    }
    auto decoded = decodeNode<pb::JobStatus>(node->data, statusPath(jobId));
    pb::JobStatus status;
    if (decoded) {
      status = std::move(decoded).value();
    } else {
      spdlog::warn("job {}: {}; replacing it", jobId, decoded.message());
      status.set_job_id(jobId);
    }
    if (isTerminal(status.state())) {
      co_return makeError(ErrorCode::kInvalidArgument, "job " + jobId + " has already " + jobStateName(status.state()));
    }
    status.set_state(state);
    status.set_finish_unix_ms(nowUnixMs());
    status.set_error(reason);
    auto set = co_await zk_.set(statusPath(jobId), status.SerializeAsString(), node->stat.version);
    if (set) co_return Status::ok();
    if (set.error().code != ErrorCode::kConflict) co_return set.status();
  }
  co_return makeError(ErrorCode::kConflict, "job " + jobId + ": its status kept changing; not ended");
}

awaitable<Status> JobStore::overwriteStatus(std::string jobId, pb::JobStatus status) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  auto set = co_await zk_.set(statusPath(jobId), status.SerializeAsString(), -1);
  co_return set.status();
}

// ---- fenced writes --------------------------------------------------------------------------

awaitable<Status> JobStore::fencedMulti(const std::string& jobId, int32_t epochVersion, std::vector<coord::ZkOp> ops) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  ops.insert(ops.begin(), coord::ZkOp::check(epochPath(jobId), epochVersion));
  auto done = co_await zk_.multi(std::move(ops));
  co_return done.status();
}

awaitable<Result<Versioned<uint64_t>>> JobStore::bumpEpoch(std::string jobId, int32_t statusVersion) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto node = co_await zk_.get(epochPath(jobId));
  if (!node) co_return node.error();
  auto previous = parseEpoch(node->data);
  if (!previous) {
    // Its version still fences whoever wrote it: counting on from 0 keeps the job going.
    spdlog::warn("job {}: malformed epoch '{}' in {}; counting from 0", jobId, node->data.substr(0, 32), epochPath(jobId));
    previous = 0;
  }
  std::vector<coord::ZkOp> ops{coord::ZkOp::check(statusPath(jobId), statusVersion),
                               coord::ZkOp::set(epochPath(jobId), std::to_string(*previous + 1), node->stat.version)};
  auto done = co_await zk_.multi(std::move(ops));
  if (!done) co_return done.error();
  if (done->size() != 2 || !(*done)[1].stat) co_return makeError(ErrorCode::kInternal, "bumping the epoch: no stat returned");
  co_return Versioned<uint64_t>{*previous + 1, *(*done)[1].stat};
}

awaitable<Status> JobStore::createTaskMapFenced(std::string jobId, uint32_t stage, pb::TaskMap map, int32_t epochVersion) {
  std::vector<coord::ZkOp> ops{coord::ZkOp::create(taskmapPath(jobId, stage), map.SerializeAsString())};
  Status st = co_await fencedMulti(jobId, epochVersion, std::move(ops));
  co_return st;
}

awaitable<Status> JobStore::removeOutputFenced(std::string jobId, TaskId task, int32_t epochVersion) {
  std::vector<coord::ZkOp> ops{coord::ZkOp::remove(partPath(jobId, task.first, task.second))};
  Status st = co_await fencedMulti(jobId, epochVersion, std::move(ops));
  co_return st;
}

awaitable<Status> JobStore::writeStatusFenced(std::string jobId, pb::JobStatus status, int32_t epochVersion) {
  std::vector<coord::ZkOp> ops{coord::ZkOp::set(statusPath(jobId), status.SerializeAsString(), -1)};
  Status st = co_await fencedMulti(jobId, epochVersion, std::move(ops));
  co_return st;
}

// ---- compare-and-set ----------------------------------------------------------------------

awaitable<Result<Versioned<pb::TaskMap>>> JobStore::casTaskMap(std::string jobId, uint32_t stage,
                                                               std::function<Status(pb::TaskMap&)> edit, int tries) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  const std::string path = taskmapPath(jobId, stage);
  Error lost{ErrorCode::kConflict, "not tried"};
  for (int attempt = 0; attempt < tries; ++attempt) {
    auto current = co_await read<pb::TaskMap>(path);
    if (!current) co_return current.error();
    pb::TaskMap map = std::move(current->value);
    if (auto edited = edit(map); !edited) co_return edited.error();
    auto set = co_await zk_.set(path, map.SerializeAsString(), current->stat.version);
    if (set) co_return Versioned<pb::TaskMap>{std::move(map), *set};
    // Another writer won, or the reply was lost (our write may have landed): try again on
    // the map as it is now; `edit` recomputes from it.
    if (set.error().code != ErrorCode::kConflict && set.error().code != ErrorCode::kUnavailable) co_return set.error();
    lost = set.error();
  }
  co_return lost;
}

// ---- a worker's writes ------------------------------------------------------------------------

awaitable<Status> JobStore::recordOutput(std::string jobId, TaskId task, pb::PartitionLocation location) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  if (!parseTaskName(location.attempt_id())) {
    co_return makeError(ErrorCode::kInvalidArgument, "output record without a valid attempt id '" +
                                                         location.attempt_id().substr(0, 64) + "'");
  }
  const std::string path = partPath(jobId, task.first, task.second);
  const std::string data = location.SerializeAsString();
  const std::string finish = finishedPath(jobId, task.first) + "/" + finishRecordName(location.attempt_id(), data);
  for (int attempt = 0;; ++attempt) {
    // The record, its finish record and a check that its execution was audited, together
    // (an audit node is written once: version 0).
    std::vector<coord::ZkOp> ops{coord::ZkOp::check(attemptsPath(jobId) + "/" + location.attempt_id(), 0),
                                 coord::ZkOp::create(path, data, coord::CreateMode::kPersistent),
                                 coord::ZkOp::create(finish, "", coord::CreateMode::kPersistent)};
    auto created = co_await zk_.multi(std::move(ops));
    // "Already exists": an earlier try whose reply was lost, or another copy of the task.
    if (created || created.error().code == ErrorCode::kAlreadyExists) co_return Status::ok();
    if (created.error().code != ErrorCode::kUnavailable || attempt >= retry_.retries) co_return created.status();
    co_await awaitReconnect();
  }
}

awaitable<Result<std::string>> JobStore::startAttempt(std::string jobId, TaskId task, pb::RunningTask marker,
                                                      std::string workerId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  const std::string markerPath = runningTaskPath(jobId, task.first, task.second);
  const std::string prefix = runningTaskName(task.first, task.second) + "-";
  const std::string audit = attemptsPath(jobId) + "/" + prefix;
  const std::string data = marker.SerializeAsString();
  for (int attempt = 0;; ++attempt) {
    std::vector<coord::ZkOp> ops{coord::ZkOp::create(markerPath, data, coord::CreateMode::kEphemeral),
                                 coord::ZkOp::create(audit, workerId, coord::CreateMode::kPersistentSequential)};
    auto r = co_await zk_.multi(std::move(ops));
    if (r) {
      if (r->size() != 2 || (*r)[1].createdPath.empty()) co_return makeError(ErrorCode::kInternal, "starting an attempt: no path returned");
      const auto& created = (*r)[1].createdPath;
      co_return created.substr(created.rfind('/') + 1);
    }
    if (r.error().code == ErrorCode::kAlreadyExists) {
      // Ours, from a try whose reply was lost? Otherwise the task really is running elsewhere.
      auto stat = co_await zk_.exists(markerPath);
      if (stat && *stat && (*stat)->ephemeralOwner == 0 && attempt < retry_.retries) {
        // Persistent: no worker's marker (forged or left by hand). It would block the task
        // forever; removed, and the attempt starts.
        spdlog::warn("removing {}: not a worker's marker (persistent)", markerPath);
        (void)co_await zk_.remove(markerPath);
        continue;
      }
      if (stat && *stat && (*stat)->ephemeralOwner == zk_.sessionId()) {
        // Rare (a lost reply): our audit node is the task's newest one naming this worker.
        auto names = co_await zk_.children(attemptsPath(jobId));
        if (!names) co_return names.error().prepend("finding the audit node of a started attempt");
        std::string newest;
        for (const auto& name : *names) {
          if (name.rfind(prefix, 0) != 0 || name <= newest) continue;
          auto node = co_await zk_.get(attemptsPath(jobId) + "/" + name);
          if (node && node->data == workerId) newest = name;
        }
        if (newest.empty()) co_return makeError(ErrorCode::kInternal, "started attempt without an audit node");
        co_return newest;
      }
      co_return makeError(ErrorCode::kAlreadyExists, "task " + std::to_string(task.first) + "/" +
                                                         std::to_string(task.second) + " is already running");
    }
    if (r.error().code != ErrorCode::kUnavailable || attempt >= retry_.retries) co_return r.error();
    co_await awaitReconnect();
  }
}

awaitable<Status> JobStore::removeRunningMarker(std::string jobId, TaskId task) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  const std::string markerPath = runningTaskPath(jobId, task.first, task.second);
  for (int attempt = 0;; ++attempt) {
    auto removed = co_await zk_.remove(markerPath);
    if (removed || removed.code() == ErrorCode::kNotFound) co_return Status::ok();
    if (removed.code() != ErrorCode::kUnavailable || attempt >= retry_.retries) {
      co_return removed.prepend("removing " + markerPath);
    }
    co_await awaitReconnect();
  }
}

// ---- a JM's registration ------------------------------------------------------------------------

awaitable<Result<std::optional<coord::NodeStat>>> JobStore::jmRegistration(std::string jobId, std::string site) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  if (auto st = checkSite(site); !st) co_return st.error();
  auto stat = co_await zk_.exists(jmPath(jobId, site));
  co_return stat;
}

awaitable<Status> JobStore::createJmRegistration(std::string jobId, pb::JmInfo info) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  if (auto st = checkSite(info.site()); !st) co_return st;
  auto created = co_await zk_.create(jmPath(jobId, info.site()), info.SerializeAsString(), coord::CreateMode::kEphemeral);
  co_return created.status();
}

awaitable<Status> JobStore::updateJmRegistration(std::string jobId, pb::JmInfo info) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  if (auto st = checkSite(info.site()); !st) co_return st;
  auto set = co_await zk_.set(jmPath(jobId, info.site()), info.SerializeAsString(), -1);
  co_return set.status();
}

awaitable<Status> JobStore::removeJmRegistration(std::string jobId, std::string site) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  if (auto st = checkSite(site); !st) co_return st;
  Status removed = co_await zk_.remove(jmPath(jobId, site));
  co_return removed;
}

// ---- watches ------------------------------------------------------------------------------------

namespace {

template <class M>
Result<coord::Subscription> watchValue(coord::Coordinator& zk, const std::string& path,
                                       JobStore::ValueCallback<M> callback) {
  return zk.watchData(path, [path, callback = std::move(callback)](const std::optional<coord::NodeData>& node) {
    if (!node) {
      callback(std::optional<Versioned<M>>());
      return;
    }
    auto value = decodeNode<M>(node->data, path);
    if (!value) {
      spdlog::warn("{}", value.message());
      callback(value.error());
      return;
    }
    callback(std::optional<Versioned<M>>(Versioned<M>{std::move(value).value(), node->stat}));
  });
}

}  // namespace

Result<coord::Subscription> JobStore::watchStatus(const std::string& jobId, ValueCallback<pb::JobStatus> callback) {
  if (auto st = checkJobId(jobId); !st) return st.error();
  return watchValue<pb::JobStatus>(zk_, statusPath(jobId), std::move(callback));
}

Result<coord::Subscription> JobStore::watchTaskMap(const std::string& jobId, uint32_t stage,
                                                   ValueCallback<pb::TaskMap> callback) {
  if (auto st = checkJobId(jobId); !st) return st.error();
  return watchValue<pb::TaskMap>(zk_, taskmapPath(jobId, stage), std::move(callback));
}

Result<coord::Subscription> JobStore::watchEpoch(const std::string& jobId,
                                                 std::function<void(const std::optional<Versioned<uint64_t>>&)> callback) {
  if (auto st = checkJobId(jobId); !st) return st.error();
  return zk_.watchData(epochPath(jobId), [path = epochPath(jobId), callback = std::move(callback)](
                                             const std::optional<coord::NodeData>& node) {
    if (!node) {
      callback(std::nullopt);
      return;
    }
    auto epoch = parseEpoch(node->data);
    if (!epoch) spdlog::warn("malformed epoch '{}' in {}; taking it as 0", node->data.substr(0, 32), path);
    callback(Versioned<uint64_t>{epoch.value_or(0), node->stat});
  });
}

Result<coord::Subscription> JobStore::watchOutputTasks(const std::string& jobId, uint32_t stage,
                                                       std::function<void(const std::set<uint32_t>&)> callback) {
  if (auto st = checkJobId(jobId); !st) return st.error();
  return zk_.watchChildren(partsPath(jobId, stage),
                           [where = partsPath(jobId, stage), callback = std::move(callback)](
                               const std::vector<std::string>& names) { callback(outputTaskIds(names, where)); });
}

Result<coord::Subscription> JobStore::watchRunningTasks(const std::string& jobId,
                                                        std::function<void(const std::vector<TaskId>&)> callback) {
  if (auto st = checkJobId(jobId); !st) return st.error();
  return zk_.watchChildren(runningPath(jobId), [where = runningPath(jobId), callback = std::move(callback)](
                                                   const std::vector<std::string>& names) {
    callback(taskIds(names, where));
  });
}

Result<coord::Subscription> JobStore::watchJmSites(const std::string& jobId,
                                                   std::function<void(const std::vector<std::string>&)> callback) {
  if (auto st = checkJobId(jobId); !st) return st.error();
  return zk_.watchChildren(jmsPath(jobId), std::move(callback));
}

Result<coord::Subscription> JobStore::watchJmRegistration(
    const std::string& jobId, const std::string& site, std::function<void(const std::optional<coord::NodeStat>&)> callback) {
  if (auto st = checkJobId(jobId); !st) return st.error();
  if (auto st = checkSite(site); !st) return st.error();
  return zk_.watchData(jmPath(jobId, site), [callback = std::move(callback)](const std::optional<coord::NodeData>& node) {
    if (!node) {
      callback(std::nullopt);
      return;
    }
    callback(node->stat);
  });
}

}  // namespace tellus::jobstate
