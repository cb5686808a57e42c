#pragma once
// Leader election over a Coordinator (the ZooKeeper recipe): each candidate creates an
// ephemeral-sequential node under `electionPath` (which must exist: it is never created
// here); the lowest sequence number leads; every other candidate watches only its
// predecessor (no herd effect). Used by the JMs of a job to
// elect the pJM (docs/design.md: /jobs/<jobId>/election/n_<token>_<seq>).
//
// Safety: a leader steps down (onLost) as soon as its session is in doubt — on disconnect
// (by default) and on expiry — and re-enters with a new node when a new session comes.
// Leadership is still only as good as the session: writes made as leader should also be
// fenced (epoch / version checks in ZooKeeper).
//
// Everything runs on the coordinator's executor; callbacks are invoked there.

#include <functional>
#include <optional>
#include <memory>
#include <string>

#include "coord/coordinator.h"

namespace tellus::coord {

struct ElectionOptions {
  // Step down while disconnected: the session may already be expired on the server and
  // someone else leading. Off: step down only on expiry (fewer flaps, a window of two leaders).
  bool stepDownOnDisconnect = true;
  // Pause before retrying after a failed ZooKeeper request.
  std::chrono::milliseconds retryDelay{200};
  // Re-check the election even without events (belt and braces against lost wake-ups).
  std::chrono::milliseconds recheckInterval{10000};
  // Keep position() exact: watch every candidate, not only the predecessor, so a change
  // anywhere ahead re-evaluates (every candidate wakes on every change: for a few candidates,
  // such as a job's JMs).
  bool trackPosition = false;
};

struct ElectionCallbacks {
  std::function<void()> onElected;  // this candidate now leads
  std::function<void()> onLost;     // it no longer leads (not called by withdraw())
};

class LeaderElection {
 public:
  // Starts campaigning (asynchronously; requires a connected or connecting coordinator).
  // `candidateData` is stored in the candidate node (e.g. the JM's address).
  static Result<std::unique_ptr<LeaderElection>> start(std::shared_ptr<Coordinator> coordinator,
                                                       std::string electionPath, std::string candidateData,
                                                       ElectionCallbacks callbacks, ElectionOptions options = {});
  // Withdraws (see withdraw()).
  ~LeaderElection();
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  bool isLeader() const;
  // This candidate's place in the election order as last evaluated: 0 while leading, 1 next in
  // line, ...; nullopt without a node or after stepping down (session in doubt). Only the
  // predecessor is watched (unless trackPosition), so the place can be behind when a node
  // further ahead goes: it is never ahead of the true one.
  std::optional<size_t> position() const;
  // This candidate's node path ("" while it has none).
  std::string candidatePath() const;
  // Stops campaigning: no callback afterwards; the candidate node is removed in the
  // background (or vanishes with the session).
  void withdraw();

  struct State;

 private:
  explicit LeaderElection(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// The candidates in election order (by sequence number; names without one are ignored).
std::vector<std::string> electionOrder(const std::vector<std::string>& children);

}  // namespace tellus::coord
