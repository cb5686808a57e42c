#include "jobstate/job_store.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <memory>
#include <type_traits>

#include "coord/election.h"
#include "jobstate/job_view.h"
#include "jobstate/paths.h"
#include "util/log.h"
#include "util/names.h"
#include "util/token.h"

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

// A node's bytes as M: the message itself, but a taskMap in its compact encoding (too large
// as a plain TaskMap for a large stage).
template <class M>
Result<M> decodeStored(const std::string& bytes, const std::string& path) {
  if constexpr (std::is_same_v<M, pb::TaskMap>) {
    return decodeTaskMap(bytes, path);
  } else {
    return decodeNode<M>(bytes, path);
  }
}

}  // namespace

std::optional<uint64_t> parseEpoch(std::string_view text) {
  uint64_t epoch = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), epoch);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return epoch;
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

std::string JobStore::electionPath(const std::string& jobId) { return jobstate::electionPath(jobId); }

template <class M>
awaitable<Result<Versioned<M>>> JobStore::read(std::string path) {
  auto node = co_await zk_.get(path);
  if (!node) co_return node.error();
  auto value = decodeStored<M>(node->data, path);
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

awaitable<Result<JobStore::CheckedStatus>> JobStore::checkedStatus(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto node = co_await zk_.get(statusPath(jobId));
  if (!node) {
    if (node.error().code == ErrorCode::kNotFound) co_return makeError(ErrorCode::kNotFound, "no job " + jobId);
    co_return node.error();
  }
  auto decoded = decodeNode<pb::JobStatus>(node->data, statusPath(jobId));
  CheckedStatus checked;
  if (decoded) {
    checked.status = std::move(decoded).value();
  } else {
    checked.corrupt = decoded.message();
  }
  co_return checked;
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

namespace {

bool isBatchName(std::string_view name) { return name.rfind(kBatchPrefix, 0) == 0; }

void addExecution(std::vector<Attempt>& out, uint32_t stage, const BatchItem& item) {
  out.push_back(Attempt{{stage, item.task}, item.location.worker_id(), item.location.attempt_id()});
}

}  // namespace

awaitable<Result<StageOutputs>> JobStore::outputNode(std::string jobId, uint32_t stage, std::string name) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  const std::string path = partsPath(jobId, stage) + "/" + name;
  auto node = co_await zk_.get(path);
  if (!node) co_return node.error();
  StageOutputs out;
  if (!isBatchName(name)) {
    auto task = parsePartName(name);
    if (!task) co_return makeError(ErrorCode::kInternal, path + " is not a record node");
    auto location = decodeNode<pb::PartitionLocation>(node->data, path);
    if (!location) co_return location.error();
    out.outputs[*task] = RecordedOutput{std::move(location).value(), "unconfirmed " + name};
    co_return out;
  }
  auto items = decodeBatch(stage, node->data, path);
  if (!items) co_return items.error();
  for (auto& item : *items) {
    addExecution(out.executions, stage, item);
    addUsage(out.usage, item.location);
    if (!item.auditOnly) out.outputs[item.task] = RecordedOutput{std::move(item.location), batchKey(name)};
  }
  co_return out;
}

awaitable<Result<std::optional<JobFinal>>> JobStore::summary(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto node = co_await zk_.get(summaryPath(jobId));
  if (!node) {
    if (node.error().code == ErrorCode::kNotFound) co_return std::optional<JobFinal>();
    co_return node.error();
  }
  auto job = decodeSummary(node->data, summaryPath(jobId));
  if (!job) co_return job.error();
  co_return std::optional<JobFinal>(std::move(job).value());
}

awaitable<Result<StageOutputs>> JobStore::outputs(std::string jobId, uint32_t stage, StageRecords* known) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto names = co_await zk_.children(partsPath(jobId, stage));
  if (!names && names.error().code != ErrorCode::kNotFound) co_return names.error();
  StageOutputs out;
  if (known != nullptr) {
    std::set<std::string> listed;
    if (names) listed.insert(names->begin(), names->end());
    std::erase_if(known->nodes, [&](const auto& kv) { return !listed.count(kv.first); });
  }
  if (!names) {
    // Compacted (or never created): the summary has what the stage recorded.
    auto compacted = co_await summary(jobId);
    if (!compacted) co_return compacted.error();
    if (!*compacted) co_return names.error();
    if (stage < (*compacted)->stages.size()) {
      auto& st = (*compacted)->stages[stage];
      for (auto& [t, loc] : st.outputs) out.outputs[t] = RecordedOutput{std::move(loc), "summary"};
      for (auto& [t, worker] : st.executions) out.executions.push_back(Attempt{{stage, t}, std::move(worker), {}});
      out.usage = std::move(st.usage);
    }
    co_return out;
  }
  // Batches first, so that a forged per-task node never hides a real record.
  std::sort(names->begin(), names->end(), [](const std::string& a, const std::string& b) {
    return isBatchName(a) != isBatchName(b) ? isBatchName(a) : a < b;
  });
  // Read a window at a time: one round trip per node, so a stage of many batches costs about
  // batches / window round trips, not one each (`tellus status` of a 100,000-task job).
  constexpr size_t kReadWindow = 32;
  struct Reads {
    Reads(const boost::asio::any_io_executor& executor, size_t n)
        : wakeup(executor, boost::asio::steady_timer::time_point::max()), results(n) {}
    boost::asio::steady_timer wakeup;  // never expires: each finished read cancels the wait
    size_t running = 0;
    std::vector<std::optional<Result<StageOutputs>>> results;
  };
  // Batches the caller already holds are not read again (a batch never changes under its name).
  const auto cached = [&](const std::string& name) { return known != nullptr && isBatchName(name) && known->nodes.count(name) > 0; };
  std::vector<size_t> toRead;
  for (size_t i = 0; i < names->size(); ++i) {
    if (!cached((*names)[i])) toRead.push_back(i);
  }
  auto executor = co_await boost::asio::this_coro::executor;
  auto reads = std::make_shared<Reads>(executor, names->size());
  // Every read is waited for (none outlives this call, which they reference).
  for (size_t next = 0; next < toRead.size() || reads->running > 0;) {
    for (; next < toRead.size() && reads->running < kReadWindow; ++next) {
      ++reads->running;
      boost::asio::co_spawn(
          executor,
          [this, reads, i = toRead[next], jobId, stage, name = (*names)[toRead[next]]]() -> awaitable<void> {
            auto node = co_await outputNode(jobId, stage, name);
            reads->results[i] = std::move(node);
          },
          [reads](const std::exception_ptr&) {
            --reads->running;
            reads->wakeup.cancel();
          });
    }
    boost::system::error_code ec;
    co_await reads->wakeup.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  }
  for (size_t i = 0; i < names->size(); ++i) {
    const std::string& name = (*names)[i];
    StageOutputs* node = nullptr;
    bool keep = false;  // the node stays in `known`: copied from, not moved
    if (cached(name) && !reads->results[i]) {
      node = &known->nodes.at(name);
      keep = true;
    } else {
      if (!reads->results[i]) co_return makeError(ErrorCode::kInternal, fmt::format("reading {}/{} failed", partsPath(jobId, stage), name));
      auto& read = *reads->results[i];
      if (!read) {
        if (read.error().code == ErrorCode::kNotFound) continue;  // replaced meanwhile
        if (!isBatchName(name)) {
          spdlog::warn("ignoring {}", read.message());
          continue;
        }
        co_return read.error();
      }
      if (known != nullptr && isBatchName(name)) {
        node = &(known->nodes[name] = std::move(read).value());
        keep = true;
      } else {
        node = &read.value();
      }
    }
    for (auto& [t, record] : node->outputs) {
      const bool batch = record.finishKey.rfind("batch ", 0) == 0;
      auto [it, added] = keep ? out.outputs.try_emplace(t, record) : out.outputs.try_emplace(t, std::move(record));
      if (!added && batch) out.recordedTwice.insert(t);
    }
    if (keep) {
      out.executions.insert(out.executions.end(), node->executions.begin(), node->executions.end());
    } else {
      for (auto& e : node->executions) out.executions.push_back(std::move(e));
    }
    out.usage.add(node->usage);
  }
  co_return out;
}

