#include "kit/adaptive_kit.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "harness/eventually.h"

namespace tellus::adaptive {

using std::chrono::milliseconds;

namespace {

std::string readAll(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Status writeAll(const std::filesystem::path& p, const std::string& content) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) return makeError(ErrorCode::kInternal, "cannot write " + p.string());
  return {};
}

// The JM log of `jobId` on every worker: (site, path).
std::vector<std::pair<std::string, std::filesystem::path>> jmLogFiles(const harness::MiniCluster& cluster,
                                                                       const std::string& jobId) {
  std::vector<std::pair<std::string, std::filesystem::path>> out;
  for (const auto& site : cluster.sites()) {
    for (const auto& worker : cluster.workers(site)) {
      auto log = cluster.dir() / site / worker / "jms" / jobId / "jm.log";
      std::error_code ec;
      if (std::filesystem::exists(log, ec)) out.emplace_back(site, log);
    }
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Job state

Result<std::vector<Execution>> readExecutions(ZkView& zk, const std::string& jobId) {
  auto attempts = zk.run(zk.jobs().attempts(jobId));
  if (!attempts) return attempts.error().prepend("reading the attempts of " + jobId);
  std::vector<Execution> out;
  for (const auto& attempt : *attempts) {
    if (attempt.workerId.empty()) {
      return makeError(ErrorCode::kInternal, "an attempt of task " + std::to_string(attempt.task.first) + "-" +
                                                 std::to_string(attempt.task.second) + " names no worker");
    }
    out.push_back(Execution{attempt.task.first, attempt.task.second, attempt.workerId});
  }
  return out;
}

std::map<std::pair<uint32_t, uint32_t>, std::vector<std::string>> executionsByTask(const std::vector<Execution>& runs) {
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::string>> out;
  for (const auto& r : runs) out[{r.stage, r.task}].push_back(r.workerId);
  return out;
}

Result<pb::JobStatus> readJobStatus(ZkView& zk, const std::string& jobId) {
  auto status = zk.run(zk.jobs().status(jobId));
  if (!status) return status.error();
  return status->value;
}

Result<pb::TaskMap> readTaskMap(ZkView& zk, const std::string& jobId, uint32_t stage) {
  auto map = zk.run(zk.jobs().taskMap(jobId, stage));
  if (!map) return map.error();
  return map->value;
}

Result<pb::StageInputs> readStageInputs(ZkView& zk, const std::string& jobId, uint32_t stage) {
  return zk.run(zk.jobs().stageInputs(jobId, stage));
}

Result<size_t> finishedTasks(ZkView& zk, const std::string& jobId, uint32_t stage) {
  auto tasks = zk.run(zk.jobs().outputTasks(jobId, stage));
  if (!tasks) return tasks.error();
  return tasks->size();
}

Result<pb::JmInfo> readJmInfo(ZkView& zk, const std::string& jobId, const std::string& site) {
  auto info = zk.run(zk.jobs().jm(jobId, site));
  if (!info) return info.error();
  return info->value;
}

std::map<std::string, std::string> workerSites(const harness::MiniCluster& cluster) {
  std::map<std::string, std::string> out;
  for (const auto& site : cluster.sites()) {
    for (const auto& w : cluster.workers(site)) out[w] = site;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// CLI

Status putDataset(harness::MiniCluster& cluster, const std::string& site, const std::string& dataset,
                  const std::string& content, uint32_t partitions, bool residencyLocal) {
  auto file = cluster.dir() / (dataset + "-" + site + ".txt");
  TELLUS_RETURN_IF_ERROR(writeAll(file, content));
  std::vector<std::string> args{"put",   file.string(), "--dataset", dataset, "--site", site, "--partitions",
                                std::to_string(partitions)};
  if (residencyLocal) args.push_back("--residency-local");
  auto r = cluster.tellus(args, site);
  if (r.exitCode != 0) {
    return makeError(ErrorCode::kInternal, "tellus put " + dataset + " at " + site + ": exit " +
                                               std::to_string(r.exitCode) + ": " + r.err);
  }
  return {};
}

Result<std::string> submitJob(harness::MiniCluster& cluster, const std::string& specYaml, const std::string& site,
                              const std::string& fileName) {
  auto file = cluster.dir() / fileName;
  TELLUS_RETURN_IF_ERROR(writeAll(file, specYaml));
  auto r = cluster.tellus({"submit", file.string()}, site);
  if (r.exitCode != 0) {
    return makeError(ErrorCode::kInternal,
                     "tellus submit " + fileName + ": exit " + std::to_string(r.exitCode) + ": " + r.err);
  }
  // The job id is the first "job-<digits>" token of the output ("job-0000000001", or
  // "submitted job-0000000001" from older CLIs).
  auto at = r.out.find("job-");
  if (at == std::string::npos) {
    return makeError(ErrorCode::kInternal, "tellus submit printed '" + r.out + "', expected a job id");
  }
  auto end = at + 4;
  while (end < r.out.size() && std::isdigit(static_cast<unsigned char>(r.out[end]))) ++end;
  if (end == at + 4) return makeError(ErrorCode::kInternal, "tellus submit printed '" + r.out + "', expected a job id");
  return r.out.substr(at, end - at);
}

Result<pb::JobStatus> waitForJobEnd(ZkView& zk, const std::string& jobId, milliseconds deadline) {
  pb::JobStatus last;
  std::string lastError;
  bool ended = harness::eventually(
      [&] {
        auto st = readJobStatus(zk, jobId);
        if (!st) {
          lastError = st.message();
          return false;
        }
        last = *st;
        return last.state() == pb::JOB_SUCCEEDED || last.state() == pb::JOB_FAILED || last.state() == pb::JOB_KILLED;
      },
      deadline, milliseconds(50));
  if (!ended) {
    return makeError(ErrorCode::kDeadlineExceeded,
                     "job " + jobId + " still " + pb::JobState_Name(last.state()) + " after " +
                         std::to_string(deadline.count()) + " ms" + (lastError.empty() ? "" : " (" + lastError + ")"));
  }
  return last;
}

Result<std::string> jobResult(harness::MiniCluster& cluster, const std::string& jobId, const std::string& site) {
  auto r = cluster.tellus({"result", jobId}, site);
  if (r.exitCode != 0) {
    return makeError(ErrorCode::kInternal, "tellus result " + jobId + ": exit " + std::to_string(r.exitCode) + ": " + r.err);
  }
  return r.out;
}

// ---------------------------------------------------------------------------------------------
// Steals

std::vector<StealRecord> parseSteals(std::string_view jmLog, const std::string& thiefSite) {
  std::vector<StealRecord> out;
  std::istringstream in{std::string(jmLog)};
  const std::string marker = "stole ";
  for (std::string line; std::getline(in, line);) {
    auto at = line.find(marker);
    if (at == std::string::npos) continue;
    // "stole <n> tasks from <site> in <ms> ms"
    std::istringstream fields(line.substr(at + marker.size()));
    StealRecord r;
    std::string tasksWord, fromWord, inWord, msWord;
    if (!(fields >> r.tasks >> tasksWord >> fromWord >> r.victimSite >> inWord >> r.latencyMs >> msWord)) continue;
    if (tasksWord != "tasks" || fromWord != "from" || inWord != "in" || msWord != "ms") continue;
    r.thiefSite = thiefSite;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<StealRecord> readSteals(const harness::MiniCluster& cluster, const std::string& jobId) {
  std::vector<StealRecord> out;
  for (const auto& [site, log] : jmLogFiles(cluster, jobId)) {
    auto steals = parseSteals(readAll(log), site);
    out.insert(out.end(), steals.begin(), steals.end());
  }
  return out;
}

std::string jmLogTails(const harness::MiniCluster& cluster, const std::string& jobId, size_t maxBytes) {
  std::string out;
  for (const auto& [site, log] : jmLogFiles(cluster, jobId)) {
    std::string text = readAll(log);
    if (text.size() > maxBytes) text = "..." + text.substr(text.size() - maxBytes);
    out += "\n--- " + log.string() + ":\n" + text;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Corpus

std::string generateText(uint32_t seed, size_t lines) {
  static const char* const kVocabulary[] = {
      "tellus", "site",    "steal",  "desire", "grant",  "task",   "stage",  "shuffle", "parades", "houtu",
      "zone",   "region",  "fabric", "quorum", "epoch",  "lease",  "bucket", "reduce",  "mapper",  "wan",
      "delta",  "rho",     "queue",  "spot",   "vm",     "ledger", "alpha",  "beta",    "gamma",   "omega",
      "north",  "south",   "east",   "west",   "river",  "stone",  "cloud",  "amber",   "cedar",   "maple"};
  constexpr size_t kWords = sizeof(kVocabulary) / sizeof(kVocabulary[0]);
  std::mt19937 rng(seed);
  // Skewed: low indices are far more frequent (a few hot keys, a long tail).
  std::geometric_distribution<size_t> pick(0.12);
  std::uniform_int_distribution<int> wordsPerLine(1, 12);
  std::string out;
  for (size_t l = 0; l < lines; ++l) {
    int n = wordsPerLine(rng);
    for (int w = 0; w < n; ++w) {
      if (w > 0) out += ' ';
      out += kVocabulary[pick(rng) % kWords];
      // Some words carry a numeric suffix: many distinct keys for the reduce tasks.
      if (rng() % 5 == 0) out += std::to_string(rng() % 200);
    }
    out += '\n';
  }
  return out;
}

int64_t jobRuntimeMs(const pb::JobStatus& status) { return status.finish_unix_ms() - status.submit_unix_ms(); }

}  // namespace tellus::adaptive
