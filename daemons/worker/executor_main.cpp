// tellus-executor: a container's long-lived executor. Its worker starts one per container slot
// and job on first use, with one end of a socketpair as stdin, and sends it task after task
// (worker/executor_protocol.h); each runs here, in-process, into the worker's partition store
// (exec still starts /bin/sh per task, confined: data/exec_operator.cpp), and its report goes
// back over the same socket. A crash or kill leaves no committed partial output; the worker
// sees the death through a pidfd at once and fails the task in flight.
//   tellus-executor --serve DIR     (DIR: its directory under the worker's containers/<job>/)
// It exits 0 when the worker closes the socket, non-zero on a broken stream.
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "data/partition_store.h"
#include "data/task_runner.h"
#include "job/exec_policy.h"
#include "tellus.pb.h"
#include "worker/executor_protocol.h"

namespace {

using tellus::worker::ExecutorTaskFrame;

// The socket moves off stdin to a close-on-exec descriptor: the commands exec tasks start
// must not inherit the worker's line (they get their own stdin from the exec operator).
int takeSocket() {
  const int fd = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return -1;
  const int devNull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devNull >= 0) {
    ::dup2(devNull, STDIN_FILENO);
    ::close(devNull);
  }
  return fd;
}

bool writeAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// One task, in-process. The store is opened once per root (the worker's, which never changes).
struct Store {
  std::string root;
  std::optional<tellus::data::PartitionStore> store;
};

tellus::pb::ExecutorReport runOne(const tellus::pb::ExecutorTask& task, Store& cache) {
  tellus::pb::ExecutorReport report;
  // This execution's log, which the worker keeps for `tellus logs`; the executor's own stderr
  // when the worker named none or it cannot be opened.
  std::ofstream logFile;
  if (!task.log_file().empty()) logFile.open(task.log_file(), std::ios::out | std::ios::trunc);
  std::ostream& log = logFile.is_open() ? static_cast<std::ostream&>(logFile) : std::cerr;
  auto& store = cache.store;
  if (!store || cache.root != task.store_root()) {
    store.reset();
    cache.root = task.store_root();
    auto opened = tellus::data::PartitionStore::open(task.store_root());
    if (!opened) {
      report.set_error(opened.message());
      log << "tellus-executor: " << opened.message() << std::endl;
      return report;
    }
    store.emplace(std::move(opened).value());
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
  spec.env.log = &log;
  auto result = tellus::data::runTask(spec, *store);
  if (!result) {
    // Also in the log (for exec, after the command's own stderr: its exit and the last lines
    // of its stderr).
    log << "tellus-executor: task " << task.stage() << ":" << task.task() << " failed: " << result.message()
        << std::endl;
    report.set_error(result.message());
  } else {
    for (const auto& b : result->buckets) report.add_bucket_bytes(b.sizeBytes);
    report.set_elapsed_s(result->elapsedMs() / 1000.0);
  }
  return report;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::string(argv[1]) != "--serve") {
    std::cerr << "usage: tellus-executor --serve DIR (started by tellus-worker, its socket on stdin)\n";
    return 2;
  }
  // Its worker is its only reason to live (the worker also watches it through a pidfd).
  // (Had it died before this call, the socket is closed already: the first read ends us.)
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const int sock = takeSocket();
  if (sock < 0) {
    std::cerr << "tellus-executor: no socket on stdin: " << std::strerror(errno) << "\n";
    return 2;
  }
  tellus::worker::ExecutorTaskDecoder decoder;
  Store store;
  std::string buffer(1 << 16, '\0');
  for (;;) {
    const ssize_t got = ::read(sock, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) return 0;  // the worker closed the line: nothing more to run
    if (got < 0) {
      std::cerr << "tellus-executor: reading from the worker: " << std::strerror(errno) << "\n";
      return 3;
    }
    decoder.feed(std::string_view(buffer.data(), static_cast<size_t>(got)));
    for (;;) {
      auto next = decoder.next();
      if (!next) {
        std::cerr << "tellus-executor: " << next.message() << "\n";
        return 2;
      }
      if (!*next) break;
      const ExecutorTaskFrame& frame = **next;
      auto report = runOne(frame.task, store);
      auto bytes = tellus::worker::encodeExecutorReport(frame.seq, report);
      if (!bytes) {
        // Too large to send (an absurd bucket count): report that instead.
        tellus::pb::ExecutorReport failed;
        failed.set_error(bytes.message());
        bytes = tellus::worker::encodeExecutorReport(frame.seq, failed);
      }
      if (!bytes || !writeAll(sock, *bytes)) {
        std::cerr << "tellus-executor: cannot send the report of task " << frame.seq << "\n";
        return 3;
      }
    }
  }
}