awaitable<Result<std::set<std::string>>> JobStore::outputNodeNames(std::string jobId, uint32_t stage) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto names = co_await zk_.children(partsPath(jobId, stage));
  if (!names) co_return names.error();
  co_return std::set<std::string>(names->begin(), names->end());
}

awaitable<Result<std::set<uint32_t>>> JobStore::outputTasks(std::string jobId, uint32_t stage) {
  auto all = co_await outputs(std::move(jobId), stage);
  if (!all) co_return all.error();
  std::set<uint32_t> tasks;
  for (const auto& [t, record] : all->outputs) tasks.insert(t);
  co_return tasks;
}

awaitable<Result<pb::PartitionLocation>> JobStore::output(std::string jobId, uint32_t stage, uint32_t task) {
  auto all = co_await outputs(jobId, stage);
  if (!all) co_return all.error();
  auto it = all->outputs.find(task);
  if (it == all->outputs.end()) {
    co_return makeError(ErrorCode::kNotFound, fmt::format("job {}: task {}/{} has no recorded output", jobId, stage, task));
  }
  co_return std::move(it->second.location);
}

awaitable<Result<std::set<std::string>>> JobStore::finishRecords(std::string jobId, uint32_t stage) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto names = co_await zk_.children(partsPath(jobId, stage));
  if (!names) co_return names.error();
  std::set<std::string> keys;
  for (const auto& name : *names) {
    if (isBatchName(name)) keys.insert(batchKey(name));
  }
  co_return keys;
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
  // The unfolded names before the batches: one folded in between is in both, counted once.
  auto names = co_await unfoldedAttemptNames(jobId);
  if (!names) co_return names.error();
  auto folded = co_await foldedAttempts(std::move(jobId));
  if (!folded) co_return folded.error();
  co_return countAttempts(*names, *folded);
}

std::map<TaskId, uint32_t> JobStore::countAttempts(const std::vector<std::string>& unfoldedNames,
                                                   const std::vector<Attempt>& folded) {
  std::map<TaskId, uint32_t> counts;
  std::set<std::string_view> ids;
  for (const auto& a : folded) {
    ++counts[a.task];
    if (!a.id.empty()) ids.insert(a.id);
  }
  for (const auto& name : unfoldedNames) {
    auto id = parseTaskName(name);
    if (id && !ids.count(name)) ++counts[*id];
  }
  return counts;
}

awaitable<Result<std::vector<std::string>>> JobStore::unfoldedAttemptNames(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto names = co_await zk_.children(attemptsPath(jobId));
  if (!names && names.error().code != ErrorCode::kNotFound) co_return names.error();
  co_return names ? std::move(names).value() : std::vector<std::string>{};
}

awaitable<Result<std::vector<Attempt>>> JobStore::attempts(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  // Executions not folded yet (running, failed, lost with their worker), read before the
  // batches: one folded in between is then in both, and counted once (by its id).
  std::vector<Attempt> unfolded;
  const std::string dir = attemptsPath(jobId);
  auto names = co_await unfoldedAttemptNames(jobId);
  if (!names) co_return names.error();
  for (const auto& name : *names) {
    auto id = parseTaskName(name);
    if (!id) {
      spdlog::warn("ignoring a malformed node {}/{}", dir, name);
      continue;
    }
    auto node = co_await zk_.get(dir + "/" + name);
    if (!node) {
      if (node.error().code == ErrorCode::kNotFound) continue;  // folded meanwhile: in a batch below
      co_return node.error().prepend("reading " + dir + "/" + name);
    }
    if (node->data.size() > kMaxNodeBytes) co_return makeError(ErrorCode::kInternal, dir + "/" + name + " is too large");
    unfolded.push_back(Attempt{*id, auditNodeWorker(node->data), name});
  }
  auto out = co_await foldedAttempts(jobId);
  if (!out) co_return out.error();
  std::set<std::string> folded;
  for (const auto& e : *out) folded.insert(e.id);
  for (auto& a : unfolded) {
    if (!folded.count(a.id)) out->push_back(std::move(a));
  }
  co_return out;
}

