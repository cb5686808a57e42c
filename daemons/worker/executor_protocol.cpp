#include "worker/executor_protocol.h"

#include <cmath>

#include <fmt/format.h>

namespace tellus::worker {

Result<std::string> encodeExecutorTask(std::uint64_t seq, const pb::ExecutorTask& task) {
  pb::RpcMeta meta;
  meta.set_call_id(seq);
  meta.set_method(kExecutorRunMethod);
  return net::encodeFrame(meta, task.SerializeAsString(), kMaxExecutorTaskFrameBytes);
}

Result<std::string> encodeExecutorReport(std::uint64_t seq, const pb::ExecutorReport& report) {
  pb::RpcMeta meta;
  meta.set_call_id(seq);
  meta.set_is_response(true);
  return net::encodeFrame(meta, report.SerializeAsString(), kMaxExecutorReportFrameBytes);
}

Result<std::optional<ExecutorTaskFrame>> ExecutorTaskDecoder::next() {
  auto frame = frames_.next();
  if (!frame) return frame.error();
  if (!*frame) return std::optional<ExecutorTaskFrame>();
  const auto& meta = (*frame)->meta;
  if (meta.is_response() || meta.method() != kExecutorRunMethod) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("executor protocol: expected a '{}' request, got {} '{}'", kExecutorRunMethod,
                                 meta.is_response() ? "a response" : "method", meta.method().substr(0, 64)));
  }
  ExecutorTaskFrame out;
  out.seq = meta.call_id();
  if (!out.task.ParseFromString((*frame)->body)) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("executor protocol: task {} does not parse as an ExecutorTask", out.seq));
  }
  return std::optional<ExecutorTaskFrame>(std::move(out));
}

Result<std::optional<ExecutorReportFrame>> ExecutorReportDecoder::next() {
  auto frame = frames_.next();
  if (!frame) return frame.error();
  if (!*frame) return std::optional<ExecutorReportFrame>();
  const auto& meta = (*frame)->meta;
  if (!meta.is_response()) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("executor protocol: expected a report, got a request '{}'", meta.method().substr(0, 64)));
  }
  ExecutorReportFrame out;
  out.seq = meta.call_id();
  if (!out.report.ParseFromString((*frame)->body)) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("executor protocol: report {} does not parse as an ExecutorReport", out.seq));
  }
  return std::optional<ExecutorReportFrame>(std::move(out));
}

Status checkExecutorReport(ExecutorReportFrame& frame, std::uint64_t seq, std::uint32_t buckets) {
  if (frame.seq != seq) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("executor protocol: report for task {} while task {} runs", frame.seq, seq));
  }
  auto& report = frame.report;
  if (report.error().size() > kMaxExecutorErrorBytes) {
    report.mutable_error()->resize(kMaxExecutorErrorBytes);
    report.mutable_error()->append("...");
  }
  if (!report.error().empty()) return Status::ok();
  if (static_cast<std::size_t>(report.bucket_bytes_size()) != buckets) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("executor protocol: report of task {} has {} bucket sizes for {} buckets", seq,
                                 report.bucket_bytes_size(), buckets));
  }
  if (!std::isfinite(report.elapsed_s()) || report.elapsed_s() < 0) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("executor protocol: report of task {} has elapsed time {}", seq, report.elapsed_s()));
  }
  return Status::ok();
}

}  // namespace tellus::worker
