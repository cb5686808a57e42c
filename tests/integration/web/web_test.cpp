// The web status page (web/, served by every master at /) in headless Chromium, and every
// daemon's /metrics, against a real mini cluster: after a word count finishes, the rendered page names the job, its stages and
// 100% and its cost (the one `tellus cost --json` prints), and the job's page shows its task
// map and its cost per site and per site pair. /status's query checks and the http_jobs
// switch are checked over plain HTTP. Screenshots are kept under the test's output dir
// ($TELLUS_TEST_OUTPUT_DIR, else <build>/test-output/web), and their paths printed.
//
// Without Chromium (`chromium` in PATH or /usr/bin/chromium; scripts/install-deps installs
// it) the browser checks are skipped with a warning; the HTTP checks still run.

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness/eventually.h"
#include "harness/files.h"
#include "harness/http_get.h"
#include "harness/mini_cluster.h"
#include "harness/temp_dir.h"
#include "jobstate/paths.h"
#include "proc/subprocess.h"

namespace tellus::itest {
namespace {

using namespace std::chrono_literals;

using harness::httpGet;

// The HTTP address a master published in its site record.
std::string httpAddressOf(harness::MiniCluster& cluster, const std::string& site) {
  auto node = cluster.zkReader().get("/sites/" + site + "/live");
  if (!node) return "";
  pb::SiteInfo info;
  if (!info.ParseFromString(node->data)) return "";
  return info.http_address();
}

std::filesystem::path chromiumPath() {
  if (const char* path = std::getenv("PATH")) {
    std::string dirs(path);
    for (std::size_t start = 0; start <= dirs.size();) {
      const std::size_t end = std::min(dirs.find(':', start), dirs.size());
      auto candidate = std::filesystem::path(dirs.substr(start, end - start)) / "chromium";
      if (!candidate.empty() && std::filesystem::exists(candidate)) return candidate;
      start = end + 1;
    }
  }
  return std::filesystem::exists("/usr/bin/chromium") ? std::filesystem::path("/usr/bin/chromium")
                                                      : std::filesystem::path();
}

std::filesystem::path outputDir() {
  std::filesystem::path dir;
  if (const char* env = std::getenv("TELLUS_TEST_OUTPUT_DIR")) {
    dir = env;
  } else if (const char* build = std::getenv("TELLUS_BUILD_DIR")) {
    dir = std::filesystem::path(build) / "test-output" / "web";
  } else {
    dir = std::filesystem::temp_directory_path() / "tellus-test-output" / "web";
  }
  std::filesystem::create_directories(dir);
  return dir;
}

// Headless Chromium on `url`: with `screenshot` empty, the DOM after the page's scripts ran
// (--dump-dom); otherwise a 1280x900 PNG written there. Waits for the browser to exit (it
// does once its virtual-time budget is spent), bounded; returns stdout.
std::string runChromium(const std::filesystem::path& chromium, const std::string& url,
                        const std::filesystem::path& screenshot) {
  harness::TempDir profile("chromium");
  std::vector<std::string> argv{chromium.string(),        "--headless",
                                "--no-sandbox",           "--disable-gpu",
                                "--disable-quic",         "--no-first-run",
                                "--disable-background-networking", "--disable-component-update",
                                "--disable-sync",         fmt::format("--user-data-dir={}", (profile.path() / "profile").string()),
                                "--virtual-time-budget=6000"};
  if (screenshot.empty()) {
    argv.push_back("--dump-dom");
  } else {
    argv.push_back("--window-size=1280,900");
    argv.push_back(fmt::format("--screenshot={}", screenshot.string()));
  }
  argv.push_back(url);
  proc::SpawnOptions options;
  options.argv = argv;
  options.stdoutFile = profile.path() / "stdout";
  options.stderrFile = profile.path() / "stderr";
  options.newProcessGroup = true;  // its renderer and GPU processes go with it
  options.dieWithParent = true;
  auto browser = proc::Subprocess::spawn(options);
  REQUIRE(browser.isOk());
  auto ended = browser->waitFor(120s);
  if (!ended) (void)browser->killGroup(SIGKILL);
  INFO("chromium stderr (tail): " << harness::readFile(profile.path() / "stderr").substr(0, 3000));
  REQUIRE(ended.isOk());
  CHECK(ended->success());
  return harness::readFile(profile.path() / "stdout");
}

std::size_t countOf(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The cluster of this binary's tests, started on first use: 2 sites x 1 worker x 2 containers,
// every daemon with an HTTP listener (ephemeral ports); us-east shows jobs over HTTP, eu-west
// keeps the default (off); both declare prices.
harness::MiniCluster& webCluster() {
  // Initialised by the start (not before it), so it is destroyed before whatever the start
  // created: the cluster stops while everything it uses still exists.
  static Result<std::unique_ptr<harness::MiniCluster>> cluster = [] {
    harness::MiniClusterOptions options;
    options.sites = 2;
    options.workersPerSite = 1;
    options.containersPerWorker = 2;
    // Prices (absurd, so that a tiny job's cost shows), different per site, so the page's cost
    // is a sum of differently priced parts.
    options.masterExtraYaml = "http_listen: 127.0.0.1:0\n";
    options.masterExtraYamlBySite["us-east"] =
        "http_jobs: true\nprices: {container_hour: 36, market: spot, egress_gb: {default: 2000000}}\n";
    options.masterExtraYamlBySite["eu-west"] = "prices: {container_hour: 72, egress_gb: {us-east: 1000000}}\n";
    for (const char* site : {"us-east", "eu-west"}) {
      options.workerExtraYaml[site] = "http_listen: 127.0.0.1:0\njm_http_listen: 127.0.0.1:0\n";
    }
    return harness::MiniCluster::start(options);
  }();
  INFO((cluster.isOk() ? std::string() : cluster.message()));
  REQUIRE(cluster.isOk());
  return **cluster;
}

// Submits the spec (written under the cluster dir) at `site`; "" if that fails (with INFO).
std::string submit(harness::MiniCluster& cluster, const std::string& name, const std::string& yaml,
                   const std::string& site, bool wait) {
  const auto spec = cluster.dir() / (name + ".yaml");
  std::ofstream(spec) << yaml;
  std::vector<std::string> args{"submit", spec.string()};
  if (wait) args.push_back("--wait");
  auto submitted = cluster.tellus(args, site, 120s);
  UNSCOPED_INFO("submit: " << submitted.exitCode << "\n" << submitted.out << submitted.err << cluster.crashedDaemons());
  if (submitted.exitCode != 0) return "";
  const auto idStart = submitted.out.find("job-");
  if (idStart == std::string::npos) return "";
  return submitted.out.substr(idStart, submitted.out.find_first_of(" \n", idStart) - idStart);
}

TEST_CASE("the web status page shows a finished job in a real browser", "[integration][web]") {
  auto& cluster = webCluster();
  const std::string east = cluster.sites()[0];
  const std::string west = cluster.sites()[1];
  const std::string eastHttp = httpAddressOf(cluster, east);
  const std::string westHttp = httpAddressOf(cluster, west);
  REQUIRE_FALSE(eastHttp.empty());
  REQUIRE_FALSE(westHttp.empty());

  // A word count over both sites.
  REQUIRE(cluster.putDataset(east, "web-corpus", "alpha beta gamma\nbeta gamma\ngamma\n", 2).isOk());
  REQUIRE(cluster.putDataset(west, "web-corpus", "delta alpha\nbeta\n", 2).isOk());
  const std::string jobId = submit(cluster, "web-wordcount",
                                   "name: web-page-wordcount\nstages:\n  - name: count-words\n    op: wordcount.map\n"
                                   "    input: {dataset: web-corpus}\n  - name: sum-counts\n    op: wordcount.reduce\n"
                                   "    tasks: 3\n    input: {stage: count-words}\n",
                                   east, true);
  REQUIRE_FALSE(jobId.empty());
  INFO("job " << jobId);

  {  // /status: the job's progress, its task map, and the boundary checks
    auto status = httpGet(eastHttp, "/status");
    REQUIRE(status.status == 200);
    CHECK(status.contentType == "application/json");
    auto j = nlohmann::json::parse(status.body);
    CHECK(j["http_jobs"] == true);
    REQUIRE(j["sites"].size() == 2);
    CHECK(j["sites"][0]["site"] == "eu-west");  // by name
    CHECK(j["sites"][1]["containers_total"] == 2);
    bool found = false;
    for (const auto& job : j["jobs"]) {
      if (job["id"] != jobId) continue;
      found = true;
      CHECK(job["name"] == "web-page-wordcount");
      CHECK(job["state"] == "succeeded");
      CHECK(job["percent"] == 100);
      REQUIRE(job["stages"].size() == 2);
      CHECK(job["stages"][1]["name"] == "sum-counts");
      CHECK(job["stages"][1]["done"] == 3);
    }
    CHECK(found);

    auto page = nlohmann::json::parse(httpGet(eastHttp, "/status?job=" + jobId + "&limit=2&offset=1").body);
    REQUIRE(page["job"]["tasks"].size() == 2);
    CHECK(page["job"]["task_offset"] == 1);
    CHECK(page["job"]["next_task_offset"] == 3);
    CHECK(page["job"]["tasks"][0]["state"] == "done");
    CHECK(page["job"]["tasks"][0]["executions"].get<int>() >= 1);
    CHECK_FALSE(page["job"]["tasks"][0]["worker"].get<std::string>().empty());

    CHECK(httpGet(eastHttp, "/status?job=job-9999999999").status == 404);
    CHECK(httpGet(eastHttp, "/status?job=..%2Fsites").status == 400);
    CHECK(httpGet(eastHttp, "/status?limit=5").status == 400);
    CHECK(httpGet(eastHttp, "/status?verbose=1").status == 400);
    CHECK(httpGet(eastHttp, "/nothing-here").status == 404);

    // eu-west does not show jobs over HTTP (http_jobs off): its page has sites only.
    auto west = nlohmann::json::parse(httpGet(westHttp, "/status").body);
    CHECK(west["http_jobs"] == false);
    CHECK_FALSE(west.contains("jobs"));
    CHECK(west["sites"].size() == 2);
    CHECK(httpGet(westHttp, "/status?job=" + jobId).status == 403);

    auto index = httpGet(westHttp, "/");
    CHECK(index.status == 200);
    CHECK(index.contentType == "text/html; charset=utf-8");
    CHECK(httpGet(westHttp, "/app.js").contentType == "text/javascript; charset=utf-8");
    CHECK(httpGet(westHttp, "/style.css").contentType == "text/css; charset=utf-8");
  }

  CHECK(cluster.crashedDaemons().empty());

  const auto chromium = chromiumPath();
  if (chromium.empty()) WARN("chromium is not installed (scripts/install-deps installs it): browser checks skipped");
  const std::string base = "http://" + eastHttp + "/";
  if (!chromium.empty()) {  // headless Chromium renders the overview and the job's page
    const std::string dom = runChromium(chromium, base, {});
    INFO("DOM:\n" << dom.substr(0, 6000));
    CHECK(dom.find("data-loaded=\"true\"") != std::string::npos);  // /status was fetched and rendered
    CHECK(dom.find("data-job=\"" + jobId + "\"") != std::string::npos);
    CHECK(dom.find(">web-page-wordcount<") != std::string::npos);
    CHECK(dom.find("data-stage=\"count-words\"") != std::string::npos);
    CHECK(dom.find("data-stage=\"sum-counts\"") != std::string::npos);
    CHECK(countOf(dom, "<b class=\"stage-pct\">100%</b>") >= 2);
    CHECK(dom.find(">succeeded<") != std::string::npos);
    CHECK(dom.find("data-site=\"us-east\"") != std::string::npos);
    CHECK(dom.find("data-site=\"eu-west\"") != std::string::npos);

    const std::string jobDom = runChromium(chromium, base + "#job=" + jobId, {});
    INFO("job DOM:\n" << jobDom.substr(0, 6000));
    CHECK(jobDom.find(jobId + " · web-page-wordcount") != std::string::npos);
    CHECK(jobDom.find("class=\"state-done\"") != std::string::npos);
    // Every task of both stages is on the first page, each done.
    const std::size_t tasks = countOf(jobDom, "class=\"state-done\">done<");
    CHECK(tasks >= 7);  // 4 map tasks (2 partitions at each site) + 3 reduce tasks

    const auto dir = outputDir();
    const auto overview = dir / "status-page.png";
    const auto jobPage = dir / "job-page.png";
    std::filesystem::remove(overview);
    std::filesystem::remove(jobPage);
    (void)runChromium(chromium, base, overview);
    (void)runChromium(chromium, base + "#job=" + jobId, jobPage);
    CHECK(std::filesystem::exists(overview));
    CHECK(std::filesystem::exists(jobPage));
    CHECK(std::filesystem::file_size(overview) > 1000);
    std::cout << "web status page screenshots: " << overview.string() << " " << jobPage.string() << std::endl;
  }

  // Its cost, once the JMs are gone (no execution of the job can finish and add usage any
  // more): /status and the rendered page show the cost `tellus cost --json` prints, priced
  // by the same code; both sites ran tasks and the reduces fetched across sites.
  {
    auto cli = cluster.tellus({"cost", jobId, "--json"}, east, 60s);
    INFO("tellus cost: " << cli.exitCode << "\n" << cli.out << cli.err);
    REQUIRE(cli.exitCode == 0);
    const auto cost = nlohmann::json::parse(cli.out)["cost"];
    const double total = cost["total"].get<double>();
    CHECK(total > 0);
    CHECK(cost["container_cost"].get<double>() > 0);
    CHECK(cost["egress_cost"].get<double>() > 0);

    const auto page = nlohmann::json::parse(httpGet(eastHttp, "/status?job=" + jobId).body)["job"]["cost"];
    INFO("/status?job cost: " << page.dump());
    CHECK(page["total"].get<double>() == total);
    CHECK(page["container_cost"].get<double>() == cost["container_cost"].get<double>());
    CHECK(page["unpriced_sites"].empty());
    REQUIRE(page["sites"].size() == 2);
    CHECK(page["sites"][0]["site"] == "eu-west");
    CHECK(page["sites"][0]["market"] == "on-demand");
    CHECK(page["sites"][1]["market"] == "spot");
    CHECK_FALSE(page["pairs"].empty());
    const bool listed = harness::eventually(  // the overview's job list is rebuilt at most once a second
        [&] {
          const auto listing = nlohmann::json::parse(httpGet(eastHttp, "/status").body);  // outlives the loop
          for (const auto& job : listing["jobs"]) {
            if (job["id"] == jobId) return job["cost"]["total"].get<double>() == total;
          }
          return false;
        },
        10s, 200ms);
    CHECK(listed);

    if (!chromium.empty()) {
      const std::string dom = runChromium(chromium, base, {});
      INFO("DOM:\n" << dom.substr(0, 6000));
      const std::size_t card = dom.find("data-job=\"" + jobId + "\"");
      REQUIRE(card != std::string::npos);
      const std::string attr = "class=\"cost\" data-cost=\"";
      const std::size_t at = dom.find(attr, card);
      REQUIRE(at != std::string::npos);
      const std::size_t from = at + attr.size();
      // String(number) in JavaScript prints the shortest text that reads back as the same double.
      CHECK(std::stod(dom.substr(from, dom.find('"', from) - from)) == total);
      CHECK(dom.find(fmt::format("<b class=\"cost-total\">{:.4f}</b>", total), card) != std::string::npos);

      const std::string jobDom = runChromium(chromium, base + "#job=" + jobId, {});
      INFO("job DOM:\n" << jobDom.substr(0, 8000));
      CHECK(jobDom.find(fmt::format("<b class=\"cost-total\">{:.4f}</b>", total)) != std::string::npos);
      CHECK(jobDom.find("data-cost-site=\"us-east\"") != std::string::npos);
      CHECK(jobDom.find("data-cost-site=\"eu-west\"") != std::string::npos);
      CHECK(jobDom.find("data-cost-from=\"") != std::string::npos);
      CHECK(jobDom.find("no prices known") == std::string::npos);
      const auto shot = outputDir() / "job-page-cost.png";
      std::filesystem::remove(shot);
      (void)runChromium(chromium, base + "#job=" + jobId, shot);
      CHECK(std::filesystem::exists(shot));
    }
  }

  // A job whose status does not decode is listed, marked, with the reason (issue 10), as
  // `tellus list` lists it (tests/integration/failover/corruption_test.cpp plants it the same
  // way): the finished job's status, once its JMs are gone, so none repairs it meanwhile.
  const bool jmsGone = harness::eventually(
      [&] {
        auto jms = cluster.jms(jobId);
        return jms && jms->empty();
      },
      60s, 100ms);
  INFO(cluster.jmLogs(jobId));
  REQUIRE(jmsGone);
  REQUIRE(cluster.zkReader().set(jobstate::statusPath(jobId), std::string("\xff\xfe\x01garbage", 10)).isOk());
  const std::string reason = "malformed tellus.pb.JobStatus in /jobs/" + jobId + "/status";
  const bool listed = harness::eventually(  // the master rebuilds its job list at most once a second
      [&] {
        auto status = httpGet(eastHttp, "/status");
        if (status.status != 200) return false;
        const auto j = nlohmann::json::parse(status.body);  // named: the loop would outlive a temporary
        for (const auto& job : j["jobs"]) {
          if (job["id"] == jobId) return job.value("state", "") == "corrupt";
        }
        return false;
      },
      30s, 200ms);
  INFO("/status: " << httpGet(eastHttp, "/status").body);
  REQUIRE(listed);
  const auto listing = nlohmann::json::parse(httpGet(eastHttp, "/status").body);
  for (const auto& job : listing["jobs"]) {
    if (job["id"] != jobId) continue;
    CHECK(job["broken"] == true);
    CHECK_THAT(job["error"].get<std::string>(), Catch::StartsWith(reason));
  }
  if (!chromium.empty()) {
    const std::string dom = runChromium(chromium, base, {});
    INFO("DOM with a corrupt job:\n" << dom.substr(0, 6000));
    CHECK(dom.find("data-loaded=\"true\"") != std::string::npos);
    CHECK(dom.find("data-job=\"" + jobId + "\" data-broken=\"corrupt\"") != std::string::npos);
    CHECK(dom.find("<span class=\"state broken\">corrupt</span>") != std::string::npos);
    CHECK(dom.find("<p class=\"error broken-reason\">" + reason) != std::string::npos);
    // The other sites and the page around it still render.
    CHECK(dom.find("data-site=\"eu-west\"") != std::string::npos);
    const auto shot = outputDir() / "status-page-corrupt.png";
    std::filesystem::remove(shot);
    (void)runChromium(chromium, base, shot);
    CHECK(std::filesystem::exists(shot));
  }
}

// The value of the sample `series` (name and labels exactly as rendered, e.g.
// `tellus_jm_steals_total{result="none"}`) in a /metrics body, nullopt if absent.
std::optional<double> sampleValue(const std::string& metrics, const std::string& series) {
  const std::string prefix = series + " ";
  for (std::size_t at = 0; at < metrics.size();) {
    const std::size_t end = std::min(metrics.find('\n', at), metrics.size());
    if (metrics.compare(at, prefix.size(), prefix) == 0 && end > at + prefix.size()) {
      return std::stod(metrics.substr(at + prefix.size(), end - at - prefix.size()));
    }
    at = end + 1;
  }
  return std::nullopt;
}

// Every family has its # HELP and # TYPE before its samples.
void checkExposition(const std::string& metrics) {
  std::set<std::string> typed;
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      typed.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s(suffix);
      if (!typed.count(name) && name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
        name.resize(name.size() - s.size());
      }
    }
    INFO(line);
    CHECK(typed.count(name) == 1);
  }
}

TEST_CASE("every daemon serves metrics worth scraping during and after a job", "[integration][metrics]") {
  auto& cluster = webCluster();
  const std::string east = cluster.sites()[0];
  const std::string west = cluster.sites()[1];
  REQUIRE(cluster.putDataset(east, "metrics-corpus", "one two three\ntwo three\n", 2).isOk());
  REQUIRE(cluster.putDataset(west, "metrics-corpus", "four one\n", 1).isOk());
  // The last stage runs for a few seconds after the map tasks are done, so the JMs (which exit
  // with the job) can be scraped with finished tasks on record.
  const std::string jobId = submit(cluster, "metrics-job",
                                   "name: metrics-job\nstages:\n  - name: map\n    op: wordcount.map\n"
                                   "    input: {dataset: metrics-corpus}\n  - name: slow\n    op: synthetic\n"
                                   "    params: {cpu_ms: 4000}\n    tasks: 1\n    input: {stage: map}\n",
                                   east, false);
  REQUIRE_FALSE(jobId.empty());
  INFO("job " << jobId);

  // The JMs while the job runs (they exit with it), once the 3 map tasks are on record in
  // their histograms (whichever JM ran them: stealing may move tasks between sites).
  std::map<std::string, std::string> jmMetrics;
  const bool scraped = harness::eventually(
      [&] {
        jmMetrics.clear();
        auto jms = cluster.jms(jobId);
        if (!jms) return false;
        double mapTasks = 0;
        for (const auto& [site, info] : *jms) {
          if (info.http_address().empty()) continue;
          jmMetrics[site] = httpGet(info.http_address(), "/metrics").body;
          mapTasks += harness::metricSum(jmMetrics[site], "tellus_jm_task_seconds_count",
                            {"op=\"wordcount.map\"", "result=\"succeeded\""});
        }
        return jmMetrics.size() == 2 && mapTasks >= 3;
      },
      90s, 200ms);
  INFO(cluster.jmLogs(jobId));
  REQUIRE(scraped);
  double launched = 0;
  for (const auto& [site, body] : jmMetrics) {
    INFO("JM at " << site << ":\n" << body);
    checkExposition(body);
    CHECK(sampleValue(body, "tellus_jm_af_desire{job=\"" + jobId + "\",site=\"" + site + "\"}").has_value());
    CHECK(sampleValue(body, "tellus_jm_epoch{job=\"" + jobId + "\",site=\"" + site + "\"}").has_value());
    CHECK(harness::metricSum(body, "tellus_zk_requests_total", {"result=\"ok\""}) > 0);
    CHECK(harness::metricSum(body, "tellus_zk_request_seconds_count") > 0);
    const double mine = harness::metricSum(body, "tellus_jm_task_launches_total", {"op=\"wordcount.map\""});
    launched += mine;
    if (mine == 0) continue;
    CHECK(body.find("tellus_jm_task_seconds_bucket{op=\"wordcount.map\",result=\"succeeded\",le=\"+Inf\"}") !=
          std::string::npos);
    CHECK(harness::metricSum(body, "tellus_jm_launch_overhead_seconds_count") >= 1);
    CHECK(harness::metricSum(body, "tellus_jm_queue_wait_seconds_count", {"op=\"wordcount.map\""}) == mine);
    CHECK(harness::metricSum(body, "tellus_jm_container_changes_total", {"direction=\"granted\""}) >= 1);
    CHECK(harness::metricSum(body, "tellus_rpc_client_calls_total", {"method=\"worker.RunTask\"", "result=\"ok\""}) >= 1);
  }
  CHECK(launched >= 3);

  const bool done = harness::eventually(
      [&] {
        auto status = cluster.zkReader().run(cluster.zkReader().jobs().status(jobId));
        return status && status->value.state() == pb::JOB_SUCCEEDED;
      },
      120s, 200ms);
  REQUIRE(done);

  for (const auto& site : cluster.sites()) {
    const std::string body = httpGet(httpAddressOf(cluster, site), "/metrics").body;
    INFO("master " << site << ":\n" << body);
    checkExposition(body);
    CHECK(harness::metricSum(body, "tellus_master_container_changes_total", {"direction=\"granted\""}) >= 1);
    CHECK(harness::metricSum(body, "tellus_rpc_server_calls_total", {"method=\"master.JmUpdate\"", "result=\"ok\""}) >= 1);
    CHECK(harness::metricSum(body, "tellus_zk_requests_total", {"result=\"ok\""}) > 0);
    CHECK(harness::metricSum(body, "tellus_zk_request_seconds_bucket", {"le=\"+Inf\""}) > 0);
  }
  CHECK(harness::metricSum(httpGet(httpAddressOf(cluster, east), "/metrics").body, "tellus_rpc_server_calls_total",
              {"method=\"master.Submit\"", "result=\"ok\""}) >= 1);

  // Workers: tasks served, and map outputs moved between the two sites for the last stage.
  double crossSiteSent = 0, crossSiteReceived = 0;
  for (const auto& site : cluster.sites()) {
    for (const auto& id : cluster.workers(site)) {
      auto node = cluster.zkReader().get("/sites/" + site + "/workers/" + id);
      REQUIRE(node.isOk());
      pb::WorkerInfo info;
      REQUIRE(info.ParseFromString(node->data));
      REQUIRE_FALSE(info.http_address().empty());
      const std::string body = httpGet(info.http_address(), "/metrics").body;
      INFO("worker " << id << ":\n" << body);
      checkExposition(body);
      CHECK(harness::metricSum(body, "tellus_rpc_server_calls_total", {"method=\"worker.RunTask\"", "result=\"ok\""}) >= 1);
      const std::string other = site == east ? west : east;
      crossSiteSent += harness::metricSum(body, "tellus_worker_sent_bytes_total", {"to_site=\"" + other + "\""});
      crossSiteReceived += harness::metricSum(body, "tellus_worker_received_bytes_total", {"from_site=\"" + other + "\""});
    }
  }
  CHECK(crossSiteSent > 0);
  CHECK(crossSiteReceived > 0);
}

}  // namespace
}  // namespace tellus::itest
