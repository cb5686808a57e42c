#pragma once
// The wire between a worker and its long-lived executors (tellus-executor --serve). Pure: no
// sockets, so both ends and the unit tests share one codec.
//
// The worker starts one executor per container slot and job on first use and talks to it over
// a socketpair with the RPC wire's frames (net/frame.h): the worker sends one task at a time
// (meta: call_id = a sequence number, method "executor.Run"; body: pb::ExecutorTask) and the
// executor answers each with its report (meta: call_id echoed, is_response; body:
// pb::ExecutorReport). Nothing else crosses. Either side treats anything else as a broken
// peer: the worker kills the executor (its task fails, the next task gets a new executor),
// the executor exits.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "net/frame.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::worker {

inline constexpr const char* kExecutorRunMethod = "executor.Run";
// A task names its input files (up to limits.max_tasks_per_job of them): the RPC maximum.
inline constexpr std::size_t kMaxExecutorTaskFrameBytes = net::kDefaultMaxFrameBytes;
// A report is a size per bucket (at most data::kMaxBucketCount varints) and an error.
inline constexpr std::size_t kMaxExecutorReportFrameBytes = 4 * 1024 * 1024;
// An executor's error message longer than this is cut (it ends up in logs and ZooKeeper).
inline constexpr std::size_t kMaxExecutorErrorBytes = 8 * 1024;

struct ExecutorTaskFrame {
  std::uint64_t seq = 0;
  pb::ExecutorTask task;
};

struct ExecutorReportFrame {
  std::uint64_t seq = 0;
  pb::ExecutorReport report;
};

// The frame that hands a task to an executor. kInvalidArgument when it would exceed
// kMaxExecutorTaskFrameBytes.
[[nodiscard]] Result<std::string> encodeExecutorTask(std::uint64_t seq, const pb::ExecutorTask& task);
// The frame that answers task `seq`.
[[nodiscard]] Result<std::string> encodeExecutorReport(std::uint64_t seq, const pb::ExecutorReport& report);

// Executor side: tasks out of the byte stream from the worker. Errors are final.
class ExecutorTaskDecoder {
 public:
  ExecutorTaskDecoder() : frames_(kMaxExecutorTaskFrameBytes) {}
  void feed(std::string_view bytes) { frames_.feed(bytes); }
  // A task, nullopt when more bytes are needed, or kInvalidArgument: a bad frame, a response,
  // another method, a body that is not an ExecutorTask.
  [[nodiscard]] Result<std::optional<ExecutorTaskFrame>> next();

 private:
  net::FrameDecoder frames_;
};

// Worker side: reports out of the byte stream from an executor. Errors are final.
class ExecutorReportDecoder {
 public:
  ExecutorReportDecoder() : frames_(kMaxExecutorReportFrameBytes) {}
  void feed(std::string_view bytes) { frames_.feed(bytes); }
  // A report, nullopt when more bytes are needed, or kInvalidArgument: a bad or oversized
  // frame, a request, a body that is not an ExecutorReport.
  [[nodiscard]] Result<std::optional<ExecutorReportFrame>> next();

 private:
  net::FrameDecoder frames_;
};

// Whether `frame` answers the task in flight (`seq`, writing `buckets` buckets): the same
// sequence number; a successful report has one size per bucket and a finite, non-negative
// elapsed time. A report with an error is valid whatever its sizes (the task failed). The
// error message is cut to kMaxExecutorErrorBytes in place.
[[nodiscard]] Status checkExecutorReport(ExecutorReportFrame& frame, std::uint64_t seq, std::uint32_t buckets);

}  // namespace tellus::worker
