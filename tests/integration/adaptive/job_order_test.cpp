// The masters' job order on a real cluster (paper 001 §5 without a controller): with
// `job_order: global-srpt` (or swag, or global-srpt-reordering) a site's master hands a freed
// container to the job that order puts first, from the sites' published queues, so a short job
// submitted after a long one finishes first; and a master that stops publishing is noticed as
// stale by the others.
//
// Scarcity is made explicit: one container per site. A blocker job holds it until the test
// opens its gate (a file its task waits for), so the long and the short job both wait for the
// same container, and the test knows — from the published queue — that the master has heard
// of both before it frees the container. No timing assumptions: every wait is on a real
// condition with a generous deadline.

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "harness/eventually.h"
#include "harness/files.h"
#include "jobstate/paths.h"
#include "kit/adaptive_kit.h"
#include "jobstate/site_queue.h"

namespace tellus::adaptive {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr milliseconds kJobDeadline = 150s;
constexpr milliseconds kStateDeadline = 60s;

std::string execSpec(const std::string& name, const std::string& dataset, const std::string& cmd) {
  std::ostringstream y;
  y << "name: " << name << "\n"
    << "stages:\n  - name: run\n    op: exec\n    params: {cmd: \"" << cmd << "\"}\n"
    << "    inputs:\n      - {dataset: " << dataset << "}\n";
  return y.str();
}

// The queue the site's master published, or an error naming why not.
Result<sched::PublishedQueue> publishedQueue(ZkView& zk, const std::string& site) {
  auto node = zk.get(jobstate::siteQueuePath(site));
  if (!node) return node.error();
  return jobstate::decodeSiteQueue(node->data, site);
}

double remainingIn(const sched::PublishedQueue& queue, const std::string& jobId) {
  for (const auto& e : queue.jobs) {
    if (e.jobId == jobId) return e.remainingTasks;
  }
  return -1;
}

std::string describe(const sched::PublishedQueue& queue) {
  std::string out = queue.site + " @" + std::to_string(queue.publishedUnixMs) + ":";
  for (const auto& e : queue.jobs) out += " " + e.jobId + "=" + std::to_string(e.remainingTasks);
  return out;
}

}  // namespace

