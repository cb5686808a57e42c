// tellus-executor: the process a container runs for one task. The worker writes the task as
// an ExecutorTask file, this process runs the operator into the worker's partition store and
// writes an ExecutorReport; a crash or kill leaves no committed partial output.
//   tellus-executor TASK_FILE REPORT_FILE
#include <fstream>
#include <iostream>

#include "data/partition_store.h"
#include "data/task_runner.h"
#include "job/exec_policy.h"
#include "tellus.pb.h"

namespace {

int writeReport(const std::string& path, const tellus::pb::ExecutorReport& report) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !report.SerializeToOstream(&out)) {
    std::cerr << "tellus-executor: cannot write " << path << "\n";
    return 3;
  }
  return report.error().empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: tellus-executor TASK_FILE REPORT_FILE\n";
    return 2;
  }
  tellus::pb::ExecutorTask task;
  std::ifstream in(argv[1], std::ios::binary);
  if (!in || !task.ParseFromIstream(&in)) {
    std::cerr << "tellus-executor: cannot read task " << argv[1] << "\n";
    return 2;
  }
  tellus::pb::ExecutorReport report;
  auto store = tellus::data::PartitionStore::open(task.store_root());
  if (!store) {
    report.set_error(store.message());
    std::cerr << "tellus-executor: " << store.message() << std::endl;
    return writeReport(argv[2], report);
  }
  tellus::data::TaskSpec spec;
  spec.operatorName = task.op();
  spec.params = {task.params().begin(), task.params().end()};
  spec.inputs = {task.input_files().begin(), task.input_files().end()};
  spec.bucketCount = task.buckets();
  spec.output.jobId = task.job_id();
  spec.output.stage = task.stage();
  spec.output.task = task.task();
  // Without the worker's exec section exec stays disabled.
  if (task.has_exec()) spec.env.exec = tellus::job::fromProto(task.exec());
  spec.env.log = &std::cerr;  // the worker keeps it for `tellus logs`
  auto result = tellus::data::runTask(spec, *store);
  if (!result) {
    // Also on stderr, which the worker keeps per execution for `tellus logs` (for exec, after
    // the command's own stderr: its exit and the last lines of its stderr).
    std::cerr << "tellus-executor: task " << task.stage() << ":" << task.task() << " failed: " << result.message()
              << std::endl;
    report.set_error(result.message());
  } else {
    for (const auto& b : result->buckets) report.add_bucket_bytes(b.sizeBytes);
    report.set_elapsed_s(result->elapsedMs() / 1000.0);
  }
  return writeReport(argv[2], report);
}
