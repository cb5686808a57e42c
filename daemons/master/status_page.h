#pragma once
// What the master's HTTP port shows about the federation and its jobs: the JSON of /status
// beyond this site's own workers, which the web page (web/, served at /) polls. Pure: the
// master reads ZooKeeper (through the same builder as the Status RPC) and hands the results
// here; tests/unit/master/status_page_test.cpp checks every formatter and the query parser.
//
// Bounds: at most kMaxPageJobs jobs per response, a job's task map in pages of at most
// kMaxTaskPage tasks, error texts cut to kMaxErrorChars, kMaxFailures recent failures kept.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jobstate/job_store.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::master {

inline constexpr uint32_t kDefaultPageJobs = 10;
inline constexpr uint32_t kMaxPageJobs = 50;
inline constexpr uint32_t kDefaultTaskPage = 100;
inline constexpr uint32_t kMaxTaskPage = 200;
inline constexpr std::size_t kMaxErrorChars = 500;
inline constexpr std::size_t kMaxFailures = 50;

// The query of GET /status: ?jobs=N (newest N jobs, 1..kMaxPageJobs) and ?job=ID with
// ?offset=&limit= (a page of that job's task map, limit 1..kMaxTaskPage). Unknown keys are
// refused, so a typo is an error rather than a silently ignored option.
struct StatusQuery {
  uint32_t jobs = kDefaultPageJobs;
  std::optional<std::string> jobId;
  uint32_t taskOffset = 0;
  uint32_t taskLimit = kDefaultTaskPage;
};
[[nodiscard]] Result<StatusQuery> parseStatusQuery(const std::map<std::string, std::string>& query);

// A failure this master saw (a worker lost, a JM dead, a job failed here), for the page.
struct FailureEvent {
  int64_t unixMs = 0;
  std::string kind;   // "worker-lost", "jm-died", "job-failed", "jm-not-replaced"
  std::string jobId;  // "" when not about a job
  std::string text;
};
// Appends `event` (text cut to kMaxErrorChars) and drops the oldest beyond kMaxFailures.
void recordFailure(std::deque<FailureEvent>& failures, FailureEvent event);
// Newest first. Without `jobDetails` (http_jobs off) an event about a job keeps its kind, time
// and job id but not its text (a JM's exit reason, a job's failure reason).
nlohmann::json failuresJson(const std::deque<FailureEvent>& failures, bool jobDetails);

// A site as the page shows it: counts only (not its addresses, datasets or exec policy).
nlohmann::json siteJson(const pb::SiteInfo& site);

// A job's summary: id, name, state, sites, times, error (cut), stages with per-site progress
// (tasks, done, released, percent), JMs (site, role, epoch, desire, granted, worker), and its
// cost so far as the master priced it (costJson without the breakdown).
nlohmann::json jobJson(const pb::JobStatusResponse& job);

// A job's cost as the Status RPC priced it (cost::price, the numbers of `tellus cost`):
// {total, container_cost, egress_cost, container_seconds, bytes_across_sites, unpriced_sites}
// and, with `breakdown`, sites [{site, market, container_seconds, container_cost, priced}] and
// pairs [{from, to, bytes, egress_cost, priced}]. The overview leaves the breakdown out: its
// pairs grow with the square of the sites, for each of up to kMaxPageJobs jobs.
nlohmann::json costJson(const pb::JobCost& cost, bool breakdown);

// A job the page cannot describe, listed instead of left out: {id, state, broken: true,
// error} where state is "corrupt" (its status node does not decode) or "unreadable" (another
// read failed), error the reason cut to kMaxErrorChars.
nlohmann::json brokenJobJson(const std::string& jobId, const std::string& state, const std::string& reason);

// The summary plus one page of its task map, as the Status RPC with `tasks` returned it:
// tasks [{stage, stage_name, task, owner_site, worker, executions, state}] where state is
// "done" (an output is recorded), "running" (in `running`) or "waiting"; total_tasks,
// task_offset, next_task_offset for paging; and the cost with its breakdown.
nlohmann::json jobPageJson(const pb::JobStatusResponse& job, uint32_t taskOffset,
                           const std::vector<jobstate::TaskId>& running);

// `text` cut to at most `max` bytes at a UTF-8 boundary, with "…" when cut.
std::string clipText(const std::string& text, std::size_t max);

}  // namespace tellus::master
