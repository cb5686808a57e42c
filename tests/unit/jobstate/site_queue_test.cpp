// The site queue a master publishes and the checks a reading master applies to it.

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "jobstate/site_queue.h"

namespace tellus::jobstate {
namespace {

std::vector<sched::PublishedQueue::Entry> entries(std::size_t n) {
  std::vector<sched::PublishedQueue::Entry> out;
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back({fmt::format("job-{:010}", i), static_cast<double>(i % 7), static_cast<int64_t>(1000 + i)});
  }
  return out;
}

std::vector<pb::SiteQueue::Lease> leases(std::size_t n) {
  std::vector<pb::SiteQueue::Lease> out;
  for (std::size_t i = 0; i < n; ++i) {
    pb::SiteQueue::Lease lease;
    lease.set_job_id(fmt::format("job-{:010}", i % 3));
    lease.set_worker_id(fmt::format("w{}", i % 4));
    lease.set_slot(static_cast<uint32_t>(i));
    lease.set_ends_in_ms(static_cast<uint32_t>((n - i) * 100));  // the last one ends first
    out.push_back(std::move(lease));
  }
  return out;
}

}  // namespace

TEST_CASE("a site queue lists the most remaining work first and sums what the cap leaves out", "[unit][jobstate]") {
  const auto queue = buildSiteQueue("eu-west", 5000, 12, entries(10), 4);
  CHECK(queue.site() == "eu-west");
  CHECK(queue.published_unix_ms() == 5000);
  CHECK(queue.containers_total() == 12u);
  REQUIRE(queue.jobs_size() == 4);
  // Remaining i % 7 for jobs 0..9: 0 1 2 3 4 5 6 0 1 2; the four largest are jobs 6, 5, 4, 3.
  CHECK(queue.jobs(0).job_id() == "job-0000000006");
  CHECK(queue.jobs(0).remaining_tasks() == 6u);
  CHECK(queue.jobs(0).submit_unix_ms() == 1006);
  CHECK(queue.jobs(1).job_id() == "job-0000000005");
  CHECK(queue.jobs(2).job_id() == "job-0000000004");
  CHECK(queue.jobs(3).job_id() == "job-0000000003");
  // Left out: jobs 0, 1, 2, 7, 8, 9 with 0 + 1 + 2 + 0 + 1 + 2 tasks.
  CHECK(queue.other_jobs() == 6u);
  CHECK(queue.other_tasks() == 6u);

  auto decoded = decodeSiteQueue(queue.SerializeAsString(), "eu-west");
  REQUIRE(decoded.isOk());
  CHECK(decoded->site == "eu-west");
  CHECK(decoded->publishedUnixMs == 5000);
  CHECK(decoded->slots == 12);
  CHECK(decoded->otherTasks == 6);
  REQUIRE(decoded->jobs.size() == 4);
  CHECK(decoded->jobs[0].jobId == "job-0000000006");
  CHECK(decoded->jobs[0].remainingTasks == 6);
  CHECK(decoded->jobs[0].submitUnixMs == 1006);

  // Under the default cap every job is listed.
  const auto all = buildSiteQueue("a", 1, 1, entries(kMaxQueueJobs));
  CHECK(all.jobs_size() == static_cast<int>(kMaxQueueJobs));
  CHECK(all.other_jobs() == 0u);
  CHECK(all.SerializeAsString().size() < kMaxQueueNodeBytes);
  const auto capped = buildSiteQueue("a", 1, 1, entries(kMaxQueueJobs + 3));
  CHECK(capped.jobs_size() == static_cast<int>(kMaxQueueJobs));
  CHECK(capped.other_jobs() == 3u);
}

