// The worker <-> executor codec (worker/executor_protocol.h): round trips over any chunking,
// and everything a broken or hostile peer can send is refused.
#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "net/frame.h"
#include "worker/executor_protocol.h"

using tellus::ErrorCode;
using namespace tellus::worker;

namespace {

tellus::pb::ExecutorTask sampleTask() {
  tellus::pb::ExecutorTask task;
  task.set_job_id("job-0000000007");
  task.set_stage(2);
  task.set_task(41);
  task.set_op("wordcount.map");
  // insert, not operator[] + assign of a literal: GCC 12 -O3 warns falsely on the latter (-Wrestrict).
  task.mutable_params()->insert({std::string("k"), std::string("v")});
  task.add_input_files("/data/in-0");
  task.add_input_files("/data/in-1");
  task.set_buckets(3);
  task.set_store_root("/data/partitions");
  return task;
}

tellus::pb::ExecutorReport okReport(int buckets) {
  tellus::pb::ExecutorReport report;
  for (int b = 0; b < buckets; ++b) report.add_bucket_bytes(100u + static_cast<unsigned>(b));
  report.set_elapsed_s(0.25);
  return report;
}

std::string frameOf(const tellus::pb::RpcMeta& meta, const std::string& body) {
  auto frame = tellus::net::encodeFrame(meta, body);
  REQUIRE(frame.isOk());
  return *frame;
}

}  // namespace

TEST_CASE("executor protocol: tasks and reports round trip, fed a byte at a time", "[unit][executor]") {
  auto taskBytes = encodeExecutorTask(7, sampleTask());
  REQUIRE(taskBytes.isOk());
  auto second = encodeExecutorTask(8, sampleTask());
  REQUIRE(second.isOk());
  ExecutorTaskDecoder tasks;
  const std::string stream = *taskBytes + *second;
  std::vector<ExecutorTaskFrame> got;
  for (char c : stream) {
    tasks.feed(std::string_view(&c, 1));
    for (;;) {
      auto next = tasks.next();
      REQUIRE(next.isOk());
      if (!*next) break;
      got.push_back(std::move(**next));
    }
  }
  REQUIRE(got.size() == 2);
  CHECK(got[0].seq == 7);
  CHECK(got[1].seq == 8);
  CHECK(got[0].task.SerializeAsString() == sampleTask().SerializeAsString());

  auto reportBytes = encodeExecutorReport(7, okReport(3));
  REQUIRE(reportBytes.isOk());
  ExecutorReportDecoder reports;
  reports.feed(*reportBytes);
  auto report = reports.next();
  REQUIRE(report.isOk());
  REQUIRE(report->has_value());
  CHECK((*report)->seq == 7);
  CHECK((*report)->report.bucket_bytes_size() == 3);
  CHECK(checkExecutorReport(**report, 7, 3).isOk());
  auto none = reports.next();
  REQUIRE(none.isOk());
  CHECK_FALSE(none->has_value());
}

TEST_CASE("executor protocol: the executor refuses anything but a task", "[unit][executor]") {
  SECTION("a response") {
    auto bytes = encodeExecutorReport(1, okReport(1));
    REQUIRE(bytes.isOk());
    ExecutorTaskDecoder d;
    d.feed(*bytes);
    auto next = d.next();
    REQUIRE_FALSE(next.isOk());
    CHECK(next.error().code == ErrorCode::kInvalidArgument);
  }
  SECTION("another method") {
    tellus::pb::RpcMeta meta;
    meta.set_call_id(1);
    meta.set_method("worker.Fetch");
    ExecutorTaskDecoder d;
    d.feed(frameOf(meta, sampleTask().SerializeAsString()));
    auto next = d.next();
    REQUIRE_FALSE(next.isOk());
    CHECK_THAT(next.message(), Catch::Contains("worker.Fetch"));
  }
  SECTION("a body that is not a task") {
    tellus::pb::RpcMeta meta;
    meta.set_call_id(1);
    meta.set_method(kExecutorRunMethod);
    ExecutorTaskDecoder d;
    d.feed(frameOf(meta, std::string("\xff\xff\xff\xff", 4)));
    CHECK_FALSE(d.next().isOk());
  }
  SECTION("garbage") {
    ExecutorTaskDecoder d;
    d.feed("GET / HTTP/1.1\r\n\r\n");
    CHECK_FALSE(d.next().isOk());
  }
}

TEST_CASE("executor protocol: the worker refuses bad and oversized reports", "[unit][executor]") {
  SECTION("a request instead of a report") {
    auto bytes = encodeExecutorTask(1, sampleTask());
    REQUIRE(bytes.isOk());
    ExecutorReportDecoder d;
    d.feed(*bytes);
    CHECK_FALSE(d.next().isOk());
  }
  SECTION("a frame over the report limit is refused from its header alone") {
    tellus::pb::RpcMeta meta;
    meta.set_call_id(1);
    meta.set_is_response(true);
    const std::string big = frameOf(meta, std::string(kMaxExecutorReportFrameBytes + 1, 'x'));
    ExecutorReportDecoder d;
    d.feed(big.substr(0, tellus::net::kFrameHeaderBytes));
    auto next = d.next();
    REQUIRE_FALSE(next.isOk());
    CHECK(next.error().code == ErrorCode::kInvalidArgument);
  }
  SECTION("an executor cannot send a report too large for the worker") {
    tellus::pb::ExecutorReport huge;
    huge.set_error(std::string(kMaxExecutorReportFrameBytes, 'e'));
    CHECK_FALSE(encodeExecutorReport(1, huge).isOk());
  }
}

TEST_CASE("executor protocol: a report must answer the task in flight", "[unit][executor]") {
  ExecutorReportFrame frame{5, okReport(2)};
  CHECK(checkExecutorReport(frame, 5, 2).isOk());
  CHECK_FALSE(checkExecutorReport(frame, 6, 2).isOk());  // another task's
  CHECK_FALSE(checkExecutorReport(frame, 5, 3).isOk());  // a size missing
  CHECK_FALSE(checkExecutorReport(frame, 5, 1).isOk());  // a size too many

  ExecutorReportFrame negative{5, okReport(1)};
  negative.report.set_elapsed_s(-1);
  CHECK_FALSE(checkExecutorReport(negative, 5, 1).isOk());
  ExecutorReportFrame nan{5, okReport(1)};
  nan.report.set_elapsed_s(std::numeric_limits<double>::quiet_NaN());
  CHECK_FALSE(checkExecutorReport(nan, 5, 1).isOk());

  // A failed task's report needs no sizes; its error is cut to the bound.
  ExecutorReportFrame failed{5, {}};
  failed.report.set_error(std::string(kMaxExecutorErrorBytes * 2, 'x'));
  CHECK(checkExecutorReport(failed, 5, 4).isOk());
  CHECK(failed.report.error().size() <= kMaxExecutorErrorBytes + 3);
}
