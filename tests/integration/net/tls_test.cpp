// Mutual TLS over loopback (issue 11): who may connect (a certificate from the cluster CA,
// within the handshake deadline), what the handler learns (the caller's identity), and which
// roles may call which daemon method. Certificates come from scripts/make-certs.
#include <boost/asio/connect.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <sstream>

#include "harness/certs.h"
#include "harness/temp_dir.h"
#include "net/methods.h"
#include "net/rpc_client.h"
#include "net/rpc_server.h"
#include "net_test_util.h"
#include "rpc.pb.h"

namespace tellus::net {
namespace {

using namespace testing;
using asio::ip::tcp;
using pb::TestEchoRequest;
using pb::TestEchoResponse;

struct Test {
  TELLUS_RPC_METHOD(Test, Echo);  // any authenticated peer
};

// One cluster CA with a master, a worker and a client, and a second CA ("another cluster").
class Certs {
 public:
  Certs() : dir_("tls-test") {
    REQUIRE(harness::makeCerts(dir_.path() / "ours", {"master/us-east", "worker/us-east/us-east-w1", "client/alice"})
                .isOk());
    REQUIRE(harness::makeCerts(dir_.path() / "theirs", {"client/mallory"}).isOk());
  }
  std::shared_ptr<TlsContext> ours(const std::string& identity) const { return load(dir_.path() / "ours", identity); }
  std::shared_ptr<TlsContext> theirs(const std::string& identity) const {
    return load(dir_.path() / "theirs", identity);
  }
  std::filesystem::path caFile() const { return dir_.path() / "ours" / "ca.pem"; }

 private:
  static std::shared_ptr<TlsContext> load(const std::filesystem::path& dir, const std::string& identity) {
    const auto files = harness::certFiles(dir, identity);
    auto context = TlsContext::load({files.ca.string(), files.cert.string(), files.key.string()});
    INFO(identity << ": " << (context ? std::string() : context.message()));
    REQUIRE(context.isOk());
    return *context;
  }
  harness::TempDir dir_;
};

const Certs& certs() {
  static const Certs shared;  // issuing keys costs ~1 s: once per binary
  return shared;
}

// Captures the process's log lines for the life of the object.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(lines_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  bool contains(const std::string& text) const { return lines_.str().find(text) != std::string::npos; }
  std::string text() const { return lines_.str(); }

 private:
  std::ostringstream lines_;
  std::shared_ptr<spdlog::logger> previous_;
};

// A TLS server as master/us-east with Echo (any role), master.Submit and worker.RunTask (the
// daemons' role rules; the handlers only answer).
class TlsServer {
 public:
  TlsServer(asio::io_context& io, std::shared_ptr<TlsContext> tls,
            std::chrono::milliseconds handshakeTimeout = std::chrono::milliseconds(5000))
      : server_(io.get_executor(), ServerOptions{.tls = std::move(tls), .handshakeTimeout = handshakeTimeout}) {
    server_.handle<Test::Echo>([this](TestEchoRequest request, CallContext context) -> asio::awaitable<Result<TestEchoResponse>> {
      lastIdentity_ = context.identity;
      TestEchoResponse response;
      response.set_text(request.text());
      co_return response;
    });
    server_.handle<rpc::Master::Submit>([](const pb::SubmitRequest&) -> Result<pb::SubmitResponse> {
      return pb::SubmitResponse();
    });
    server_.handle<rpc::Worker::RunTask>([](const pb::RunTaskRequest&) -> Result<pb::RunTaskResponse> {
      return pb::RunTaskResponse();
    });
    auto bound = server_.start(Endpoint{"127.0.0.1", 0});
    REQUIRE(bound.isOk());
    endpoint_ = Endpoint{"127.0.0.1", *bound};
  }
  const Endpoint& endpoint() const { return endpoint_; }
  const std::optional<PeerIdentity>& lastIdentity() const { return lastIdentity_; }
  RpcServer& server() { return server_; }

