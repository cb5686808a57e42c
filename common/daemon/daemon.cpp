#include "daemon/daemon.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "util/log.h"

namespace tellus::daemon {

namespace asio = boost::asio;

int Runtime::run(std::function<void()> onSignal) {
  signals_.emplace(io_, SIGINT, SIGTERM);
  signals_->async_wait([this, onSignal = std::move(onSignal)](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: shutting down", sig);
    // An operator who signals again does not want to wait for the orderly stop.
    signals_->async_wait([this](const boost::system::error_code& again, int) {
      if (!again) io_.stop();
    });
    onSignal();
  });
  io_.run();
  return failed_ ? 1 : 0;
}

void Runtime::shutdownWhenIdle(std::chrono::milliseconds grace) {
  if (shutdownWhenIdle_) return;
  shutdownWhenIdle_ = true;
  if (running_ == 0) {
    io_.stop();
    return;
  }
  graceTimer_.emplace(io_, grace);
  graceTimer_->async_wait([this, grace](const boost::system::error_code& ec) {
    if (ec) return;
    spdlog::warn("{} task(s) still running {} ms after stop; exiting without them", running_, grace.count());
    io_.stop();
  });
}

void Runtime::spawn(asio::awaitable<void> task, std::string what) {
  ++running_;
  asio::co_spawn(io_, std::move(task), [this, what = std::move(what)](std::exception_ptr e) {
    --running_;
    if (shutdownWhenIdle_ && running_ == 0) io_.stop();
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const boost::system::system_error& err) {
      // Cancellation at shutdown is the normal way for a loop to end.
      if (err.code() == asio::error::operation_aborted) return;
      spdlog::critical("{} failed: {}", what, err.what());
    } catch (const std::exception& err) {
      spdlog::critical("{} failed: {}", what, err.what());
    }
    failed_ = true;
    io_.stop();
  });
}

asio::awaitable<void> sleepFor(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(asio::use_awaitable);
}

int64_t nowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace tellus::daemon
