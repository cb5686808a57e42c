#pragma once
// Child processes for daemons (a worker launching executors and JMs) and for test harnesses
// (a real ZooKeeper, real daemons). A Subprocess owns its child: when the object goes away
// a still-running child is SIGKILLed and reaped, so no zombie and no orphan is left behind.
//
// Spawning uses posix_spawn (glibc implements it with CLONE_VFORK and reports exec failures
// synchronously). With dieWithParent it uses fork+exec instead, calling only
// async-signal-safe functions in the child and reporting exec failures through a pipe.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"

namespace tellus::proc {

struct SpawnOptions {
  // argv[0] is the program: a path, or a bare name looked up in PATH. Must not be empty.
  std::vector<std::string> argv;
  // Variables added to (or overriding) the parent's environment.
  std::vector<std::pair<std::string, std::string>> extraEnv;
  // Empty: inherit the parent's working directory.
  std::filesystem::path workingDir;
  // nullopt: inherit the parent's stdin. Otherwise this descriptor of the parent becomes the
  // child's stdin (e.g. one end of a socketpair; the parent keeps and closes its own copy).
  std::optional<int> stdinFd;
  // nullopt: inherit the parent's stream. Otherwise the file is created if missing and
  // appended to (several restarts of one server can share a log).
  std::optional<std::filesystem::path> stdoutFile;
  std::optional<std::filesystem::path> stderrFile;
  // Put the child in a new process group (pgid = its pid) so that killGroup() also reaches
  // the grandchildren it starts (a shell script, a JVM launcher).
  bool newProcessGroup = false;
  // SIGKILL the child when the spawning thread dies (Linux PR_SET_PDEATHSIG), so that a
  // crashed or timed-out test leaves no server behind. Spawn from a thread that outlives the
  // child (a test's main thread, a daemon's main io thread).
  bool dieWithParent = false;
};

// How a child ended: exited with a code, or killed by a signal.
struct ExitStatus {
  bool exited = false;  // true: `code` is meaningful; false: `signal` is
  int code = 0;
  int signal = 0;

  static ExitStatus fromWaitStatus(int waitStatus);
  bool success() const { return exited && code == 0; }
  // "exit code 3" / "killed by signal 9 (Killed)"
  std::string toString() const;
  bool operator==(const ExitStatus&) const = default;
};

// Validates options without touching the system (pure; unit-tested).
Status validateSpawnOptions(const SpawnOptions& options);

class Subprocess {
 public:
  // Starts the child. Errors: kInvalidArgument for bad options, kNotFound when the program
  // does not exist, kInternal for other spawn failures (message names the program and errno).
  static Result<Subprocess> spawn(const SpawnOptions& options);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  // Kills (SIGKILL, the whole group if it has its own) and reaps a still-running child.
  ~Subprocess();

  pid_t pid() const { return pid_; }
  const std::string& program() const { return program_; }
  bool hasOwnGroup() const { return ownGroup_; }

  // True until the child has been reaped by tryWait/waitFor/waitUntil.
  bool running() const { return pid_ > 0 && !status_; }
  // The exit status once reaped.
  const std::optional<ExitStatus>& exitStatus() const { return status_; }

  // A new pidfd of the child (close-on-exec; the caller owns it): readable once the child has
  // ended, so an event loop can wait for it without polling. kNotFound once reaped; kInternal
  // when the kernel has no pidfd_open (Linux < 5.3).
  Result<int> openPidFd() const;

  // Sends `sig` to the child only. kNotFound when it has already been reaped.
  Status signal(int sig);
  // Sends `sig` to the child's whole process group (requires newProcessGroup).
  Status killGroup(int sig);

  // Non-blocking reap: the exit status if the child has ended, nullopt while it runs.
  std::optional<ExitStatus> tryWait();
  // Blocks until the child ends or the deadline passes (kDeadlineExceeded; the child keeps
  // running).
  Result<ExitStatus> waitUntil(std::chrono::steady_clock::time_point deadline);
  Result<ExitStatus> waitFor(std::chrono::milliseconds timeout) {
    return waitUntil(std::chrono::steady_clock::now() + timeout);
  }

  // SIGTERM (to the group if it has one), wait up to `grace`, then SIGKILL and reap.
  ExitStatus terminate(std::chrono::milliseconds grace);

 private:
  Subprocess(pid_t pid, std::string program, bool ownGroup)
      : pid_(pid), program_(std::move(program)), ownGroup_(ownGroup) {}
  void killAndReap();

  pid_t pid_ = -1;
  std::string program_;
  bool ownGroup_ = false;
  std::optional<ExitStatus> status_;
};

}  // namespace tellus::proc