 private:
  RpcServer server_;
  Endpoint endpoint_;
  std::optional<PeerIdentity> lastIdentity_;
};

TestEchoRequest echo(std::string text) {
  TestEchoRequest request;
  request.set_text(std::move(text));
  return request;
}

TEST_CASE("mutual TLS: a peer with a certificate from the cluster CA calls, and the handler knows who it is",
          "[integration][net][tls]") {
  asio::io_context io;
  TlsServer server(io, certs().ours("master/us-east"));
  RpcClient client(io.get_executor(), server.endpoint(), ClientOptions{.tls = certs().ours("client/alice")});
  runOnIo(io, [&]() -> asio::awaitable<void> {
    auto echoed = co_await client.call<Test::Echo>(echo("hello"), 5s);
    INFO((echoed.isOk() ? std::string() : echoed.message()));
    REQUIRE(echoed.isOk());
    CHECK(echoed->text() == "hello");
    REQUIRE(server.lastIdentity().has_value());
    CHECK(server.lastIdentity()->toString() == "client/alice");
    // A large body crosses many TLS records intact.
    auto big = echo(std::string(3 * 1024 * 1024 + 7, 'x'));
    auto large = co_await client.call<Test::Echo>(big, 10s);
    REQUIRE(large.isOk());
    CHECK(large->text() == big.text());
  });
}

TEST_CASE("a peer without a certificate is refused during the handshake, with a log line",
          "[integration][net][tls]") {
  LogCapture log;
  asio::io_context io;
  TlsServer server(io, certs().ours("master/us-east"));

  SECTION("a TLS client that presents no certificate") {
    runOnIo(io, [&]() -> asio::awaitable<void> {
      asio::ssl::context bare(asio::ssl::context::tls_client);
      bare.load_verify_file(certs().caFile().string());
      bare.set_verify_mode(asio::ssl::verify_peer);
      asio::ssl::stream<tcp::socket> stream(co_await asio::this_coro::executor, bare);
      boost::system::error_code ec;
      co_await stream.next_layer().async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.endpoint().port),
                                                 asio::redirect_error(asio::use_awaitable, ec));
      REQUIRE_FALSE(ec);
      co_await stream.async_handshake(asio::ssl::stream_base::client, asio::redirect_error(asio::use_awaitable, ec));
      // TLS 1.3: the client finishes first; the server's refusal arrives on the next read.
      char byte = 0;
      if (!ec) co_await stream.async_read_some(asio::buffer(&byte, 1), asio::redirect_error(asio::use_awaitable, ec));
      CHECK(ec);
      const bool logged = co_await eventually([&] { return log.contains("refused connection"); });
      INFO(log.text());
      CHECK(logged);
      CHECK(log.contains("certificate"));
    });
  }

  SECTION("a plaintext client") {
    RpcClient plain(io.get_executor(), server.endpoint());
    runOnIo(io, [&]() -> asio::awaitable<void> {
      auto echoed = co_await plain.call<Test::Echo>(echo("hi"), 2s);
      REQUIRE_FALSE(echoed.isOk());
      CHECK((echoed.error().code == ErrorCode::kUnavailable || echoed.error().code == ErrorCode::kDeadlineExceeded));
      const bool logged = co_await eventually([&] { return log.contains("refused connection"); });
      INFO(log.text());
      CHECK(logged);
      CHECK(server.lastIdentity() == std::nullopt);  // the handler never ran
    });
  }
}

TEST_CASE("a certificate from another CA is refused on both sides", "[integration][net][tls]") {
  LogCapture log;
  asio::io_context io;
  TlsServer server(io, certs().ours("master/us-east"));
  RpcClient stranger(io.get_executor(), server.endpoint(), ClientOptions{.tls = certs().theirs("client/mallory")});
  runOnIo(io, [&]() -> asio::awaitable<void> {
    auto echoed = co_await stranger.call<Test::Echo>(echo("hi"), 5s);
    REQUIRE_FALSE(echoed.isOk());
    // The client cannot verify our server either: it refuses before sending anything.
    CHECK(echoed.error().code == ErrorCode::kPermissionDenied);
    CHECK_THAT(echoed.message(), Catch::Contains("certificate verify failed"));
    const bool logged = co_await eventually([&] { return log.contains("refused connection"); });
    INFO(log.text());
    CHECK(logged);
    CHECK(server.lastIdentity() == std::nullopt);
  });
}

TEST_CASE("a TLS server refuses a peer that does not finish the handshake in time", "[integration][net][tls]") {
  LogCapture log;
  asio::io_context io;
  TlsServer server(io, certs().ours("master/us-east"), std::chrono::milliseconds(300));
  runOnIo(io, [&]() -> asio::awaitable<void> {
    tcp::socket socket(co_await asio::this_coro::executor);
    co_await socket.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.endpoint().port),
                                  asio::use_awaitable);
    // Says nothing: the server closes the connection at its handshake deadline.
    const bool closed = co_await closedByPeer(socket, 10s);
    CHECK(closed);
    const bool logged = co_await eventually([&] { return log.contains("timed out"); });
    INFO(log.text());
    CHECK(logged);
    CHECK(server.server().connectionCount() == 0);
  });
}