TEST_CASE("ranking masters: a short job submitted after a long one gets the freed container and finishes first",
          "[integration][order]") {
  // Every order that ranks by remaining work puts the 1-task job before the 4-task one.
  const std::string order = GENERATE(as<std::string>(), "global-srpt", "swag", "global-srpt-reordering");
  INFO("job_order: " << order);
  harness::MiniClusterOptions options;
  options.sites = 2;
  options.workersPerSite = 1;
  options.containersPerWorker = 1;
  options.execYaml = harness::kExecEnabledYaml;
  options.masterExtraYaml = "job_order: " + order + "\nqueue_publish_ms: 200\n";
  auto started = harness::MiniCluster::start(options);
  INFO((started ? std::string() : started.message()));
  REQUIRE(started.isOk());
  auto& cluster = **started;
  auto zkConnected = cluster.connectZkReader(30s);
  INFO((zkConnected ? std::string() : zkConnected.message()));
  REQUIRE(zkConnected.isOk());
  ZkView& zk = **zkConnected;
  const std::string site = cluster.sites()[0];
  const std::string other = cluster.sites()[1];

  for (const auto& [dataset, partitions] : std::vector<std::pair<std::string, uint32_t>>{{"blk", 1}, {"long", 4}, {"short", 1}}) {
    std::string lines;
    for (uint32_t i = 0; i < partitions * 3; ++i) lines += dataset + " line " + std::to_string(i) + "\n";
    Status put = putDataset(cluster, site, dataset, lines, partitions);
    INFO(dataset << ": " << put.message());
    REQUIRE(put.isOk());
  }

  // The blocker takes the site's only container and keeps it until the gate exists.
  const auto gate = cluster.dir() / "gate";
  auto blocker = submitJob(cluster,
                           execSpec("blocker", "blk",
                                    "while [ ! -e " + gate.string() + " ]; do sleep 0.05; done; cat"),
                           site, "blocker.yaml");
  INFO((blocker ? std::string() : blocker.message()));
  REQUIRE(blocker.isOk());
  bool blocking = harness::eventually(
      [&] {
        auto running = zk.children("/jobs/" + *blocker + "/running");
        return running && !running->empty();
      },
      kStateDeadline, 50ms);
  INFO(jmLogTails(cluster, *blocker));
  REQUIRE(blocking);

  // Then the long job (4 tasks of a second each), then the short one (1 task).
  auto longJob = submitJob(cluster, execSpec("long", "long", "sleep 1; cat"), site, "long.yaml");
  INFO((longJob ? std::string() : longJob.message()));
  REQUIRE(longJob.isOk());
  auto shortJob = submitJob(cluster, execSpec("short", "short", "cat"), site, "short.yaml");
  INFO((shortJob ? std::string() : shortJob.message()));
  REQUIRE(shortJob.isOk());

  // The master has heard from both JMs (their remaining tasks are in its published queue) and
  // both want a container, before the container is freed.
  std::string lastQueue;
  bool known = harness::eventually(
      [&] {
        auto queue = publishedQueue(zk, site);
        if (!queue) {
          lastQueue = queue.message();
          return false;
        }
        lastQueue = describe(*queue);
        if (remainingIn(*queue, *longJob) != 4 || remainingIn(*queue, *shortJob) != 1) return false;
        auto longJm = readJmInfo(zk, *longJob, site);
        auto shortJm = readJmInfo(zk, *shortJob, site);
        return longJm && shortJm && longJm->desire() >= 1 && shortJm->desire() >= 1;
      },
      kStateDeadline, 50ms);
  INFO("queue: " << lastQueue << jmLogTails(cluster, *longJob) << jmLogTails(cluster, *shortJob));
  REQUIRE(known);
  // The other master publishes its (empty) queue too.
  auto otherQueue = publishedQueue(zk, other);
  INFO((otherQueue ? describe(*otherQueue) : otherQueue.message()));
  REQUIRE(otherQueue.isOk());
  CHECK(otherQueue->jobs.empty());

  {
    std::ofstream out(gate);
    out << "go\n";
    REQUIRE(out.good());
  }

  auto blockerEnd = waitForJobEnd(zk, *blocker, kJobDeadline);
  auto shortEnd = waitForJobEnd(zk, *shortJob, kJobDeadline);
  auto longEnd = waitForJobEnd(zk, *longJob, kJobDeadline);
  INFO((blockerEnd ? std::string() : blockerEnd.message()) << (shortEnd ? std::string() : shortEnd.message())
       << (longEnd ? std::string() : longEnd.message()) << jmLogTails(cluster, *longJob)
       << jmLogTails(cluster, *shortJob) << cluster.crashedDaemons());
  REQUIRE(blockerEnd.isOk());
  REQUIRE(shortEnd.isOk());
  REQUIRE(longEnd.isOk());
  REQUIRE(shortEnd->state() == pb::JOB_SUCCEEDED);
  REQUIRE(longEnd->state() == pb::JOB_SUCCEEDED);
  // Submitted after the long job, finished before it: under `fair` (or fcfs) the long job,
  // first by id and by arrival, takes the container and keeps it for its four tasks (checked:
  // with job_order fair this assertion fails).
  INFO("long job submitted " << longEnd->submit_unix_ms() << " finished " << longEnd->finish_unix_ms()
                             << "; short job submitted " << shortEnd->submit_unix_ms() << " finished "
                             << shortEnd->finish_unix_ms());
  CHECK(shortEnd->submit_unix_ms() >= longEnd->submit_unix_ms());
  CHECK(shortEnd->finish_unix_ms() < longEnd->finish_unix_ms());
  // And the CLI reports the same ending.
  auto status = cluster.tellus({"status", *shortJob, "--json"}, site);
  INFO(status.out << status.err);
  CHECK(status.exitCode == 0);
  CHECK(status.out.find("SUCCEEDED") != std::string::npos);

  // A master that stops publishing (its site paused) is stale for the others after
  // queue_stale_ms (3 x 200 ms): logged once and counted as an empty queue.
  REQUIRE(cluster.pauseSite(other).isOk());
  const auto log = cluster.daemonLog("master-" + site);
  const std::string staleLine = "the queue site " + other + " published is";
  bool noticed = harness::eventually([&] { return harness::readFile(log).find(staleLine) != std::string::npos; }, kStateDeadline,
                                     100ms);
  REQUIRE(cluster.resumeSite(other).isOk());
  CHECK(noticed);
  const std::string text = harness::readFile(log);
  const auto first = text.find(staleLine);
  INFO(text.substr(first == std::string::npos ? 0 : first, 600));
  CHECK(first != std::string::npos);
  CHECK(cluster.crashedDaemons().empty());
}

}  // namespace tellus::adaptive
