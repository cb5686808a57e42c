#include "proc/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

extern char** environ;

namespace tellus::proc {
namespace {

std::string errnoText(int err) { return std::strerror(err); }

// Closes a file descriptor at scope exit.
class FdGuard {
 public:
  explicit FdGuard(int fd = -1) : fd_(fd) {}
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// The parent opens redirection targets itself (close-on-exec) so that a bad path yields a
// clear error naming the file rather than an anonymous spawn failure.
Result<int> openOutputFile(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    return makeError(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
                     "opening output file " + path.string() + ": " + errnoText(err));
  }
  return fd;
}

// The parent's environment with `extra` applied on top, as "KEY=VALUE" strings.
std::vector<std::string> buildEnvironment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> vars;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view kv(*entry);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    vars[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  for (const auto& [key, value] : extra) vars[key] = value;
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& [key, value] : vars) out.push_back(key + "=" + value);
  return out;
}

std::vector<char*> toCharPointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// RAII for the posix_spawn attribute objects.
struct SpawnAttrs {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnAttrs() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnAttrs() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnAttrs(const SpawnAttrs&) = delete;
  SpawnAttrs& operator=(const SpawnAttrs&) = delete;
};

// pidfd_open(2) lets waitUntil() block in poll() instead of spinning; absent on old kernels.
int openPidFd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

// PATH lookup done in the parent: after fork only async-signal-safe calls are allowed.
std::string resolveProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string_view dirs(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
  while (!dirs.empty()) {
    auto colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return program;  // execve reports ENOENT
}

// fork+exec with PR_SET_PDEATHSIG. Between fork and exec the child only makes system calls.
Result<pid_t> forkExec(const SpawnOptions& options, int outFd, int errFd, char* const* argv, char* const* envp) {
  const std::string& program = options.argv.front();
  std::string resolved = resolveProgram(program);
  const char* workDir = options.workingDir.empty() ? nullptr : options.workingDir.c_str();
  int reportPipe[2];
  if (::pipe2(reportPipe, O_CLOEXEC) != 0) {
    return makeError(ErrorCode::kInternal, "spawn " + program + ": pipe: " + errnoText(errno));
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(reportPipe[0]);
    ::close(reportPipe[1]);
    return makeError(ErrorCode::kInternal, "spawn " + program + ": fork: " + errnoText(err));
  }
  if (pid == 0) {
    auto fail = [&](int err) {
      (void)!::write(reportPipe[1], &err, sizeof(err));
      ::_exit(127);
    };
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(errno);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    if (options.newProcessGroup && ::setpgid(0, 0) != 0) fail(errno);
    sigset_t emptyMask;
    sigemptyset(&emptyMask);
    ::sigprocmask(SIG_SETMASK, &emptyMask, nullptr);
    struct sigaction defaultAction {};
    defaultAction.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &defaultAction, nullptr);  // EINVAL for KILL/STOP: fine
    if (options.stdinFd && ::dup2(*options.stdinFd, STDIN_FILENO) < 0) fail(errno);
    if (outFd >= 0 && ::dup2(outFd, STDOUT_FILENO) < 0) fail(errno);
    if (errFd >= 0 && ::dup2(errFd, STDERR_FILENO) < 0) fail(errno);
    if (workDir && ::chdir(workDir) != 0) fail(errno);
    // Close-on-exec rather than close: the report pipe must stay open until execve.
    ::close_range(STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC);
    ::execve(resolved.c_str(), argv, envp);
    fail(errno);
  }
  ::close(reportPipe[1]);
  int childErr = 0;
  ssize_t n;
  do {
    n = ::read(reportPipe[0], &childErr, sizeof(childErr));
  } while (n < 0 && errno == EINTR);
  ::close(reportPipe[0]);
  if (n > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return makeError(childErr == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInternal,
                     "spawn " + program + ": " + errnoText(childErr));
  }
  return pid;
}

}  // namespace

ExitStatus ExitStatus::fromWaitStatus(int waitStatus) {
  ExitStatus s;
  if (WIFEXITED(waitStatus)) {
    s.exited = true;
    s.code = WEXITSTATUS(waitStatus);
  } else if (WIFSIGNALED(waitStatus)) {
    s.signal = WTERMSIG(waitStatus);
  }
  return s;
}