awaitable<Result<std::vector<Attempt>>> JobStore::foldedAttempts(std::string jobId) {
  std::vector<Attempt> out;
  // Compacted (the summary is written before anything is removed): it has every execution.
  auto compactedStat = co_await zk_.exists(summaryPath(jobId));
  if (!compactedStat) co_return compactedStat.error();
  auto stages = co_await zk_.children(stagesPath(jobId));
  if (!stages && stages.error().code != ErrorCode::kNotFound) co_return stages.error();
  if (!stages || *compactedStat) {
    auto compacted = co_await summary(jobId);
    if (!compacted) co_return compacted.error();
    if (!*compacted) co_return makeError(ErrorCode::kNotFound, "job " + jobId + " has no stages");
    for (uint32_t s = 0; s < (*compacted)->stages.size(); ++s) {
      for (auto& [t, worker] : (*compacted)->stages[s].executions) out.push_back(Attempt{{s, t}, std::move(worker), {}});
    }
    co_return out;
  }
  for (const auto& name : *stages) {
    auto s = parsePartName(name);
    if (!s) continue;
    auto recorded = co_await outputs(jobId, *s);
    if (!recorded) co_return recorded.error();
    for (auto& e : recorded->executions) out.push_back(std::move(e));
  }
  co_return out;
}

awaitable<Result<std::vector<Attempt>>> JobStore::taskAttempts(std::string jobId, TaskId task) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  // The audit is in attempt nodes until recorded, then folded into the stage's batches:
  // attempts() reads both.
  auto all = co_await attempts(jobId);
  if (!all) co_return all.error();
  std::vector<Attempt> out;
  bool unnamed = false;
  for (auto& a : *all) {
    if (a.task != task) continue;
    if (a.id.empty()) {
      unnamed = true;
      continue;
    }
    if (!isName(a.workerId)) {
      co_return makeError(ErrorCode::kInvalidArgument, "execution " + a.id + " does not name a worker");
    }
    out.push_back(std::move(a));
  }
  if (unnamed && out.empty()) {
    co_return makeError(ErrorCode::kNotFound,
                        fmt::format("job {} was compacted (job_state_retention_ms): its executions are counted but "
                                    "no longer named",
                                    jobId));
  }
  // Sequence numbers in decimal: shorter is smaller, then digit by digit.
  std::sort(out.begin(), out.end(), [](const Attempt& a, const Attempt& b) {
    return a.id.size() != b.id.size() ? a.id.size() < b.id.size() : a.id < b.id;
  });
  co_return out;
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

awaitable<Result<std::vector<coord::ZkOpResult>>> JobStore::fencedMulti(const std::string& jobId, int32_t epochVersion,
                                                                         std::vector<coord::ZkOp> ops) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  const size_t count = ops.size();
  ops.insert(ops.begin(), coord::ZkOp::check(epochPath(jobId), epochVersion));
  auto done = co_await zk_.multi(std::move(ops));
  if (!done) co_return done.error();
  if (done->size() != count + 1) co_return makeError(ErrorCode::kInternal, "a fenced write: results missing");
  done->erase(done->begin());  // the check's
  co_return std::move(done).value();
}

awaitable<Result<bool>> JobStore::epochMoved(const std::string& jobId, int32_t epochVersion) {
  auto epoch = co_await zk_.exists(epochPath(jobId));
  if (!epoch) co_return epoch.error();
  co_return !*epoch || (*epoch)->version != epochVersion;
}

awaitable<Result<Versioned<uint64_t>>> JobStore::bumpEpoch(std::string jobId, int32_t statusVersion,
                                                           uint64_t expected) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  auto node = co_await zk_.get(epochPath(jobId));
  if (!node) co_return node.error();
  auto previous = parseEpoch(node->data);
  if (!previous) {
    // Its version still fences whoever wrote it: counting on from 0 keeps the job going.
    spdlog::warn("job {}: malformed epoch '{}' in {}; counting from 0", jobId, node->data.substr(0, 32), epochPath(jobId));
    previous = 0;
  }
  // Someone took over since the caller looked: bumping again would fence that new primary.
  if (*previous != expected) {
    co_return makeError(ErrorCode::kConflict,
                        fmt::format("job {}: the epoch is {} already, not {}", jobId, *previous, expected));
  }
  std::vector<coord::ZkOp> ops{coord::ZkOp::check(statusPath(jobId), statusVersion),
                               coord::ZkOp::set(epochPath(jobId), std::to_string(*previous + 1), node->stat.version)};
  auto done = co_await zk_.multi(std::move(ops));
  if (!done) co_return done.error();
  if (done->size() != 2 || !(*done)[1].stat) co_return makeError(ErrorCode::kInternal, "bumping the epoch: no stat returned");
  co_return Versioned<uint64_t>{*previous + 1, *(*done)[1].stat};
}

awaitable<Status> JobStore::createTaskMapFenced(std::string jobId, uint32_t stage, pb::TaskMap map, int32_t epochVersion) {
  auto data = encodeTaskMap(map);
  if (!data) co_return data.error().prepend(fmt::format("the taskMap of stage {}", stage));
  std::vector<coord::ZkOp> ops{coord::ZkOp::create(taskmapPath(jobId, stage), std::move(data).value())};
  auto written = co_await fencedMulti(jobId, epochVersion, std::move(ops));
  co_return written.status();
}

