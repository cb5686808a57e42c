#include <catch2/catch.hpp>

#include "jobstate/paths.h"
#include "util/names.h"

using namespace tellus::jobstate;
using TaskId = std::pair<uint32_t, uint32_t>;

TEST_CASE("task names: a marker's <s>-<t> and an attempt's <s>-<t>-<n> parse back", "[unit][jobstate]") {
  CHECK(parseTaskName(runningTaskName(3, 17)) == TaskId{3, 17});
  CHECK(parseTaskName("0-0") == TaskId{0, 0});
  CHECK(parseTaskName("2-5-0000000007") == TaskId{2, 5});
  CHECK(parseTaskName("4294967295-1") == TaskId{4294967295u, 1});
}

TEST_CASE("task names: anything else is rejected, never thrown on", "[unit][jobstate]") {
  for (const char* bad : {"", "-", "3", "3-", "-3", "a-1", "1-b", "1--2", "1-2-", "1-2-x", "1-2-3-4", "1 -2",
                          "4294967296-1", "+1-2", "1-2 "}) {
    INFO(bad);
    CHECK_FALSE(parseTaskName(bad).has_value());
  }
}

TEST_CASE("output names: a task index parses back, anything else is rejected", "[unit][jobstate]") {
  CHECK(parsePartName("0") == 0u);
  CHECK(parsePartName("4294967295") == 4294967295u);
  for (const char* bad : {"", "x", "1-2", "4294967296", "-1", "+1", "1 ", " 1", "0x10"}) {
    INFO(bad);
    CHECK_FALSE(parsePartName(bad).has_value());
  }
}

TEST_CASE("job ids: what ZooKeeper makes is accepted, paths and oversized names are not", "[unit][jobstate]") {
  CHECK(isJobId("job-0000000001"));
  CHECK(isJobId("my_job.2"));
  for (const char* bad : {"", ".", "..", "../x", "a/b", "job 1", ".hidden"}) {
    INFO(bad);
    CHECK_FALSE(isJobId(bad));
  }
  CHECK_FALSE(isJobId(std::string(tellus::kMaxNameBytes + 1, 'a')));
  CHECK(isJobId(std::string(tellus::kMaxNameBytes, 'a')));
}