std::string ExitStatus::toString() const {
  if (exited) return "exit code " + std::to_string(code);
  if (signal == 0) return "ended with unknown status";
  const char* name = ::strsignal(signal);
  return "killed by signal " + std::to_string(signal) + " (" + (name ? name : "?") + ")";
}

Status validateSpawnOptions(const SpawnOptions& options) {
  if (options.argv.empty() || options.argv.front().empty()) {
    return makeError(ErrorCode::kInvalidArgument, "spawn: argv is empty (argv[0] must name the program)");
  }
  for (const auto& arg : options.argv) {
    if (arg.find('\0') != std::string::npos) {
      return makeError(ErrorCode::kInvalidArgument,
                       "spawn " + options.argv.front() + ": an argument contains a NUL byte");
    }
  }
  if (options.stdinFd && *options.stdinFd < 0) {
    return makeError(ErrorCode::kInvalidArgument, "spawn " + options.argv.front() + ": stdinFd is negative");
  }
  for (const auto& [key, value] : options.extraEnv) {
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos ||
        value.find('\0') != std::string::npos) {
      return makeError(ErrorCode::kInvalidArgument, "spawn " + options.argv.front() +
                                                        ": invalid environment variable name '" + key +
                                                        "' (must be non-empty, without '=' or NUL)");
    }
  }
  return Status::ok();
}

Result<Subprocess> Subprocess::spawn(const SpawnOptions& options) {
  TELLUS_RETURN_IF_ERROR(validateSpawnOptions(options));
  const std::string& program = options.argv.front();

  FdGuard outFd, errFd;
  if (options.stdoutFile) {
    auto fd = openOutputFile(*options.stdoutFile);
    if (!fd) return fd.error().prepend("spawn " + program);
    outFd.reset(*fd);
  }
  if (options.stderrFile) {
    auto fd = openOutputFile(*options.stderrFile);
    if (!fd) return fd.error().prepend("spawn " + program);
    errFd.reset(*fd);
  }
  if (!options.workingDir.empty() && !std::filesystem::is_directory(options.workingDir)) {
    return makeError(ErrorCode::kNotFound,
                     "spawn " + program + ": working directory " + options.workingDir.string() + " does not exist");
  }

  std::vector<std::string> argvStrings = options.argv;
  std::vector<std::string> envStrings = buildEnvironment(options.extraEnv);
  std::vector<char*> argvPtrs = toCharPointers(argvStrings);
  std::vector<char*> envPtrs = toCharPointers(envStrings);

  if (options.dieWithParent) {
    auto pid = forkExec(options, outFd.get(), errFd.get(), argvPtrs.data(), envPtrs.data());
    if (!pid) return pid.error();
    return Subprocess(*pid, program, options.newProcessGroup);
  }

  SpawnAttrs attrs;
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  // The child starts with no blocked signals and default dispositions, whatever the parent
  // (e.g. an Asio signal_set or an ignored SIGPIPE) had set up.
  sigset_t emptyMask, allSignals;
  sigemptyset(&emptyMask);
  sigfillset(&allSignals);
  posix_spawnattr_setsigmask(&attrs.attr, &emptyMask);
  posix_spawnattr_setsigdefault(&attrs.attr, &allSignals);
  if (options.newProcessGroup) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attrs.attr, 0);
  }
  posix_spawnattr_setflags(&attrs.attr, flags);

  if (options.stdinFd) posix_spawn_file_actions_adddup2(&attrs.actions, *options.stdinFd, STDIN_FILENO);
  if (outFd.get() >= 0) posix_spawn_file_actions_adddup2(&attrs.actions, outFd.get(), STDOUT_FILENO);
  if (errFd.get() >= 0) posix_spawn_file_actions_adddup2(&attrs.actions, errFd.get(), STDERR_FILENO);
  if (!options.workingDir.empty()) {
    posix_spawn_file_actions_addchdir_np(&attrs.actions, options.workingDir.c_str());
  }
  // Descriptors the parent forgot to mark close-on-exec (listening sockets!) must not leak
  // into the child and outlive the parent's use of them.
  posix_spawn_file_actions_addclosefrom_np(&attrs.actions, STDERR_FILENO + 1);

  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, program.c_str(), &attrs.actions, &attrs.attr, argvPtrs.data(), envPtrs.data());
  if (rc != 0) {
    return makeError(rc == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInternal,
                     "spawn " + program + ": " + errnoText(rc));
  }
  return Subprocess(pid, program, options.newProcessGroup);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      program_(std::move(other.program_)),
      ownGroup_(other.ownGroup_),
      status_(std::move(other.status_)) {}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    killAndReap();
    pid_ = std::exchange(other.pid_, -1);
    program_ = std::move(other.program_);
    ownGroup_ = other.ownGroup_;
    status_ = std::move(other.status_);
  }
  return *this;
}

