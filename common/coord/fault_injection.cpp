#include "coord/fault_injection.h"

#include <fmt/format.h>

namespace tellus::coord {

using boost::asio::awaitable;

FaultInjectingCoordinator::FaultInjectingCoordinator(std::shared_ptr<Coordinator> inner, FaultOptions options)
    : inner_(std::move(inner)), options_(options), rng_(options.seed) {}

void FaultInjectingCoordinator::setOptions(const FaultOptions& options) {
  options_ = options;
  rng_.seed(options.seed);
}

std::optional<Error> FaultInjectingCoordinator::maybeFail(Fault stage, const char* operation, const std::string& path) {
  bool fail = false;
  for (auto it = scripted_.begin(); it != scripted_.end(); ++it) {
    if (it->stage == stage && (it->operation.empty() || it->operation == operation)) {
      scripted_.erase(it);
      fail = true;
      break;
    }
  }
  if (!fail && scripted_.empty()) {
    double p = stage == Fault::kBefore ? options_.failBeforeProbability : options_.failAfterProbability;
    fail = p > 0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p;
  }
  if (!fail) return std::nullopt;
  ++injected_;
  std::string where = std::string(operation) + " " + path;
  if (stage == Fault::kBefore) {
    return Error{ErrorCode::kUnavailable, where + ": connection to ZooKeeper lost (injected, before sending)"};
  }
  return Error{ErrorCode::kUnavailable,
               where +
                   ": connection to ZooKeeper lost (injected, after applying); the write may or may not "
                   "have been applied"};
}

Subscription FaultInjectingCoordinator::onSessionEvent(SessionCallback callback) {
  return inner_->onSessionEvent(std::move(callback));
}

awaitable<Status> FaultInjectingCoordinator::waitConnected(std::chrono::milliseconds timeout) {
  Status st = co_await inner_->waitConnected(timeout);
  co_return st;
}

// Each request: maybe fail before forwarding, forward, maybe drop the reply after.
awaitable<Result<std::string>> FaultInjectingCoordinator::create(std::string path, std::string data, CreateMode mode) {
  if (auto e = maybeFail(Fault::kBefore, "create", path)) co_return *e;
  auto result = co_await inner_->create(path, std::move(data), mode);
  if (auto e = maybeFail(Fault::kAfter, "create", path)) co_return *e;
  co_return result;
}

awaitable<Status> FaultInjectingCoordinator::ensurePath(std::string path) {
  if (auto e = maybeFail(Fault::kBefore, "ensurePath", path)) co_return Status(*e);
  Status st = co_await inner_->ensurePath(path);
  if (auto e = maybeFail(Fault::kAfter, "ensurePath", path)) co_return Status(*e);
  co_return st;
}

awaitable<Result<NodeData>> FaultInjectingCoordinator::get(std::string path) {
  if (auto e = maybeFail(Fault::kBefore, "get", path)) co_return *e;
  auto result = co_await inner_->get(path);
  if (auto e = maybeFail(Fault::kAfter, "get", path)) co_return *e;
  co_return result;
}

awaitable<Result<NodeStat>> FaultInjectingCoordinator::set(std::string path, std::string data,
                                                           int32_t expectedVersion) {
  if (auto e = maybeFail(Fault::kBefore, "set", path)) co_return *e;
  auto result = co_await inner_->set(path, std::move(data), expectedVersion);
  if (auto e = maybeFail(Fault::kAfter, "set", path)) co_return *e;
  co_return result;
}

awaitable<Status> FaultInjectingCoordinator::remove(std::string path, int32_t expectedVersion) {
  if (auto e = maybeFail(Fault::kBefore, "remove", path)) co_return Status(*e);
  Status st = co_await inner_->remove(path, expectedVersion);
  if (auto e = maybeFail(Fault::kAfter, "remove", path)) co_return Status(*e);
  co_return st;
}

awaitable<Status> FaultInjectingCoordinator::removeRecursive(std::string path) {
  if (auto e = maybeFail(Fault::kBefore, "removeRecursive", path)) co_return Status(*e);
  Status st = co_await inner_->removeRecursive(path);
  if (auto e = maybeFail(Fault::kAfter, "removeRecursive", path)) co_return Status(*e);
  co_return st;
}

awaitable<Result<std::vector<std::string>>> FaultInjectingCoordinator::children(std::string path) {
  if (auto e = maybeFail(Fault::kBefore, "children", path)) co_return *e;
  auto result = co_await inner_->children(path);
  if (auto e = maybeFail(Fault::kAfter, "children", path)) co_return *e;
  co_return result;
}

awaitable<Result<std::optional<NodeStat>>> FaultInjectingCoordinator::exists(std::string path) {
  if (auto e = maybeFail(Fault::kBefore, "exists", path)) co_return *e;
  auto result = co_await inner_->exists(path);
  if (auto e = maybeFail(Fault::kAfter, "exists", path)) co_return *e;
  co_return result;
}

awaitable<Result<std::vector<ZkOpResult>>> FaultInjectingCoordinator::multi(std::vector<ZkOp> ops) {
  std::string what = fmt::format("({} ops)", ops.size());
  if (auto e = maybeFail(Fault::kBefore, "multi", what)) co_return *e;
  if (multiVia_) {
    auto via = std::move(multiVia_);
    multiVia_.reset();
    (void)co_await via->multi(std::move(ops));
    ++injected_;
    co_return Error{ErrorCode::kUnavailable,
                    "multi " + what + ": connection to ZooKeeper lost (injected, applied under another session)"};
  }
  auto result = co_await inner_->multi(std::move(ops));
  if (auto e = maybeFail(Fault::kAfter, "multi", what)) co_return *e;
  co_return result;
}

Result<Subscription> FaultInjectingCoordinator::watchData(std::string path, DataCallback callback) {
  return inner_->watchData(std::move(path), std::move(callback));
}

Result<Subscription> FaultInjectingCoordinator::watchChildren(std::string path, ChildrenCallback callback,
                                                             CoalesceFn coalesce) {
  return inner_->watchChildren(std::move(path), std::move(callback), std::move(coalesce));
}

}  // namespace tellus::coord
