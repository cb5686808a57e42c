// Limits and names at the door (issues 10 and 11), against real daemons: a request over a limit
// or naming a path outside data_dir is refused with one line and leaves nothing behind, in
// ZooKeeper or on disk; a put that fails midway leaves nothing registered and no files.

#include <catch2/catch.hpp>

#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cluster_test_util.h"
#include "harness/eventually.h"
#include "jobstate/paths.h"
#include "net/methods.h"
#include "net/rpc_client.h"

namespace tellus::itest {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Regular files under `dir` (recursively); none when it does not exist.
std::vector<std::string> filesUnder(const fs::path& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file()) files.push_back(it->path().string());
  }
  return files;
}

void checkOneLine(const harness::CliResult& r, const std::string& reason) {
  INFO("exit " << r.exitCode << "\nstdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exitCode != 0);
  CHECK(r.err.rfind("tellus: ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find(reason) != std::string::npos);
}

TEST_CASE("limits and names are enforced at the door; a failed put leaves nothing", "[integration][limits]") {
  harness::MiniClusterOptions options;
  options.sites = 1;
  options.workersPerSite = 2;
  options.containersPerWorker = 2;
  options.masterExtraYaml = "limits:\n  max_tasks_per_stage: 100\n  max_partitions_per_put: 4\n"
                            "  max_containers_per_worker: 8\n";
  // The second worker accepts fewer partitions per put than its master: a put of 3 fails at
  // its third partition, after the first two are stored on both workers.
  options.workerIdExtraYaml["us-east-w2"] = "limits:\n  max_partitions_per_put: 2\n";
  // Plaintext: the hostile names are sent straight to the workers and the master as any caller
  // could without TLS; with TLS they are refused earlier, by role (security_test.cpp), and
  // behind that the same handlers check the same names.
  options.tls = false;
  auto started = harness::MiniCluster::start(options);
  REQUIRE(started.isOk());
  auto& cluster = **started;
  const std::string site = cluster.sites().front();
  const fs::path siteDir = cluster.dir() / site;
  CliRunner cli;
  auto datasetFiles = [&] {
    std::vector<std::string> all;
    for (const auto& w : cluster.workers(site)) {
      auto files = filesUnder(siteDir / w / "datasets");
      all.insert(all.end(), files.begin(), files.end());
    }
    return all;
  };
  auto datasetNode = [&](const std::string& name) {
    auto there = cluster.zkReader().exists(jobstate::siteDatasetsPath(site) + "/" + name);
    REQUIRE(there.isOk());
    return *there;
  };

  // The issue's `tasks: 1000000000`: one line, no job.
  auto before = jobIds(cluster, site);
  REQUIRE(before.isOk());
  auto huge = cli.writeFile("huge.yaml", "name: huge\nstages:\n  - name: s\n    op: synthetic\n    tasks: 1000000000\n");
  checkOneLine(cluster.tellus({"submit", huge.string()}, site), "(limits.max_tasks_per_stage)");
  auto after = jobIds(cluster, site);
  REQUIRE(after.isOk());
  CHECK(*after == *before);

  auto text = cli.writeFile("text.txt", "one line\nanother line\na third line\na fourth line\n");
  // More partitions than a put may have: refused before anything is stored.
  checkOneLine(cluster.tellus({"put", text.string(), "--dataset", "too-many", "--site", site, "--partitions", "5"}, site),
               "(limits.max_partitions_per_put)");
  CHECK_FALSE(datasetNode("too-many"));
  CHECK(datasetFiles().empty());

  // A put that fails midway (a worker refuses its third partition): nothing registered, and
  // the partitions already stored on both workers are gone.
  auto failed = cluster.tellus({"put", text.string(), "--dataset", "half", "--site", site, "--partitions", "3"}, site);
  checkOneLine(failed, "nothing registered");
  CHECK_FALSE(datasetNode("half"));
  {
    INFO(fmt::format("{}", fmt::join(datasetFiles(), "\n")));
    CHECK(datasetFiles().empty());
  }
  auto sites = cluster.tellus({"sites"}, site);
  CHECK(sites.exitCode == 0);
  CHECK(sites.out.find("half") == std::string::npos);
  // Dropped by its own master: its pending record goes with its files.
  auto pending = cluster.zkReader().children(jobstate::sitePutsPath(site));
  REQUIRE(pending.isOk());
  CHECK(pending->empty());

  // Within every limit, a put is published whole.
  auto whole = cluster.tellus({"put", text.string(), "--dataset", "whole", "--site", site, "--partitions", "2"}, site);
  INFO(whole.err);
  REQUIRE(whole.exitCode == 0);
  CHECK(datasetNode("whole"));
  CHECK(datasetFiles().size() == 4);  // two partitions, two copies
  sites = cluster.tellus({"sites"}, site);
  CHECK(sites.out.find("dataset whole: 2 partitions") != std::string::npos);

  // Traversal names of issue 11, sent straight to the daemons: refused, nothing created.
  auto workerInfo = cluster.zkReader().get(jobstate::siteWorkerPath(site, site + "-w1"));
  REQUIRE(workerInfo.isOk());
  pb::WorkerInfo w1;
  REQUIRE(w1.ParseFromString(workerInfo->data));
  auto worker = net::Endpoint::parse(w1.address());
  REQUIRE(worker.isOk());
  auto master = net::Endpoint::parse(cluster.masterAddress(site));
  REQUIRE(master.isOk());
  // Relative names that would land in the cluster's directory, and an absolute one.
  const fs::path absolute = cluster.dir() / "escape-abs";
  for (const std::string& name : {std::string("../../../escape-jm"), std::string("../../escape-task"),
                                  std::string("../../escape-ds"), absolute.string(), std::string("..")}) {
    INFO(name);
    pb::LaunchJmRequest launch;
    launch.set_job_id(name);
    launch.set_worker_id(site + "-w1");  // addressed right: the name is what is refused
    launch.set_site(site);
    auto launched = net::callBlocking<rpc::Worker::LaunchJm>(*worker, launch, 5000ms);
    REQUIRE_FALSE(launched.isOk());
    CHECK(launched.error().code == ErrorCode::kInvalidArgument);

    pb::RunTaskRequest run;
    run.set_job_id(name);
    run.set_op("identity");
    run.mutable_container()->set_slot(0);
    run.mutable_container()->set_worker_id(site + "-w1");
    run.set_site(site);
    auto ran = net::callBlocking<rpc::Worker::RunTask>(*worker, run, 5000ms);
    REQUIRE_FALSE(ran.isOk());
    CHECK(ran.error().code == ErrorCode::kInvalidArgument);

    pb::WriteDatasetRequest write;
    write.set_dataset(name);
    write.set_upload_id("u1");
    write.set_data("x\n");
    write.set_last_chunk(true);
    write.set_worker_id(site + "-w1");
    write.set_site(site);
    auto wrote = net::callBlocking<rpc::Worker::WriteDataset>(*worker, write, 5000ms);
    REQUIRE_FALSE(wrote.isOk());
    write.set_dataset("fine");
    write.set_upload_id(name);
    wrote = net::callBlocking<rpc::Worker::WriteDataset>(*worker, write, 5000ms);
    REQUIRE_FALSE(wrote.isOk());

    pb::PutRequest put;
    put.set_dataset(name);
    put.set_upload_id("u2");
    put.set_partitions(1);
    put.set_data("x\n");
    put.set_last_chunk(true);
    auto stored = net::callBlocking<rpc::Master::Put>(*master, put, 5000ms);
    REQUIRE_FALSE(stored.isOk());
    CHECK(stored.error().code == ErrorCode::kInvalidArgument);
  }
  for (const fs::path& escaped : {cluster.dir() / "escape-jm", siteDir / "escape-task", siteDir / "escape-ds", absolute}) {
    INFO(escaped.string());
    CHECK_FALSE(fs::exists(escaped));
  }
  CHECK(datasetFiles().size() == 4);

  // A request meant for another worker (a registration under a made-up id that claimed this
  // worker's address would send the master's requests here): refused, nothing started.
  {
    pb::LaunchJmRequest launch;
    launch.set_job_id("job-0000000042");
    launch.set_worker_id("impostor");
    launch.set_site(site);
    auto launched = net::callBlocking<rpc::Worker::LaunchJm>(*worker, launch, 5000ms);
    REQUIRE_FALSE(launched.isOk());
    CHECK(launched.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(launched.message(), Catch::Contains("addressed to worker 'impostor'"));
    launch.set_worker_id(site + "-w1");
    launch.set_site("elsewhere");  // ids are unique per site only
    launched = net::callBlocking<rpc::Worker::LaunchJm>(*worker, launch, 5000ms);
    REQUIRE_FALSE(launched.isOk());
    CHECK_THAT(launched.message(), Catch::Contains("of site 'elsewhere'"));
    CHECK_FALSE(fs::exists(siteDir / (site + "-w1") / "jms" / "job-0000000042"));

    pb::RunTaskRequest run;
    run.set_job_id("job-0000000042");
    run.set_op("identity");
    run.mutable_container()->set_worker_id("impostor");
    run.set_site(site);
    auto ran = net::callBlocking<rpc::Worker::RunTask>(*worker, run, 5000ms);
    REQUIRE_FALSE(ran.isOk());
    CHECK_THAT(ran.message(), Catch::Contains("addressed to worker 'impostor'"));

    pb::WriteDatasetRequest write;
    write.set_dataset("misdirected");
    write.set_upload_id("u3");
    write.set_data("x\n");
    write.set_last_chunk(true);
    write.set_worker_id("impostor");
    write.set_site(site);
    auto wrote = net::callBlocking<rpc::Worker::WriteDataset>(*worker, write, 5000ms);
    REQUIRE_FALSE(wrote.isOk());
    CHECK_THAT(wrote.message(), Catch::Contains("addressed to worker 'impostor'"));
    CHECK(datasetFiles().size() == 4);
  }

  // The 4294967295-container registration: refused at once, the master serves on.
  pb::RegisterWorkerRequest reg;
  reg.set_worker_id("evil");
  reg.set_address("127.0.0.1:1");
  reg.set_containers(4294967295u);
  auto registered = net::callBlocking<rpc::Master::RegisterWorker>(*master, reg, 5000ms);
  REQUIRE_FALSE(registered.isOk());
  CHECK(registered.error().message.find("(limits.max_containers_per_worker)") != std::string::npos);
  sites = cluster.tellus({"sites"}, site);
  CHECK(sites.exitCode == 0);
  CHECK(sites.out.find("workers 2 ") != std::string::npos);
  CHECK(cluster.crashedDaemons().empty());
}

}  // namespace
}  // namespace tellus::itest

namespace tellus::itest {
namespace {

// Entries of `dir` whose names start with `prefix`.
size_t entriesStartingWith(const fs::path& dir, const std::string& prefix) {
  size_t n = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

TEST_CASE("a killed task's partial output is deleted", "[integration][limits]") {
  harness::MiniClusterOptions options;
  options.sites = 1;
  options.workersPerSite = 1;
  options.containersPerWorker = 1;
  auto started = harness::MiniCluster::start(options);
  REQUIRE(started.isOk());
  auto& cluster = **started;
  const std::string site = cluster.sites().front();
  CliRunner cli;
  // Its bucket's writer is open (a .tmp-* directory in the partition store) while it burns CPU.
  auto spec = cli.writeFile("slow.yaml", "name: slow\nstages:\n  - name: s\n    op: synthetic\n    tasks: 1\n"
                                         "    params: {cpu_ms: '600000', output_bytes: '1000'}\n");
  auto jobId = submitJob(cluster, spec, site);
  REQUIRE(jobId.isOk());
  const fs::path jobDir = cluster.dir() / site / (site + "-w1") / "partitions" / *jobId;
  REQUIRE(harness::eventually([&] { return entriesStartingWith(jobDir, ".tmp-s0-t0-b0-") == 1; }, 30000ms));
  auto killed = cluster.tellus({"kill", *jobId}, site);
  INFO(killed.err);
  REQUIRE(killed.exitCode == 0);
  // The executor dies by SIGKILL (its writer never cleans up): the worker removes what it left.
  CHECK(harness::eventually([&] { return entriesStartingWith(jobDir, ".tmp-") == 0; }, 30000ms));
  CHECK(cluster.crashedDaemons().empty());
}

}  // namespace
}  // namespace tellus::itest
