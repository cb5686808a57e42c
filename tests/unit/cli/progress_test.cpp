// The live progress of `tellus submit --wait` / `status --watch` (tools/tellus/progress.h):
// throughput and ETA from polled counts, and the frame of bars, with times passed in.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "progress.h"

namespace tellus::cli {
namespace {

pb::JobStatusResponse twoStageJob(uint32_t mapDone, uint32_t reduceDone, pb::JobState state = pb::JOB_RUNNING) {
  pb::JobStatusResponse st;
  st.mutable_status()->set_job_id("job-0000000007");
  st.mutable_status()->set_name("wordcount");
  st.mutable_status()->set_state(state);
  auto* map = st.add_stages();
  map->set_name("map");
  map->set_tasks(20);
  map->set_done(mapDone);
  map->set_released(true);
  auto* us = map->add_sites();
  us->set_site("us-east");
  us->set_owned(12);
  us->set_done(std::min(mapDone, 12u));
  auto* eu = map->add_sites();
  eu->set_site("eu-west");
  eu->set_owned(8);
  eu->set_done(mapDone > 12 ? mapDone - 12 : 0);
  auto* reduce = st.add_stages();
  reduce->set_name("reduce");
  reduce->set_tasks(4);
  reduce->set_done(reduceDone);
  reduce->set_released(mapDone == 20);
  return st;
}

TEST_CASE("throughput is the growth of the count over the window", "[unit][cli]") {
  Throughput t(10.0);
  CHECK_FALSE(t.perSecond());
  CHECK_FALSE(t.etaSeconds(5));
  CHECK(t.etaSeconds(0) == 0.0);
  t.add(0.0, 0);
  CHECK_FALSE(t.perSecond());  // one sample spans no time
  t.add(2.0, 4);
  REQUIRE(t.perSecond());
  CHECK(*t.perSecond() == Approx(2.0));
  CHECK(*t.etaSeconds(10) == Approx(5.0));
  // Samples older than the window stop counting: only the last 10 s (from t=12: 4 -> 14).
  t.add(12.0, 14);
  t.add(22.0, 15);
  CHECK(*t.perSecond() == Approx(0.1));
  // Nothing finished for a whole window: no ETA rather than an infinite one.
  t.add(40.0, 15);
  CHECK(*t.perSecond() == Approx(0.0));
  CHECK_FALSE(t.etaSeconds(3));
  // A count that drops (lost outputs re-run) is a zero rate, never a negative one.
  t.add(41.0, 10);
  CHECK(*t.perSecond() == Approx(0.0));
}

TEST_CASE("durations are short and readable", "[unit][cli]") {
  CHECK(formatDuration(0) == "0s");
  CHECK(formatDuration(42.4) == "42s");
  CHECK(formatDuration(185) == "3m05s");
  CHECK(formatDuration(2 * 3600 + 7 * 60 + 30) == "2h07m");
  CHECK(formatDuration(-3) == "0s");
}

TEST_CASE("a bar fills in proportion to what is done", "[unit][cli]") {
  CHECK(progressBar(0, 10, 10) == "[----------]");
  CHECK(progressBar(5, 10, 10) == "[#####-----]");
  CHECK(progressBar(10, 10, 10) == "[##########]");
  CHECK(progressBar(3, 0, 4) == "[----]");
  CHECK(progressBar(99, 10, 4) == "[####]");  // never past full
}

TEST_CASE("the frame has a header and one bar per stage with sites, rate and ETA", "[unit][cli]") {
  JobProgress progress;
  progress.add(0.0, twoStageJob(0, 0));
  const auto st = twoStageJob(10, 0);
  progress.add(5.0, st);  // 2 map tasks per second
  const auto lines = progress.render(st, 5.0, 120);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "job-0000000007  wordcount  running  5s  ETA 7s");  // 14 tasks left at 2/s
  CHECK_THAT(lines[1], Catch::StartsWith("  map    [###############---------------]    10/20     50%  2.0/s  ETA 5s"));
  CHECK_THAT(lines[1], Catch::EndsWith("us-east 10/12  eu-west 0/8"));
  CHECK_THAT(lines[2], Catch::Contains("0/4 ") && Catch::Contains("waiting for upstream"));
}

TEST_CASE("a finished stage says done and a finished job shows no ETA", "[unit][cli]") {
  JobProgress progress;
  progress.add(0.0, twoStageJob(20, 0));
  const auto st = twoStageJob(20, 4, pb::JOB_SUCCEEDED);
  progress.add(3.0, st);
  const auto lines = progress.render(st, 3.0, 100);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "job-0000000007  wordcount  succeeded  3s");
  CHECK_THAT(lines[1], Catch::Contains("20/20") && Catch::Contains("100%  done"));
  CHECK_THAT(lines[2], Catch::Contains("4/4") && Catch::Contains("done"));
}

TEST_CASE("no line is wider than the terminal", "[unit][cli]") {
  JobProgress progress;
  auto st = twoStageJob(3, 0);
  st.mutable_status()->set_error(std::string(300, 'x'));
  progress.add(1.0, st);
  for (int width : {20, 40, 80}) {
    for (const auto& line : progress.render(st, 1.0, width)) {
      INFO(width << ": " << line);
      CHECK(line.size() <= static_cast<size_t>(width));
    }
  }
}

TEST_CASE("a redraw moves up over the last frame and clears every line", "[unit][cli]") {
  CHECK(redrawFrame({"a", "b"}, 0) == "\r\x1b[2Ka\n\r\x1b[2Kb\n");
  CHECK(redrawFrame({"a", "b"}, 2) == "\x1b[2A\r\x1b[2Ka\n\r\x1b[2Kb\n");
  // Fewer lines than before: the rest of the old frame is erased.
  CHECK(redrawFrame({"a"}, 3) == "\x1b[3A\r\x1b[2Ka\n\x1b[J");
}

}  // namespace
}  // namespace tellus::cli
