#pragma once
// Helpers shared by the net integration tests: run coroutines on a test's io_context with a
// hard limit, and wait on real conditions instead of sleeping.

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <exception>
#include <functional>

// Never write co_await inside CHECK/REQUIRE: with GCC 12 the macro's extra mentions of the
// expression (__builtin_constant_p, the do-while condition) make it run twice. Await into a
// local first.

namespace tellus::net::testing {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// Runs the coroutine `makeBody` on `io` until it finishes, then stops the io_context.
// Fails the test if it has not finished within `limit`; rethrows what it threw (REQUIRE).
template <class MakeBody>
void runOnIo(asio::io_context& io, MakeBody makeBody, std::chrono::milliseconds limit = 20s) {
  bool finished = false;
  std::exception_ptr failure;
  asio::co_spawn(io, std::move(makeBody), [&](std::exception_ptr e) {
    finished = true;
    failure = e;
    io.stop();
  });
  io.run_for(limit);
  REQUIRE(finished);
  if (failure) std::rethrow_exception(failure);
}

// Polls `condition` every few milliseconds; false if it is still false after `limit`.
inline asio::awaitable<bool> eventually(std::function<bool()> condition, std::chrono::milliseconds limit = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) co_return false;
    timer.expires_after(2ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
  co_return true;
}

// Lets coroutines wait until `count` tasks called done().
class Countdown {
 public:
  Countdown(const asio::any_io_executor& executor, int count) : remaining_(count), wakeup_(executor) {
    wakeup_.expires_at(asio::steady_timer::time_point::max());
  }
  void done() {
    if (--remaining_ <= 0) wakeup_.cancel();
  }
  int remaining() const { return remaining_; }
  asio::awaitable<void> wait() {
    while (remaining_ > 0) {
      boost::system::error_code ec;
      co_await wakeup_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

 private:
  int remaining_;
  asio::steady_timer wakeup_;
};

// Reads from `socket` until the peer closes it (true) or `limit` passes (false).
inline asio::awaitable<bool> closedByPeer(asio::ip::tcp::socket& socket, std::chrono::milliseconds limit) {
  bool timedOut = false;
  asio::steady_timer timer(co_await asio::this_coro::executor, limit);
  timer.async_wait([&](boost::system::error_code ec) {
    if (ec) return;
    timedOut = true;
    socket.cancel();
  });
  char buffer[4096];
  boost::system::error_code ec;
  while (!ec) {
    co_await socket.async_read_some(asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
  }
  timer.cancel();
  co_return !timedOut && (ec == asio::error::eof || ec == asio::error::connection_reset);
}

// A loopback port with nothing listening on it (bound, then released).
inline std::uint16_t unusedLoopbackPort() {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return acceptor.local_endpoint().port();
}

}  // namespace tellus::net::testing
