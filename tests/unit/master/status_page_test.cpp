// The master's HTTP status formatters and query parser (daemons/master/status_page.h) and the
// web page's embedded files (web_assets.h). No I/O.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "cost/cost.h"
#include "cost/cost_proto.h"
#include "master/status_page.h"
#include "master/web_assets.h"

namespace tellus::master {
namespace {

pb::JobStatusResponse sampleJob() {
  pb::JobStatusResponse r;
  auto* st = r.mutable_status();
  st->set_job_id("job-0000000007");
  st->set_name("<img src=x onerror=alert(1)>");
  st->set_state(pb::JOB_RUNNING);
  st->set_submit_site("us-east");
  st->add_sites("us-east");
  st->add_sites("eu-west");
  st->set_submit_unix_ms(1000);
  auto* map = r.add_stages();
  map->set_name("map");
  map->set_tasks(4);
  map->set_done(3);
  map->set_released(true);
  auto* us = map->add_sites();
  us->set_site("us-east");
  us->set_owned(3);
  us->set_done(3);
  auto* eu = map->add_sites();
  eu->set_site("eu-west");
  eu->set_owned(1);
  eu->set_done(0);
  auto* reduce = r.add_stages();
  reduce->set_name("reduce");
  reduce->set_tasks(2);
  auto* jm = r.add_jms();
  jm->set_site("us-east");
  jm->set_role(pb::JM_PRIMARY);
  jm->set_epoch(3);
  jm->set_desire(2);
  jm->set_granted(1);
  jm->set_worker_id("us-east-w1");
  return r;
}

TEST_CASE("status query: defaults, bounds and unknown keys", "[unit][master]") {
  auto q = parseStatusQuery({});
  REQUIRE(q.isOk());
  CHECK(q->jobs == kDefaultPageJobs);
  CHECK_FALSE(q->jobId);

  auto page = parseStatusQuery({{"job", "job-0000000001"}, {"offset", "200"}, {"limit", "50"}, {"jobs", "3"}});
  REQUIRE(page.isOk());
  CHECK(page->jobId == "job-0000000001");
  CHECK(page->taskOffset == 200);
  CHECK(page->taskLimit == 50);
  CHECK(page->jobs == 3);

  for (const auto& bad : std::vector<std::map<std::string, std::string>>{
           {{"jobs", "0"}},
           {{"jobs", "51"}},
           {{"jobs", "-1"}},
           {{"jobs", "1x"}},
           {{"jobs", ""}},
           {{"job", "../etc"}},
           {{"job", ".hidden"}},
           {{"job", "job/1"}},
           {{"job", "job-1"}, {"limit", "201"}},
           {{"job", "job-1"}, {"limit", "0"}},
           {{"job", "job-1"}, {"offset", "99999999999"}},
           {{"offset", "5"}},  // paging without a job
           {{"verbose", "1"}},
       }) {
    auto r = parseStatusQuery(bad);
    INFO(bad.begin()->first << "=" << bad.begin()->second);
    CHECK_FALSE(r.isOk());
  }
}

TEST_CASE("a job's summary: stages with per-site progress, JMs, names as given", "[unit][master]") {
  auto j = jobJson(sampleJob());
  CHECK(j["id"] == "job-0000000007");
  // The name is data: escaping is the page's job (textContent), the JSON carries it verbatim.
  CHECK(j["name"] == "<img src=x onerror=alert(1)>");
  CHECK(j["state"] == "running");
  CHECK(j["percent"] == 50);  // 3 of 6 tasks
  REQUIRE(j["stages"].size() == 2);
  CHECK(j["stages"][0]["name"] == "map");
  CHECK(j["stages"][0]["percent"] == 75);
  CHECK(j["stages"][0]["released"] == true);
  REQUIRE(j["stages"][0]["sites"].size() == 2);
  CHECK(j["stages"][0]["sites"][1] == nlohmann::json{{"site", "eu-west"}, {"owned", 1}, {"done", 0}});
  CHECK(j["stages"][1]["percent"] == 0);
  CHECK(j["stages"][1]["released"] == false);
  REQUIRE(j["jms"].size() == 1);
  CHECK(j["jms"][0]["role"] == "primary");
  CHECK(j["jms"][0]["epoch"] == 3);
  CHECK(j["jms"][0]["granted"] == 1);
  CHECK(j["jms"][0]["worker"] == "us-east-w1");

  auto done = sampleJob();
  done.mutable_stages(0)->set_done(4);
  done.mutable_stages(1)->set_done(2);
  done.mutable_status()->set_state(pb::JOB_SUCCEEDED);
  auto d = jobJson(done);
  CHECK(d["percent"] == 100);
  CHECK(d["stages"][0]["percent"] == 100);
  CHECK(d["state"] == "succeeded");
}

TEST_CASE("a job page: task states from outputs and running markers", "[unit][master]") {
  auto job = sampleJob();
  job.set_total_tasks(4);
  job.set_next_task_offset(4);
  auto* stage = job.mutable_stages(0);
  for (uint32_t t = 0; t < 4; ++t) {
    auto* p = stage->add_task_placements();
    p->set_task(t);
    p->set_owner_site(t < 3 ? "us-east" : "eu-west");
    p->set_executions(t == 1 ? 2 : (t == 3 ? 0 : 1));
    if (t < 2) p->set_worker_id("us-east-w2");
  }
  auto j = jobPageJson(job, 0, {{0, 2}});
  REQUIRE(j["tasks"].size() == 4);
  CHECK(j["tasks"][0]["state"] == "done");
  CHECK(j["tasks"][0]["worker"] == "us-east-w2");
  CHECK(j["tasks"][1]["executions"] == 2);
  CHECK(j["tasks"][2]["state"] == "running");
  CHECK(j["tasks"][3]["state"] == "waiting");
  CHECK(j["tasks"][3]["owner_site"] == "eu-west");
  CHECK(j["tasks"][3]["stage_name"] == "map");
  CHECK(j["total_tasks"] == 4);
  CHECK(j["next_task_offset"] == 4);
}

TEST_CASE("a job's cost: totals on the overview, the breakdown on its page", "[unit][master]") {
  // Priced as the Status RPC prices it: 90 container-seconds at us-east (4 per hour: 0.1),
  // 2 GB us-east -> eu-west (0.05 per GB: 0.1), 30 s at eu-west whose prices are unknown.
  cost::Usage usage;
  usage.addContainerMs("us-east", 90'000);
  usage.addContainerMs("eu-west", 30'000);
  usage.addBytes("us-east", "eu-west", 2'000'000'000);
  cost::Prices east;
  east.container_hour = 4;
  east.market = "spot";
  east.egress_default_gb = 0.05;
  auto job = sampleJob();
  *job.mutable_cost() = cost::toProto(cost::price(usage, {{"us-east", east}}));

  const auto summary = jobJson(job)["cost"];
  CHECK(summary["total"].get<double>() == Approx(0.2));
  CHECK(summary["container_cost"].get<double>() == Approx(0.1));
  CHECK(summary["egress_cost"].get<double>() == Approx(0.1));
  CHECK(summary["container_seconds"].get<double>() == Approx(120));
  CHECK(summary["bytes_across_sites"] == 2'000'000'000);
  CHECK(summary["unpriced_sites"] == nlohmann::json::array({"eu-west"}));
  CHECK_FALSE(summary.contains("sites"));
  CHECK_FALSE(summary.contains("pairs"));

  const auto page = jobPageJson(job, 0, {})["cost"];
  CHECK(page["total"] == summary["total"]);
  REQUIRE(page["sites"].size() == 2);  // by site name
  CHECK(page["sites"][0]["site"] == "eu-west");
  CHECK(page["sites"][0]["priced"] == false);
  CHECK(page["sites"][0]["container_cost"] == 0.0);
  CHECK(page["sites"][1]["site"] == "us-east");
  CHECK(page["sites"][1]["market"] == "spot");
  CHECK(page["sites"][1]["container_seconds"].get<double>() == Approx(90));
  CHECK(page["sites"][1]["container_cost"].get<double>() == Approx(0.1));
  REQUIRE(page["pairs"].size() == 1);
  CHECK(page["pairs"][0]["from"] == "us-east");
  CHECK(page["pairs"][0]["to"] == "eu-west");
  CHECK(page["pairs"][0]["bytes"] == 2'000'000'000);
  CHECK(page["pairs"][0]["egress_cost"].get<double>() == Approx(0.1));
  CHECK(page["pairs"][0]["priced"] == true);

  // No usage yet: zeros and empty lists, not missing fields the page would have to guess.
  const auto none = jobJson(sampleJob())["cost"];
  CHECK(none["total"] == 0.0);
  CHECK(none["unpriced_sites"] == nlohmann::json::array());
}

TEST_CASE("a job that cannot be described is listed with its reason, cut", "[unit][master]") {
  auto j = brokenJobJson("job-0000000007", "corrupt", "malformed tellus.pb.JobStatus in /jobs/job-0000000007/status");
  CHECK(j["id"] == "job-0000000007");
  CHECK(j["state"] == "corrupt");
  CHECK(j["broken"] == true);
  CHECK(j["error"] == "malformed tellus.pb.JobStatus in /jobs/job-0000000007/status");
  auto long_ = brokenJobJson("job-0000000008", "unreadable", std::string(kMaxErrorChars + 100, 'x'));
  CHECK(long_["state"] == "unreadable");
  CHECK(long_["error"].get<std::string>().size() == kMaxErrorChars + std::string("\u2026").size());
}

TEST_CASE("sites show counts only", "[unit][master]") {
  pb::SiteInfo s;
  s.set_site("eu-west");
  s.set_master_address("10.0.0.1:7000");
  s.set_workers(2);
  s.set_containers_total(6);
  s.set_containers_free(2);
  s.add_datasets()->set_name("secret-logs");
  auto j = siteJson(s);
  CHECK(j == nlohmann::json{{"site", "eu-west"}, {"workers", 2}, {"containers_total", 6}, {"containers_free", 2},
                            {"containers_granted", 4}});
  s.set_containers_free(9);  // a record from a confused peer: never a negative grant
  CHECK(siteJson(s)["containers_granted"] == 0);
}

TEST_CASE("failures are bounded, cut and newest first", "[unit][master]") {
  std::deque<FailureEvent> failures;
  for (int i = 0; i < static_cast<int>(kMaxFailures) + 5; ++i) {
    recordFailure(failures, {i, "jm-died", "job-1", std::string(kMaxErrorChars + 10, 'x')});
  }
  CHECK(failures.size() == kMaxFailures);
  auto j = failuresJson(failures, true);
  REQUIRE(j.size() == kMaxFailures);
  CHECK(j[0]["unix_ms"] == static_cast<int>(kMaxFailures) + 4);
  CHECK(j[kMaxFailures - 1]["unix_ms"] == 5);
  CHECK(j[0]["text"].get<std::string>().size() <= kMaxErrorChars + 3);
  CHECK(j[0]["text"].get<std::string>().size() > 100);

  // Without http_jobs, a job's failure reasons stay off the HTTP port; a lost worker does not.
  recordFailure(failures, {100, "worker-lost", "", "worker w1 missed heartbeats for 3000 ms"});
  auto hidden = failuresJson(failures, false);
  CHECK(hidden[0]["text"] == "worker w1 missed heartbeats for 3000 ms");
  CHECK(hidden[1]["kind"] == "jm-died");
  CHECK(hidden[1]["job_id"] == "job-1");
  CHECK(hidden[1]["text"] == "");
}

TEST_CASE("clipText never splits a UTF-8 character", "[unit][master]") {
  CHECK(clipText("short", 10) == "short");
  CHECK(clipText("abcdef", 3) == "abc\u2026");
  // "é" is two bytes: a cut after its first byte backs up before it.
  CHECK(clipText("a\xc3\xa9z", 2) == "a\u2026");
}

TEST_CASE("web assets: compiled in, with paths and content types", "[unit][master]") {
  std::set<std::string> files;
  for (const auto& asset : web::assets()) {
    files.insert(std::string(asset.file));
    CHECK_FALSE(asset.body.empty());
  }
  CHECK(files.count("index.html"));
  CHECK(files.count("app.js"));
  CHECK(files.count("style.css"));
  for (const auto& asset : web::assets()) {
    if (asset.file == "index.html") CHECK(asset.body.find("<script src=\"/app.js\"") != std::string_view::npos);
    // The page script never writes markup from data.
    if (asset.file == "app.js") CHECK(asset.body.find("innerHTML") == std::string_view::npos);
  }
  CHECK(web::urlPathFor("index.html") == "/");
  CHECK(web::urlPathFor("app.js") == "/app.js");
  CHECK(web::contentTypeFor("index.html") == "text/html; charset=utf-8");
  CHECK(web::contentTypeFor("app.js") == "text/javascript; charset=utf-8");
  CHECK(web::contentTypeFor("style.css") == "text/css; charset=utf-8");
  CHECK(web::contentTypeFor("logo.svg") == "image/svg+xml");
  CHECK(web::contentTypeFor("README") == "application/octet-stream");
  CHECK(web::contentTypeFor(".js") == "application/octet-stream");
}

}  // namespace
}  // namespace tellus::master
