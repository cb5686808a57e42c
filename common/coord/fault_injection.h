#pragma once
// A Coordinator that forwards to another one and injects connection-level failures
// (ClickHouse ZooKeeperWithFaultInjection): before a request is sent (nothing applied) or
// after it was applied (the reply is lost). Code above the coordinator — elections, taskMap
// compare-and-set, job state writers — must survive both; tests prove it with this wrapper.
//
// Faults apply to requests (create, get, set, ...), not to watches, session events or close().

#include <deque>
#include <random>

#include "coord/coordinator.h"

namespace tellus::coord {

struct FaultOptions {
  double failBeforeProbability = 0.0;  // per request
  double failAfterProbability = 0.0;   // per request that reached the inner coordinator
  uint64_t seed = 1;                   // deterministic fault sequence
};

class FaultInjectingCoordinator final : public Coordinator {
 public:
  enum class Fault { kBefore, kAfter };

  FaultInjectingCoordinator(std::shared_ptr<Coordinator> inner, FaultOptions options = {});

  // A scripted fault for the next request named `operation` ("create", "set", "multi", ...;
  // "" for any). While scripted faults are pending, no random ones are injected.
  void injectNext(Fault fault, std::string operation = "") { scripted_.push_back({fault, std::move(operation)}); }
  // The next multi is applied through `other` (another session) and its reply lost: a try that
  // landed under a session the retry no longer has (it expired while ZooKeeper was away).
  void injectNextMultiVia(std::shared_ptr<Coordinator> other) { multiVia_ = std::move(other); }
  void setOptions(const FaultOptions& options);
  uint64_t injectedFaults() const { return injected_; }

  boost::asio::any_io_executor executor() const override { return inner_->executor(); }
  SessionState state() const override { return inner_->state(); }
  int64_t sessionId() const override { return inner_->sessionId(); }
  Subscription onSessionEvent(SessionCallback callback) override;
  // Not a request: never fails.
  void close() override { inner_->close(); }
  boost::asio::awaitable<Status> waitConnected(std::chrono::milliseconds timeout) override;

  boost::asio::awaitable<Result<std::string>> create(std::string path, std::string data, CreateMode mode) override;
  boost::asio::awaitable<Status> ensurePath(std::string path) override;
  boost::asio::awaitable<Result<NodeData>> get(std::string path) override;
  boost::asio::awaitable<Result<NodeStat>> set(std::string path, std::string data, int32_t expectedVersion) override;
  boost::asio::awaitable<Status> remove(std::string path, int32_t expectedVersion = -1) override;
  boost::asio::awaitable<Status> removeRecursive(std::string path) override;
  boost::asio::awaitable<Result<std::vector<std::string>>> children(std::string path) override;
  boost::asio::awaitable<Result<std::optional<NodeStat>>> exists(std::string path) override;
  boost::asio::awaitable<Result<std::vector<ZkOpResult>>> multi(std::vector<ZkOp> ops) override;

  Result<Subscription> watchData(std::string path, DataCallback callback) override;
  using Coordinator::watchChildren;
  Result<Subscription> watchChildren(std::string path, ChildrenCallback callback, CoalesceFn coalesce) override;

 private:
  std::optional<Error> maybeFail(Fault stage, const char* operation, const std::string& path);

  std::shared_ptr<Coordinator> inner_;
  FaultOptions options_;
  std::mt19937_64 rng_;
  struct Scripted {
    Fault stage;
    std::string operation;
  };
  std::deque<Scripted> scripted_;
  std::shared_ptr<Coordinator> multiVia_;
  uint64_t injected_ = 0;
};

}  // namespace tellus::coord
