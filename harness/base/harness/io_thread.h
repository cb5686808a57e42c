#pragma once
// An io_context running on its own thread, so a test's main thread can drive coroutines that
// live on a daemon-like single-threaded executor and then wait with eventually().
//
// Everything that touches objects bound to this executor (a ZkClient, its watches) must run
// on it: use run() for coroutines and call() for plain functions.

#include <utility>  // before Asio 1.74's awaitable.hpp, which uses std::exchange without it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <exception>
#include <future>
#include <optional>
#include <thread>
#include <type_traits>

namespace tellus::harness {

class IoThread {
 public:
  IoThread() : guard_(boost::asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}
  ~IoThread() {
    guard_.reset();
    io_.stop();
    thread_.join();
  }
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  boost::asio::io_context& context() { return io_; }
  boost::asio::any_io_executor executor() { return io_.get_executor(); }

  // Runs the coroutine on the io thread and blocks until it finishes (rethrows its exception).
  template <class T>
  T run(boost::asio::awaitable<T> task) {
    std::promise<T> promise;
    auto future = promise.get_future();
    // Asio 1.74's co_spawn needs a default-constructible result type (Result<T> is not), so
    // the value travels through the promise and co_spawn only sees void.
    boost::asio::co_spawn(io_, deliver(std::move(task), promise), [&promise](std::exception_ptr e) {
      if (e) promise.set_exception(e);
    });
    return future.get();
  }

  // Runs `fn` on the io thread and blocks until it returns.
  template <class Fn>
  auto call(Fn fn) -> std::invoke_result_t<Fn> {
    using R = std::invoke_result_t<Fn>;
    std::promise<R> promise;
    auto future = promise.get_future();
    boost::asio::post(io_, [&] {
      try {
        if constexpr (std::is_void_v<R>) {
          fn();
          promise.set_value();
        } else {
          promise.set_value(fn());
        }
      } catch (...) {
        promise.set_exception(std::current_exception());
      }
    });
    return future.get();
  }

 private:
  template <class T>
  static boost::asio::awaitable<void> deliver(boost::asio::awaitable<T> task, std::promise<T>& promise) {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(task);
      promise.set_value();
    } else {
      promise.set_value(co_await std::move(task));
    }
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

}  // namespace tellus::harness
