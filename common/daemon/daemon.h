#pragma once
// Plumbing shared by the three daemons (master, worker, JM): one io_context run by one
// thread, coroutines spawned on it whose failures are logged, shutdown on SIGTERM/SIGINT, and
// protobuf decoding with a clear error. What a daemon serves and calls with (RPC, clients,
// coordinator, HTTP, ordered stop) is daemon/server.h.

#include <utility>  // Boost 1.74's awaitable.hpp needs std::exchange

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdio>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "util/log.h"
#include "util/result.h"

namespace tellus::daemon {

// The event loop of one daemon process: one io_context, run by one thread.
class Runtime {
 public:
  boost::asio::io_context& io() { return io_; }

  // Starts a coroutine. An exception escaping it is a bug: it is logged with `what` and the
  // loop is stopped so the daemon exits non-zero (its supervisor restarts it) instead of
  // running on half-broken. Cancellation (operation_aborted) is a normal end.
  void spawn(boost::asio::awaitable<void> task, std::string what);

  // Coroutines started by spawn() that have not returned yet.
  std::size_t running() const { return running_; }

  // Runs the loop on the calling thread until SIGTERM/SIGINT (then calls onSignal, which must
  // stop the daemon: see Server::stop) or until it runs out of work. A second signal ends the
  // loop at once. Returns the process exit code: 0, or 1 if a spawned coroutine failed.
  int run(std::function<void()> onSignal);

  // Ends run() once every spawned coroutine has returned (the daemon has cancelled their
  // work), or after `grace` if some have not; those are destroyed with the io_context.
  void shutdownWhenIdle(std::chrono::milliseconds grace);
  // Ends run() now; suspended coroutines are destroyed with the io_context.
  void shutdown() { io_.stop(); }
  // Makes run() return 1: the daemon could not do its job (its supervisor acts on that).
  void fail() { failed_ = true; }

 private:
  void waitForSignal(std::function<void()> onSignal);

  boost::asio::io_context io_{1};
  std::size_t running_ = 0;
  bool shutdownWhenIdle_ = false;
  std::optional<boost::asio::steady_timer> graceTimer_;
  std::optional<boost::asio::signal_set> signals_;
  bool failed_ = false;
};

// The body of every daemon's main: load the config (exit 2 with the loader's one-line error),
// start logging as `logName(config)`, build the daemon on a Runtime, start it (exit 1 on
// failure), and run until SIGTERM/SIGINT, when it is stopped (its Server's ordered stop ends
// the loop once the daemon's coroutines have returned).
template <class Daemon, class Config, class LoadFn, class NameFn>
int runDaemon(const char* program, const std::string& configPath, LoadFn load, NameFn logName) {
  Result<Config> config = load(configPath);
  if (!config) {
    std::fprintf(stderr, "%s: %s\n", program, config.message().c_str());
    return 2;
  }
  initLogging(logName(*config), config->log_level,
              config->log_format == "json" ? LogFormat::kJson : LogFormat::kText);
  Runtime runtime;
  Daemon daemon(runtime, *config);
  if (auto st = daemon.start(); !st) {
    spdlog::critical("cannot start: {}", st.message());
    return 1;
  }
  return runtime.run([&] { daemon.stop(); });
}

// Waits on the current coroutine's executor (a timer, not a thread sleep).
boost::asio::awaitable<void> sleepFor(std::chrono::milliseconds d);

// Milliseconds since the Unix epoch (for timestamps shown to users, never for timing).
int64_t nowUnixMs();

// Parses serialized protobuf `bytes` as M; the error names `what` (e.g. a znode path).
template <class M>
Result<M> parseProto(const std::string& bytes, std::string_view what) {
  M m;
  if (!m.ParseFromString(bytes)) {
    return makeError(ErrorCode::kInternal, "malformed " + m.GetTypeName() + " in " + std::string(what));
  }
  return m;
}

}  // namespace tellus::daemon
