#pragma once
// The one wrapper of the ZooKeeper C client (zookeeper_mt) in Tellus.
//
// How it is done right (Mesos zookeeper/group.cpp, ClickHouse ZooKeeper):
// - The C library calls back on its own threads. Every completion and watch event is posted
//   to the owner's executor, tagged with the handle generation (one per session); events of
//   an older handle are dropped, so nothing acts on a stale session.
// - Session state machine: connected -> disconnected (a local timer of the negotiated session
//   timeout starts) -> expired (the server said so, or the timer fired). On expiry the owner
//   is told (kExpired) and a fresh handle is opened at once (kNewSession when it connects).
// - Only idempotent requests are retried on connection loss / timeout (reads, versionless
//   sets, tolerant creates in ensurePath, removeRecursive), with capped backoff within a
//   retry budget. create/remove/versioned set/multi are never retried blindly: their error
//   says the outcome is unknown.
// - Watches are persistent from the caller's point of view: re-armed after every trigger,
//   after reconnects and on a new session, until cancelled.
// - The chroot is applied by the client (see paths.h); waitConnected() creates it if missing.
// - With credentials (SessionOptions::credentials), every handle authenticates before its
//   session counts as connected, and every node it creates (the chroot included) gets an ACL
//   for that identity alone; without, nodes are open to anyone (world:anyone).
//
// Lifetime: create() returns a shared_ptr; in-flight coroutines keep the client alive. Call
// close() on the executor before the executor's io_context is destroyed.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string_view>

#include "coord/coordinator.h"
#include "coord/credentials.h"
#include "coord/errors.h"

struct ACL_vector;  // zookeeper.jute.h

namespace tellus::coord {

namespace detail {
struct ZkHandle;
struct PendingOp;
struct RawReply;
struct WatchEntry;
}  // namespace detail

struct SessionOptions {
  // "host:port[,host:port...]" without a chroot suffix.
  std::string connectString;
  // Prefix of every path ("" or "/" for none). Created by waitConnected() if missing.
  std::string chroot = "/tellus";
  // Requested session timeout; the server clamps it to [2, 20] ticks by default.
  std::chrono::milliseconds sessionTimeout{6000};
  // How long idempotent requests are retried on connection errors; 0 = the session timeout.
  std::chrono::milliseconds retryBudget{0};
  std::chrono::milliseconds backoffInitial{20};
  std::chrono::milliseconds backoffMax{1000};
  // Called on the client's executor once per request sent to the server (every retry is a
  // request), with its outcome (zkResultName) and how long the reply took: the one place
  // ZooKeeper traffic is counted (a daemon's tellus_zk_* metrics).
  std::function<void(std::string_view result, std::chrono::steady_clock::duration elapsed)> onRequest;
  // Digest identity to authenticate as (zoo_add_auth) on every handle; the session is
  // reported connected only once the server accepted it. Every node created then has the ACL
  // "creator only, all permissions" (ZOO_CREATOR_ALL_ACL: digest:<user>:<hash>). nullopt:
  // no authentication and open ACLs (world:anyone), for tests and closed networks.
  std::optional<DigestCredentials> credentials;
};

// A ZooKeeper return code as a metric label: "ok", "no_node", "node_exists", "bad_version",
// "not_empty", "connection_loss", "operation_timeout", "session_expired", "closing",
// "invalid_state", "no_auth", or "other".
std::string_view zkResultName(int rc);

// Identity of a session: lets tests force an expiry (harness/zk_session.h).
struct SessionCredentials {
  int64_t id = 0;
  std::string password;  // 16 opaque bytes
};

class ZkClient final : public Coordinator, public std::enable_shared_from_this<ZkClient> {
 public:
  // Validates the options and starts connecting (no wait). kInvalidArgument for a bad chroot,
  // an empty connect string or one the C client rejects.
  static Result<std::shared_ptr<ZkClient>> create(boost::asio::any_io_executor executor, SessionOptions options);
  ~ZkClient() override;
  ZkClient(const ZkClient&) = delete;
  ZkClient& operator=(const ZkClient&) = delete;

  boost::asio::any_io_executor executor() const override { return executor_; }
  SessionState state() const override { return state_; }
  int64_t sessionId() const override { return sessionId_; }
  Subscription onSessionEvent(SessionCallback callback) override;
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

