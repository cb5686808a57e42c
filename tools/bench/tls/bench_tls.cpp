// The cost of mutual TLS on RPC (issue 11, docs/security.md), on loopback, with the daemons'
// threading (server and client each on one io thread):
//   dispatch: small calls per second, `--in-flight` calls outstanding on one connection;
//   transfer: `--bytes` (default 1 GiB) pulled as 1 MiB responses, 4 in flight, like
//             worker.Fetch's chunks;
//   handshake: new connections per second (connect, handshake, one small call).
// Each measurement runs in plaintext and with TLS 1.3; JSON on stdout.
//
//   build/bin/bench-tls [--seconds 5] [--bytes 1073741824] [--in-flight 64]
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "harness/certs.h"
#include "harness/temp_dir.h"
#include "net/rpc_client.h"
#include "net/rpc_server.h"

namespace asio = boost::asio;
using namespace tellus;
using namespace tellus::net;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kChunkBytes = 1 << 20;  // worker.Fetch's chunk
constexpr int kTransferInFlight = 4;

// The daemons' per-connection call rate limit would measure itself, not the transport.
ServerOptions unlimited(std::shared_ptr<TlsContext> tls) {
  ServerOptions options;
  options.maxCallsPerSecondPerConnection = 0;
  options.tls = std::move(tls);
  return options;
}

struct Options {
  double seconds = 5;
  std::uint64_t bytes = 1ull << 30;
  int inFlight = 64;
};

// A server on its own io thread: "bench.Small" echoes, "bench.Chunk" answers kChunkBytes.
class Server {
 public:
  explicit Server(std::shared_ptr<TlsContext> tls) : server_(io_.get_executor(), unlimited(std::move(tls))) {
    server_.handleRaw("bench.Small", [](std::string body, CallContext) -> asio::awaitable<Result<std::string>> {
      co_return body;
    });
    const auto chunk = std::make_shared<std::string>(kChunkBytes, 'x');
    server_.handleRaw("bench.Chunk", [chunk](std::string, CallContext) -> asio::awaitable<Result<std::string>> {
      co_return *chunk;
    });
    auto port = server_.start(Endpoint{"127.0.0.1", 0});
    if (!port) throw std::runtime_error(port.message());
    endpoint_ = Endpoint{"127.0.0.1", *port};
    work_.emplace(io_.get_executor());
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Server() {
    server_.stop();
    work_.reset();
    io_.stop();
    thread_.join();
  }
  const Endpoint& endpoint() const { return endpoint_; }

 private:
  asio::io_context io_;
  RpcServer server_;
  Endpoint endpoint_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread thread_;
};

template <class Body>
void runClient(Body body) {
  asio::io_context io;
  std::exception_ptr failure;
  asio::co_spawn(io, std::move(body), [&](std::exception_ptr e) { failure = e; });
  io.run();
  if (failure) std::rethrow_exception(failure);
}

void require(const Result<std::string>& r, const char* what) {
  if (!r) throw std::runtime_error(std::string(what) + ": " + r.message());
}

// Small calls per second over one connection.
double dispatchRate(const Endpoint& to, std::shared_ptr<TlsContext> tls, const Options& o) {
  double rate = 0;
  runClient([&]() -> asio::awaitable<void> {
    auto executor = co_await asio::this_coro::executor;
    RpcClient client(executor, to, ClientOptions{.tls = tls});
    require(co_await client.callRaw("bench.Small", "warm-up", std::chrono::seconds(10)), "warm-up");
    std::uint64_t calls = 0;
    int running = o.inFlight;
    const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
    const auto start = Clock::now();
    asio::steady_timer done(executor, Clock::time_point::max());
    for (int i = 0; i < o.inFlight; ++i) {
      asio::co_spawn(
          executor,
          [&]() -> asio::awaitable<void> {
            const std::string body(64, 'p');
            while (Clock::now() < end) {
              require(co_await client.callRaw("bench.Small", body, std::chrono::seconds(10)), "small call");
              ++calls;
            }
            if (--running == 0) done.cancel();
          },
          asio::detached);
    }
    boost::system::error_code ec;
    co_await done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    rate = static_cast<double>(calls) / std::chrono::duration<double>(Clock::now() - start).count();
    client.close();
  });
  return rate;
}

// Seconds to pull `bytes` as kChunkBytes responses.
double transferSeconds(const Endpoint& to, std::shared_ptr<TlsContext> tls, const Options& o) {
  double seconds = 0;
  runClient([&]() -> asio::awaitable<void> {
    auto executor = co_await asio::this_coro::executor;
    RpcClient client(executor, to, ClientOptions{.tls = tls});
    require(co_await client.callRaw("bench.Small", "warm-up", std::chrono::seconds(10)), "warm-up");
    const std::uint64_t chunks = (o.bytes + kChunkBytes - 1) / kChunkBytes;
    std::uint64_t next = 0;
    std::uint64_t received = 0;
    int running = kTransferInFlight;
    asio::steady_timer done(executor, Clock::time_point::max());
    const auto start = Clock::now();
    for (int i = 0; i < kTransferInFlight; ++i) {
      asio::co_spawn(
          executor,
          [&]() -> asio::awaitable<void> {
            while (next < chunks) {
              ++next;
              auto chunk = co_await client.callRaw("bench.Chunk", {}, std::chrono::seconds(30));
              require(chunk, "chunk");
              received += chunk->size();
            }
            if (--running == 0) done.cancel();
          },
          asio::detached);
    }
    boost::system::error_code ec;
    co_await done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (received < o.bytes) throw std::runtime_error("short transfer");
    client.close();
  });
  return seconds;
}

// New connections per second (each: connect, handshake, one small call, close).
double connectionRate(const Endpoint& to, std::shared_ptr<TlsContext> tls, const Options& o) {
  double rate = 0;
  runClient([&]() -> asio::awaitable<void> {
    auto executor = co_await asio::this_coro::executor;
    std::uint64_t connections = 0;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds / 2));
    while (Clock::now() < end) {
      RpcClient client(executor, to, ClientOptions{.tls = tls});
      require(co_await client.callRaw("bench.Small", "hi", std::chrono::seconds(10)), "connection");
      client.close();
      ++connections;
    }
    rate = static_cast<double>(connections) / std::chrono::duration<double>(Clock::now() - start).count();
  });
  return rate;
}