awaitable<Status> JobStore::removeOutputFenced(std::string jobId, TaskId task, int32_t epochVersion) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  const auto [s, t] = task;
  const std::string dirPath = partsPath(jobId, s);
  constexpr int kTries = 5;  // each lost try means another record of the stage landed meanwhile
  for (int attempt = 0; attempt < kTries; ++attempt) {
    auto dir = co_await zk_.get(dirPath);
    if (!dir) co_return dir.status();
    auto names = co_await zk_.children(dirPath);
    if (!names) co_return names.status();
    std::vector<coord::ZkOp> ops{coord::ZkOp::set(dirPath, "", dir->stat.version)};
    for (const auto& name : *names) {
      const std::string path = dirPath + "/" + name;
      if (!isBatchName(name)) {
        if (parsePartName(name) == t) ops.push_back(coord::ZkOp::remove(path));
        continue;
      }
      auto node = co_await zk_.get(path);
      if (!node) {
        if (node.error().code == ErrorCode::kNotFound) continue;  // replaced: the CAS below fails, and we retry
        co_return node.status();
      }
      auto items = decodeBatch(s, node->data, path);
      if (!items) continue;  // not a batch: removeOutputNodeFenced's business
      bool recorded = false;
      for (auto& item : *items) {
        if (item.task != t || item.auditOnly) continue;
        item.auditOnly = true;  // the execution stays in the audit
        recorded = true;
      }
      if (!recorded) continue;
      auto data = encodeBatch(s, *items);
      if (!data) co_return data.error().prepend("rewriting " + path);
      ops.push_back(coord::ZkOp::remove(path, node->stat.version));
      ops.push_back(coord::ZkOp::create(batchPrefixPath(jobId, s), std::move(data).value(), coord::CreateMode::kPersistentSequential));
    }
    if (ops.size() == 1) co_return makeError(ErrorCode::kNotFound, fmt::format("task {}/{} has no recorded output", s, t));
    auto done = co_await fencedMulti(jobId, epochVersion, std::move(ops));
    Status st = done.status();
    if (st || st.code() != ErrorCode::kConflict) co_return st;
    // Fenced (the epoch moved: final), or the stage's records changed under us: again.
    auto moved = co_await epochMoved(jobId, epochVersion);
    if (!moved || *moved) co_return st;
  }
  co_return makeError(ErrorCode::kConflict, fmt::format("task {}/{}: the stage's records kept changing", s, t));
}

awaitable<Status> JobStore::removeOutputNodeFenced(std::string jobId, uint32_t stage, std::string name, int32_t epochVersion) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  if (name.empty() || name.find('/') != std::string::npos) co_return makeError(ErrorCode::kInvalidArgument, "bad node name");
  // The record version moves too: a batch being written on what this node claimed retries.
  std::vector<coord::ZkOp> ops{coord::ZkOp::set(partsPath(jobId, stage), "", -1),
                               coord::ZkOp::remove(partsPath(jobId, stage) + "/" + name)};
  auto written = co_await fencedMulti(jobId, epochVersion, std::move(ops));
  co_return written.status();
}

awaitable<Status> JobStore::writeStatusFenced(std::string jobId, pb::JobStatus status, int32_t epochVersion) {
  std::vector<coord::ZkOp> ops{coord::ZkOp::set(statusPath(jobId), status.SerializeAsString(), -1)};
  auto written = co_await fencedMulti(jobId, epochVersion, std::move(ops));
  co_return written.status();
}

// ---- compare-and-set ----------------------------------------------------------------------

awaitable<Result<Versioned<pb::TaskMap>>> JobStore::casTaskMap(std::string jobId, uint32_t stage,
                                                               std::function<Status(pb::TaskMap&)> edit, int tries,
                                                               std::optional<int32_t> epochVersion) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  const std::string path = taskmapPath(jobId, stage);
  Error lost{ErrorCode::kConflict, "not tried"};
  for (int attempt = 0; attempt < tries; ++attempt) {
    auto current = co_await read<pb::TaskMap>(path);
    if (!current) co_return current.error();
    pb::TaskMap map = std::move(current->value);
    if (auto edited = edit(map); !edited) co_return edited.error();
    auto encoded = encodeTaskMap(map);
    if (!encoded) co_return encoded.error().prepend(fmt::format("the taskMap of stage {}", stage));
    std::string data = std::move(encoded).value();
    if (!epochVersion) {
      auto set = co_await zk_.set(path, std::move(data), current->stat.version);
      if (set) co_return Versioned<pb::TaskMap>{std::move(map), *set};
      lost = set.error();
    } else {
      std::vector<coord::ZkOp> ops{coord::ZkOp::set(path, std::move(data), current->stat.version)};
      auto done = co_await fencedMulti(jobId, *epochVersion, std::move(ops));
      if (done) {
        if (!done->front().stat) co_return makeError(ErrorCode::kInternal, "setting the taskMap: no stat returned");
        co_return Versioned<pb::TaskMap>{std::move(map), *done->front().stat};
      }
      lost = done.error();
      if (lost.code == ErrorCode::kConflict) {
        // Fenced (the epoch moved: final), or another writer won the map: the epoch tells.
        auto moved = co_await epochMoved(jobId, *epochVersion);
        if (!moved) co_return moved.error();
        if (*moved) co_return lost;
      }
    }
    // Another writer won, or the reply was lost (our write may have landed): try again on
    // the map as it is now; `edit` recomputes from it.
    if (lost.code != ErrorCode::kConflict && lost.code != ErrorCode::kUnavailable) co_return lost;
  }
  if (epochVersion) {
    co_return makeError(ErrorCode::kUnavailable,
                        fmt::format("stage {}'s taskMap kept changing: {}", stage, lost.message));
  }
  co_return lost;
}

// ---- a worker's writes ------------------------------------------------------------------------

