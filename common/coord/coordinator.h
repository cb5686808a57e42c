#pragma once
// The coordination interface Tellus daemons program against (ClickHouse's IKeeper idea):
// ZkClient is the real ZooKeeper implementation; a fault-injecting wrapper or a fake can
// stand in for tests of the code above it.
//
// Threading: an implementation lives on one executor (a daemon's single-threaded
// io_context). Every method, every coroutine and every Subscription must be used on that
// executor; every callback (session events, watches) is invoked on it.
//
// Paths are absolute ("/jobs/7/spec") and relative to the client's chroot.
//
// GCC 12 coroutine bugs to avoid in callers: do not build a lambda-to-std::function
// conversion or a braced list as an argument inside a co_await expression (the first is
// destroyed twice, the second does not compile); build a named variable first:
//   std::vector<ZkOp> ops{ZkOp::check(p, v), ZkOp::set(p, d, v)};
//   auto done = co_await zk.multi(std::move(ops));

#include <utility>  // before Asio 1.74's awaitable.hpp, which uses std::exchange without it

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace tellus::coord {

struct NodeStat {
  int64_t czxid = 0;           // zxid of the create
  int64_t mzxid = 0;           // zxid of the last data change
  int64_t pzxid = 0;           // zxid of the last child change
  int32_t version = 0;         // data version, the CAS token for set()/remove()
  int32_t cversion = 0;        // children version
  int64_t ephemeralOwner = 0;  // session id for ephemeral nodes, 0 otherwise
  int32_t dataLength = 0;
  int32_t numChildren = 0;
};

struct NodeData {
  std::string data;
  NodeStat stat;
};

enum class CreateMode { kPersistent, kEphemeral, kPersistentSequential, kEphemeralSequential };

// Connection states as the owner sees them.
enum class SessionState {
  kConnecting,  // no session yet (first connect, or a fresh session after expiry)
  kConnected,
  kDisconnected,  // the session may still be alive; the expiry timer runs
  kClosed,        // close() was called
};

// Delivered to session listeners, in this order over a session's life:
// kConnected, (kDisconnected, kConnected)*, [kDisconnected], kExpired, kNewSession, ...
enum class SessionEvent {
  kConnected,     // connected, or reconnected to the same session (ephemerals intact)
  kDisconnected,  // connection lost; leadership and ephemeral-based state are uncertain
  kExpired,       // the session is gone with its ephemeral nodes: give up leadership and
                  // everything tied to it. A fresh session is being opened.
  kNewSession,    // connected with a fresh session after kExpired; watches are re-armed,
                  // ephemeral nodes must be re-created by their owners
};

const char* toString(SessionEvent event);
const char* toString(SessionState state);

// One operation of an atomic multi(): all apply or none does.
struct ZkOp {
  enum class Kind { kCreate, kSet, kRemove, kCheck };
  Kind kind = Kind::kCheck;
  std::string path;
  std::string data;                           // kCreate, kSet
  CreateMode mode = CreateMode::kPersistent;  // kCreate
  int32_t version = -1;                       // kSet, kRemove, kCheck; -1 = any (not for kCheck)

  static ZkOp create(std::string path, std::string data, CreateMode mode = CreateMode::kPersistent) {
    return ZkOp{Kind::kCreate, std::move(path), std::move(data), mode, -1};
  }
  static ZkOp set(std::string path, std::string data, int32_t version = -1) {
    return ZkOp{Kind::kSet, std::move(path), std::move(data), CreateMode::kPersistent, version};
  }
  static ZkOp remove(std::string path, int32_t version = -1) {
    return ZkOp{Kind::kRemove, std::move(path), {}, CreateMode::kPersistent, version};
  }
  static ZkOp check(std::string path, int32_t version) {
    return ZkOp{Kind::kCheck, std::move(path), {}, CreateMode::kPersistent, version};
  }
};

// Per-op result of a successful multi(): the created path for kCreate, the new stat for kSet.
struct ZkOpResult {
  std::string createdPath;
  std::optional<NodeStat> stat;
};

// Keeps a listener or a watch alive; cancels it when destroyed (or on cancel()). Must be
// destroyed on the coordinator's executor. Harmless after the coordinator is gone.
class [[nodiscard]] Subscription {
 public:
  Subscription() = default;
  explicit Subscription(std::function<void()> cancel) : cancel_(std::move(cancel)) {}
  Subscription(Subscription&& other) noexcept : cancel_(std::exchange(other.cancel_, nullptr)) {}
  Subscription& operator=(Subscription&& other) noexcept {
    if (this != &other) {
      cancel();
      cancel_ = std::exchange(other.cancel_, nullptr);
    }
    return *this;
  }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  ~Subscription() { cancel(); }

  void cancel() {
    if (auto fn = std::exchange(cancel_, nullptr)) fn();
  }
  bool active() const { return static_cast<bool>(cancel_); }

 private:
  std::function<void()> cancel_;
};

class Coordinator {
 public:
  using DataCallback = std::function<void(const std::optional<NodeData>&)>;       // nullopt: no node
  using ChildrenCallback = std::function<void(const std::vector<std::string>&)>;  // sorted names
  using SessionCallback = std::function<void(SessionEvent)>;
  using CoalesceFn = std::function<std::chrono::milliseconds()>;  // empty: no coalescing

  virtual ~Coordinator() = default;

  // The executor everything of this coordinator runs on.
  virtual boost::asio::any_io_executor executor() const = 0;

  virtual SessionState state() const = 0;
  // The current session's id, 0 while there is none.
  virtual int64_t sessionId() const = 0;
  virtual Subscription onSessionEvent(SessionCallback callback) = 0;
  // Ends the session (its ephemeral nodes vanish at once), cancels watches and listeners, and
  // fails in-flight requests with kUnavailable. Idempotent. A daemon's last act on it.
  virtual void close() = 0;
  // Waits until a session is established (and the chroot exists). kDeadlineExceeded on timeout.
  virtual boost::asio::awaitable<Status> waitConnected(std::chrono::milliseconds timeout) = 0;

  // Creates a node; returns its actual path (with the sequence suffix for sequential modes).
  // Not retried on connection loss (the error says the outcome is unknown).
  virtual boost::asio::awaitable<Result<std::string>> create(std::string path, std::string data, CreateMode mode) = 0;
  // Creates `path` and its missing ancestors as empty persistent nodes; existing ones are fine.
  virtual boost::asio::awaitable<Status> ensurePath(std::string path) = 0;
  virtual boost::asio::awaitable<Result<NodeData>> get(std::string path) = 0;
  // Writes data if the node's version equals `expectedVersion` (-1: any). kConflict on a
  // version mismatch, kNotFound without node. Returns the new stat.
  virtual boost::asio::awaitable<Result<NodeStat>> set(std::string path, std::string data, int32_t expectedVersion) = 0;
  virtual boost::asio::awaitable<Status> remove(std::string path, int32_t expectedVersion = -1) = 0;
  // Removes a subtree; a missing node is fine.
  virtual boost::asio::awaitable<Status> removeRecursive(std::string path) = 0;
  // Sorted child names.
  virtual boost::asio::awaitable<Result<std::vector<std::string>>> children(std::string path) = 0;
  virtual boost::asio::awaitable<Result<std::optional<NodeStat>>> exists(std::string path) = 0;
  // Atomic transaction. On failure the error names the first failing op.
  virtual boost::asio::awaitable<Result<std::vector<ZkOpResult>>> multi(std::vector<ZkOp> ops) = 0;

  // Persistent watches: the callback gets the current value right away, then every change
  // (successive changes may be coalesced into the latest value), across reconnects and new
  // sessions, until the Subscription is cancelled. Bad paths are reported when the
  // subscription is made.
  virtual Result<Subscription> watchData(std::string path, DataCallback callback) = 0;
  // A missing node is reported as no children; its creation is watched too. With a coalesce
  // window > 0 the children are re-listed at most that often: the changes in between arrive
  // as one listing (one request instead of one per change, for a directory that changes
  // often). `coalesce` is asked for the window when the directory changed, and again every
  // few milliseconds while the window runs, so a caller can want a change at once (a stage's
  // last outputs) and batch the others.
  virtual Result<Subscription> watchChildren(std::string path, ChildrenCallback callback, CoalesceFn coalesce) = 0;
  Result<Subscription> watchChildren(std::string path, ChildrenCallback callback, std::chrono::milliseconds coalesce) {
    return watchChildren(std::move(path), std::move(callback), [coalesce] { return coalesce; });
  }
  Result<Subscription> watchChildren(std::string path, ChildrenCallback callback) {
    return watchChildren(std::move(path), std::move(callback), CoalesceFn{});
  }
};

}  // namespace tellus::coord
