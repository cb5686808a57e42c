#include "master/status_page.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "jobstate/job_view.h"
#include "jobstate/paths.h"

namespace tellus::master {

namespace {

Result<uint32_t> parseBounded(const std::string& key, const std::string& value, uint32_t min, uint32_t max) {
  uint32_t n = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, n);
  if (value.empty() || ec != std::errc() || ptr != end || n < min || n > max) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("query '{}' must be an integer in {}..{}", key, min, max));
  }
  return n;
}

uint32_t percent(uint32_t done, uint32_t tasks) {
  if (tasks == 0) return 0;
  return static_cast<uint32_t>(std::min<uint64_t>(100, uint64_t{done} * 100 / tasks));
}

}  // namespace

Result<StatusQuery> parseStatusQuery(const std::map<std::string, std::string>& query) {
  StatusQuery q;
  for (const auto& [key, value] : query) {
    if (key == "jobs") {
      auto n = parseBounded(key, value, 1, kMaxPageJobs);
      if (!n) return n.error();
      q.jobs = *n;
    } else if (key == "job") {
      if (!jobstate::isJobId(value)) {
        return makeError(ErrorCode::kInvalidArgument, "query 'job' must be a job id (1-128 of [A-Za-z0-9_.-], not starting with '.')");
      }
      q.jobId = value;
    } else if (key == "offset") {
      auto n = parseBounded(key, value, 0, UINT32_MAX);
      if (!n) return n.error();
      q.taskOffset = *n;
    } else if (key == "limit") {
      auto n = parseBounded(key, value, 1, kMaxTaskPage);
      if (!n) return n.error();
      q.taskLimit = *n;
    } else {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("unknown query '{}' (known: jobs, job, offset, limit)", key));
    }
  }
  if (!q.jobId && (query.count("offset") || query.count("limit"))) {
    return makeError(ErrorCode::kInvalidArgument, "query 'offset' and 'limit' page a job's tasks: give 'job' too");
  }
  return q;
}

std::string clipText(const std::string& text, std::size_t max) {
  if (text.size() <= max) return text;
  std::size_t cut = max;
  // Back up over UTF-8 continuation bytes so a character is never split.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  std::string out = text.substr(0, cut);
  out.append("\u2026");
  return out;
}

void recordFailure(std::deque<FailureEvent>& failures, FailureEvent event) {
  event.text = clipText(event.text, kMaxErrorChars);
  failures.push_back(std::move(event));
  while (failures.size() > kMaxFailures) failures.pop_front();
}

nlohmann::json failuresJson(const std::deque<FailureEvent>& failures, bool jobDetails) {
  nlohmann::json out = nlohmann::json::array();
  for (auto it = failures.rbegin(); it != failures.rend(); ++it) {
    const bool shown = jobDetails || it->jobId.empty();
    out.push_back({{"unix_ms", it->unixMs}, {"kind", it->kind}, {"job_id", it->jobId}, {"text", shown ? it->text : ""}});
  }
  return out;
}

nlohmann::json siteJson(const pb::SiteInfo& site) {
  const uint32_t total = site.containers_total();
  const uint32_t free = std::min(site.containers_free(), total);
  return {{"site", site.site()},
          {"workers", site.workers()},
          {"containers_total", total},
          {"containers_free", free},
          {"containers_granted", total - free}};
}

nlohmann::json costJson(const pb::JobCost& cost, bool breakdown) {
  double seconds = 0;
  uint64_t bytes = 0;
  for (const auto& s : cost.sites()) seconds += s.container_seconds();
  for (const auto& p : cost.pairs()) bytes = p.bytes() > UINT64_MAX - bytes ? UINT64_MAX : bytes + p.bytes();
  nlohmann::json j{{"total", cost.total()},
                   {"container_cost", cost.container_cost()},
                   {"egress_cost", cost.egress_cost()},
                   {"container_seconds", seconds},
                   {"bytes_across_sites", bytes},
                   {"unpriced_sites", std::vector<std::string>(cost.unpriced_sites().begin(), cost.unpriced_sites().end())}};
  if (!breakdown) return j;
  j["sites"] = nlohmann::json::array();
  for (const auto& s : cost.sites()) {
    j["sites"].push_back({{"site", s.site()},
                          {"market", s.market()},
                          {"container_seconds", s.container_seconds()},
                          {"container_cost", s.container_cost()},
                          {"priced", s.priced()}});
  }
  j["pairs"] = nlohmann::json::array();
  for (const auto& p : cost.pairs()) {
    j["pairs"].push_back({{"from", p.from_site()},
                          {"to", p.to_site()},
                          {"bytes", p.bytes()},
                          {"egress_cost", p.egress_cost()},
                          {"priced", p.priced()}});
  }
  return j;
}