awaitable<Status> JobStore::refreshRecords(const std::string& jobId, uint32_t stage, StageRecords& known) {
  auto names = co_await zk_.children(partsPath(jobId, stage));
  if (!names) co_return names.status();
  const std::set<std::string> listed(names->begin(), names->end());
  std::erase_if(known.nodes, [&](const auto& kv) { return !listed.count(kv.first); });
  for (const auto& name : listed) {
    if (!isBatchName(name) || known.nodes.count(name)) continue;  // per-task nodes are no records
    auto node = co_await outputNode(jobId, stage, name);
    if (!node) {
      if (node.error().code == ErrorCode::kNotFound) continue;  // replaced meanwhile: the CAS tells
      if (node.error().code == ErrorCode::kUnavailable) co_return node.status();
      // Not a batch (forged or corrupt): no record of ours; the primary removes it.
      spdlog::warn("{}", node.message());
      known.nodes[name];
      continue;
    }
    known.nodes[name] = std::move(node).value();
  }
  co_return Status::ok();
}

awaitable<Result<std::set<uint32_t>>> JobStore::recordBatch(std::string jobId, uint32_t stage, std::vector<BatchItem> items,
                                                            int64_t markerSession, StageRecords* known) {
  StageRecords local;
  StageRecords& records = known != nullptr ? *known : local;
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  if (items.empty()) co_return std::set<uint32_t>();
  if (items.size() > kMaxBatchTasks) {
    co_return makeError(ErrorCode::kInvalidArgument, fmt::format("a batch of {} executions; at most {}", items.size(), kMaxBatchTasks));
  }
  std::set<std::string> mine;
  for (const auto& item : items) {
    if (!attemptSeqOf(item.location.attempt_id(), stage, item.task)) {
      co_return makeError(ErrorCode::kInvalidArgument, fmt::format("task {}/{}: '{}' is not one of its executions", stage,
                                                                   item.task, item.location.attempt_id().substr(0, 64)));
    }
    mine.insert(item.location.attempt_id());
  }
  const std::string dirPath = partsPath(jobId, stage);
  // After a node we meant to delete was missing: check each one (a marker another session
  // owns now is not ours to delete; an audit node someone removed cannot be).
  bool careful = false;
  Error last{ErrorCode::kConflict, "the stage's records kept changing"};
  int unavailable = 0;
  constexpr int kMaxConflicts = 20;  // each means another batch of the stage landed meanwhile
  for (int conflicts = 0; conflicts < kMaxConflicts;) {
    if (last.code == ErrorCode::kUnavailable) {
      if (unavailable++ >= retry_.retries) co_return last;
      co_await awaitReconnect();
    }
    auto dir = co_await zk_.get(dirPath);
    if (!dir) {
      last = dir.error();
      if (last.code == ErrorCode::kUnavailable) continue;
      co_return last;
    }
    // The tasks some batch records (`taken`): from the parts node's own summary when it has one
    // and none of our tasks is in it; else from every batch. A try of ours that landed (its
    // reply lost) put our tasks in the summary, so it always takes the second way, which finds
    // it. An unreadable summary only costs the reads.
    std::optional<RecordedTaskSet> taken;
    bool summarized = true;  // every recorded task fits the summary
    if (!dir->data.empty()) {
      auto summary = decodeRecordedTasks(stage, dir->data, dirPath);
      if (summary) {
        const bool anyOurs =
            std::any_of(items.begin(), items.end(), [&](const BatchItem& item) { return summary->contains(item.task); });
        if (!anyOurs) taken = std::move(summary).value();
      } else {
        spdlog::warn("{}; reading the stage's batches instead", summary.message());
      }
    }
    if (!taken) {
      Status refreshed = co_await refreshRecords(jobId, stage, records);
      if (!refreshed) {
        last = refreshed.error();
        if (last.code == ErrorCode::kUnavailable) continue;
        co_return last;
      }
      std::set<std::string> folded;
      taken.emplace();
      for (const auto& [name, node] : records.nodes) {
        for (const auto& e : node.executions) folded.insert(e.id);
        for (const auto& [t, r] : node.outputs) summarized = taken->insert(t) && summarized;
      }
      if (std::any_of(mine.begin(), mine.end(), [&](const std::string& id) { return folded.count(id) > 0; })) {
        // A try whose reply was lost landed (all of the batch, or nothing: one transaction).
        std::set<uint32_t> ours;
        for (const auto& [name, node] : records.nodes) {
          for (const auto& [t, r] : node.outputs) {
            if (mine.count(r.location.attempt_id())) ours.insert(t);
          }
        }
        co_return ours;
      }
    }
    // Careful: an execution whose audit node is gone cannot be folded (its record would name
    // an execution the audit does not have): it is left out, and its task runs again.
    std::set<uint32_t> markerTasks;
    for (const auto& item : items) markerTasks.insert(item.task);
    std::vector<BatchItem> batch;
    bool unchecked = false;
    for (const auto& item : items) {
      if (careful) {
        auto stat = co_await zk_.exists(attemptsPath(jobId) + "/" + item.location.attempt_id());
        if (!stat) {
          last = stat.error();
          unchecked = true;
          break;
        }
        if (!*stat) {
          spdlog::warn("job {}: execution {} is not in the audit; its output is not recorded", jobId,
                       item.location.attempt_id());
          continue;
        }
      }
      batch.push_back(item);
    }
    if (unchecked) {
      if (last.code == ErrorCode::kUnavailable) continue;
      co_return last;
    }
    std::set<uint32_t> recordedHere;
    for (auto& item : batch) {
      item.auditOnly = taken->contains(item.task) || recordedHere.count(item.task) > 0;
      if (item.auditOnly) continue;
      recordedHere.insert(item.task);
      summarized = taken->insert(item.task) && summarized;
    }
    std::string summary;  // empty: unknown, the next writer reads the batches
    if (summarized) {
      auto encoded = encodeRecordedTasks(stage, *taken);
      if (!encoded) co_return encoded.error();
      summary = std::move(encoded).value();
    }
    std::vector<coord::ZkOp> ops{coord::ZkOp::set(dirPath, std::move(summary), dir->stat.version)};
    if (!batch.empty()) {
      auto data = encodeBatch(stage, batch);
      if (!data) co_return data.error();
      ops.push_back(coord::ZkOp::create(batchPrefixPath(jobId, stage), std::move(data).value(),
                                        coord::CreateMode::kPersistentSequential));
    }
    for (const auto& item : batch) ops.push_back(coord::ZkOp::remove(attemptsPath(jobId) + "/" + item.location.attempt_id()));
    // The markers go only while the session that wrote them lives: after its expiry they went
    // with it, and a marker at the same path is another execution's (another worker's, or a
    // later one of ours) — removing it would hide a running task from its JM.
    if (markerSession != 0 && zk_.sessionId() == markerSession) {
      for (uint32_t task : markerTasks) {
        const std::string path = runningTaskPath(jobId, stage, task);
        if (careful) {
          auto stat = co_await zk_.exists(path);
          if (!stat || !*stat || (*stat)->ephemeralOwner != markerSession) continue;
          ops.push_back(coord::ZkOp::remove(path, (*stat)->version));
        } else {
          ops.push_back(coord::ZkOp::remove(path));
        }
      }
    }
    auto done = co_await zk_.multi(std::move(ops));
    if (done) co_return recordedHere;
    last = done.error();
    if (last.code == ErrorCode::kConflict) {
      ++conflicts;  // another batch of the stage landed: re-read
      continue;
    }
    if (last.code == ErrorCode::kNotFound && !careful) {
      careful = true;
      continue;
    }
    if (last.code == ErrorCode::kUnavailable) continue;
    co_return last;
  }
  co_return last;
}

