#include "failover/scenario.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "harness/eventually.h"
#include "jobstate/job_store.h"

namespace tellus::failover {

using std::chrono::milliseconds;
using namespace tellus::jobstate;

std::string taskName(const TaskId& id) { return std::to_string(id.first) + "/" + std::to_string(id.second); }

// ---- words ---------------------------------------------------------------------------------

std::string makeCorpus(uint32_t seed, size_t lines) {
  static const char* const kVocabulary[] = {
      "tellus", "zookeeper", "primary", "secondary", "epoch",   "fence",  "lineage", "worker",
      "master", "container", "stage",   "task",      "shuffle", "reduce", "map",     "site",
      "spot",   "failover",  "session", "expiry",    "quorum",  "leader", "vm",      "x86",
      "a",      "b",         "c",       "d7",        "e",       "wan",    "lp",      "houtu"};
  constexpr size_t kWords = sizeof(kVocabulary) / sizeof(kVocabulary[0]);
  static const char* const kSeparators[] = {" ", "  ", ", ", ". ", "; ", " - ", "! ", " (", ") "};
  constexpr size_t kSeps = sizeof(kSeparators) / sizeof(kSeparators[0]);
  // A fixed linear congruential generator: the same text on every platform.
  uint64_t state = 0x9E3779B97F4A7C15ULL ^ (static_cast<uint64_t>(seed) * 0x100000001B3ULL);
  auto next = [&state](uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % bound;
  };
  std::string text;
  for (size_t l = 0; l < lines; ++l) {
    size_t words = 1 + next(12);
    for (size_t w = 0; w < words; ++w) {
      // Skewed: low indices are frequent.
      size_t index = std::min(next(kWords), next(kWords));
      std::string word = kVocabulary[index];
      if (next(4) == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
      if (next(10) == 0) word += std::to_string(next(100));
      text += word;
      text += kSeparators[next(kSeps)];
    }
    text += '\n';
  }
  return text;
}

// ---- job state -----------------------------------------------------------------------------

bool JobSnapshot::terminal() const {
  auto s = status.state();
  return s == pb::JOB_SUCCEEDED || s == pb::JOB_FAILED || s == pb::JOB_KILLED;
}

size_t JobSnapshot::done(uint32_t stage) const {
  return static_cast<size_t>(std::count_if(parts.begin(), parts.end(), [&](const auto& kv) { return kv.first.first == stage; }));
}

std::vector<pb::JmInfo> JobSnapshot::primaries() const {
  std::vector<pb::JmInfo> out;
  for (const auto& [site, info] : jms) {
    if (info.role() == pb::JM_PRIMARY) out.push_back(info);
  }
  return out;
}

std::optional<pb::JmInfo> JobSnapshot::currentPrimary() const {
  for (const auto& info : primaries()) {
    if (info.epoch() == epoch) return info;
  }
  return std::nullopt;
}

bool JobSnapshot::settled() const {
  for (const auto& site : status.sites()) {
    if (!jms.count(site)) return false;
  }
  auto all = primaries();
  if (all.size() != 1 || all.front().epoch() != epoch || epoch == 0) return false;
  return !election.empty() && election.front() == all.front().site();
}

std::string JobSnapshot::describe() const {
  std::string out = pb::JobState_Name(status.state());
  for (const auto& [s, n] : stageTasks) {
    size_t running = static_cast<size_t>(
        std::count_if(this->running.begin(), this->running.end(), [&](const auto& kv) { return kv.first.first == s; }));
    out += "; stage " + std::to_string(s) + ": " + std::to_string(done(s)) + "/" + std::to_string(n) + " done, " +
           std::to_string(running) + " running";
  }
  if (!running.empty() && running.size() <= 6) {
    out += " (";
    for (const auto& [id, m] : running) out += " " + taskName(id) + "@" + m.container().worker_id();
    out += " )";
  }
  out += "; epoch " + std::to_string(epoch) + "; jms:";
  for (const auto& [site, info] : jms) {
    out += " " + site + (info.role() == pb::JM_PRIMARY ? " primary" : " secondary") + " e" +
           std::to_string(info.epoch()) + " pid " + std::to_string(info.pid()) + " on " + info.worker_id() + ",";
  }
  out += " election:";
  for (const auto& site : election) out += " " + site;
  return out;
}

Result<JobSnapshot> snapshotJob(harness::ZkReader& zk, const std::string& jobId) {
  JobSnapshot snap;
  snap.jobId = jobId;
  snap.takenAt = Clock::now();
  auto& jobs = zk.jobs();
  auto status = zk.run(jobs.status(jobId));
  if (!status) return status.error();
  snap.status = status->value;
  auto spec = zk.run(jobs.spec(jobId));
  if (!spec) return spec.error();
  auto epoch = zk.run(jobs.epoch(jobId));
  if (!epoch) return epoch.error();
  snap.epoch = epoch->value;
  snap.epochMzxid = epoch->stat.mzxid;

  auto sites = zk.run(jobs.jmSites(jobId));
  if (!sites) return sites.error();
  for (const auto& site : *sites) {
    auto info = zk.run(jobs.jm(jobId, site));
    if (info) {
      snap.jms[site] = info->value;
    } else if (info.error().code != ErrorCode::kNotFound) {
      return info.error();
    }
  }
  auto candidates = zk.run(jobs.electionCandidates(jobId));
  if (!candidates) return candidates.error();
  snap.election = *candidates;

  for (uint32_t s = 0; s < static_cast<uint32_t>(spec->stages_size()); ++s) {
    auto map = zk.run(jobs.taskMap(jobId, s));
    if (!map) {
      if (map.error().code == ErrorCode::kNotFound) continue;
      return map.error();
    }
    snap.taskmaps[s] = map->value;
    snap.taskmapCzxid[s] = map->stat.czxid;
    snap.stageTasks[s] = static_cast<uint32_t>(map->value.owner_site_size());
    // Every record of the stage in one pass (one read per batch node).
    auto outputs = zk.run(jobs.outputs(jobId, s));
    if (!outputs) return outputs.error();
    for (auto& [t, record] : outputs->outputs) snap.parts[{s, t}] = std::move(record.location);
  }
  auto running = zk.run(jobs.runningTasks(jobId));
  if (!running) return running.error();
  for (const auto& id : *running) {
    auto marker = zk.run(jobs.runningMarker(jobId, id));
    if (marker) snap.running[id] = *marker;
  }
  auto executions = zk.run(jobs.attemptCounts(jobId));
  if (!executions) return executions.error();
  for (const auto& [id, count] : *executions) snap.executions[id] += count;
  auto epochAtEnd = zk.run(jobs.epoch(jobId));
  if (!epochAtEnd) return epochAtEnd.error();
  snap.epochAtEnd = epochAtEnd->value;
  snap.epochAtEndMzxid = epochAtEnd->stat.mzxid;
  return snap;
}

void InvariantWatch::check(bool ok, const std::string& jobId, const std::string& what) {
  std::string line = jobId + ": " + what;
  if (!ok && std::find(violations_.begin(), violations_.end(), line) == violations_.end()) violations_.push_back(line);
}

void InvariantWatch::observe(const JobSnapshot& snap) {
  auto& epochStart = epochStart_[snap.jobId];
  epochStart.try_emplace(snap.epoch, snap.epochMzxid);
  epochStart.try_emplace(snap.epochAtEnd, snap.epochAtEndMzxid);
  // Two JMs claiming the current epoch as primary would be two primaries acting at once.
  size_t claiming = 0;
  for (const auto& info : snap.primaries()) claiming += info.epoch() == snap.epoch ? 1 : 0;
  check(claiming <= 1, snap.jobId, std::to_string(claiming) + " JMs registered as primary of epoch " + std::to_string(snap.epoch) +
                           ": " + snap.describe());
  for (const auto& info : snap.primaries()) {
    check(info.epoch() <= snap.epochAtEnd, snap.jobId, "JM at " + info.site() + " claims epoch " + std::to_string(info.epoch()) +
                                          " beyond the current " + std::to_string(snap.epochAtEnd));
  }
  // Fencing: a stage released (taskmap created) after epoch E became current must carry an
  // epoch >= E; a stale primary's release would carry an older one.
  for (const auto& [s, map] : snap.taskmaps) {
    int64_t created = snap.taskmapCzxid.at(s);
    check(map.epoch() >= 1 && map.epoch() <= snap.epochAtEnd, snap.jobId,
          "stage " + std::to_string(s) + " released under epoch " + std::to_string(map.epoch()) +
              " while the epoch is " + std::to_string(snap.epochAtEnd));
    for (const auto& [e, start] : epochStart) {
      check(!(e > map.epoch() && start < created), snap.jobId,
            "stage " + std::to_string(s) + " released under stale epoch " + std::to_string(map.epoch()) +
                " after epoch " + std::to_string(e) + " had begun (zxid " + std::to_string(start) + " < " +
                std::to_string(created) + ")");
    }
  }
}

std::set<TaskId> mayRerun(const JobSnapshot& before, const JobSnapshot& after,
                          const std::set<std::string>& killedWorkers) {
  std::set<TaskId> out;
  for (const auto* snap : {&before, &after}) {
    for (const auto& [id, marker] : snap->running) {
      if (killedWorkers.count(marker.container().worker_id())) out.insert(id);
    }
    for (const auto& [id, loc] : snap->parts) {
      if (killedWorkers.count(loc.worker_id())) out.insert(id);
    }
  }
  return out;
}

std::set<TaskId> runningOn(const std::vector<const JobSnapshot*>& snapshots, const std::set<std::string>& workers) {
  std::set<TaskId> out;
  for (const auto* snap : snapshots) {
    for (const auto& [id, marker] : snap->running) {
      if (workers.count(marker.container().worker_id())) out.insert(id);
    }
  }
  return out;
}

std::vector<std::string> checkExecutions(const JobSnapshot& end, const std::set<TaskId>& allowed) {
  std::map<TaskId, uint32_t> extra;
  for (const auto& id : allowed) extra[id] = 1;
  return checkExecutions(end, extra);
}

std::vector<std::string> checkExecutions(const JobSnapshot& end, const std::map<TaskId, uint32_t>& extraRuns) {
  std::vector<std::string> problems;
  for (const auto& [s, n] : end.stageTasks) {
    for (uint32_t t = 0; t < n; ++t) {
      TaskId id{s, t};
      auto it = end.executions.find(id);
      uint32_t runs = it == end.executions.end() ? 0 : it->second;
      auto extra = extraRuns.find(id);
      uint32_t most = 1 + (extra == extraRuns.end() ? 0 : extra->second);
      if (runs < 1 || runs > most) {
        problems.push_back("task " + taskName(id) + " ran " + std::to_string(runs) + " times (allowed 1.." +
                           std::to_string(most) + ")");
      }
    }
  }
  for (const auto& [id, runs] : end.executions) {
    auto stage = end.stageTasks.find(id.first);
    if (stage == end.stageTasks.end() || id.second >= stage->second) {
      problems.push_back("task " + taskName(id) + " ran " + std::to_string(runs) + " times but does not exist");
    }
  }
  return problems;
}

// ---- the scenario --------------------------------------------------------------------------

harness::MiniClusterOptions ScenarioOptions::defaultCluster() {
  harness::MiniClusterOptions o;
  o.sites = 3;
  o.workersPerSite = 2;
  o.containersPerWorker = 2;
  o.sessionTimeoutMs = 2000;
  o.schedulePeriodMs = 100;
  o.heartbeatMs = 200;
  o.workerTimeoutMs = 1500;
  o.execYaml = harness::kExecEnabledYaml;  // its jobs use exec
  return o;
}

Result<std::unique_ptr<Scenario>> Scenario::start(const ScenarioOptions& options) {
  if (options.partitionsPerSite == 0 || options.linesPerPartition == 0 || options.mapTasks == 0 ||
      options.reduceTasks == 0) {
    return makeError(ErrorCode::kInvalidArgument, "partitions, lines, map and reduce tasks must be positive");
  }
  std::unique_ptr<Scenario> sc(new Scenario(options));
  auto cluster = harness::MiniCluster::start(options.cluster);
  if (!cluster) return cluster.error().prepend("mini cluster");
  sc->cluster_ = std::move(cluster).value();
  const auto& sites = sc->cluster_->sites();
  for (size_t i = 0; i < sites.size(); ++i) {
    // Texts are counted per site and never concatenated: no word straddles two sites.
    std::string text = makeCorpus(static_cast<uint32_t>(17 + i), options.partitionsPerSite * options.linesPerPartition);
    for (const auto& [word, n] : countWords(text)) sc->expected_[word] += n;
    TELLUS_RETURN_IF_ERROR(sc->cluster_->putDataset(sites[i], "corpus", text, options.partitionsPerSite,
                                                    options.residencyLocalSites.count(sites[i]) > 0));
  }
  return sc;
}

Result<std::string> Scenario::submit(const std::string& site) {
  char sleep[32];
  std::snprintf(sleep, sizeof(sleep), "%.3f", options_.taskSleepS);
  std::string name = "failover-" + std::to_string(++submitted_);
  std::string side;
  std::string mapInput = "input: {stage: slow}";
  if (options_.sideTasks > 0) {
    side = fmt::format(R"(
  - name: side
    op: exec
    tasks: {}
    params: {{cmd: "sleep {:.3f}"}})",
                       options_.sideTasks, options_.sideSleepS);
    mapInput = "inputs: [{stage: slow}, {stage: side}]";
  }
  const std::string replicas =
      options_.outputReplicas ? fmt::format("output_replicas: {}\n", *options_.outputReplicas) : std::string();
  std::string spec = "name: " + name + "\n" + replicas + R"(placement: proportional
stages:
  - name: slow
    op: exec
    input: {dataset: corpus}
    params: {cmd: "sleep )" + std::string(sleep) + R"(; cat"})" + side + R"(
  - name: map
    op: wordcount.map
    tasks: )" + std::to_string(options_.mapTasks) + R"(
    )" + mapInput + R"(
  - name: reduce
    op: wordcount.reduce
    tasks: )" + std::to_string(options_.reduceTasks) + R"(
    input: {stage: map}
)";
  return submitYaml(site, name, spec);
}

