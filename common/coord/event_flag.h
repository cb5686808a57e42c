#pragma once
// A level-triggered wake-up flag for coroutines on one executor: set() wakes every waiter;
// a waiter that arrives after set() returns at once until reset(). Used to park a coroutine
// until "something changed" (a session event, a watch) or a timeout, without polling.
// Not thread-safe: use it on its executor only, and keep it alive while coroutines wait on
// it (own it through a shared_ptr they hold).

#include <utility>  // before Asio 1.74's awaitable.hpp, which uses std::exchange without it

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <list>
#include <memory>

namespace tellus::coord {

class EventFlag {
 public:
  explicit EventFlag(boost::asio::any_io_executor executor) : executor_(std::move(executor)) {}

  void set() {
    set_ = true;
    for (auto& waiter : waiters_) waiter->cancel();
  }
  void reset() { set_ = false; }
  bool isSet() const { return set_; }

  // Returns when the flag is set or `timeout` has passed; true if set.
  boost::asio::awaitable<bool> waitFor(std::chrono::milliseconds timeout) {
    if (set_) co_return true;
    auto timer = std::make_shared<boost::asio::steady_timer>(executor_, timeout);
    auto it = waiters_.insert(waiters_.end(), timer);
    boost::system::error_code ec;
    co_await timer->async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    waiters_.erase(it);
    co_return set_;
  }
  // Returns when the flag is set.
  boost::asio::awaitable<void> wait() {
    for (;;) {
      const bool set = co_await waitFor(std::chrono::hours(24));
      if (set) co_return;
    }
  }

 private:
  boost::asio::any_io_executor executor_;
  bool set_ = false;
  std::list<std::shared_ptr<boost::asio::steady_timer>> waiters_;
};

}  // namespace tellus::coord