awaitable<Result<std::string>> JobStore::startAttempt(std::string jobId, TaskId task, pb::RunningTask marker,
                                                      std::string workerId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  if (!isName(workerId)) co_return makeError(ErrorCode::kInvalidArgument, "bad worker id");
  // This call's audit node carries a token of its own: a try whose reply was lost may have
  // landed under a session that is gone by the retry, and the retry must find it rather than
  // start the execution a second time in the audit.
  co_return co_await startAttemptFrom(std::move(jobId), task, marker.SerializeAsString(),
                                      auditNodeData(workerId, randomToken()), false);
}

awaitable<Result<std::vector<Result<std::string>>>> JobStore::startAttempts(std::string jobId,
                                                                            std::vector<AttemptStart> starts,
                                                                            std::string workerId) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  if (!isName(workerId)) co_return makeError(ErrorCode::kInvalidArgument, "bad worker id");
  if (starts.size() > kMaxStartsPerMulti) {
    co_return makeError(ErrorCode::kInvalidArgument, fmt::format("{} attempts in one transaction, more than {}",
                                                                 starts.size(), kMaxStartsPerMulti));
  }
  std::vector<std::string> data, auditData;
  std::vector<coord::ZkOp> ops;
  for (const auto& start : starts) {
    data.push_back(start.marker.SerializeAsString());
    auditData.push_back(auditNodeData(workerId, randomToken()));
    ops.push_back(coord::ZkOp::create(runningTaskPath(jobId, start.task.first, start.task.second), data.back(),
                                      coord::CreateMode::kEphemeral));
    ops.push_back(coord::ZkOp::create(attemptsPath(jobId) + "/" + runningTaskName(start.task.first, start.task.second) + "-",
                                      auditData.back(), coord::CreateMode::kPersistentSequential));
  }
  std::vector<Result<std::string>> out;
  bool inDoubt = false;
  if (starts.size() > 1) {
    auto r = co_await zk_.multi(std::move(ops));
    if (r && r->size() == 2 * starts.size()) {
      for (size_t i = 0; i < starts.size(); ++i) {
        const auto& created = (*r)[2 * i + 1].createdPath;
        if (created.empty()) {
          out.push_back(makeError(ErrorCode::kInternal, "starting an attempt: no path returned"));
        } else {
          out.push_back(created.substr(created.rfind('/') + 1));
        }
      }
      co_return out;
    }
    // A transaction is all or nothing: unless its reply was lost, none of it landed.
    inDoubt = !r && r.error().code == ErrorCode::kUnavailable;
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    out.push_back(co_await startAttemptFrom(jobId, starts[i].task, std::move(data[i]), std::move(auditData[i]), inDoubt));
  }
  co_return out;
}

