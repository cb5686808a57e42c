// Typed RPC method tags: they match the proto services, keep the historical wire names, and a
// typed call round-trips over a real loopback server.
#include <google/protobuf/descriptor.h>

#include <cctype>
#include <set>
#include <string>
#include <tuple>

#include "../../integration/net/net_test_util.h"
#include "net/methods.h"
#include "net/rpc_client.h"
#include "net/rpc_server.h"
#include "rpc.pb.h"

namespace tellus::net {
namespace {

using namespace testing;

struct Test {
  TELLUS_RPC_METHOD(Test, Echo);
  TELLUS_RPC_METHOD(Test, Gate);
};

std::string lowerCase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The proto rpc M names, with M's types and wire name; adds its full name to `seen`.
template <RpcMethod M>
void checkAgainstDescriptor(std::set<std::string>& seen) {
  INFO(M::kWireName);
  const auto* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("tellus.pb." + std::string(M::kService));
  REQUIRE(service != nullptr);
  const auto* method = service->FindMethodByName(std::string(M::kMethod));
  REQUIRE(method != nullptr);
  CHECK(method->input_type() == M::Request::descriptor());
  CHECK(method->output_type() == M::Response::descriptor());
  CHECK(std::string(M::kWireName) == lowerCase(service->name()) + "." + method->name());
  CHECK(seen.insert(method->full_name()).second);
}

TEST_CASE("every method tag matches its proto rpc, and every rpc has a tag", "[unit][net]") {
  std::set<std::string> tagged;
  std::apply([&](auto... tag) { (checkAgainstDescriptor<decltype(tag)>(tagged), ...); }, rpc::AllMethods{});
  const auto* file = pb::SubmitRequest::descriptor()->file();
  REQUIRE(file->service_count() == 3);
  std::size_t methods = 0;
  for (int s = 0; s < file->service_count(); ++s) {
    for (int m = 0; m < file->service(s)->method_count(); ++m) {
      ++methods;
      INFO(file->service(s)->method(m)->full_name());
      CHECK(tagged.count(file->service(s)->method(m)->full_name()) == 1);
    }
  }
  CHECK(methods == tagged.size());
}

TEST_CASE("wire names are the ones every Tellus version has sent", "[unit][net]") {
  // Mixed versions keep talking only while these strings stay.
  const std::set<std::string_view> historical = {
      "master.Submit",   "master.StartJm",        "master.Status",    "master.List",       "master.Sites",
      "master.Kill",     "master.Result",         "master.Put",       "master.RegisterWorker",
      "master.Heartbeat", "master.JmUpdate",      "worker.LaunchJm",  "worker.RunTask",    "worker.Fetch",
      "worker.KillJobTasks", "worker.WriteDataset", "jm.Steal",       "jm.ContainerUsage", "jm.Grants",
      // Added later (issue 15: `tellus logs`).
      "master.Logs",     "worker.ReadLog",
      // Added later (issue 12: direct heartbeats between a job's JMs).
      "jm.Heartbeat",
      // Added later (issue 12: copies of finished outputs on a second worker).
      "worker.Replicate"};
  std::set<std::string_view> current;
  std::apply([&](auto... tag) { (current.insert(decltype(tag)::kWireName), ...); }, rpc::AllMethods{});
  CHECK(current == historical);
  static_assert(rpc::Jm::Steal::kWireName == "jm.Steal");
  static_assert(std::is_same_v<rpc::Master::Heartbeat::Request, pb::WorkerHeartbeat>);
  static_assert(std::is_same_v<rpc::Jm::Grants::Response, pb::Empty>);
}

TEST_CASE("a typed call round-trips over loopback under the method's wire name", "[unit][net]") {
  asio::io_context io;
  RpcServer server(io.get_executor());
  server.handle<Test::Echo>([](const pb::TestEchoRequest& request) -> Result<pb::TestEchoResponse> {
    pb::TestEchoResponse response;
    response.set_text("echo:" + request.text());
    return response;
  });
  auto port = server.start(Endpoint{"127.0.0.1", 0});
  REQUIRE(port.isOk());
  RpcClient client(io.get_executor(), Endpoint{"127.0.0.1", *port});
  pb::TestEchoRequest request;
  request.set_text("hi");
  runOnIo(io, [&]() -> asio::awaitable<void> {
    auto typed = co_await client.call<Test::Echo>(request, 2s);
    REQUIRE(typed.isOk());
    CHECK(typed->text() == "echo:hi");
    // The frame carries the plain method name: an untyped caller (an older version) reaches
    // the same handler.
    auto raw = co_await client.callRaw("test.Echo", request.SerializeAsString(), 2s);
    REQUIRE(raw.isOk());
    pb::TestEchoResponse parsed;
    REQUIRE(parsed.ParseFromString(*raw));
    CHECK(parsed.text() == "echo:hi");
  });
}

TEST_CASE("a method the server does not serve is a clear error", "[unit][net]") {
  asio::io_context io;
  RpcServer server(io.get_executor());
  server.handle<Test::Echo>([](const pb::TestEchoRequest&) -> Result<pb::TestEchoResponse> { return pb::TestEchoResponse(); });
  auto port = server.start(Endpoint{"127.0.0.1", 0});
  REQUIRE(port.isOk());
  RpcClient client(io.get_executor(), Endpoint{"127.0.0.1", *port});
  runOnIo(io, [&]() -> asio::awaitable<void> {
    // Declared in the proto but not registered here (e.g. a peer of another version).
    auto unserved = co_await client.call<Test::Gate>(pb::TestEchoRequest(), 2s);
    REQUIRE_FALSE(unserved.isOk());
    CHECK(unserved.error().code == ErrorCode::kNotFound);
    CHECK(unserved.message() == "unknown RPC method 'test.Gate'");
    auto misspelled = co_await client.callRaw("test.echo", "", 2s);
    REQUIRE_FALSE(misspelled.isOk());
    CHECK(misspelled.message() == "unknown RPC method 'test.echo'");
  });
}

}  // namespace
}  // namespace tellus::net