double slowdownPercent(double plain, double tls) { return (plain / tls - 1) * 100; }  // rates

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) o.seconds = std::atof(argv[i + 1]);
    else if (std::strcmp(argv[i], "--bytes") == 0) o.bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--in-flight") == 0) o.inFlight = std::atoi(argv[i + 1]);
    else {
      std::cerr << "usage: bench-tls [--seconds S] [--bytes N] [--in-flight K]\n";
      return 2;
    }
  }
  if (o.seconds <= 0 || o.bytes == 0 || o.inFlight < 1) {
    std::cerr << "bench-tls: --seconds, --bytes and --in-flight must be positive\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  try {
    harness::TempDir dir("bench-tls");
    const auto certs = dir.path() / "certs";
    if (auto made = harness::makeCerts(certs, {"master/bench", "worker/bench/bench-w1"}); !made) {
      throw std::runtime_error(made.message());
    }
    auto load = [&](const std::string& identity) {
      const auto f = harness::certFiles(certs, identity);
      auto tls = TlsContext::load({f.ca.string(), f.cert.string(), f.key.string()});
      if (!tls) throw std::runtime_error(tls.message());
      return *tls;
    };
    const auto serverTls = load("master/bench");
    const auto clientTls = load("worker/bench/bench-w1");

    nlohmann::json out;
    out["loopback"] = true;
    out["threads"] = "server and client on one io thread each";
    double plainRate = 0, tlsRate = 0, plainS = 0, tlsS = 0, plainConn = 0, tlsConn = 0;
    {
      Server plain(nullptr);
      plainRate = dispatchRate(plain.endpoint(), nullptr, o);
      plainS = transferSeconds(plain.endpoint(), nullptr, o);
      plainConn = connectionRate(plain.endpoint(), nullptr, o);
    }
    {
      Server secure(serverTls);
      tlsRate = dispatchRate(secure.endpoint(), clientTls, o);
      tlsS = transferSeconds(secure.endpoint(), clientTls, o);
      tlsConn = connectionRate(secure.endpoint(), clientTls, o);
    }
    const double mib = static_cast<double>(o.bytes) / (1 << 20);
    out["dispatch"] = {{"in_flight", o.inFlight},
                       {"plaintext_calls_per_s", plainRate},
                       {"tls_calls_per_s", tlsRate},
                       {"tls_slower_percent", slowdownPercent(plainRate, tlsRate)}};
    out["transfer"] = {{"bytes", o.bytes},
                       {"chunk_bytes", kChunkBytes},
                       {"plaintext_s", plainS},
                       {"tls_s", tlsS},
                       {"plaintext_mib_per_s", mib / plainS},
                       {"tls_mib_per_s", mib / tlsS},
                       {"tls_slower_percent", (tlsS / plainS - 1) * 100}};
    out["new_connections"] = {{"plaintext_per_s", plainConn},
                              {"tls_per_s", tlsConn},
                              {"tls_slower_percent", slowdownPercent(plainConn, tlsConn)}};
    std::cout << out.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "bench-tls: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
