#pragma once
// The worker's handle on one long-lived executor (tellus-executor --serve): the process, the
// worker's end of its socketpair and a pidfd. Tasks go one at a time (run()); the report comes
// back over the socket (worker/executor_protocol.h). The executor's death is seen at once: a
// coroutine waits for the pidfd to become readable, reaps the process and fails the task in
// flight with its exit status. Nothing is polled.
//
// Threading: everything runs on the worker's io thread. The owner spawns watchExit() and
// readReports() (both hold a shared_ptr) as tracked coroutines right after start(); they end
// once the process is reaped and the socket closed, so kill() is how a stop ends them.

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "coord/event_flag.h"
#include "proc/subprocess.h"
#include "tellus.pb.h"
#include "util/result.h"
#include "worker/executor_protocol.h"

namespace tellus::worker {

class ExecutorProcess : public std::enable_shared_from_this<ExecutorProcess> {
 public:
  // Starts `program --serve dir` with its socket on stdin and stderr appended to dir/stderr
  // (dir is created). Errors name the step (socketpair, spawn, pidfd_open). `execWorkDir`
  // (empty: exec is off) is where its exec commands get their private directories: those a
  // killed executor leaves there are removed when it has ended.
  static Result<std::shared_ptr<ExecutorProcess>> start(boost::asio::any_io_executor io,
                                                        const std::filesystem::path& program,
                                                        const std::filesystem::path& dir,
                                                        std::filesystem::path execWorkDir);
  ~ExecutorProcess();
  ExecutorProcess(const ExecutorProcess&) = delete;
  ExecutorProcess& operator=(const ExecutorProcess&) = delete;

  // Runs one task: its report (which may carry the operator's error), or kInternal when the
  // executor died or broke the protocol meanwhile ("executor (pid N) killed by signal 9 while
  // running the task"). One task at a time: call only when !busy(), after reserve().
  boost::asio::awaitable<Result<pb::ExecutorReport>> run(pb::ExecutorTask task);

  // Marks the executor taken for the task about to be run (the pool's choice and run() are
  // separated by no suspension, but the mark makes it explicit).
  void reserve() { reserved_ = true; }
  bool busy() const { return reserved_; }
  bool alive() const { return !exit_.has_value(); }
  pid_t pid() const { return pid_; }
  const std::filesystem::path& dir() const { return dir_; }
  // SIGKILL to the executor and every process under it (the commands of exec tasks); the exit
  // watcher then reaps it and fails the task in flight, naming `why` (if not empty). No-op once
  // reaped.
  void kill(const std::string& why);

  // The two coroutines of an executor's life (see the top of this file).
  static boost::asio::awaitable<void> watchExit(std::shared_ptr<ExecutorProcess> self);
  static boost::asio::awaitable<void> readReports(std::shared_ptr<ExecutorProcess> self);

 private:
  ExecutorProcess(boost::asio::any_io_executor io, proc::Subprocess process, int socketFd, int pidFd,
                  std::filesystem::path dir, std::filesystem::path execWorkDir);
  // Ends the task in flight (if any, and not ended yet) with `result`.
  void finish(Result<pb::ExecutorReport> result);
  std::string deathMessage() const;

  boost::asio::any_io_executor io_;
  proc::Subprocess process_;
  pid_t pid_;
  boost::asio::local::stream_protocol::socket socket_;
  boost::asio::posix::stream_descriptor pidFd_;
  std::filesystem::path dir_;
  std::filesystem::path execWorkDir_;
  ExecutorReportDecoder decoder_;
  uint64_t nextSeq_ = 0;
  struct InFlight {
    uint64_t seq = 0;
    uint32_t buckets = 0;
    std::optional<Result<pb::ExecutorReport>> result;
  };
  std::optional<InFlight> inFlight_;
  coord::EventFlag done_;  // set when the task in flight has its result
  bool reserved_ = false;
  std::optional<proc::ExitStatus> exit_;  // once reaped
  std::string brokenBecause_;             // why we killed it, for the task's error
};

}  // namespace tellus::worker
