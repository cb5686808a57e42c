#include "worker/executor_process.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "data/operator.h"
#include "monitor/process_table.h"
#include "util/log.h"

namespace tellus::worker {

namespace asio = boost::asio;
using asio::awaitable;

Result<std::shared_ptr<ExecutorProcess>> ExecutorProcess::start(asio::any_io_executor io,
                                                                const std::filesystem::path& program,
                                                                const std::filesystem::path& dir,
                                                                std::filesystem::path execWorkDir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return makeError(ErrorCode::kInternal, "cannot create " + dir.string() + ": " + ec.message());
  int sv[2];
  // Close-on-exec on both ends: only the executor gets one, as its stdin (dup2 clears the flag).
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return makeError(ErrorCode::kInternal, std::string("executor socketpair: ") + std::strerror(errno));
  }
  proc::SpawnOptions opts;
  opts.argv = {program.string(), "--serve", dir.string()};
  opts.stdinFd = sv[1];
  opts.stderrFile = dir / "stderr";
  auto child = proc::Subprocess::spawn(opts);
  ::close(sv[1]);
  if (!child) {
    ::close(sv[0]);
    return child.error();
  }
  auto pidFd = child->openPidFd();
  if (!pidFd) {
    ::close(sv[0]);
    return pidFd.error();  // the Subprocess kills and reaps the child as it goes
  }
  return std::shared_ptr<ExecutorProcess>(
      new ExecutorProcess(std::move(io), std::move(child).value(), sv[0], *pidFd, dir, std::move(execWorkDir)));
}

ExecutorProcess::ExecutorProcess(asio::any_io_executor io, proc::Subprocess process, int socketFd, int pidFd,
                                 std::filesystem::path dir, std::filesystem::path execWorkDir)
    : io_(io),
      process_(std::move(process)),
      pid_(process_.pid()),
      socket_(io, asio::local::stream_protocol(), socketFd),
      pidFd_(io, pidFd),
      dir_(std::move(dir)),
      execWorkDir_(std::move(execWorkDir)),
      done_(io) {}

ExecutorProcess::~ExecutorProcess() = default;  // process_ kills and reaps a child still running

void ExecutorProcess::kill(const std::string& why) {
  // Only before it is reaped: until then its pid cannot name another process.
  if (!alive()) return;
  if (brokenBecause_.empty() && !why.empty()) brokenBecause_ = why;
  monitor::signalProcessTree(pid_, SIGKILL);
}

void ExecutorProcess::finish(Result<pb::ExecutorReport> result) {
  if (!inFlight_ || inFlight_->result) return;
  inFlight_->result = std::move(result);
  done_.set();
}

std::string ExecutorProcess::deathMessage() const {
  return fmt::format("executor (pid {}) {} while running the task{}", pid_,
                     exit_ ? exit_->toString() : std::string("ended"),
                     brokenBecause_.empty() ? std::string() : " (" + brokenBecause_ + ")");
}

awaitable<Result<pb::ExecutorReport>> ExecutorProcess::run(pb::ExecutorTask task) {
  if (!alive()) {
    reserved_ = false;
    co_return makeError(ErrorCode::kInternal, fmt::format("executor (pid {}) has ended", pid_));
  }
  reserved_ = true;
  const uint64_t seq = ++nextSeq_;
  auto frame = encodeExecutorTask(seq, task);
  if (!frame) {
    reserved_ = false;
    co_return frame.error();
  }
  inFlight_ = InFlight{seq, task.buckets(), std::nullopt};
  done_.reset();
  boost::system::error_code ec;
  co_await asio::async_write(socket_, asio::buffer(*frame), asio::redirect_error(asio::use_awaitable, ec));
  // It cannot take the task: it is gone or going; the exit watcher ends the task with why.
  if (ec) kill("it did not take the task: " + ec.message());
  // Woken by its report or its death; the long timeout only bounds one wait, not the task.
  while (!inFlight_->result) (void)co_await done_.waitFor(std::chrono::hours(1));
  Result<pb::ExecutorReport> result = std::move(*inFlight_->result);
  inFlight_.reset();
  reserved_ = false;
  co_return result;
}

awaitable<void> ExecutorProcess::watchExit(std::shared_ptr<ExecutorProcess> self) {
  boost::system::error_code ec;
  // A pidfd is readable once its process has ended.
  co_await self->pidFd_.async_wait(asio::posix::descriptor_base::wait_read,
                                   asio::redirect_error(asio::use_awaitable, ec));
  // Ended but not reaped yet, so its pid still names it alone: what its exec commands left
  // (it was killed before its own cleanup ran) goes now.
  if (!ec && !self->execWorkDir_.empty()) {
    if (size_t left = data::removeExecDirsOf(self->execWorkDir_, self->pid_); left > 0) {
      spdlog::info("executor pid {} ended: removed {} private directories of its commands", self->pid_, left);
    }
  }
  auto status = self->process_.tryWait();
  if (!status) {
    // Only if waiting on the pidfd failed: end it ourselves (a short wait once SIGKILLed).
    spdlog::warn("waiting for executor pid {}: {}; killing it", self->pid_, ec.message());
    self->kill("its pidfd failed: " + ec.message());
    auto reaped = self->process_.waitFor(std::chrono::seconds(5));
    status = reaped ? *reaped : proc::ExitStatus{};
  }
  self->exit_ = status;
  boost::system::error_code ignored;
  self->socket_.close(ignored);  // ends readReports
  self->pidFd_.close(ignored);
  if (self->inFlight_ && !self->inFlight_->result) {
    spdlog::warn("{}", self->deathMessage());
    self->finish(makeError(ErrorCode::kInternal, self->deathMessage()));
  } else if (!self->brokenBecause_.empty()) {
    spdlog::debug("executor pid {} ended ({}): {}", self->pid_, self->brokenBecause_, status->toString());
  } else {
    spdlog::warn("idle executor pid {} ended: {}", self->pid_, status->toString());
  }
}

awaitable<void> ExecutorProcess::readReports(std::shared_ptr<ExecutorProcess> self) {
  std::string buffer(1 << 16, '\0');
  for (;;) {
    boost::system::error_code ec;
    const size_t got = co_await self->socket_.async_read_some(asio::buffer(buffer),
                                                              asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      // Its end closed: it is ending (the exit watcher has the status and says why), or it
      // dropped its line and is of no more use.
      self->kill("");
      co_return;
    }
    self->decoder_.feed(std::string_view(buffer.data(), got));
    for (;;) {
      auto next = self->decoder_.next();
      if (!next) {
        self->kill(next.message());
        co_return;
      }
      if (!*next) break;
      if (!self->inFlight_ || self->inFlight_->result) {
        self->kill(fmt::format("executor protocol: report {} with no task in flight", (*next)->seq));
        co_return;
      }
      if (Status ok = checkExecutorReport(**next, self->inFlight_->seq, self->inFlight_->buckets); !ok) {
        self->kill(ok.message());
        co_return;
      }
      self->finish(std::move((*next)->report));
    }
  }
}

}  // namespace tellus::worker
