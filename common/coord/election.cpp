#include "coord/election.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "coord/event_flag.h"
#include "coord/paths.h"
#include "util/log.h"
#include "util/token.h"

namespace tellus::coord {

namespace asio = boost::asio;
using asio::awaitable;

struct LeaderElection::State {
  State(std::shared_ptr<Coordinator> c, std::string path, std::string d, ElectionCallbacks cb, ElectionOptions o)
      : coordinator(std::move(c)),
        electionPath(std::move(path)),
        data(std::move(d)),
        callbacks(std::move(cb)),
        options(o),
        wake(coordinator->executor()) {}

  std::shared_ptr<Coordinator> coordinator;
  std::string electionPath;
  std::string data;
  ElectionCallbacks callbacks;
  ElectionOptions options;
  // Part of the node name, so that after a create whose reply was lost the node can be
  // recognized as ours instead of creating a second one (Curator's "protected" mode).
  std::string token;
  EventFlag wake;

  bool stopped = false;
  bool leader = false;
  std::string myNode;     // "" while we have none
  int64_t mySession = 0;  // the session that owns myNode
  size_t position = 0;    // myNode's index in the order as last evaluated
  std::string watchedPredecessor;
  Subscription sessionEvents;
  Subscription predecessorWatch;
  Subscription ownWatch;
  Subscription candidatesWatch;  // trackPosition only
};

namespace {

using State = LeaderElection::State;

void stepDown(State& s) {
  if (!s.leader) return;
  s.leader = false;
  spdlog::info("election {}: {} stepped down", s.electionPath, s.myNode.empty() ? "(no node)" : s.myNode);
  if (!s.stopped && s.callbacks.onLost) s.callbacks.onLost();
}

void forgetNode(State& s) {
  s.myNode.clear();
  s.mySession = 0;
  s.position = 0;
  s.ownWatch.cancel();
  s.predecessorWatch.cancel();
  s.watchedPredecessor.clear();
}

// Wakes the campaign when the watched node disappears.
Coordinator::DataCallback wakeOnDelete(const std::shared_ptr<State>& state) {
  return [weak = std::weak_ptr<State>(state)](const std::optional<NodeData>& data) {
    if (data) return;
    if (auto s = weak.lock()) s->wake.set();
  };
}

// After a create that failed with an unknown outcome: our node, if the server made it.
awaitable<std::string> findOwnNode(std::shared_ptr<State> s) {
  auto kids = co_await s->coordinator->children(s->electionPath);
  if (!kids) co_return std::string();
  for (const auto& name : *kids) {
    if (name.find("n_" + s->token + "_") != 0) continue;
    std::string path = joinPath(s->electionPath, name);
    auto node = co_await s->coordinator->get(path);
    if (node && node->stat.ephemeralOwner == s->coordinator->sessionId()) co_return path;
  }
  co_return std::string();
}

// One look at the election: make sure we have a node, then lead or watch the predecessor.
awaitable<Status> evaluate(std::shared_ptr<State> s) {
  Coordinator& zk = *s->coordinator;
  if (zk.state() != SessionState::kConnected) {
    if (zk.state() != SessionState::kDisconnected || s->options.stepDownOnDisconnect) stepDown(*s);
    co_return Status::ok();  // a session event wakes us
  }
  if (!s->myNode.empty() && s->mySession != zk.sessionId()) {
    // The node belonged to a session that is gone, and the node with it.
    stepDown(*s);
    forgetNode(*s);
  }
  if (s->myNode.empty()) {
    // The election's path belongs to whoever made it (a job's, to its submission) and is not
    // re-created here: candidates re-entering under a deleted job would resurrect it, and an
    // operator's delete of the job would race them forever. Without it, retry until withdrawn.
    int64_t session = zk.sessionId();
    auto created =
        co_await zk.create(joinPath(s->electionPath, "n_" + s->token + "_"), s->data, CreateMode::kEphemeralSequential);
    if (s->stopped) {
      if (created) (void)co_await zk.remove(*created);
      co_return Status::ok();
    }
    std::string node;
    if (created) {
      node = *created;
    } else if (created.error().code == ErrorCode::kUnavailable) {
      node = co_await findOwnNode(s);
      if (node.empty()) co_return created.status();
    } else if (created.error().code == ErrorCode::kNotFound) {
      co_return makeError(ErrorCode::kNotFound, "election " + s->electionPath + " does not exist");
    } else {
      co_return created.status();
    }
    if (zk.sessionId() != session) co_return Status::ok();  // the session changed meanwhile: start over
    s->myNode = node;
    s->mySession = session;
    spdlog::info("election {}: candidate {}", s->electionPath, node);
    auto watch = zk.watchData(node, wakeOnDelete(s));
    if (!watch) co_return watch.status();
    s->ownWatch = std::move(*watch);
  }
  auto kids = co_await zk.children(s->electionPath);
  if (!kids && kids.error().code == ErrorCode::kNotFound && !s->stopped) {
    // The election was deleted, our node with it.
    stepDown(*s);
    forgetNode(*s);
  }
  if (!kids) co_return kids.status();
  if (s->stopped || s->myNode.empty()) co_return Status::ok();
  auto order = electionOrder(*kids);
  auto me = std::find(order.begin(), order.end(), baseName(s->myNode));
  if (me != order.end()) s->position = static_cast<size_t>(me - order.begin());
  if (me == order.end()) {
    // Our node is gone (removed by someone, or our session ended): enter again, after a pause
    // (kConflict) — someone deleting the election's subtree (a job deleted) must be able to get
    // past candidates that would re-enter at once, or its delete would never get through.
    stepDown(*s);
    forgetNode(*s);
    co_return makeError(ErrorCode::kConflict, "election " + s->electionPath + ": our node was removed");
  }
  if (me == order.begin()) {
    s->predecessorWatch.cancel();
    s->watchedPredecessor.clear();
    if (!s->leader) {
      s->leader = true;
      spdlog::info("election {}: {} is the leader", s->electionPath, s->myNode);
      if (s->callbacks.onElected) s->callbacks.onElected();
    }
    co_return Status::ok();
  }
  stepDown(*s);
  std::string predecessor = joinPath(s->electionPath, *(me - 1));
  if (predecessor != s->watchedPredecessor) {
    auto watch = zk.watchData(predecessor, wakeOnDelete(s));
    if (!watch) co_return watch.status();
    s->predecessorWatch = std::move(*watch);
    s->watchedPredecessor = predecessor;
  }
  co_return Status::ok();
}

awaitable<void> campaign(std::shared_ptr<State> s) {
  while (!s->stopped) {
    if (s->coordinator->state() == SessionState::kClosed) {
      stepDown(*s);
      break;
    }
    s->wake.reset();
    Status st = co_await evaluate(s);
    if (s->stopped) break;
    if (!st.isOk()) {
      spdlog::warn("election {}: {}; retrying", s->electionPath, st.message());
      if (st.code() == ErrorCode::kConflict) {
        // Not cut short by wake-ups: the other candidates' nodes going wake us as well.
        asio::steady_timer pause(s->coordinator->executor(), 5 * s->options.retryDelay);
        co_await pause.async_wait(asio::use_awaitable);
      } else {
        co_await s->wake.waitFor(s->options.retryDelay);
      }
      continue;
    }
    co_await s->wake.waitFor(s->options.recheckInterval);
  }
  // Withdrawn: remove the node now rather than when the session ends.
  Coordinator& zk = *s->coordinator;
  if (!s->myNode.empty() && zk.state() == SessionState::kConnected && s->mySession == zk.sessionId()) {
    (void)co_await zk.remove(s->myNode);
  }
}

}  // namespace

std::vector<std::string> electionOrder(const std::vector<std::string>& children) {
  std::vector<std::pair<int64_t, std::string>> numbered;
  for (const auto& name : children) {
    if (auto seq = sequenceNumber(name)) numbered.emplace_back(*seq, name);
  }
  std::sort(numbered.begin(), numbered.end());
  std::vector<std::string> out;
  out.reserve(numbered.size());
  for (auto& [seq, name] : numbered) out.push_back(std::move(name));
  return out;
}

Result<std::unique_ptr<LeaderElection>> LeaderElection::start(std::shared_ptr<Coordinator> coordinator,
                                                              std::string electionPath, std::string candidateData,
                                                              ElectionCallbacks callbacks, ElectionOptions options) {
  if (!coordinator) return makeError(ErrorCode::kInvalidArgument, "election: no coordinator");
  if (auto st = validatePath(electionPath); !st.isOk()) return st.error().prepend("election");
  if (electionPath == "/") return makeError(ErrorCode::kInvalidArgument, "election: path must not be the root");
  auto state = std::make_shared<State>(std::move(coordinator), std::move(electionPath), std::move(candidateData),
                                       std::move(callbacks), options);
  state->token = randomToken();
  state->sessionEvents = state->coordinator->onSessionEvent([weak = std::weak_ptr<State>(state)](SessionEvent e) {
    auto s = weak.lock();
    if (!s || s->stopped) return;
    if (e == SessionEvent::kDisconnected && s->options.stepDownOnDisconnect) stepDown(*s);
    if (e == SessionEvent::kExpired) {
      stepDown(*s);
      forgetNode(*s);
    }
    s->wake.set();
  });
  if (state->options.trackPosition) {
    auto watch = state->coordinator->watchChildren(state->electionPath, [weak = std::weak_ptr<State>(state)](
                                                                            const std::vector<std::string>&) {
      if (auto s = weak.lock()) s->wake.set();
    });
    if (!watch) return watch.status().prepend("election: watching the candidates");
    state->candidatesWatch = std::move(*watch);
  }
  asio::co_spawn(state->coordinator->executor(), campaign(state), [](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      spdlog::error("election campaign failed: {}", ex.what());
    }
  });
  return std::unique_ptr<LeaderElection>(new LeaderElection(state));
}

LeaderElection::~LeaderElection() { withdraw(); }

bool LeaderElection::isLeader() const { return state_->leader && !state_->stopped; }

std::optional<size_t> LeaderElection::position() const {
  const State& s = *state_;
  if (s.stopped || s.myNode.empty()) return std::nullopt;
  if (s.leader) return 0;
  // At the head but not leading: stepped down while the session is in doubt.
  if (s.position == 0) return std::nullopt;
  return s.position;
}

std::string LeaderElection::candidatePath() const { return state_->myNode; }

void LeaderElection::withdraw() {
  if (state_->stopped) return;
  state_->stopped = true;
  state_->leader = false;
  state_->sessionEvents.cancel();
  state_->predecessorWatch.cancel();
  state_->ownWatch.cancel();
  state_->candidatesWatch.cancel();
  state_->wake.set();
}

}  // namespace tellus::coord
