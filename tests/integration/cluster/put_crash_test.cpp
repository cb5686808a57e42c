// A put whose master dies (SIGKILL) after some partitions are stored on workers leaves no
// orphan files (issue 10): the restarted master finds the put's pending record in ZooKeeper,
// has its workers drop the put's files and deletes the record; nothing is registered, and a
// fresh put of the same name works. Real daemons, the real CLI, a real kill.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/eventually.h"
#include "harness/mini_cluster.h"
#include "jobstate/paths.h"
#include "proc/subprocess.h"

namespace tellus::itest {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Every file under the workers' dataset directories of `site` (recursively).
std::vector<std::string> datasetFiles(harness::MiniCluster& cluster, const std::string& site) {
  std::vector<std::string> files;
  for (const auto& w : cluster.workers(site)) {
    std::error_code ec;
    for (fs::recursive_directory_iterator it(cluster.dir() / site / w / "datasets", ec), end; !ec && it != end;
         it.increment(ec)) {
      if (it->is_regular_file()) files.push_back(it->path().string());
    }
  }
  return files;
}

// A one-site cluster of two workers (each partition of a put is stored on both).
std::unique_ptr<harness::MiniCluster> twoWorkerSite(const std::string& masterExtraYaml) {
  harness::MiniClusterOptions options;
  options.sites = 1;
  options.workersPerSite = 2;
  options.containersPerWorker = 1;
  options.masterExtraYaml = masterExtraYaml;
  auto started = harness::MiniCluster::start(options);
  REQUIRE(started.isOk());
  return std::move(started).value();
}

// Starts `tellus put` of 96 MiB in 8 partitions into `dataset` (stdout and stderr in put.out and
// put.err of the cluster's directory) and returns once a complete partition of it is stored on
// a worker: large enough that the put is then still sending its later partitions (they go one
// after another).
proc::Subprocess startBigPut(harness::MiniCluster& cluster, const std::string& site, const std::string& dataset) {
  const fs::path big = cluster.dir() / "big.txt";
  {
    std::ofstream out(big, std::ios::binary);
    const std::string line = std::string(99, 'x') + "\n";
    for (int i = 0; i < 96 * 1024 * 1024 / 100; ++i) out << line;
    REQUIRE(out.good());
  }
  proc::SpawnOptions put;
  put.argv = {(cluster.binDir() / "tellus").string(), "--master", cluster.masterAddress(site), "--timeout-ms", "30000",
              "put", big.string(), "--dataset", dataset, "--site", site, "--partitions", "8"};
  put.extraEnv = cluster.cliEnv();
  put.stdoutFile = cluster.dir() / "put.out";
  put.stderrFile = cluster.dir() / "put.err";
  put.newProcessGroup = true;
  put.dieWithParent = true;
  auto cli = proc::Subprocess::spawn(put);
  REQUIRE(cli.isOk());
  auto completePartition = [&] {
    for (const auto& f : datasetFiles(cluster, site)) {
      if (f.find("/datasets/" + dataset + "/") != std::string::npos && f.find("-part-") != std::string::npos) return true;
    }
    return false;
  };
  bool stored = harness::eventually(completePartition, 60s, 2ms);
  REQUIRE(stored);
  return std::move(cli).value();
}

TEST_CASE("a put whose master is killed after partitions are stored leaves no files and nothing registered",
          "[integration][put]") {
  // The restarted master looks for puts that never committed every put_idle_timeout_ms / 4.
  auto owned = twoWorkerSite("put_idle_timeout_ms: 2000\n");
  auto& cluster = *owned;
  const std::string site = cluster.sites().front();
  const std::string dataset = "crashed";

  // The moment: a complete partition of the put is stored on a worker.
  auto cli = startBigPut(cluster, site, dataset);
  REQUIRE(cluster.killMaster(site).isOk());
  auto ended = cli.waitFor(40s);
  if (!ended) (void)cli.killGroup(SIGKILL);
  INFO("the put: " << (ended ? ended->toString() : ended.message()));
  CHECK((ended.isOk() && !ended->success()));

  // Killed before its commit: not registered, its files on the workers, its record pending.
  auto registered = cluster.zkReader().exists(jobstate::siteDatasetPath(site, dataset));
  REQUIRE(registered.isOk());
  INFO("the put committed before the master was killed: make it larger");
  REQUIRE_FALSE(*registered);
  const auto left = datasetFiles(cluster, site);
  INFO(fmt::format("files left by the put:\n{}", fmt::join(left, "\n")));
  CHECK_FALSE(left.empty());
  auto pending = cluster.zkReader().children(jobstate::sitePutsPath(site));
  REQUIRE(pending.isOk());
  CHECK(pending->size() == 1);

  // The restarted master has the workers drop the put's files and forgets the put.
  REQUIRE(cluster.restartMaster(site).isOk());
  std::vector<std::string> files;
  std::vector<std::string> records;
  bool cleaned = harness::eventually(
      [&] {
        files = datasetFiles(cluster, site);
        auto names = cluster.zkReader().children(jobstate::sitePutsPath(site));
        records = names ? *names : std::vector<std::string>{"(unreadable: " + names.message() + ")"};
        return files.empty() && records.empty();
      },
      30s, 50ms);
  INFO(fmt::format("files: {}\npending puts: {}", fmt::join(files, " "), fmt::join(records, " ")));
  CHECK(cleaned);
  registered = cluster.zkReader().exists(jobstate::siteDatasetPath(site, dataset));
  REQUIRE(registered.isOk());
  CHECK_FALSE(*registered);

  // A fresh put of the same name is published whole.
  const fs::path small = cluster.dir() / "small.txt";
  {
    std::ofstream out(small, std::ios::binary);
    out << "one line\nanother line\na third line\na fourth line\n";
  }
  auto again = cluster.tellus({"put", small.string(), "--dataset", dataset, "--site", site, "--partitions", "2"}, site);
  INFO("put again: " << again.exitCode << "\n" << again.out << again.err);
  REQUIRE(again.exitCode == 0);
  registered = cluster.zkReader().exists(jobstate::siteDatasetPath(site, dataset));
  REQUIRE(registered.isOk());
  CHECK(*registered);
  CHECK(datasetFiles(cluster, site).size() == 4);  // two partitions, two copies
  auto sites = cluster.tellus({"sites"}, site);
  CHECK(sites.out.find("dataset " + dataset + ": 2 partitions") != std::string::npos);
  pending = cluster.zkReader().children(jobstate::sitePutsPath(site));
  REQUIRE(pending.isOk());
  CHECK(pending->empty());
  CHECK(cluster.crashedDaemons().empty());
}

TEST_CASE("a put that loses a worker midway fails with the cause, not a bare 'dropped'", "[integration][put]") {
  auto owned = twoWorkerSite("");
  auto& cluster = *owned;
  const std::string site = cluster.sites().front();
  auto cli = startBigPut(cluster, site, "halfway");
  REQUIRE(cluster.killWorker(cluster.workers(site).back()).isOk());
  auto ended = cli.waitFor(40s);
  if (!ended) (void)cli.killGroup(SIGKILL);
  INFO("the put: " << (ended ? ended->toString() : ended.message()));
  REQUIRE(ended.isOk());
  CHECK_FALSE(ended->success());
  std::ifstream errFile(cluster.dir() / "put.err");
  const std::string err((std::istreambuf_iterator<char>(errFile)), std::istreambuf_iterator<char>());
  INFO("put's stderr: " << err);
  CHECK(err.find("storing partition") != std::string::npos);
  CHECK(err.find(cluster.workers(site).back()) != std::string::npos);
  auto registered = cluster.zkReader().exists(jobstate::siteDatasetPath(site, "halfway"));
  REQUIRE(registered.isOk());
  CHECK_FALSE(*registered);
}

}  // namespace
}  // namespace tellus::itest
