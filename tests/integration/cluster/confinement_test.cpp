// Issue 11 end to end: `exec` refused at submission where a site of the job does not allow it,
// and residency in meaning (raw records of a residency-local dataset leave their site only
// through an aggregation). Its own two-site cluster: the sites' exec policies differ.
#include <catch2/catch.hpp>

#include "cluster_test_util.h"

using namespace tellus;
using namespace tellus::itest;
using namespace std::chrono_literals;

namespace {

constexpr const char* kUs = "us-east";
constexpr const char* kEu = "eu-west";

harness::MiniCluster& confinedCluster() {
  static Result<std::unique_ptr<harness::MiniCluster>> cluster = [] {
    harness::MiniClusterOptions options;
    options.sites = 2;
    options.workersPerSite = 1;
    options.containersPerWorker = 2;
    // us-east allows exactly `cat`; eu-west keeps exec off (the default).
    const std::string usExec = "exec:\n  enabled: true\n  run_as_user: \"\"\n  allowed_commands: [cat]\n";
    options.masterExtraYamlBySite[kUs] = usExec;
    options.workerExtraYaml[kUs] = usExec;
    return harness::MiniCluster::start(options);
  }();
  INFO("starting the mini cluster: " << whyNot(cluster));
  REQUIRE(cluster.isOk());
  return **cluster;
}

void putPinned(harness::MiniCluster& cluster, CliRunner& files, const std::string& site, const std::string& dataset,
               const std::string& content) {
  auto file = files.writeFile(dataset + ".txt", content);
  auto r = cluster.tellus({"put", file.string(), "--dataset", dataset, "--site", site, "--partitions", "2",
                           "--residency-local"});
  INFO(r.err);
  REQUIRE(r.exitCode == 0);
}

// The one-line error of a refused `tellus` command.
std::string refusal(const harness::CliResult& r) {
  CHECK(r.exitCode != 0);
  CHECK(trimmed(r.err).find('\n') == std::string::npos);
  return r.err;
}

std::string runToResult(harness::MiniCluster& cluster, const std::filesystem::path& spec, const std::string& site) {
  auto jobId = submitJob(cluster, spec, site);
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());
  pb::JobStatusResponse last;
  REQUIRE(waitForJobState(cluster, *jobId, pb::JOB_SUCCEEDED, site, 60000ms, &last));
  auto result = cluster.tellus({"result", *jobId}, site);
  INFO(result.err);
  REQUIRE(result.exitCode == 0);
  return result.out;
}

}  // namespace

TEST_CASE("exec is refused at submission where a site of the job disables or does not allow it",
          "[integration][cluster][exec]") {
  auto& cluster = confinedCluster();
  CliRunner files;
  REQUIRE(cluster.putDataset(kUs, "exec-in", "alpha\nbeta\n", 1).isOk());
  const auto spec = [&](const std::string& name, const std::string& cmd) {
    return files.writeFile(name + ".yaml", "name: " + name + "\nstages:\n  - name: run\n    op: exec\n    params: {cmd: \"" +
                                               cmd + "\"}\n    input: {dataset: exec-in}\n");
  };
  // Allowed at the only site of the job.
  CHECK(runToResult(cluster, spec("allowed", "cat"), kUs) == "alpha\nbeta\n");
  // Not in us-east's allow-list.
  auto denied = cluster.tellus({"submit", spec("denied", "id > /tmp/x").string()}, kUs);
  CHECK_THAT(refusal(denied),
             Catch::Contains("stage 'run': exec at site us-east: command 'id > /tmp/x' is not in this site's "
                             "exec.allowed_commands"));
  // Submitted at eu-west, the job runs there too, and eu-west has exec off.
  auto disabled = cluster.tellus({"submit", spec("disabled", "cat").string()}, kEu);
  CHECK_THAT(refusal(disabled),
             Catch::Contains("stage 'run': exec at site eu-west: exec is disabled at this site (exec.enabled: false in "
                             "its config)"));
}

TEST_CASE("raw records of a residency-local dataset leave their site only through an aggregation",
          "[integration][cluster][residency]") {
  auto& cluster = confinedCluster();
  CliRunner files;
  putPinned(cluster, files, kEu, "eu-private", "patient-1 fever\npatient-2 cough\npatient-3 fever\n");
  const auto copy = files.writeFile("copy.yaml", "name: copy\nstages:\n  - name: copy\n    op: identity\n"
                                                 "    input: {dataset: eu-private}\n");

  // The leak of issue 11: identity over eu-west's pinned dataset, submitted at us-east.
  auto leak = cluster.tellus({"submit", copy.string()}, kUs);
  CHECK_THAT(refusal(leak), Catch::Contains("the result of stage 'copy' (identity) holds raw records pinned at "
                                            "eu-west (residency: local) and may not leave it through site us-east"));

  // At eu-west the same job runs, and its result is read there ...
  auto jobId = submitJob(cluster, copy, kEu);
  INFO(whyNot(jobId));
  REQUIRE(jobId.isOk());
  REQUIRE(waitForJobState(cluster, *jobId, pb::JOB_SUCCEEDED, kEu, 60000ms));
  auto atHome = cluster.tellus({"result", *jobId}, kEu);
  INFO(atHome.err);
  REQUIRE(atHome.exitCode == 0);
  CHECK_THAT(atHome.out, Catch::Contains("patient-2 cough"));
  // ... but not through us-east's master.
  auto through = cluster.tellus({"result", *jobId}, kUs);
  CHECK_THAT(refusal(through), Catch::Contains("holds raw records pinned at eu-west"));
  CHECK(through.out.find("patient") == std::string::npos);

  // grep copies raw records as well; a stage after it reading them is pinned with them.
  const auto grepThenSort = files.writeFile(
      "grep-sort.yaml", "name: grep-sort\nstages:\n  - name: match\n    op: grep\n    params: {pattern: fever}\n"
                        "    input: {dataset: eu-private}\n  - name: order\n    op: sort\n    tasks: 2\n"
                        "    input: {stage: match}\n");
  auto grepLeak = cluster.tellus({"submit", grepThenSort.string()}, kUs);
  CHECK_THAT(refusal(grepLeak), Catch::Contains("the result of stage 'order' (sort) holds raw records pinned at eu-west"));

  // An aggregation may leave: the word count is submitted and read at us-east.
  const auto count = files.writeFile(
      "count.yaml", "name: count\nstages:\n  - name: map\n    op: wordcount.map\n    input: {dataset: eu-private}\n"
                    "  - name: reduce\n    op: wordcount.reduce\n    tasks: 2\n    input: {stage: map}\n");
  const std::string counts = runToResult(cluster, count, kUs);
  CHECK_THAT(counts, Catch::Contains("fever\t2"));
  CHECK(counts.find("patient-2 cough") == std::string::npos);
}
