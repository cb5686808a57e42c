#include "worker/log_retention.h"

#include <catch2/catch.hpp>

namespace tellus::worker {
namespace {

using namespace std::chrono_literals;
using Time = std::filesystem::file_time_type;

TEST_CASE("log retention deletes job log dirs untouched for the retention, never an active job's", "[unit][worker]") {
  const Time now = Time::clock::now();
  const std::vector<LogDir> dirs{{"job-old", now - 2h}, {"job-new", now - 10min}, {"job-busy", now - 5h},
                                 {"job-edge", now - 1h}};
  auto expired = expiredLogDirs(dirs, now, 1h, {"job-busy"});
  CHECK(expired == std::vector<std::string>{"job-old", "job-edge"});
  // Zero keeps everything, whatever its age.
  CHECK(expiredLogDirs(dirs, now, 0ms, {}).empty());
  // A clock that went back (a file from the future) is not old.
  CHECK(expiredLogDirs({{"job-future", now + 1h}}, now, 1ms, {}).empty());
}

}  // namespace
}  // namespace tellus::worker
