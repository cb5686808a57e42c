#pragma once
// Synchronous use of the coroutine API for simple tools (a CLI that makes a few ZooKeeper
// calls and exits): run one coroutine on an io_context from the calling thread until it
// completes. Daemons do not use this; they co_await on their running io_context.

#include <utility>  // before Asio 1.74's awaitable.hpp, which uses std::exchange without it

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <exception>
#include <optional>
#include <type_traits>

namespace tellus::coord {

namespace detail {
template <class T>
boost::asio::awaitable<void> storeResult(boost::asio::awaitable<T> task, std::optional<T>& out) {
  out.emplace(co_await std::move(task));
}
}  // namespace detail

// Runs `task` on `io` (which must not be running on another thread) until it finishes, while
// also running whatever else is queued on `io` (e.g. ZooKeeper completions). Rethrows the
// coroutine's exception. Works for any T (Asio 1.74's co_spawn alone needs a default-
// constructible result, which Result<T> is not).
template <class T>
T runBlocking(boost::asio::io_context& io, boost::asio::awaitable<T> task) {
  bool done = false;
  std::exception_ptr error;
  auto onDone = [&](std::exception_ptr e) {
    error = e;
    done = true;
  };
  // Completions arrive from ZooKeeper's threads: keep run_one() waiting for them.
  auto guard = boost::asio::make_work_guard(io);
  if (io.stopped()) io.restart();
  if constexpr (std::is_void_v<T>) {
    boost::asio::co_spawn(io, std::move(task), onDone);
    while (!done) io.run_one();
    if (error) std::rethrow_exception(error);
  } else {
    std::optional<T> result;
    boost::asio::co_spawn(io, detail::storeResult(std::move(task), result), onDone);
    while (!done) io.run_one();
    if (error) std::rethrow_exception(error);
    return std::move(*result);
  }
}

}  // namespace tellus::coord
