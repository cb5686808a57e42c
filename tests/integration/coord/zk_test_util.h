#pragma once
// Shared by the coord integration tests: a ZkClient bound to an IoThread, and a recorder of
// session events that the test thread can inspect.

#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <vector>

#include "coord/zk_client.h"
#include "harness/eventually.h"
#include "harness/io_thread.h"

namespace tellus::coord::testing {

using namespace std::chrono_literals;

// Records session events (written on the io thread, read on the test thread).
class EventLog {
 public:
  void add(SessionEvent e) {
    std::lock_guard lock(mutex_);
    events_.push_back(e);
  }
  std::vector<SessionEvent> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }
  size_t count(SessionEvent e) const {
    std::lock_guard lock(mutex_);
    return static_cast<size_t>(std::count(events_.begin(), events_.end(), e));
  }

 private:
  mutable std::mutex mutex_;
  std::vector<SessionEvent> events_;
};

// Owns a client on `io`; closes and releases it on the io thread.
class TestClient {
 public:
  TestClient(harness::IoThread& io, SessionOptions options) : io_(io) {
    auto created = io_.call([&] { return ZkClient::create(io_.executor(), options); });
    REQUIRE(created.isOk());
    client_ = *created;
    subscription_ = io_.call([&] { return client_->onSessionEvent([this](SessionEvent e) { log_.add(e); }); });
  }
  ~TestClient() { release(); }
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  // Closes the client (its session ends, its ephemeral nodes vanish) and drops it.
  void release() {
    if (!client_) return;
    io_.call([&] {
      subscription_.cancel();
      client_->close();
      client_.reset();
    });
  }

  ZkClient& operator*() { return *client_; }
  ZkClient* operator->() { return client_.get(); }
  std::shared_ptr<ZkClient> shared() { return client_; }
  const EventLog& log() const { return log_; }

  // Runs a coroutine of the client on the io thread and waits for its result.
  template <class T>
  T run(boost::asio::awaitable<T> task) {
    return io_.run(std::move(task));
  }
  template <class Fn>
  auto call(Fn fn) {
    return io_.call(std::move(fn));
  }

 private:
  harness::IoThread& io_;
  std::shared_ptr<ZkClient> client_;
  Subscription subscription_;
  EventLog log_;
};

inline SessionOptions options(const std::string& connectString, std::string chroot = "/tellus-test",
                              std::chrono::milliseconds sessionTimeout = 4000ms) {
  SessionOptions o;
  o.connectString = connectString;
  o.chroot = std::move(chroot);
  o.sessionTimeout = sessionTimeout;
  return o;
}

}  // namespace tellus::coord::testing