Result<std::string> Scenario::submitYaml(const std::string& site, const std::string& name, const std::string& spec) {
  auto path = cluster_->dir() / (name + ".yaml");
  {
    std::ofstream out(path, std::ios::trunc);
    out << spec;
    if (!out) return makeError(ErrorCode::kInternal, "cannot write " + path.string());
  }
  auto r = cluster_->tellus({"submit", path.string()}, site);
  if (r.exitCode != 0) {
    return makeError(ErrorCode::kInternal, "tellus submit exited " + std::to_string(r.exitCode) + ": " + r.err);
  }
  std::string id = r.out;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  if (id.rfind("job-", 0) != 0) return makeError(ErrorCode::kInternal, "tellus submit printed '" + r.out + "'");
  return id;
}

Result<JobSnapshot> Scenario::snapshot(const std::string& jobId) { return snapshotJob(cluster_->zkReader(), jobId); }

Result<std::set<TaskId>> Scenario::unfinishedOn(const std::string& jobId, const JobSnapshot& after,
                                                const std::set<std::string>& workers) {
  auto& zk = cluster_->zkReader();
  auto attempts = zk.run(zk.jobs().attempts(jobId));
  if (!attempts) return attempts.error();
  std::map<TaskId, uint32_t> onWorkers;
  for (const auto& a : *attempts) {
    if (workers.count(a.workerId)) ++onWorkers[a.task];
  }
  std::set<TaskId> out;
  for (const auto& [id, runs] : onWorkers) {
    auto part = after.parts.find(id);
    const uint32_t finished = part != after.parts.end() && workers.count(part->second.worker_id()) ? 1 : 0;
    if (runs > finished) out.insert(id);
  }
  return out;
}