TEST_CASE("a queue read from ZooKeeper is checked before it counts", "[unit][jobstate]") {
  auto good = buildSiteQueue("us-east", 1, 1, entries(2));
  CHECK(decodeSiteQueue(good.SerializeAsString(), "us-east").isOk());

  SECTION("another site's name") {
    auto r = decodeSiteQueue(good.SerializeAsString(), "eu-west");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.message() == "/sites/eu-west/queue: names site 'us-east'");
  }
  SECTION("not a SiteQueue") {
    auto r = decodeSiteQueue(std::string("\xff\xff\xff", 3), "us-east");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.message() == "/sites/us-east/queue: malformed SiteQueue");
  }
  SECTION("too large") {
    auto r = decodeSiteQueue(std::string(kMaxQueueNodeBytes + 1, '\0'), "us-east");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.message().find("over 65536") != std::string::npos);
  }
  SECTION("too many jobs") {
    pb::SiteQueue q = buildSiteQueue("us-east", 1, 1, entries(kMaxQueueJobs), kMaxQueueJobs);
    auto* extra = q.add_jobs();
    extra->set_job_id("job-9999999999");
    auto r = decodeSiteQueue(q.SerializeAsString(), "us-east");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.message() == "/sites/us-east/queue: 257 jobs, over 256");
  }
  SECTION("a job id that is no name") {
    good.mutable_jobs(0)->set_job_id("../x");
    auto r = decodeSiteQueue(good.SerializeAsString(), "us-east");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.message() == "/sites/us-east/queue: '../x' is not a job id");
  }
  SECTION("absurd task counts") {
    good.mutable_jobs(1)->set_remaining_tasks(kMaxQueueTasks + 1);
    CHECK_FALSE(decodeSiteQueue(good.SerializeAsString(), "us-east").isOk());
    good.mutable_jobs(1)->set_remaining_tasks(1);
    good.set_other_tasks(UINT64_MAX);
    CHECK_FALSE(decodeSiteQueue(good.SerializeAsString(), "us-east").isOk());
  }
}

TEST_CASE("a site queue lists the soonest-ending leases and counts the rest", "[unit][jobstate]") {
  auto some = leases(5);
  some[0].set_ends_in_ms(UINT32_MAX);  // a master's clamp is the day the format allows
  const auto queue = buildSiteQueue("eu-west", 5000, 12, entries(2), kMaxQueueJobs, some);
  REQUIRE(queue.leases_size() == 5);
  CHECK(queue.leases(0).slot() == 4u);
  CHECK(queue.leases(0).ends_in_ms() == 100u);
  CHECK(queue.leases(3).slot() == 1u);
  CHECK(queue.leases(4).ends_in_ms() == kMaxQueueLeaseMs);
  CHECK(queue.other_leases() == 0u);
  auto parsed = parseSiteQueue(queue.SerializeAsString(), "eu-west");
  REQUIRE(parsed.isOk());
  CHECK(parsed->leases_size() == 5);

  // A full queue, every job and lease listed, fits the node size readers accept.
  const auto full = buildSiteQueue("a", 1, 1, entries(kMaxQueueJobs), kMaxQueueJobs, leases(kMaxQueueLeases + 7));
  CHECK(full.leases_size() == static_cast<int>(kMaxQueueLeases));
  CHECK(full.other_leases() == 7u);
  CHECK(full.leases(0).ends_in_ms() == 100u);
  CHECK(full.SerializeAsString().size() < kMaxQueueNodeBytes);
  CHECK(parseSiteQueue(full.SerializeAsString(), "a").isOk());
}

TEST_CASE("leases read from ZooKeeper are checked", "[unit][jobstate]") {
  auto queue = buildSiteQueue("us-east", 1, 1, entries(1), kMaxQueueJobs, leases(3));
  SECTION("too many") {
    for (std::size_t i = 0; i < kMaxQueueLeases; ++i) *queue.add_leases() = queue.leases(0);
    auto r = parseSiteQueue(queue.SerializeAsString(), "us-east");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.message() == "/sites/us-east/queue: 515 leases, over 512");
  }
  SECTION("not a job") {
    queue.mutable_leases(1)->set_job_id("/etc");
    auto r = parseSiteQueue(queue.SerializeAsString(), "us-east");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.message() == "/sites/us-east/queue: a lease of '/etc', not a job id");
  }
  SECTION("not a worker") {
    queue.mutable_leases(1)->set_worker_id("..");
    CHECK_FALSE(parseSiteQueue(queue.SerializeAsString(), "us-east").isOk());
  }
  SECTION("past a day") {
    queue.mutable_leases(2)->set_ends_in_ms(kMaxQueueLeaseMs + 1);
    CHECK_FALSE(parseSiteQueue(queue.SerializeAsString(), "us-east").isOk());
  }
}

}  // namespace tellus::jobstate
