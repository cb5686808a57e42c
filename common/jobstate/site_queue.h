#pragma once
// A site's published queue (/sites/<site>/queue, pb::SiteQueue): built by its master from the
// sub-jobs it serves and the containers they hold. Every other master reads the jobs to rank
// them in one order across the federation (sched::federationOrder, paper 001 §5); the site's
// JMs read the leases (Awan, paper 004 §III-C: who holds what until when). Pure: no ZooKeeper,
// no clock.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sched/job_order.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::jobstate {

// Jobs one queue lists: ~30 bytes each, so the job list stays under 8 KiB. The rest are summed
// into other_jobs / other_tasks.
inline constexpr std::size_t kMaxQueueJobs = 256;
// Leases one queue lists (~50 bytes each), the soonest-ending first: those are what a JM
// waiting for a local container weighs. The rest are counted in other_leases.
inline constexpr std::size_t kMaxQueueLeases = 512;
// A sub-job's remaining tasks as the master accepts them (a JM's report is bounded by
// limits.max_tasks_per_job before it gets here; this bounds what another master publishes).
inline constexpr uint64_t kMaxQueueTasks = uint64_t{1} << 32;
// The longest lease a queue may state: a day (masters clamp leases to lease_max_ms first).
inline constexpr uint32_t kMaxQueueLeaseMs = 24 * 3600 * 1000;
// A queue node larger than this is not read (the caps above take far less).
inline constexpr std::size_t kMaxQueueNodeBytes = 64 * 1024;

// The site's queue: up to `maxJobs` entries, the most remaining tasks first (ties: job id),
// the others summed into other_jobs / other_tasks. Those listed weigh most on every master's
// order; the ones left out still lengthen the site's queue (SWAG's existing load). Leases: up
// to kMaxQueueLeases, the soonest-ending first (ends_in_ms clamped to kMaxQueueLeaseMs).
pb::SiteQueue buildSiteQueue(const std::string& site, int64_t nowUnixMs, uint32_t containersTotal,
                             std::vector<sched::PublishedQueue::Entry> jobs, std::size_t maxJobs = kMaxQueueJobs,
                             std::vector<pb::SiteQueue::Lease> leases = {});

// The queue as sched::federationOrder takes it.
sched::PublishedQueue toPublished(const pb::SiteQueue& queue);

// A queue node read from ZooKeeper (hostile): it must parse, name `site`, list at most
// kMaxQueueJobs entries with job ids and at most kMaxQueueTasks remaining tasks each, and at
// most kMaxQueueLeases leases with job ids, worker names and ends within kMaxQueueLeaseMs.
// Anything else is an error naming the path.
Result<pb::SiteQueue> parseSiteQueue(const std::string& bytes, const std::string& site);
// parseSiteQueue, as sched::federationOrder takes it.
Result<sched::PublishedQueue> decodeSiteQueue(const std::string& bytes, const std::string& site);

}  // namespace tellus::jobstate