awaitable<Result<std::string>> JobStore::startAttemptFrom(std::string jobId, TaskId task, std::string data,
                                                          std::string auditData, bool inDoubt) {
  const std::string markerPath = runningTaskPath(jobId, task.first, task.second);
  const std::string prefix = runningTaskName(task.first, task.second) + "-";
  const std::string audit = attemptsPath(jobId) + "/" + prefix;
  bool sawOwnData = false;  // the marker in the way holds our data
  Error last{ErrorCode::kUnavailable, "starting an attempt"};
  // In doubt from the start: the transaction that held this start was tried once already.
  for (int attempt = inDoubt ? 1 : 0; attempt <= retry_.retries; ++attempt) {
    if (last.code == ErrorCode::kUnavailable && attempt > 0) co_await awaitReconnect();
    if (inDoubt) {
      auto landed = co_await findAuditNode(jobId, prefix, auditData);
      if (!landed) {
        last = landed.error();
        if (last.code == ErrorCode::kUnavailable) continue;
        co_return last.prepend("finding the audit node of a started attempt");
      }
      if (!landed->empty()) {
        Status held = co_await holdLandedMarker(jobId, markerPath, data, *landed);
        if (held) co_return *landed;
        last = held.error();
        if (last.code == ErrorCode::kUnavailable) continue;
        co_return last;
      }
      if (sawOwnData) break;  // a marker like ours, but another executor's
      inDoubt = false;        // nothing landed: a plain retry
    }
    std::vector<coord::ZkOp> ops{coord::ZkOp::create(markerPath, data, coord::CreateMode::kEphemeral),
                                 coord::ZkOp::create(audit, auditData, coord::CreateMode::kPersistentSequential)};
    auto r = co_await zk_.multi(std::move(ops));
    if (r) {
      if (r->size() != 2 || (*r)[1].createdPath.empty()) co_return makeError(ErrorCode::kInternal, "starting an attempt: no path returned");
      const auto& created = (*r)[1].createdPath;
      co_return created.substr(created.rfind('/') + 1);
    }
    last = r.error();
    if (last.code == ErrorCode::kUnavailable) {
      inDoubt = true;
      continue;
    }
    if (last.code != ErrorCode::kAlreadyExists) co_return last;
    auto existing = co_await zk_.get(markerPath);
    if (!existing) {
      last = existing.error();
      if (last.code == ErrorCode::kUnavailable || last.code == ErrorCode::kNotFound) continue;  // gone: try again
      co_return last;
    }
    if (existing->stat.ephemeralOwner == 0) {
      // Persistent: no worker's marker (forged or left by hand). It would block the task
      // forever; removed, and the attempt starts.
      spdlog::warn("removing {}: not a worker's marker (persistent)", markerPath);
      (void)co_await zk_.remove(markerPath, existing->stat.version);
      continue;
    }
    if (existing->data != data) break;
    inDoubt = true;  // our own marker from a try that landed? Its audit node says.
    sawOwnData = true;
    last = Error{ErrorCode::kAlreadyExists, "starting an attempt"};
  }
  if (last.code != ErrorCode::kAlreadyExists) co_return last;
  co_return makeError(ErrorCode::kAlreadyExists,
                      "task " + std::to_string(task.first) + "/" + std::to_string(task.second) + " is already running");
}

awaitable<Result<std::string>> JobStore::findAuditNode(std::string jobId, std::string prefix, std::string auditData) {
  auto names = co_await zk_.children(attemptsPath(jobId));
  if (!names) co_return names.error();
  for (const auto& name : *names) {
    if (name.rfind(prefix, 0) != 0) continue;
    auto node = co_await zk_.get(attemptsPath(jobId) + "/" + name);
    if (!node) {
      if (node.error().code == ErrorCode::kNotFound) continue;  // folded meanwhile: not ours, ours is not folded yet
      co_return node.error();
    }
    if (node->data == auditData) co_return name;
  }
  co_return std::string();
}

awaitable<Status> JobStore::holdLandedMarker(std::string jobId, std::string markerPath, std::string data,
                                            std::string auditName) {
  auto existing = co_await zk_.get(markerPath);
  if (!existing && existing.error().code != ErrorCode::kNotFound) co_return existing.error();
  if (existing && existing->stat.ephemeralOwner == zk_.sessionId()) co_return Status::ok();
  std::vector<coord::ZkOp> ops;
  if (existing) {
    if (existing->data != data) {
      // Our try landed, but its marker went with its session and another worker started the
      // task since: this executor does not start, and its audit node goes.
      (void)co_await zk_.remove(attemptsPath(jobId) + "/" + auditName);
      co_return makeError(ErrorCode::kAlreadyExists, markerPath + ": the task is already running");
    }
    // Ours, left by the session that made it (it dies with that session): this one takes it over.
    ops.push_back(coord::ZkOp::remove(markerPath, existing->stat.version));
  }
  ops.push_back(coord::ZkOp::create(markerPath, data, coord::CreateMode::kEphemeral));
  auto taken = co_await zk_.multi(std::move(ops));
  if (taken) co_return Status::ok();
  // Changed under us (the old session's marker went, or someone's appeared): look again.
  if (taken.error().code == ErrorCode::kNotFound || taken.error().code == ErrorCode::kAlreadyExists ||
      taken.error().code == ErrorCode::kConflict) {
    co_return makeError(ErrorCode::kUnavailable, markerPath + " changed while taking it over");
  }
  co_return taken.error();
}

awaitable<Status> JobStore::removeRunningMarker(std::string jobId, TaskId task, int64_t markerSession) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  const std::string markerPath = runningTaskPath(jobId, task.first, task.second);
  for (int attempt = 0;; ++attempt) {
    // The marker went with the session that wrote it; one there now is another execution's.
    if (zk_.sessionId() != markerSession) co_return Status::ok();
    auto removed = co_await zk_.remove(markerPath);
    if (removed || removed.code() == ErrorCode::kNotFound) co_return Status::ok();
    if (removed.code() != ErrorCode::kUnavailable || attempt >= retry_.retries) {
      co_return removed.prepend("removing " + markerPath);
    }
    co_await awaitReconnect();
  }
}

awaitable<Status> JobStore::removeMarkerOf(std::string jobId, TaskId task, std::string worker) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  const std::string path = runningTaskPath(jobId, task.first, task.second);
  auto marker = co_await read<pb::RunningTask>(path);
  if (!marker) co_return marker.status();
  if (marker->stat.ephemeralOwner == 0 || marker->value.container().worker_id() != worker) {
    co_return makeError(ErrorCode::kConflict, path + " is not an execution on " + worker);
  }
  co_return co_await zk_.remove(path, marker->stat.version);
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

