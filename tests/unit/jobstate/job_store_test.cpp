// The pure parts of jobstate::JobStore: node names and node contents from ZooKeeper are
// decoded into values or refused, never thrown on.
#include "jobstate/job_store.h"

#include <catch2/catch.hpp>

using namespace tellus;
using namespace tellus::jobstate;

TEST_CASE("output and task names: ours are read, foreign ones skipped", "[jobstate][store]") {
  CHECK(JobStore::outputTaskIds({"0", "7", "x", "3-1", "", "-1", "99999999999"}, "/jobs/j/stages/0/parts") ==
        std::set<uint32_t>{0, 7});
  CHECK(JobStore::taskIds({"0-1", "2-3-0000000004", "1", "a-b", "1-2-", "4-5"}, "/jobs/j/running") ==
        std::vector<TaskId>{{0, 1}, {2, 3}, {4, 5}});
}

TEST_CASE("epoch text", "[jobstate][store]") {
  CHECK(parseEpoch("0") == 0u);
  CHECK(parseEpoch("42") == 42u);
  CHECK_FALSE(parseEpoch(""));
  CHECK_FALSE(parseEpoch("4x"));
  CHECK_FALSE(parseEpoch("-1"));
  CHECK_FALSE(parseEpoch("99999999999999999999999"));
}

TEST_CASE("node contents: malformed or oversized bytes are error values", "[jobstate][store]") {
  pb::TaskMap map;
  map.add_owner_site("s1");
  auto decoded = decodeNode<pb::TaskMap>(map.SerializeAsString(), "/jobs/j/stages/0/taskmap");
  REQUIRE(decoded.isOk());
  CHECK(decoded->owner_site(0) == "s1");

  auto malformed = decodeNode<pb::TaskMap>(std::string("\xff\xff\xff", 3), "/jobs/j/stages/0/taskmap");
  REQUIRE_FALSE(malformed.isOk());
  CHECK(malformed.error().code == ErrorCode::kInternal);
  CHECK(malformed.message() == "malformed tellus.pb.TaskMap in /jobs/j/stages/0/taskmap");

  // Valid protobuf, but larger than any node ZooKeeper would hand us.
  pb::TaskMap huge;
  huge.add_owner_site(std::string(kMaxNodeBytes, 's'));
  auto oversized = decodeNode<pb::TaskMap>(huge.SerializeAsString(), "/jobs/j/stages/0/taskmap");
  REQUIRE_FALSE(oversized.isOk());
  CHECK(oversized.error().code == ErrorCode::kInternal);
  CHECK_THAT(oversized.message(), Catch::Contains("more than any tellus.pb.TaskMap may"));
}