  // The session timeout the server granted (the requested one until connected).
  std::chrono::milliseconds negotiatedTimeout() const { return negotiatedTimeout_; }
  // Id and password of the current session (empty password while there is none).
  SessionCredentials sessionCredentials() const;
  const std::string& chroot() const { return chroot_; }
  const SessionOptions& options() const { return options_; }

  // Closes the session (its ephemeral nodes vanish at once), cancels watches and listeners,
  // and fails in-flight requests with kUnavailable. Idempotent.
  void close() override;

 private:
  struct Private {  // makes the constructor usable (by make_shared) only from create()
    explicit Private() = default;
  };

 public:
  ZkClient(Private, boost::asio::any_io_executor executor, SessionOptions options, std::string chroot);

 private:
  using StartFn = std::function<int(detail::ZkHandle&, detail::PendingOp&)>;
  enum class Retry { kNever, kIdempotent };

  friend struct detail::ZkHandle;

  Status openHandle();
  void closeHandle();
  void scheduleReopen();
  void onWatcherEvent(uint64_t generation, int type, int zkState, const std::string& path);
  void onSessionState(int zkState);
  void onAuthReply(uint64_t generation, int rc);
  void onExpiryTimer(uint64_t generation);
  // Drops the handle and opens a new one: at once, or after the reopen backoff when the
  // server refused us (trying again at once would only be refused again).
  void expireSession(const std::string& reason, bool backoff = false);
  void emit(SessionEvent event);
  void notifyStateChange();
  // Keeps the process-wide count of clients without a session (which quiets the C library's
  // retry errors) in step with state_; called after every change of state_.
  void countSession();

  boost::asio::awaitable<detail::RawReply> callOnce(StartFn start);
  boost::asio::awaitable<detail::RawReply> call(StartFn start, Retry retry);
  boost::asio::awaitable<void> sleepFor(std::chrono::milliseconds delay);
  boost::asio::awaitable<Status> ensureFullPath(std::string fullPath);
  boost::asio::awaitable<void> warnIfChrootOpen();
  // The ACL of every node this client creates (see SessionOptions::credentials).
  const struct ACL_vector* createAcl() const;
  boost::asio::awaitable<Status> removeTree(std::string fullPath, std::string userPath);

  Result<Subscription> addWatch(bool dataWatch, std::string path, DataCallback onData, ChildrenCallback onChildren,
                                CoalesceFn coalesce = {});
  void rearm(const std::shared_ptr<detail::WatchEntry>& watch);
  void rearmAll();
  // Static with an owning `self`: spawned coroutines may start after the caller returned.
  static boost::asio::awaitable<void> watchLoop(std::shared_ptr<ZkClient> self,
                                                std::shared_ptr<detail::WatchEntry> watch);
  static boost::asio::awaitable<void> delayedRearm(std::shared_ptr<ZkClient> self,
                                                   std::shared_ptr<detail::WatchEntry> watch);
  boost::asio::awaitable<Status> refreshWatch(detail::WatchEntry& watch);

  boost::asio::any_io_executor executor_;
  SessionOptions options_;
  std::string chroot_;  // normalized: "" or a valid path

  std::unique_ptr<detail::ZkHandle> handle_;
  uint64_t generation_ = 0;  // of the newest handle
  bool handleConnectedOnce_ = false;
  SessionState state_ = SessionState::kConnecting;
  bool countedWithoutSession_ = false;
  int64_t sessionId_ = 0;
  std::chrono::milliseconds negotiatedTimeout_;
  bool chrootReady_ = false;
  bool closed_ = false;

  boost::asio::steady_timer expiryTimer_;  // runs while disconnected
  boost::asio::steady_timer reopenTimer_;  // retries zookeeper_init after a failure
  Backoff reopenBackoff_;
  std::list<std::shared_ptr<boost::asio::steady_timer>> stateWaiters_;

  uint64_t nextId_ = 1;
  std::map<uint64_t, std::shared_ptr<SessionCallback>> listeners_;
  std::map<uint64_t, std::shared_ptr<detail::WatchEntry>> watches_;
};

}  // namespace tellus::coord