awaitable<Result<int32_t>> JobStore::updateJmRegistration(std::string jobId, pb::JmInfo info, int32_t epochVersion,
                                                          int32_t expectedVersion) {
  if (auto st = checkJobId(jobId); !st) co_return st.error();
  if (auto st = checkSite(info.site()); !st) co_return st.error();
  if (info.role() == pb::JM_PRIMARY && epochVersion >= 0) {
    std::vector<coord::ZkOp> ops{coord::ZkOp::set(jmPath(jobId, info.site()), info.SerializeAsString(), expectedVersion)};
    auto written = co_await fencedMulti(jobId, epochVersion, std::move(ops));
    if (!written) co_return written.error();
    if (written->empty() || !written->front().stat) co_return makeError(ErrorCode::kInternal, "a JM registration write: no stat");
    co_return written->front().stat->version;
  }
  auto set = co_await zk_.set(jmPath(jobId, info.site()), info.SerializeAsString(), expectedVersion);
  if (!set) co_return set.error();
  co_return set->version;
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
    auto value = decodeStored<M>(node->data, path);
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

Result<coord::Subscription> JobStore::watchOutputNodes(const std::string& jobId, uint32_t stage,
                                                       std::function<void(const std::set<std::string>&)> callback,
                                                       coord::Coordinator::CoalesceFn coalesce) {
  if (auto st = checkJobId(jobId); !st) return st.error();
  return zk_.watchChildren(
      partsPath(jobId, stage),
      [callback = std::move(callback)](const std::vector<std::string>& names) {
        callback(std::set<std::string>(names.begin(), names.end()));
      },
      std::move(coalesce));
}

Result<coord::Subscription> JobStore::watchRunningTasks(const std::string& jobId,
                                                        std::function<void(const std::vector<TaskId>&)> callback,
                                                        std::chrono::milliseconds coalesce) {
  if (auto st = checkJobId(jobId); !st) return st.error();
  return zk_.watchChildren(
      runningPath(jobId),
      [where = runningPath(jobId), callback = std::move(callback)](const std::vector<std::string>& names) {
        callback(taskIds(names, where));
      },
      coalesce);
}

Result<coord::Subscription> JobStore::watchJmSites(const std::string& jobId,
                                                   std::function<void(const std::vector<std::string>&)> callback) {
  if (auto st = checkJobId(jobId); !st) return st.error();
  return zk_.watchChildren(jmsPath(jobId), std::move(callback));
}

// ---- compaction ---------------------------------------------------------------------------------

awaitable<Status> JobStore::compactJob(std::string jobId) {
  if (auto st = checkJobId(jobId); !st) co_return st;
  auto status = co_await this->status(jobId);
  if (!status) co_return status.error();
  if (!isTerminal(status->value.state())) co_return makeError(ErrorCode::kInvalidArgument, "job " + jobId + " is still running");
  auto existing = co_await zk_.exists(summaryPath(jobId));
  if (!existing) co_return existing.error();
  if (!*existing) {
    auto spec = co_await this->spec(jobId);
    if (!spec) co_return spec.error().prepend("compacting " + jobId);
    JobFinal job;
    job.stages.resize(static_cast<size_t>(spec->stages_size()));
    for (uint32_t s = 0; s < job.stages.size(); ++s) {
      auto map = co_await taskMap(jobId, s);
      if (map) {
        job.stages[s].taskmap = std::move(map->value);
      } else if (map.error().code != ErrorCode::kNotFound) {
        // A taskMap that does not decode (the reason the job failed, perhaps): no tasks kept.
        spdlog::warn("compacting {}: {}", jobId, map.message());
      }
      if (!job.stages[s].taskmap) continue;
      auto recorded = co_await outputs(jobId, s);
      if (!recorded) co_return recorded.error().prepend("compacting " + jobId);
      const auto tasks = static_cast<uint32_t>(job.stages[s].taskmap->owner_site_size());
      for (auto& [t, r] : recorded->outputs) {
        // Only confirmed records (a forged per-task node is not one), of tasks of the stage.
        if (t < tasks && r.finishKey.rfind("batch ", 0) == 0) job.stages[s].outputs[t] = std::move(r.location);
      }
      job.stages[s].usage = std::move(recorded->usage);
    }
    auto executions = co_await attempts(jobId);
    if (!executions) co_return executions.error().prepend("compacting " + jobId);
    for (auto& a : *executions) {
      if (a.task.first < job.stages.size()) job.stages[a.task.first].executions.emplace_back(a.task.second, std::move(a.workerId));
    }
    auto data = encodeSummary(job);
    if (!data) co_return data.error().prepend("compacting " + jobId);
    // Only while the status is the one read: the summary is of a job that is over.
    std::vector<coord::ZkOp> ops{coord::ZkOp::check(statusPath(jobId), status->stat.version),
                                 coord::ZkOp::create(summaryPath(jobId), std::move(data).value())};
    auto written = co_await zk_.multi(std::move(ops));
    if (!written && written.error().code != ErrorCode::kAlreadyExists) co_return written.error().prepend("compacting " + jobId);
  }
  // The rest goes but the dataset stages' inputs (what a result's residency check reads);
  // readers take the summary once a stage's `parts` is gone, so the order is free and a
  // compaction cut short is finished by the next one.
  std::vector<std::string> rest{attemptsPath(jobId), runningPath(jobId), jmsPath(jobId), jobstate::electionPath(jobId),
                                epochPath(jobId)};
  auto stages = co_await zk_.children(stagesPath(jobId));
  if (!stages && stages.error().code != ErrorCode::kNotFound) co_return stages.error().prepend("compacting " + jobId);
  bool keepStages = false;
  for (const auto& stage : stages ? *stages : std::vector<std::string>{}) {
    const std::string path = stagesPath(jobId) + "/" + stage;
    auto children = co_await zk_.children(path);
    if (!children) continue;
    bool inputs = false;
    for (const auto& child : *children) {
      if (child == "inputs") {
        inputs = true;
      } else {
        rest.push_back(path + "/" + child);
      }
    }
    if (inputs) {
      keepStages = true;
    } else {
      rest.push_back(path);
    }
  }
  if (!keepStages) rest.push_back(stagesPath(jobId));
  for (const auto& path : rest) {
    Status removed = co_await zk_.removeRecursive(path);
    if (!removed && removed.code() != ErrorCode::kNotFound) co_return removed.prepend("compacting " + jobId);
  }
  co_return Status::ok();
}

}  // namespace tellus::jobstate