nlohmann::json jobJson(const pb::JobStatusResponse& job) {
  const auto& st = job.status();
  nlohmann::json j;
  j["id"] = st.job_id();
  j["name"] = st.name();
  j["state"] = jobstate::jobStateName(st.state());
  j["submit_site"] = st.submit_site();
  j["sites"] = nlohmann::json::array();
  for (const auto& s : st.sites()) j["sites"].push_back(s);
  j["submit_unix_ms"] = st.submit_unix_ms();
  j["finish_unix_ms"] = st.finish_unix_ms();
  j["error"] = clipText(st.error(), kMaxErrorChars);
  uint64_t tasks = 0, done = 0;
  j["stages"] = nlohmann::json::array();
  for (const auto& stage : job.stages()) {
    nlohmann::json s{{"name", stage.name()},
                     {"tasks", stage.tasks()},
                     {"done", stage.done()},
                     {"released", stage.released()},
                     {"percent", percent(stage.done(), stage.tasks())}};
    s["sites"] = nlohmann::json::array();
    for (const auto& site : stage.sites()) {
      s["sites"].push_back({{"site", site.site()}, {"owned", site.owned()}, {"done", site.done()}});
    }
    tasks += stage.tasks();
    done += std::min(stage.done(), stage.tasks());
    j["stages"].push_back(std::move(s));
  }
  j["percent"] = tasks == 0 ? 0 : static_cast<uint32_t>(done * 100 / tasks);
  j["jms"] = nlohmann::json::array();
  for (const auto& jm : job.jms()) {
    j["jms"].push_back({{"site", jm.site()},
                        {"role", jm.role() == pb::JM_PRIMARY ? "primary" : "secondary"},
                        {"epoch", jm.epoch()},
                        {"desire", jm.desire()},
                        {"granted", jm.granted()},
                        {"worker", jm.worker_id()}});
  }
  j["cost"] = costJson(job.cost(), false);
  return j;
}

nlohmann::json brokenJobJson(const std::string& jobId, const std::string& state, const std::string& reason) {
  return {{"id", jobId}, {"state", state}, {"broken", true}, {"error", clipText(reason, kMaxErrorChars)}};
}

nlohmann::json jobPageJson(const pb::JobStatusResponse& job, uint32_t taskOffset,
                           const std::vector<jobstate::TaskId>& running) {
  nlohmann::json j = jobJson(job);
  const std::set<jobstate::TaskId> runningSet(running.begin(), running.end());
  j["tasks"] = nlohmann::json::array();
  for (int s = 0; s < job.stages_size(); ++s) {
    const auto& stage = job.stages(s);
    for (const auto& t : stage.task_placements()) {
      const bool isRunning = runningSet.count({static_cast<uint32_t>(s), t.task()}) > 0;
      const char* state = !t.worker_id().empty() ? "done" : (isRunning ? "running" : "waiting");
      j["tasks"].push_back({{"stage", s},
                            {"stage_name", stage.name()},
                            {"task", t.task()},
                            {"owner_site", t.owner_site()},
                            {"worker", t.worker_id()},
                            {"executions", t.executions()},
                            {"state", state}});
    }
  }
  j["total_tasks"] = job.total_tasks();
  j["task_offset"] = taskOffset;
  j["next_task_offset"] = job.next_task_offset();
  j["cost"] = costJson(job.cost(), true);
  return j;
}

}  // namespace tellus::master
