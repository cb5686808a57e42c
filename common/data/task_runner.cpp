#include "data/task_runner.h"

#include <fstream>
#include <memory>

namespace tellus::data {
namespace fs = std::filesystem;

Result<TaskReport> runTask(const TaskSpec& spec, const PartitionStore& store) {
  const auto started = std::chrono::steady_clock::now();
  const std::string context =
      "task " + spec.output.jobId + "/s" + std::to_string(spec.output.stage) + "-t" + std::to_string(spec.output.task);
  if (spec.bucketCount == 0 || spec.bucketCount > kMaxBucketCount) {
    return makeError(ErrorCode::kInvalidArgument, context + ": bucket count must be between 1 and " +
                                                      std::to_string(kMaxBucketCount) + ", got " +
                                                      std::to_string(spec.bucketCount));
  }
  auto op = makeOperator(spec.operatorName, spec.params, spec.env);
  if (!op.isOk()) return op.error().prepend(context);
  TELLUS_RETURN_IF_ERROR_CTX(validateStoreName("job id", spec.output.jobId), context);

  TaskReport report;
  std::vector<std::unique_ptr<std::ifstream>> inputFiles;
  TaskIo io;
  for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
    const fs::path& path = spec.inputs[i];
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      return makeError(ErrorCode::kNotFound,
                       context + ": input " + std::to_string(i) + " '" + path.string() + "' is not a readable file");
    }
    report.inputBytes += fs::file_size(path, ec);
    auto file = std::make_unique<std::ifstream>(path, std::ios::binary);
    if (!file->is_open()) {
      return makeError(ErrorCode::kInternal, context + ": cannot open input " + std::to_string(i) + " '" + path.string() + "'");
    }
    io.inputs.push_back(file.get());
    inputFiles.push_back(std::move(file));
  }

  std::vector<std::unique_ptr<PartitionWriter>> writers;
  for (std::uint32_t bucket = 0; bucket < spec.bucketCount; ++bucket) {
    PartitionKey key = spec.output;
    key.bucket = bucket;
    auto writer = store.create(key);
    if (!writer.isOk()) return writer.error().prepend(context);
    io.buckets.push_back(&(*writer)->stream());
    writers.push_back(std::move(writer).value());
  }

  TELLUS_RETURN_IF_ERROR_CTX((*op)->run(io), context);

  for (auto& writer : writers) {
    auto info = writer->commit();
    if (!info.isOk()) return info.error().prepend(context);
    report.outputBytes += info->sizeBytes;
    report.buckets.push_back(*info);
  }
  report.elapsed = std::chrono::steady_clock::now() - started;
  return report;
}

}  // namespace tellus::data
