#include "jobstate/site_queue.h"

#include <algorithm>

#include <fmt/format.h>

#include "jobstate/paths.h"
#include "util/names.h"

namespace tellus::jobstate {

pb::SiteQueue buildSiteQueue(const std::string& site, int64_t nowUnixMs, uint32_t containersTotal,
                             std::vector<sched::PublishedQueue::Entry> jobs, std::size_t maxJobs,
                             std::vector<pb::SiteQueue::Lease> leases) {
  std::sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) {
    if (a.remainingTasks != b.remainingTasks) return a.remainingTasks > b.remainingTasks;
    return a.jobId < b.jobId;
  });
  pb::SiteQueue queue;
  queue.set_site(site);
  queue.set_published_unix_ms(nowUnixMs);
  queue.set_containers_total(containersTotal);
  uint64_t otherTasks = 0;
  uint32_t otherJobs = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto tasks = static_cast<uint64_t>(std::clamp(jobs[i].remainingTasks, 0.0, double(kMaxQueueTasks)));
    if (i >= maxJobs) {
      ++otherJobs;
      otherTasks += tasks;
      continue;
    }
    auto* entry = queue.add_jobs();
    entry->set_job_id(std::move(jobs[i].jobId));
    entry->set_remaining_tasks(tasks);
    entry->set_submit_unix_ms(jobs[i].submitUnixMs);
  }
  queue.set_other_jobs(otherJobs);
  queue.set_other_tasks(otherTasks);
  std::sort(leases.begin(), leases.end(), [](const auto& a, const auto& b) {
    if (a.ends_in_ms() != b.ends_in_ms()) return a.ends_in_ms() < b.ends_in_ms();
    if (a.worker_id() != b.worker_id()) return a.worker_id() < b.worker_id();
    return a.slot() < b.slot();
  });
  const std::size_t listed = std::min(leases.size(), kMaxQueueLeases);
  for (std::size_t i = 0; i < listed; ++i) {
    auto* lease = queue.add_leases();
    *lease = std::move(leases[i]);
    lease->set_ends_in_ms(std::min(lease->ends_in_ms(), kMaxQueueLeaseMs));
  }
  queue.set_other_leases(static_cast<uint32_t>(leases.size() - listed));
  return queue;
}

sched::PublishedQueue toPublished(const pb::SiteQueue& queue) {
  sched::PublishedQueue out;
  out.site = queue.site();
  out.publishedUnixMs = queue.published_unix_ms();
  out.slots = queue.containers_total();
  out.otherTasks = static_cast<double>(queue.other_tasks());
  out.jobs.reserve(static_cast<std::size_t>(queue.jobs_size()));
  for (const auto& e : queue.jobs()) {
    out.jobs.push_back({e.job_id(), static_cast<double>(e.remaining_tasks()), e.submit_unix_ms()});
  }
  return out;
}

Result<pb::SiteQueue> parseSiteQueue(const std::string& bytes, const std::string& site) {
  const std::string path = siteQueuePath(site);
  if (bytes.size() > kMaxQueueNodeBytes) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("{}: {} bytes, over {}", path, bytes.size(), kMaxQueueNodeBytes));
  }
  pb::SiteQueue queue;
  if (!queue.ParseFromString(bytes)) return makeError(ErrorCode::kInvalidArgument, fmt::format("{}: malformed SiteQueue", path));
  if (queue.site() != site) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("{}: names site '{}'", path, queue.site().substr(0, 64)));
  }
  if (static_cast<std::size_t>(queue.jobs_size()) > kMaxQueueJobs) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("{}: {} jobs, over {}", path, queue.jobs_size(), kMaxQueueJobs));
  }
  if (queue.other_tasks() > kMaxQueueTasks * kMaxQueueJobs) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("{}: other_tasks {} out of bounds", path, queue.other_tasks()));
  }
  for (const auto& e : queue.jobs()) {
    if (!isJobId(e.job_id())) {
      return makeError(ErrorCode::kInvalidArgument, fmt::format("{}: '{}' is not a job id", path, e.job_id().substr(0, 64)));
    }
    if (e.remaining_tasks() > kMaxQueueTasks) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("{}: job {} has {} remaining tasks, over {}", path, e.job_id(), e.remaining_tasks(), kMaxQueueTasks));
    }
  }
  if (static_cast<std::size_t>(queue.leases_size()) > kMaxQueueLeases) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("{}: {} leases, over {}", path, queue.leases_size(), kMaxQueueLeases));
  }
  for (const auto& lease : queue.leases()) {
    if (!isJobId(lease.job_id())) {
      return makeError(ErrorCode::kInvalidArgument, fmt::format("{}: a lease of '{}', not a job id", path, lease.job_id().substr(0, 64)));
    }
    if (!isName(lease.worker_id())) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("{}: a lease on worker '{}', not a worker id", path, lease.worker_id().substr(0, 64)));
    }
    if (lease.ends_in_ms() > kMaxQueueLeaseMs) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("{}: a lease of job {} ends in {} ms, over {}", path, lease.job_id(), lease.ends_in_ms(), kMaxQueueLeaseMs));
    }
  }
  return queue;
}

Result<sched::PublishedQueue> decodeSiteQueue(const std::string& bytes, const std::string& site) {
  auto queue = parseSiteQueue(bytes, site);
  if (!queue) return queue.error();
  return toPublished(*queue);
}

}  // namespace tellus::jobstate
