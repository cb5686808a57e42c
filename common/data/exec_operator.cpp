// exec: stream a task's input through a user's shell command (Hadoop-streaming style).
//
// One child per task: /bin/sh -c <cmd>, stdin = the inputs concatenated in order, stdout =
// the output records, stderr kept (its tail) for the error message. The child is confined by
// the site's exec config: unprivileged user, rlimits, private working directory, clean env. The parent moves bytes
// in both directions with poll() on non-blocking pipes, so a command that writes a lot before
// reading all its input (cat, sort-like filters) never deadlocks against us.

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <ostream>

#include <fmt/format.h>

#include "data/operator_factories.h"
#include "data/record.h"
#include "monitor/process_table.h"

namespace tellus::data::internal {
namespace {

constexpr std::size_t kPipeChunkBytes = 1 << 16;
constexpr std::size_t kStderrTailBytes = 8 << 10;
constexpr std::size_t kStderrTailLines = 10;
constexpr std::uint64_t kMaxTimeoutMs = 7ULL * 24 * 3600 * 1000;

Error systemError(const std::string& what, int errnum) {
  return makeError(ErrorCode::kInternal, what + ": " + std::strerror(errnum));
}

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool isOpen() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Result<Pipe> makePipe() {
  int fds[2];
  // O_CLOEXEC: a child spawned concurrently by another thread must not inherit our ends,
  // or it would hold the command's stdin open and we would never see EOF.
  if (::pipe2(fds, O_CLOEXEC) != 0) return systemError("pipe2", errno);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

Status setNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return systemError("fcntl(O_NONBLOCK)", errno);
  return Status::ok();
}

// Blocks SIGPIPE in the calling thread for its lifetime, so that writing to a command that
// exited early gives EPIPE instead of killing the whole process; a SIGPIPE raised meanwhile
// is consumed before the old mask is restored. Thread-local by construction: the process's
// signal dispositions are not ours to change.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigset_t pipeOnly;
    sigemptyset(&pipeOnly);
    sigaddset(&pipeOnly, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    wasPending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipeOnly, &previousMask_);
  }
  ~ScopedSigpipeBlock() {
    sigset_t pending;
    sigpending(&pending);
    if (!wasPending_ && sigismember(&pending, SIGPIPE) == 1) {
      sigset_t pipeOnly;
      sigemptyset(&pipeOnly);
      sigaddset(&pipeOnly, SIGPIPE);
      const timespec noWait{0, 0};
      while (sigtimedwait(&pipeOnly, nullptr, &noWait) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &previousMask_, nullptr);
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t previousMask_{};
  bool wasPending_ = false;
};

// Owns a spawned child: whatever path we leave by (error, timeout), the child and everything
// it started (`sleep 30` under dash is a grandchild, a pipeline is several) are killed if the
// child is still running, and the child is always reaped. The command stays in the executor's
// process group, which is its worker's: killing a worker "VM" kills the command too.
class ChildProcess {
 public:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  ~ChildProcess() {
    if (!reaped_) {
      monitor::signalProcessTree(pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  Result<int> wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0) {
      if (errno != EINTR) return systemError("waitpid", errno);
    }
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_;
  bool reaped_ = false;
};

// Turns the command's stdout bytes into records. With one bucket the bytes are copied as is;
// with several, complete lines are routed by key. Either way the output ends with '\n'.
class OutputSplitter {
 public:
  explicit OutputSplitter(BucketRouter& router, std::ostream& singleBucket)
      : router_(router), singleBucket_(singleBucket) {}

  void consume(std::string_view bytes) {
    if (bytes.empty()) return;
    if (router_.bucketCount() == 1) {
      singleBucket_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      endsWithNewline_ = bytes.back() == '\n';
      return;
    }
    std::size_t start = 0;
    for (std::size_t newline = bytes.find('\n'); newline != std::string_view::npos;
         newline = bytes.find('\n', start)) {
      if (partial_.empty()) {
        router_.writeLine(bytes.substr(start, newline - start));
      } else {
        partial_.append(bytes.substr(start, newline - start));
        router_.writeLine(partial_);
        partial_.clear();
      }
      start = newline + 1;
    }
    partial_.append(bytes.substr(start));
  }

  void finish() {
    if (router_.bucketCount() == 1) {
      if (!endsWithNewline_) singleBucket_.put('\n');
    } else if (!partial_.empty()) {
      router_.writeLine(partial_);
      partial_.clear();
    }
  }

 private:
  BucketRouter& router_;
  std::ostream& singleBucket_;
  std::string partial_;
  bool endsWithNewline_ = true;  // empty output stays empty
};

// The last kStderrTailLines lines of what the command wrote to stderr, for error messages.
class StderrTail {
 public:
  void consume(std::string_view bytes) {
    tail_.append(bytes);
    if (tail_.size() > 2 * kStderrTailBytes) tail_.erase(0, tail_.size() - kStderrTailBytes);
  }

  std::string lastLines() const {
    std::string_view text = tail_;
    if (text.size() > kStderrTailBytes) text.remove_prefix(text.size() - kStderrTailBytes);
    while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    std::size_t start = text.size();
    std::size_t lines = 0;
    while (start > 0) {
      const auto newline = text.rfind('\n', start - 1);
      if (newline == std::string_view::npos) {
        start = 0;
        break;
      }
      if (++lines == kStderrTailLines) {
        start = newline + 1;
        break;
      }
      start = newline;
    }
    while (start < text.size() && text[start] == '\n') ++start;
    return std::string(text.substr(start));
  }

 private:
  std::string tail_;
};

std::string describeExit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + sigdescr_np(sig) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

// Who the command runs as and where: resolved in the parent, before fork, because the child
// may call only async-signal-safe functions.
struct Confinement {
  bool switchUser = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;
  std::filesystem::path dir;  // private working directory (0700, owned by uid)
  std::vector<std::pair<decltype(RLIMIT_CPU), rlim_t>> limits;
};

Result<Confinement> resolveConfinement(const config::ExecConfig& exec) {
  Confinement c;
  c.user = exec.run_as_user;
  if (!c.user.empty()) {
    passwd entry{};
    passwd* found = nullptr;
    std::vector<char> buffer(16384);
    const int rc = ::getpwnam_r(c.user.c_str(), &entry, buffer.data(), buffer.size(), &found);
    if (rc != 0 || found == nullptr) {
      return makeError(ErrorCode::kInvalidArgument, "exec.run_as_user '" + c.user + "' is not a user on this host");
    }
    if (entry.pw_uid == 0) {
      return makeError(ErrorCode::kInvalidArgument, "exec.run_as_user '" + c.user + "' is root; name an unprivileged user");
    }
    c.uid = entry.pw_uid;
    c.gid = entry.pw_gid;
    if (::geteuid() != c.uid) {
      if (::geteuid() != 0) {
        return makeError(ErrorCode::kInvalidArgument,
                         fmt::format("cannot run commands as '{}': the worker is not root (uid {}); set "
                                     "exec.run_as_user: \"\" to run them as the worker's own user",
                                     c.user, ::geteuid()));
      }
      c.switchUser = true;
    }
  }
  const auto& r = exec.rlimits;
  auto add = [&](decltype(RLIMIT_CPU) resource, std::uint64_t value) {
    if (value > 0) c.limits.emplace_back(resource, static_cast<rlim_t>(value));
  };
  add(RLIMIT_CPU, r.cpu_s);
  add(RLIMIT_AS, r.memory_mb << 20);
  add(RLIMIT_NOFILE, r.open_files);
  add(RLIMIT_NPROC, r.processes);
  return c;
}

// The private directories of process `pid`'s commands start so: a process killed before it
// removed one (SIGKILL) leaves it behind, and its parent removes it by this name.
std::string execDirPrefix(pid_t pid) { return fmt::format("tellus-exec-{}-", pid); }

// A fresh private directory for one command, removed (with whatever the command left) when
// the owner goes: after the command and its process tree have been killed and reaped.
class PrivateDir {
 public:
  static Result<PrivateDir> create(const std::filesystem::path& parent, const Confinement& c) {
    std::string pattern = (parent / (execDirPrefix(::getpid()) + "XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) return systemError("creating a private directory in " + parent.string(), errno);
    PrivateDir dir(pattern);
    if (c.switchUser && ::chown(pattern.c_str(), c.uid, c.gid) != 0) {
      return systemError("giving " + pattern + " to user " + c.user, errno);
    }
    return dir;
  }
  PrivateDir(PrivateDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  PrivateDir& operator=(PrivateDir&&) = delete;
  ~PrivateDir() {
    if (path_.empty()) return;
    std::error_code ignored;  // best effort: a leftover directory is only disk, never a wrong result
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit PrivateDir(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

// What the child failed at before exec, sent back through a close-on-exec pipe.
struct ChildFailure {
  int step;
  int errnum;
};
constexpr const char* kChildSteps[] = {"dup2", "chdir", "setrlimit", "setgroups", "setgid", "setuid", "no_new_privs",
                                       "exec /bin/sh", "pdeathsig"};

class ExecOperator final : public Operator {
 public:
  ExecOperator(std::string command, std::uint64_t timeoutMs, config::ExecConfig exec, std::ostream* log)
      : Operator("exec"), command_(std::move(command)), timeoutMs_(timeoutMs), exec_(std::move(exec)), log_(log) {}

 private:
  // fork + exec rather than posix_spawn: the child must drop privileges and set limits before
  // the command starts. Between fork and exec only async-signal-safe calls.
  Result<pid_t> spawn(const Pipe& toChild, const Pipe& fromChild, const Pipe& errFromChild, const Confinement& c,
                      const std::filesystem::path& dir) const {
    auto report = makePipe();
    if (!report.isOk()) return report.error();
    std::string shell = "/bin/sh";
    std::string dashC = "-c";
    std::string command = command_;
    char* argv[] = {shell.data(), dashC.data(), command.data(), nullptr};
    // A clean environment: the worker's may hold anything (tokens, credentials paths).
    const char* path = std::getenv("PATH");
    std::string pathVar = std::string("PATH=") + (path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
    std::string homeVar = "HOME=" + dir.string();
    std::string tmpVar = "TMPDIR=" + dir.string();
    char* envp[] = {pathVar.data(), homeVar.data(), tmpVar.data(), nullptr};
    const std::string dirText = dir.string();
    const int in = toChild.read.get(), out = fromChild.write.get(), err = errFromChild.write.get();
    const int reportFd = report->write.get();
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid < 0) return systemError("fork for command '" + command_ + "'", errno);
    if (pid == 0) {
      auto fail = [&](int step) {
        const ChildFailure failure{step, errno};
        (void)!::write(reportFd, &failure, sizeof failure);
        ::_exit(127);
      };
      // The command gets an empty signal mask (we block SIGPIPE in this thread) and a default
      // SIGPIPE (daemons often ignore it; `producer | head` pipelines rely on it); it stays in
      // our process group (see ChildProcess).
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      if (::dup2(in, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 || ::dup2(err, STDERR_FILENO) < 0) fail(0);
      if (::chdir(dirText.c_str()) != 0) fail(1);
      for (const auto& [resource, value] : c.limits) {
        // CPU: SIGXCPU at the soft limit, SIGKILL a second later if it is caught.
        const rlimit limit{value, resource == RLIMIT_CPU ? value + 1 : value};
        if (::setrlimit(resource, &limit) != 0) fail(2);
      }
      if (c.switchUser) {
        if (::setgroups(0, nullptr) != 0) fail(3);
        if (::setgid(c.gid) != 0) fail(4);
        if (::setuid(c.uid) != 0) fail(5);
      }
      // No setuid binary (sudo, su) can give the command back what we just dropped.
      if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(6);
      // The command dies with its executor (a long-lived one runs task after task: one killed
      // mid-task must not leave its command running). Set after the user switch, which clears
      // it; a parent already gone is seen by getppid.
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(8);
      if (::getppid() != parent) ::_exit(127);
      ::execve(shell.c_str(), argv, envp);
      fail(7);
    }
    report->write.reset();
    ChildFailure failure{};
    ssize_t got;
    while ((got = ::read(report->read.get(), &failure, sizeof failure)) < 0 && errno == EINTR) {
    }
    if (got == static_cast<ssize_t>(sizeof failure)) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      const auto step = static_cast<std::size_t>(failure.step) < std::size(kChildSteps) ? kChildSteps[failure.step] : "?";
      return systemError(fmt::format("starting command '{}' ({})", command_, step), failure.errnum);
    }
    return pid;
  }

  Status process(TaskIo& io) override {
    auto toChild = makePipe();
    if (!toChild.isOk()) return toChild.error();
    auto fromChild = makePipe();
    if (!fromChild.isOk()) return fromChild.error();
    auto errFromChild = makePipe();
    if (!errFromChild.isOk()) return errFromChild.error();

    // Checked again here (the master checked at submission): defence in depth.
    TELLUS_RETURN_IF_ERROR(checkExecAllowed(exec_, command_));
    auto confinement = resolveConfinement(exec_);
    if (!confinement.isOk()) return confinement.error();
    auto dir = PrivateDir::create(exec_.work_dir, *confinement);
    if (!dir.isOk()) return dir.error();

    ScopedSigpipeBlock sigpipeBlocked;
    auto pid = spawn(*toChild, *fromChild, *errFromChild, *confinement, dir->path());
    if (!pid.isOk()) return pid.error();
    ChildProcess child(*pid);
    // Our copies of the child's ends must go, or we would never see EOF on stdout/stderr.
    toChild->read.reset();
    fromChild->write.reset();
    errFromChild->write.reset();
    UniqueFd childStdin = std::move(toChild->write);
    UniqueFd childStdout = std::move(fromChild->read);
    UniqueFd childStderr = std::move(errFromChild->read);
    TELLUS_RETURN_IF_ERROR(setNonBlocking(childStdin.get()));
    TELLUS_RETURN_IF_ERROR(setNonBlocking(childStdout.get()));
    TELLUS_RETURN_IF_ERROR(setNonBlocking(childStderr.get()));

    BucketRouter router(io.buckets);
    OutputSplitter output(router, *io.buckets.front());
    StderrTail stderrTail;
    std::uint64_t forwarded = 0;  // of the command's stderr, to log_
    std::vector<char> inputBuffer(kPipeChunkBytes);
    std::size_t inputBegin = 0;
    std::size_t inputEnd = 0;
    std::size_t nextInput = 0;
    std::vector<char> readBuffer(kPipeChunkBytes);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs_);

    while (childStdin.isOpen() || childStdout.isOpen() || childStderr.isOpen()) {
      // Refill the input buffer when drained; close the command's stdin after the last input.
      while (childStdin.isOpen() && inputBegin == inputEnd) {
        if (nextInput == io.inputs.size()) {
          childStdin.reset();
          break;
        }
        std::istream& in = *io.inputs[nextInput];
        in.read(inputBuffer.data(), static_cast<std::streamsize>(inputBuffer.size()));
        inputBegin = 0;
        inputEnd = static_cast<std::size_t>(in.gcount());
        if (!in) {
          TELLUS_RETURN_IF_ERROR(checkInputStream(in, nextInput));
          ++nextInput;
        }
      }

      pollfd fds[3];
      nfds_t count = 0;
      int stdinSlot = -1, stdoutSlot = -1, stderrSlot = -1;
      if (childStdin.isOpen()) {
        stdinSlot = static_cast<int>(count);
        fds[count++] = pollfd{childStdin.get(), POLLOUT, 0};
      }
      if (childStdout.isOpen()) {
        stdoutSlot = static_cast<int>(count);
        fds[count++] = pollfd{childStdout.get(), POLLIN, 0};
      }
      if (childStderr.isOpen()) {
        stderrSlot = static_cast<int>(count);
        fds[count++] = pollfd{childStderr.get(), POLLIN, 0};
      }
      if (count == 0) break;
      int pollTimeoutMs = -1;
      if (timeoutMs_ > 0) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
          return makeError(ErrorCode::kDeadlineExceeded,
                           "command '" + command_ + "' timed out after " + std::to_string(timeoutMs_) + " ms");
        }
        pollTimeoutMs = static_cast<int>(std::min<std::int64_t>(left.count(), 60'000));
      }
      if (::poll(fds, count, pollTimeoutMs) < 0) {
        if (errno == EINTR) continue;
        return systemError("poll", errno);
      }

      if (stdinSlot >= 0 && fds[stdinSlot].revents != 0) {
        const ssize_t written = ::write(childStdin.get(), inputBuffer.data() + inputBegin, inputEnd - inputBegin);
        if (written >= 0) {
          inputBegin += static_cast<std::size_t>(written);
        } else if (errno == EPIPE) {
          // The command stopped reading (e.g. `head -n 1`): not an error by itself; its exit
          // status decides. The rest of the input is not needed.
          childStdin.reset();
        } else if (errno != EAGAIN && errno != EINTR) {
          return systemError("writing to the stdin of command '" + command_ + "'", errno);
        }
      }
      if (stdoutSlot >= 0 && fds[stdoutSlot].revents != 0) {
        const ssize_t got = ::read(childStdout.get(), readBuffer.data(), readBuffer.size());
        if (got > 0) {
          output.consume(std::string_view(readBuffer.data(), static_cast<std::size_t>(got)));
          if (!router.healthy()) return router.finish();
        } else if (got == 0) {
          childStdout.reset();
        } else if (errno != EAGAIN && errno != EINTR) {
          return systemError("reading the stdout of command '" + command_ + "'", errno);
        }
      }
      if (stderrSlot >= 0 && fds[stderrSlot].revents != 0) {
        const ssize_t got = ::read(childStderr.get(), readBuffer.data(), readBuffer.size());
        if (got > 0) {
          const std::string_view bytes(readBuffer.data(), static_cast<std::size_t>(got));
          stderrTail.consume(bytes);
          if (log_ != nullptr && forwarded < kMaxForwardedStderrBytes) {
            const auto n = std::min<std::uint64_t>(bytes.size(), kMaxForwardedStderrBytes - forwarded);
            log_->write(bytes.data(), static_cast<std::streamsize>(n));
            forwarded += n;
            if (forwarded == kMaxForwardedStderrBytes) {
              *log_ << "\n[tellus: the rest of the command's stderr is not kept (over " << (kMaxForwardedStderrBytes >> 20)
                    << " MiB)]\n";
            }
            log_->flush();
          }
        } else if (got == 0) {
          childStderr.reset();
        } else if (errno != EAGAIN && errno != EINTR) {
          return systemError("reading the stderr of command '" + command_ + "'", errno);
        }
      }
    }

    auto status = child.wait();
    if (!status.isOk()) return status.error();
    if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
      std::string message = "command '" + command_ + "' " + describeExit(*status);
      const std::string lastLines = stderrTail.lastLines();
      message += lastLines.empty() ? "; stderr was empty" : "; last lines of stderr:\n" + lastLines;
      return makeError(ErrorCode::kInternal, message);
    }
    output.finish();
    return Status::ok();
  }

  std::string command_;
  std::uint64_t timeoutMs_;  // 0: no limit
  config::ExecConfig exec_;
  std::ostream* log_;  // the task's log (OperatorEnv::log), or nullptr
};

}  // namespace

Result<std::unique_ptr<Operator>> makeExec(ParamReader& params, const OperatorEnv& env) {
  auto command = params.requiredString("cmd");
  if (!command.isOk()) return command.error();
  auto timeoutMs = params.optionalUint("timeout_ms", 0, kMaxTimeoutMs);
  if (!timeoutMs.isOk()) return timeoutMs.error();
  TELLUS_RETURN_IF_ERROR(checkExecAllowed(env.exec, *command));
  return std::unique_ptr<Operator>(new ExecOperator(*command, *timeoutMs, env.exec, env.log));
}

}  // namespace tellus::data::internal

namespace tellus::data {

Status checkExecConfinement(const config::ExecConfig& exec) { return internal::resolveConfinement(exec).status(); }

size_t removeExecDirsOf(const std::filesystem::path& workDir, pid_t pid) {
  const std::string prefix = internal::execDirPrefix(pid);
  size_t removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(workDir, ec)) {
    if (e.path().filename().string().rfind(prefix, 0) != 0) continue;
    std::error_code ignored;  // best effort, as PrivateDir's own removal
    if (std::filesystem::remove_all(e.path(), ignored) > 0) ++removed;
  }
  return removed;
}

}  // namespace tellus::data