Result<JobSnapshot> Scenario::waitFor(const std::string& jobId, const std::function<bool(const JobSnapshot&)>& condition,
                                      milliseconds deadline, milliseconds poll) {
  std::optional<JobSnapshot> found;
  std::string last = "no snapshot";
  bool ended = false;
  harness::eventually(
      [&] {
        auto snap = snapshot(jobId);
        if (!snap) {
          last = "reading the job state: " + snap.message();
          return false;
        }
        invariants_.observe(*snap);
        if (condition(*snap)) {
          found = std::move(snap).value();
          return true;
        }
        last = snap->describe();
        ended = snap->terminal();
        return ended;
      },
      deadline, poll);
  if (found) return std::move(*found);
  if (ended) return makeError(ErrorCode::kInvalidArgument, "the job ended first: " + last);
  return makeError(ErrorCode::kDeadlineExceeded, "not within the deadline; last: " + last);
}

Result<JobSnapshot> Scenario::waitForEnd(const std::string& jobId, milliseconds deadline) {
  return waitFor(jobId, [](const JobSnapshot& s) { return s.terminal(); }, deadline, milliseconds(50));
}

Status Scenario::checkResult(const std::string& jobId, const std::string& site) {
  auto r = cluster_->tellus({"result", jobId}, site);
  if (r.exitCode != 0) return makeError(ErrorCode::kInternal, "tellus result exited " + std::to_string(r.exitCode) + ": " + r.err);
  auto counts = parseWordCounts(r.out);
  if (!counts) return counts.error();
  if (*counts != expected_) {
    return makeError(ErrorCode::kInternal, "word counts differ (" + std::to_string(counts->size()) + " words, expected " +
                                               std::to_string(expected_.size()) + "): " +
                                               describeDifferences(expected_, *counts));
  }
  return {};
}

