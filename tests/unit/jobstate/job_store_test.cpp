// The pure parts of jobstate::JobStore: node names and node contents from ZooKeeper are
// decoded into values or refused, never thrown on.
#include "jobstate/job_store.h"

#include <catch2/catch.hpp>

using namespace tellus;
using namespace tellus::jobstate;

TEST_CASE("output and task names: ours are read, foreign ones skipped", "[jobstate][store]") {
  CHECK(JobStore::batchKey("b-0000000003") == "batch b-0000000003");
  CHECK(JobStore::taskIds({"0-1", "2-3-0000000004", "1", "a-b", "1-2-", "4-5"}, "/jobs/j/running") ==
        std::vector<TaskId>{{0, 1}, {2, 3}, {4, 5}});
}

TEST_CASE("executions per task: folded ones, and unfolded names not folded meanwhile", "[jobstate][store]") {
  // 0-1 ran twice (both folded), 0-2 once folded and once still an audit node, 1-0 only as an
  // audit node; 0-2-0000000005 was folded between the listing and the read: counted once.
  const std::vector<Attempt> folded{{{0, 1}, "w1", "0-1-0000000001"},
                                    {{0, 1}, "w2", "0-1-0000000002"},
                                    {{0, 2}, "w1", "0-2-0000000005"}};
  const std::vector<std::string> unfolded{"0-2-0000000005", "0-2-0000000007", "1-0-0000000009", "junk", "0-"};
  const auto counts = JobStore::countAttempts(unfolded, folded);
  CHECK(counts == std::map<TaskId, uint32_t>{{{0, 1}, 2}, {{0, 2}, 2}, {{1, 0}, 1}});
  // A compacted job's executions have no ids: each counts.
  const std::vector<Attempt> compacted{{{0, 0}, "w1", ""}, {{0, 0}, "w1", ""}};
  CHECK(JobStore::countAttempts({}, compacted) == std::map<TaskId, uint32_t>{{{0, 0}, 2}});
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

TEST_CASE("createJobBytes: a job's creating transaction must fit in one ZooKeeper request", "[unit][jobstate]") {
  pb::JobSpec spec;
  spec.set_name("wc");
  spec.add_stages()->set_name("map");
  pb::JobStatus status;
  status.set_name("wc");
  auto inputsOf = [](int partitions) {
    pb::StageInputs in;
    for (int i = 0; i < partitions; ++i) {
      auto* ref = in.add_partitions();
      ref->set_site("us-east");
      ref->set_worker_id("us-east-w1");
      ref->set_worker_address("127.0.0.1:40000");
      ref->set_dataset_file("/var/lib/tellus/us-east-w1/datasets/corpus/put-1700000000000000000-part-" + std::to_string(i));
      ref->set_bytes(1 << 20);
    }
    return in;
  };
  auto small = tellus::jobstate::createJobBytes(spec, status, {{0, inputsOf(1000)}});
  REQUIRE(small.isOk());
  CHECK(*small < tellus::jobstate::kMaxCreateJobBytes);
  // The 1,000,000-task job: refused before the first write, naming the largest part.
  auto huge = tellus::jobstate::createJobBytes(spec, status, {{0, inputsOf(20000)}});
  REQUIRE_FALSE(huge.isOk());
  CHECK(huge.error().code == tellus::ErrorCode::kInvalidArgument);
  CHECK(huge.error().message.find("stage 0's inputs (20000 partitions") != std::string::npos);
  CHECK(huge.error().message.find('\n') == std::string::npos);
}