Subprocess::~Subprocess() { killAndReap(); }

void Subprocess::killAndReap() {
  if (!running()) return;
  ::kill(ownGroup_ ? -pid_ : pid_, SIGKILL);
  int waitStatus = 0;
  while (::waitpid(pid_, &waitStatus, 0) < 0 && errno == EINTR) {
  }
  status_ = ExitStatus::fromWaitStatus(waitStatus);
}

Result<int> Subprocess::openPidFd() const {
  if (!running()) return makeError(ErrorCode::kNotFound, program_ + ": process already reaped");
  // Before it is reaped its pid cannot name another process, so this is its pidfd.
  const int fd = proc::openPidFd(pid_);
  if (fd < 0) {
    return makeError(ErrorCode::kInternal, "pidfd_open for " + program_ + " (pid " + std::to_string(pid_) +
                                               "): " + errnoText(errno) + " (Linux 5.3 or later is required)");
  }
  return fd;
}

Status Subprocess::signal(int sig) {
  if (!running()) return makeError(ErrorCode::kNotFound, program_ + ": process already reaped");
  if (::kill(pid_, sig) != 0) {
    return makeError(ErrorCode::kInternal, "signal " + std::to_string(sig) + " to " + program_ + " (pid " +
                                               std::to_string(pid_) + "): " + errnoText(errno));
  }
  return Status::ok();
}

Status Subprocess::killGroup(int sig) {
  if (!ownGroup_) {
    return makeError(ErrorCode::kInvalidArgument,
                     program_ + " was not started in its own process group (set newProcessGroup)");
  }
  if (!running()) return makeError(ErrorCode::kNotFound, program_ + ": process already reaped");
  if (::kill(-pid_, sig) != 0) {
    return makeError(ErrorCode::kInternal, "signal " + std::to_string(sig) + " to process group " +
                                               std::to_string(pid_) + " (" + program_ + "): " + errnoText(errno));
  }
  return Status::ok();
}

std::optional<ExitStatus> Subprocess::tryWait() {
  if (status_ || pid_ <= 0) return status_;
  int waitStatus = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &waitStatus, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    status_ = ExitStatus::fromWaitStatus(waitStatus);
  } else if (r < 0 && errno == ECHILD) {
    // Someone else reaped it (a SIGCHLD handler with waitpid(-1)); the status is lost.
    status_ = ExitStatus{};
  }
  return status_;
}

Result<ExitStatus> Subprocess::waitUntil(std::chrono::steady_clock::time_point deadline) {
  if (pid_ <= 0) return makeError(ErrorCode::kInvalidArgument, "wait: no process (moved-from Subprocess)");
  if (auto s = tryWait()) return *s;
  FdGuard pidFd(proc::openPidFd(pid_));
  auto pollDelay = std::chrono::milliseconds(1);
  while (true) {
    if (auto s = tryWait()) return *s;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return makeError(ErrorCode::kDeadlineExceeded,
                       program_ + " (pid " + std::to_string(pid_) + ") still running at the deadline");
    }
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    if (pidFd.get() >= 0) {
      // The pidfd becomes readable when the child exits.
      pollfd pfd{pidFd.get(), POLLIN, 0};
      ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    } else {
      std::this_thread::sleep_for(std::min(pollDelay, left));
      pollDelay = std::min(pollDelay * 2, std::chrono::milliseconds(20));
    }
  }
}

ExitStatus Subprocess::terminate(std::chrono::milliseconds grace) {
  if (!running()) return status_.value_or(ExitStatus{});
  ::kill(ownGroup_ ? -pid_ : pid_, SIGTERM);
  auto ended = waitFor(grace);
  if (ended) {
    // The leader is gone but a group member may linger; the group is ours to clean up.
    if (ownGroup_) ::kill(-pid_, SIGKILL);
    return *ended;
  }
  killAndReap();
  return *status_;
}

}  // namespace tellus::proc