std::string Scenario::diagnostics(const std::string& jobId) {
  std::string out = cluster_->crashedDaemons();
  if (!jobId.empty()) {
    // The JM logs without the ZooKeeper C client's connection chatter.
    std::istringstream logs(cluster_->jmLogs(jobId, 1 << 20));
    std::string kept;
    for (std::string line; std::getline(logs, line);) {
      if (line.find("zookeeper-c") == std::string::npos) kept += line + "\n";
    }
    out += kept.size() > 12000 ? "..." + kept.substr(kept.size() - 12000) : kept;
  }
  // The workers' warnings and errors (lost connections, failed tasks).
  for (const auto& site : cluster_->sites()) {
    for (const auto& id : cluster_->workers(site)) {
      std::ifstream in(cluster_->daemonLog(id));
      std::string notable;
      for (std::string line; std::getline(in, line);) {
        if ((line.find(" W [") != std::string::npos || line.find(" E [") != std::string::npos) &&
            line.find("zookeeper-c") == std::string::npos) {
          notable += line + "\n";
        }
      }
      if (notable.size() > 3000) notable = "..." + notable.substr(notable.size() - 3000);
      if (!notable.empty()) out += "\n--- warnings of " + id + ":\n" + notable;
    }
  }
  return out;
}

}  // namespace tellus::failover