TEST_CASE("each daemon method admits only its callers' roles", "[integration][net][tls]") {
  LogCapture log;
  asio::io_context io;
  TlsServer server(io, certs().ours("master/us-east"));
  RpcClient asWorker(io.get_executor(), server.endpoint(), ClientOptions{.tls = certs().ours("worker/us-east/us-east-w1")});
  RpcClient asClient(io.get_executor(), server.endpoint(), ClientOptions{.tls = certs().ours("client/alice")});
  runOnIo(io, [&]() -> asio::awaitable<void> {
    // A worker cannot submit jobs.
    auto submitted = co_await asWorker.call<rpc::Master::Submit>(pb::SubmitRequest(), 5s);
    REQUIRE_FALSE(submitted.isOk());
    CHECK(submitted.error().code == ErrorCode::kPermissionDenied);
    CHECK_THAT(submitted.message(), Catch::Contains("'master.Submit' may be called by client only"));
    CHECK_THAT(submitted.message(), Catch::Contains("worker/us-east/us-east-w1"));
    // A client cannot run tasks.
    auto ran = co_await asClient.call<rpc::Worker::RunTask>(pb::RunTaskRequest(), 5s);
    REQUIRE_FALSE(ran.isOk());
    CHECK(ran.error().code == ErrorCode::kPermissionDenied);
    CHECK_THAT(ran.message(), Catch::Contains("client/alice"));
    // The same peers may call what their roles allow, on the same connections.
    auto clientSubmits = co_await asClient.call<rpc::Master::Submit>(pb::SubmitRequest(), 5s);
    CHECK(clientSubmits.isOk());
    auto workerRuns = co_await asWorker.call<rpc::Worker::RunTask>(pb::RunTaskRequest(), 5s);
    CHECK(workerRuns.isOk());
    CHECK(log.contains("refused call"));
  });
}

TEST_CASE("a TLS client does not talk to a plaintext server", "[integration][net][tls]") {
  asio::io_context io;
  RpcServer plain(io.get_executor());
  plain.handle<Test::Echo>([](const TestEchoRequest& r) -> Result<TestEchoResponse> {
    TestEchoResponse response;
    response.set_text(r.text());
    return response;
  });
  auto port = plain.start(Endpoint{"127.0.0.1", 0});
  REQUIRE(port.isOk());
  RpcClient client(io.get_executor(), Endpoint{"127.0.0.1", *port}, ClientOptions{.tls = certs().ours("client/alice")});
  runOnIo(io, [&]() -> asio::awaitable<void> {
    auto echoed = co_await client.call<Test::Echo>(echo("hi"), 3s);
    REQUIRE_FALSE(echoed.isOk());
  });
}

TEST_CASE("TLS files that do not fit together are refused at load with the file named", "[integration][net][tls]") {
  harness::TempDir dir("tls-load");
  REQUIRE(harness::makeCerts(dir.path() / "a", {"client/alice"}).isOk());
  REQUIRE(harness::makeCerts(dir.path() / "b", {"client/bob"}).isOk());
  const auto a = harness::certFiles(dir.path() / "a", "client/alice");
  const auto b = harness::certFiles(dir.path() / "b", "client/bob");
  auto otherCa = TlsContext::load({b.ca.string(), a.cert.string(), a.key.string()});
  REQUIRE_FALSE(otherCa.isOk());
  CHECK_THAT(otherCa.message(), Catch::Contains("tls.cert_file"));
  auto otherKey = TlsContext::load({a.ca.string(), a.cert.string(), b.key.string()});
  REQUIRE_FALSE(otherKey.isOk());
  CHECK_THAT(otherKey.message(), Catch::Contains("tls.key_file"));
  auto missing = TlsContext::load({a.ca.string(), (dir.path() / "nope.pem").string(), a.key.string()});
  REQUIRE_FALSE(missing.isOk());
  CHECK_THAT(missing.message(), Catch::Contains("nope.pem"));
  auto good = TlsContext::load({a.ca.string(), a.cert.string(), a.key.string()});
  REQUIRE(good.isOk());
  CHECK((*good)->identity().toString() == "client/alice");
}

}  // namespace
}  // namespace tellus::net
