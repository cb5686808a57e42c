#include "coord/zk_client.h"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "coord/paths.h"
#include "util/log.h"

namespace tellus::coord {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace detail {

// Everything a C completion can report, filled on the C completion thread and handed to the
// waiting coroutine on its executor.
struct RawReply {
  int rc = ZOK;
  std::optional<std::string> data;
  std::optional<NodeStat> stat;
  std::vector<std::string> strings;
  std::string createdPath;  // full server path
  std::vector<int> multiErrors;
  std::vector<ZkOpResult> multiResults;  // createdPath is the full server path here too
  std::vector<std::string> aclSchemes;   // zoo_aget_acl: the scheme of each entry
};

// zoo_amulti writes its results into caller-owned buffers when the reply arrives, so they
// live with the pending operation.
struct MultiBuffers {
  std::vector<ZkOp::Kind> kinds;
  std::vector<std::string> paths;
  std::vector<std::string> datas;
  std::vector<std::vector<char>> pathBuffers;
  std::vector<struct Stat> stats;
  std::vector<zoo_op_t> ops;
  std::vector<zoo_op_result_t> results;
};

struct PendingOp {
  ZkHandle* handle = nullptr;
  std::function<void(RawReply)> complete;  // posts the reply to the waiting coroutine
  std::unique_ptr<MultiBuffers> multi;
};

// One per zhandle_t (one per session attempt). It is the C library's context pointer and
// owns the operations in flight on that handle, so that close() can finish those the
// library never completes.
struct ZkHandle {
  zhandle_t* zh = nullptr;
  uint64_t generation = 0;
  asio::any_io_executor executor;
  std::weak_ptr<ZkClient> owner;

  std::mutex mutex;
  std::unordered_map<const void*, std::unique_ptr<PendingOp>> pending;

  // On the owner's executor only: the server answered this handle's zoo_add_auth (or the
  // connection dropped first; see onAuthReply).
  bool authSettled = false;

  PendingOp& add(std::unique_ptr<PendingOp> op) {
    PendingOp& ref = *op;
    std::lock_guard lock(mutex);
    pending.emplace(op.get(), std::move(op));
    return ref;
  }
  std::unique_ptr<PendingOp> take(const void* key) {
    std::lock_guard lock(mutex);
    auto it = pending.find(key);
    if (it == pending.end()) return nullptr;
    auto op = std::move(it->second);
    pending.erase(it);
    return op;
  }

  // The global watcher, on a C library thread: hand the event to the owner's executor,
  // tagged with this handle's generation. Nothing else happens here.
  static void watcher(zhandle_t* zh, int type, int state, const char* path, void* /*watcherCtx*/) {
    auto* self = static_cast<ZkHandle*>(const_cast<void*>(zoo_get_context(zh)));
    if (self == nullptr) return;
    asio::post(self->executor,
               [owner = self->owner, generation = self->generation, type, state, p = std::string(path ? path : "")] {
                 if (auto client = owner.lock()) client->onWatcherEvent(generation, type, state, p);
               });
  }

  // The completion of zoo_add_auth, on a C library thread: handed over like a watcher event.
  static void authCompletion(int rc, const void* data) {
    const auto* self = static_cast<const ZkHandle*>(data);
    asio::post(self->executor, [owner = self->owner, generation = self->generation, rc] {
      if (auto client = owner.lock()) client->onAuthReply(generation, rc);
    });
  }
};

struct WatchEntry {
  uint64_t id = 0;
  bool dataWatch = true;  // false: children
  std::string path;       // as the caller gave it
  std::string fullPath;   // with the chroot, as events name it
  Coordinator::DataCallback onData;
  Coordinator::ChildrenCallback onChildren;
  Coordinator::CoalesceFn coalesce;  // children: at most one listing per what it says (empty: 0)
  std::optional<std::chrono::steady_clock::time_point> lastRefresh;
  bool inflight = false;  // a refresh coroutine is running
  bool dirty = false;     // an event arrived during the refresh: read again
  bool cancelled = false;
  // (exists, zxid) of the last delivered value: suppresses duplicates after re-arming.
  std::optional<std::pair<bool, int64_t>> lastSignature;
};

}  // namespace detail

namespace {

// A coalesced listing's window is asked again while it runs (watchLoop) every tenth of it,
// within these bounds: a JM's 100 ms outputs window is rechecked every 10 ms, its 500 ms
// markers window every 50 ms (a window costs at most ten timer wakeups), a long one each second.
constexpr std::chrono::milliseconds kCoalesceRecheckMin{10};
constexpr std::chrono::milliseconds kCoalesceRecheckMax{1000};

// How long the C library goes without resolving the server names again while connected.
constexpr int kServerResolutionDelayMs = 10'000;

using detail::PendingOp;
using detail::RawReply;
using detail::ZkHandle;

NodeStat toNodeStat(const struct Stat& s) {
  return NodeStat{s.czxid, s.mzxid, s.pzxid, s.version, s.cversion, s.ephemeralOwner, s.dataLength, s.numChildren};
}

int createFlags(CreateMode mode) {
  switch (mode) {
    case CreateMode::kPersistent:
      return ZOO_PERSISTENT;
    case CreateMode::kEphemeral:
      return ZOO_EPHEMERAL;
    case CreateMode::kPersistentSequential:
      return ZOO_PERSISTENT_SEQUENTIAL;
    case CreateMode::kEphemeralSequential:
      return ZOO_EPHEMERAL_SEQUENTIAL;
  }
  return ZOO_PERSISTENT;
}

const char* opKindName(ZkOp::Kind kind) {
  switch (kind) {
    case ZkOp::Kind::kCreate:
      return "create";
    case ZkOp::Kind::kSet:
      return "set";
    case ZkOp::Kind::kRemove:
      return "remove";
    case ZkOp::Kind::kCheck:
      return "check";
  }
  return "?";
}

std::string hexId(int64_t id) { return fmt::format("0x{:x}", static_cast<uint64_t>(id)); }

void extractMulti(const detail::MultiBuffers& buffers, RawReply& reply) {
  // Results are only meaningful when the server answered (success or an API error).
  if (reply.rc != ZOK && reply.rc > ZAPIERROR) return;
  for (size_t i = 0; i < buffers.results.size(); ++i) {
    int err = buffers.results[i].err;
    reply.multiErrors.push_back(err);
    ZkOpResult result;
    if (err == ZOK && buffers.kinds[i] == ZkOp::Kind::kCreate) result.createdPath = buffers.pathBuffers[i].data();
    if (err == ZOK && buffers.kinds[i] == ZkOp::Kind::kSet) result.stat = toNodeStat(buffers.stats[i]);
    reply.multiResults.push_back(std::move(result));
  }
}

// C completion trampolines (C library thread). The op is still registered: the library
// calls back at most once, and close() finishes leftovers only after the threads stopped.
void finish(const void* data, RawReply reply) {
  auto* op = static_cast<const PendingOp*>(data);
  auto owned = op->handle->take(data);
  if (!owned) return;
  if (owned->multi) extractMulti(*owned->multi, reply);
  owned->complete(std::move(reply));
}

void voidCompletion(int rc, const void* data) { finish(data, RawReply{rc}); }

void statCompletion(int rc, const struct Stat* stat, const void* data) {
  RawReply reply{rc};
  if (rc == ZOK && stat) reply.stat = toNodeStat(*stat);
  finish(data, std::move(reply));
}

void dataCompletion(int rc, const char* value, int valueLen, const struct Stat* stat, const void* data) {
  RawReply reply{rc};
  if (rc == ZOK) {
    reply.data = (value && valueLen > 0) ? std::string(value, static_cast<size_t>(valueLen)) : std::string();
    if (stat) reply.stat = toNodeStat(*stat);
  }
  finish(data, std::move(reply));
}

void stringsStatCompletion(int rc, const struct String_vector* strings, const struct Stat* stat, const void* data) {
  RawReply reply{rc};
  if (rc == ZOK) {
    if (strings) {
      for (int32_t i = 0; i < strings->count; ++i) reply.strings.emplace_back(strings->data[i]);
      std::sort(reply.strings.begin(), reply.strings.end());
    }
    if (stat) reply.stat = toNodeStat(*stat);
  }
  finish(data, std::move(reply));
}

void stringCompletion(int rc, const char* value, const void* data) {
  RawReply reply{rc};
  if (rc == ZOK && value) reply.createdPath = value;
  finish(data, std::move(reply));
}

void aclCompletion(int rc, struct ACL_vector* acl, struct Stat* /*stat*/, const void* data) {
  RawReply reply{rc};
  if (rc == ZOK && acl) {
    for (int32_t i = 0; i < acl->count; ++i) {
      reply.aclSchemes.emplace_back(acl->data[i].id.scheme ? acl->data[i].id.scheme : "");
    }
  }
  finish(data, std::move(reply));
}

// Clients of this process without a usable session (connecting, disconnected, expired).
// The C library logs every failed connection attempt; while a client has no session those are
// its retries, which the session state machine (and the daemon's outage line) reports once.
std::atomic<int> gClientsWithoutSession{0};

// The C library's log lines go to spdlog, one level down: its errors and warnings are
// mostly connection retries, which the session state machine already reports once. Its
// errors are warnings only while every client is connected (then they are news).
void logFromZk(const char* message) {
  std::string_view text(message ? message : "");
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  if (text.find("ZOO_ERROR") != std::string_view::npos && gClientsWithoutSession.load() == 0) {
    spdlog::warn("zookeeper-c: {}", text);
  } else {
    spdlog::debug("zookeeper-c: {}", text);
  }
}

// Wraps a coroutine's completion handler so it can be resumed from any thread: the result is
// posted to the handler's own executor.
template <class Handler>
std::function<void(RawReply)> makeCompleter(Handler handler, const asio::any_io_executor& fallback) {
  auto shared = std::make_shared<Handler>(std::move(handler));
  auto executor = asio::get_associated_executor(*shared, fallback);
  return [shared, executor](RawReply reply) {
    asio::post(executor, [shared, reply = std::move(reply)]() mutable { (*shared)(std::move(reply)); });
  };
}

void logSpawnFailure(std::exception_ptr e, const char* what) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    spdlog::error("{} failed: {}", what, ex.what());
  }
}

}  // namespace

const char* toString(SessionEvent event) {
  switch (event) {
    case SessionEvent::kConnected:
      return "connected";
    case SessionEvent::kDisconnected:
      return "disconnected";
    case SessionEvent::kExpired:
      return "expired";
    case SessionEvent::kNewSession:
      return "new-session";
  }
  return "?";
}

const char* toString(SessionState state) {
  switch (state) {
    case SessionState::kConnecting:
      return "connecting";
    case SessionState::kConnected:
      return "connected";
    case SessionState::kDisconnected:
      return "disconnected";
    case SessionState::kClosed:
      return "closed";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Construction, handles and the session state machine.

Result<std::shared_ptr<ZkClient>> ZkClient::create(asio::any_io_executor executor, SessionOptions options) {
  if (options.connectString.empty()) {
    return makeError(ErrorCode::kInvalidArgument, "ZooKeeper connect string is empty");
  }
  if (options.connectString.find('/') != std::string::npos) {
    return makeError(ErrorCode::kInvalidArgument, "ZooKeeper connect string '" + options.connectString +
                                                      "' contains a chroot suffix; set SessionOptions.chroot instead");
  }
  if (options.sessionTimeout.count() <= 0) {
    return makeError(ErrorCode::kInvalidArgument, "ZooKeeper session timeout must be positive");
  }
  if (options.backoffInitial.count() <= 0 || options.backoffMax < options.backoffInitial) {
    return makeError(ErrorCode::kInvalidArgument, "ZooKeeper retry backoff must satisfy 0 < initial <= max");
  }
  auto chroot = normalizeChroot(options.chroot);
  if (!chroot) return chroot.error();
  auto client = std::make_shared<ZkClient>(Private{}, std::move(executor), std::move(options), std::move(*chroot));
  Status opened = client->openHandle();
  if (!opened.isOk()) return opened.error();
  return client;
}

ZkClient::ZkClient(Private, asio::any_io_executor executor, SessionOptions options, std::string chroot)
    : executor_(std::move(executor)),
      options_(std::move(options)),
      chroot_(std::move(chroot)),
      negotiatedTimeout_(options_.sessionTimeout),
      expiryTimer_(executor_),
      reopenTimer_(executor_),
      reopenBackoff_(options_.backoffInitial, options_.backoffMax) {}

ZkClient::~ZkClient() { close(); }

Status ZkClient::openHandle() {
  auto handle = std::make_unique<ZkHandle>();
  handle->generation = generation_ + 1;
  handle->executor = executor_;
  handle->owner = weak_from_this();
  // The C threads may call the watcher before zookeeper_init2 returns; it only needs the
  // fields set above.
  zhandle_t* zh =
      zookeeper_init2(options_.connectString.c_str(), &ZkHandle::watcher,
                      static_cast<int>(options_.sessionTimeout.count()), nullptr, handle.get(), 0, &logFromZk);
  if (zh == nullptr) {
    int err = errno;
    return makeError(err == EINVAL ? ErrorCode::kInvalidArgument : ErrorCode::kUnavailable,
                     "connecting to ZooKeeper at '" + options_.connectString + "': " + std::strerror(err));
  }
  // By default the library resolves the server names again (getaddrinfo, which opens a
  // netlink socket) every time it polls its socket: measured, a netlink round trip and an
  // open of /dev/urandom per request of a busy worker. DNS changes are still seen within
  // this window, and at once on a connection loss (when the library always resolves).
  if (int rc = zoo_set_servers_resolution_delay(zh, kServerResolutionDelayMs); rc != ZOK) {
    spdlog::warn("ZooKeeper server name resolution delay: {}", zkCodeName(rc));
  }
  if (options_.credentials) {
    // Queued before the handle connects: the library sends it first on every connection of
    // the handle (before any request), and calls the completion for the first answer.
    const std::string auth = options_.credentials->authString();
    int rc = zoo_add_auth(zh, "digest", auth.data(), static_cast<int>(auth.size()), &ZkHandle::authCompletion,
                          handle.get());
    if (rc != ZOK) {
      zookeeper_close(zh);
      return makeError(ErrorCode::kUnavailable, "authenticating to ZooKeeper at '" + options_.connectString +
                                                    "': " + zkCodeName(rc));
    }
  }
  handle->zh = zh;
  generation_ = handle->generation;
  handle_ = std::move(handle);
  handleConnectedOnce_ = false;
  state_ = SessionState::kConnecting;
  countSession();
  return Status::ok();
}

void ZkClient::countSession() {
  const bool without = state_ != SessionState::kConnected && state_ != SessionState::kClosed;
  if (without != countedWithoutSession_) {
    countedWithoutSession_ = without;
    gClientsWithoutSession += without ? 1 : -1;
  }
}

void ZkClient::closeHandle() {
  if (!handle_) return;
  std::unique_ptr<ZkHandle> handle = std::move(handle_);
  // Joins the C library's threads: no callback for this handle can run afterwards, and
  // events it already posted are dropped as stale (handle_ no longer matches).
  int rc = zookeeper_close(handle->zh);
  if (rc != ZOK) spdlog::debug("zookeeper_close: {}", zkCodeName(rc));
  std::unordered_map<const void*, std::unique_ptr<PendingOp>> leftovers;
  {
    std::lock_guard lock(handle->mutex);
    leftovers.swap(handle->pending);
  }
  for (auto& [key, op] : leftovers) op->complete(RawReply{closed_ ? ZCLOSING : ZSESSIONEXPIRED});
}

void ZkClient::scheduleReopen() {
  reopenTimer_.expires_after(reopenBackoff_.next());
  reopenTimer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->closed_ || self->handle_) return;
    Status st = self->openHandle();
    if (!st.isOk()) {
      spdlog::warn("{}; retrying", st.message());
      self->scheduleReopen();
    }
  });
}

void ZkClient::onWatcherEvent(uint64_t generation, int type, int zkState, const std::string& path) {
  // Events of a closed or replaced handle describe a session we no longer act on.
  if (closed_ || !handle_ || generation != handle_->generation) return;
  if (type == ZOO_SESSION_EVENT) {
    onSessionState(zkState);
    return;
  }
  // A node event: the one-shot ZooKeeper watch is spent; refresh every watch on that path
  // (which reads the new value and sets the next watch).
  for (auto& [id, watch] : watches_) {
    if (watch->fullPath == path) rearm(watch);
  }
}

void ZkClient::onSessionState(int zkState) {
  if (zkState == ZOO_CONNECTED_STATE) {
    // Not usable before the server has answered our credentials: a refusal must surface as
    // an error here, not as requests failing later with "not authorized" (onAuthReply calls
    // back once it has).
    if (options_.credentials && !handle_->authSettled) return;
    expiryTimer_.cancel();
    const clientid_t* id = zoo_client_id(handle_->zh);
    sessionId_ = id ? id->client_id : 0;
    negotiatedTimeout_ = milliseconds(zoo_recv_timeout(handle_->zh));
    bool freshSession = !handleConnectedOnce_;
    handleConnectedOnce_ = true;
    if (state_ == SessionState::kConnected) return;
    state_ = SessionState::kConnected;
    countSession();
    reopenBackoff_.reset();
    spdlog::info("ZooKeeper session {} {} (timeout {} ms, {})", hexId(sessionId_),
                 freshSession ? "established" : "reconnected", negotiatedTimeout_.count(), options_.connectString);
    notifyStateChange();
    // Same session: the library restores its watches itself, but reading again costs little
    // and covers changes made while we were away. New session: all watches are gone.
    rearmAll();
    emit(freshSession && generation_ > 1 ? SessionEvent::kNewSession : SessionEvent::kConnected);
  } else if (zkState == ZOO_CONNECTING_STATE) {
    if (state_ != SessionState::kConnected) return;
    state_ = SessionState::kDisconnected;
    countSession();
    spdlog::warn("ZooKeeper session {} disconnected; expiring it locally in {} ms unless it reconnects",
                 hexId(sessionId_), negotiatedTimeout_.count());
    // The server expires the session one timeout after it last heard from us, which is
    // before this timer fires: when it does, the session is certainly gone.
    expiryTimer_.expires_after(negotiatedTimeout_);
    expiryTimer_.async_wait([weak = weak_from_this(), generation = generation_](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->onExpiryTimer(generation);
    });
    notifyStateChange();
    emit(SessionEvent::kDisconnected);
  } else if (zkState == ZOO_EXPIRED_SESSION_STATE) {
    expireSession("expired by the server");
  } else if (zkState == ZOO_AUTH_FAILED_STATE) {
    expireSession("the server refused our credentials", /*backoff=*/true);
  }
  // ZOO_ASSOCIATING_STATE (handshake in progress) and read-only mode change nothing here.
}

void ZkClient::onAuthReply(uint64_t generation, int rc) {
  if (closed_ || !handle_ || generation != handle_->generation || handle_->authSettled) return;
  if (rc == ZAUTHFAILED) {
    spdlog::error("ZooKeeper refused the credentials of digest user '{}' ({})", options_.credentials->user,
                  options_.connectString);
    expireSession("the server refused our credentials", /*backoff=*/true);
    return;
  }
  // ZOK; or the connection dropped before the answer: the library sends the credentials again
  // first on the next connection, and a refusal then arrives as ZOO_AUTH_FAILED_STATE.
  handle_->authSettled = true;
  if (rc == ZOK) spdlog::info("ZooKeeper: authenticated as digest user '{}'", options_.credentials->user);
  if (zoo_state(handle_->zh) == ZOO_CONNECTED_STATE) onSessionState(ZOO_CONNECTED_STATE);
}

void ZkClient::onExpiryTimer(uint64_t generation) {
  if (closed_ || generation != generation_ || state_ != SessionState::kDisconnected) return;
  expireSession("no connection for " + std::to_string(negotiatedTimeout_.count()) + " ms (the session timeout)");
}

void ZkClient::expireSession(const std::string& reason, bool backoff) {
  if (closed_) return;
  spdlog::warn("ZooKeeper session {} expired: {}; opening a new session", hexId(sessionId_), reason);
  expiryTimer_.cancel();
  closeHandle();
  sessionId_ = 0;
  state_ = SessionState::kConnecting;
  countSession();
  notifyStateChange();
  // The owner gives up leadership and ephemeral-based state before anything new happens.
  emit(SessionEvent::kExpired);
  if (closed_) return;  // a listener closed the client
  if (backoff) {
    scheduleReopen();
    return;
  }
  Status st = openHandle();
  if (!st.isOk()) {
    spdlog::warn("{}; retrying", st.message());
    scheduleReopen();
  }
}

void ZkClient::emit(SessionEvent event) {
  // Listeners may add or cancel listeners (or close the client) while being called.
  std::vector<std::pair<uint64_t, std::shared_ptr<SessionCallback>>> snapshot(listeners_.begin(), listeners_.end());
  for (auto& [id, callback] : snapshot) {
    if (closed_) return;
    if (listeners_.count(id) == 0) continue;
    (*callback)(event);
  }
}

void ZkClient::notifyStateChange() {
  for (auto& waiter : stateWaiters_) waiter->cancel();
}

Subscription ZkClient::onSessionEvent(SessionCallback callback) {
  uint64_t id = nextId_++;
  listeners_.emplace(id, std::make_shared<SessionCallback>(std::move(callback)));
  return Subscription([weak = weak_from_this(), id] {
    if (auto self = weak.lock()) self->listeners_.erase(id);
  });
}

awaitable<Status> ZkClient::waitConnected(milliseconds timeout) {
  auto self = shared_from_this();
  auto deadline = Clock::now() + timeout;
  while (state_ != SessionState::kConnected) {
    if (closed_) co_return makeError(ErrorCode::kUnavailable, "ZooKeeper client is closed");
    if (Clock::now() >= deadline) {
      co_return makeError(ErrorCode::kDeadlineExceeded, "no ZooKeeper session with " + options_.connectString +
                                                            " within " + std::to_string(timeout.count()) + " ms");
    }
    auto timer = std::make_shared<asio::steady_timer>(executor_, deadline);
    auto it = stateWaiters_.insert(stateWaiters_.end(), timer);
    boost::system::error_code ec;
    co_await timer->async_wait(asio::redirect_error(use_awaitable, ec));
    stateWaiters_.erase(it);
  }
  if (!chrootReady_ && !chroot_.empty()) {
    Status st = co_await ensureFullPath(chroot_);
    if (!st.isOk()) co_return st.prepend("creating the chroot node " + chroot_);
    if (options_.credentials) co_await warnIfChrootOpen();
  }
  chrootReady_ = true;
  co_return Status::ok();
}

awaitable<void> ZkClient::warnIfChrootOpen() {
  // A chroot made before credentials were configured keeps its open ACL (ZooKeeper never
  // changes an ACL by itself), and so may nodes below it: say so once, with the way out.
  std::string chroot = chroot_;
  StartFn start = [chroot](ZkHandle& h, PendingOp& op) {
    return zoo_aget_acl(h.zh, chroot.c_str(), aclCompletion, &op);
  };
  RawReply reply = co_await call(start, Retry::kIdempotent);
  if (reply.rc == ZNOAUTH) {
    // Reading an ACL needs read permission: the chroot is someone else's.
    spdlog::error("ZooKeeper: digest user '{}' may not read the chroot {} (ZNOAUTH): it was created with other "
                  "credentials (another password in the credentials file?), and every request under it will be refused",
                  options_.credentials->user, chroot_);
    co_return;
  }
  if (reply.rc != ZOK) {
    spdlog::warn("ZooKeeper: cannot read the ACL of the chroot {}: {}", chroot_, zkCodeName(reply.rc));
    co_return;
  }
  if (std::find(reply.aclSchemes.begin(), reply.aclSchemes.end(), "world") != reply.aclSchemes.end()) {
    spdlog::warn("ZooKeeper: the chroot {} is open to anyone (world ACL): it was created without credentials, and "
                 "nodes below it created then are open too; restrict them (docs/security.md, \"Moving an open "
                 "deployment to ACLs\")",
                 chroot_);
  }
}

SessionCredentials ZkClient::sessionCredentials() const {
  SessionCredentials out;
  if (!handle_ || state_ != SessionState::kConnected) return out;
  const clientid_t* id = zoo_client_id(handle_->zh);
  if (!id) return out;
  out.id = id->client_id;
  out.password.assign(id->passwd, sizeof(id->passwd));
  return out;
}

void ZkClient::close() {
  if (closed_) return;
  closed_ = true;
  state_ = SessionState::kClosed;
  countSession();
  expiryTimer_.cancel();
  reopenTimer_.cancel();
  if (handle_) spdlog::info("closing ZooKeeper session {}", hexId(sessionId_));
  closeHandle();
  for (auto& [id, watch] : watches_) watch->cancelled = true;
  watches_.clear();
  listeners_.clear();
  sessionId_ = 0;
  notifyStateChange();
}

// ---------------------------------------------------------------------------------------------
// Requests.

awaitable<RawReply> ZkClient::callOnce(StartFn start) {
  if (closed_) co_return RawReply{ZCLOSING};
  if (!handle_) co_return RawReply{ZINVALIDSTATE};  // between sessions; retryable
  ZkHandle* handle = handle_.get();
  const auto sent = Clock::now();
  RawReply reply = co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(RawReply)>(
      [handle, &start](auto handler) {
        auto owned = std::make_unique<PendingOp>();
        owned->handle = handle;
        owned->complete = makeCompleter(std::move(handler), handle->executor);
        PendingOp& op = handle->add(std::move(owned));
        int rc = start(*handle, op);
        // Refused synchronously: the library will never call back for it.
        if (rc != ZOK) {
          if (auto mine = handle->take(&op)) mine->complete(RawReply{rc});
        }
      },
      use_awaitable);
  if (options_.onRequest && !closed_) options_.onRequest(zkResultName(reply.rc), Clock::now() - sent);
  co_return reply;
}

std::string_view zkResultName(int rc) {
  switch (rc) {
    case ZOK: return "ok";
    case ZNONODE: return "no_node";
    case ZNODEEXISTS: return "node_exists";
    case ZBADVERSION: return "bad_version";
    case ZNOTEMPTY: return "not_empty";
    case ZCONNECTIONLOSS: return "connection_loss";
    case ZOPERATIONTIMEOUT: return "operation_timeout";
    case ZSESSIONEXPIRED: return "session_expired";
    case ZCLOSING: return "closing";
    case ZINVALIDSTATE: return "invalid_state";
    case ZNOAUTH: return "no_auth";
    default: return "other";
  }
}

awaitable<RawReply> ZkClient::call(StartFn start, Retry retry) {
  auto self = shared_from_this();
  auto budget = options_.retryBudget.count() > 0 ? options_.retryBudget : options_.sessionTimeout;
  auto deadline = Clock::now() + budget;
  Backoff backoff(options_.backoffInitial, options_.backoffMax);
  while (true) {
    RawReply reply = co_await callOnce(start);
    if (closed_ || retry == Retry::kNever || !isRetryableForIdempotent(reply.rc)) co_return reply;
    auto now = Clock::now();
    if (now >= deadline) co_return reply;
    co_await sleepFor(std::min(backoff.next(), std::chrono::ceil<milliseconds>(deadline - now)));
  }
}

awaitable<void> ZkClient::sleepFor(milliseconds delay) {
  asio::steady_timer timer(executor_, delay);
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
}

awaitable<Result<std::string>> ZkClient::create(std::string path, std::string data, CreateMode mode) {
  auto self = shared_from_this();
  if (auto st = validatePath(path); !st.isOk()) co_return st.error();
  if (path == "/") co_return makeError(ErrorCode::kInvalidArgument, "create /: the root always exists");
  std::string full = applyChroot(chroot_, path);
  int flags = createFlags(mode);
  // Named, not a temporary: GCC 12 destroys a lambda converted to a coroutine's
  // std::function parameter twice when it is built inside the co_await expression.
  const struct ACL_vector* acl = createAcl();
  StartFn start = [full, data, flags, acl](ZkHandle& h, PendingOp& op) {
    return zoo_acreate(h.zh, full.c_str(), data.data(), static_cast<int>(data.size()), acl, flags, stringCompletion,
                       &op);
  };
  RawReply reply = co_await call(start, Retry::kNever);
  if (reply.rc != ZOK) co_return zkError(reply.rc, "create", path, /*outcomeUnknown=*/true);
  auto relative = stripChroot(chroot_, reply.createdPath);
  if (!relative) {
    co_return makeError(ErrorCode::kInternal, "create " + path + ": server returned " + reply.createdPath +
                                                  ", outside the chroot " + chroot_);
  }
  co_return *relative;
}

const struct ACL_vector* ZkClient::createAcl() const {
  // "auth" scheme: the server replaces it with the identities this session authenticated as.
  return options_.credentials ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE;
}

awaitable<Status> ZkClient::ensureFullPath(std::string fullPath) {
  if (fullPath.empty() || fullPath == "/") co_return Status::ok();
  StartFn start = [fullPath](ZkHandle& h, PendingOp& op) {
    return zoo_aexists(h.zh, fullPath.c_str(), 0, statCompletion, &op);
  };
  RawReply existing = co_await call(start, Retry::kIdempotent);
  if (existing.rc == ZOK) co_return Status::ok();
  size_t pos = 1;
  while (true) {
    pos = fullPath.find('/', pos);
    std::string prefix = pos == std::string::npos ? fullPath : fullPath.substr(0, pos);
    // Retrying is safe here: ZNODEEXISTS (ours from an earlier attempt, or anyone's) is success.
    const struct ACL_vector* acl = createAcl();
    StartFn start = [prefix, acl](ZkHandle& h, PendingOp& op) {
      return zoo_acreate(h.zh, prefix.c_str(), "", 0, acl, ZOO_PERSISTENT, stringCompletion, &op);
    };
    RawReply reply = co_await call(start, Retry::kIdempotent);
    if (reply.rc != ZOK && reply.rc != ZNODEEXISTS) co_return zkError(reply.rc, "ensurePath: create", prefix);
    if (pos == std::string::npos) break;
    ++pos;
  }
  co_return Status::ok();
}

awaitable<Status> ZkClient::ensurePath(std::string path) {
  auto self = shared_from_this();
  if (auto st = validatePath(path); !st.isOk()) co_return st;
  Status st = co_await ensureFullPath(applyChroot(chroot_, path));
  co_return st;
}

awaitable<Result<NodeData>> ZkClient::get(std::string path) {
  auto self = shared_from_this();
  if (auto st = validatePath(path); !st.isOk()) co_return st.error();
  std::string full = applyChroot(chroot_, path);
  StartFn start = [full](ZkHandle& h, PendingOp& op) { return zoo_aget(h.zh, full.c_str(), 0, dataCompletion, &op); };
  RawReply reply = co_await call(start, Retry::kIdempotent);
  if (reply.rc != ZOK) co_return zkError(reply.rc, "get", path);
  co_return NodeData{reply.data.value_or(std::string()), reply.stat.value_or(NodeStat{})};
}

awaitable<Result<NodeStat>> ZkClient::set(std::string path, std::string data, int32_t expectedVersion) {
  auto self = shared_from_this();
  if (auto st = validatePath(path); !st.isOk()) co_return st.error();
  if (expectedVersion < -1) {
    co_return makeError(ErrorCode::kInvalidArgument, "set " + path + ": expected version must be >= -1");
  }
  std::string full = applyChroot(chroot_, path);
  // A versionless set is idempotent; a versioned one is a compare-and-set whose retry after
  // a lost reply would report a false conflict, so it is left to the caller.
  Retry retry = expectedVersion == -1 ? Retry::kIdempotent : Retry::kNever;
  StartFn start = [full, data, expectedVersion](ZkHandle& h, PendingOp& op) {
    return zoo_aset(h.zh, full.c_str(), data.data(), static_cast<int>(data.size()), expectedVersion, statCompletion,
                    &op);
  };
  RawReply reply = co_await call(start, retry);
  if (reply.rc != ZOK) co_return zkError(reply.rc, "set", path, retry == Retry::kNever);
  co_return reply.stat.value_or(NodeStat{});
}

awaitable<Status> ZkClient::remove(std::string path, int32_t expectedVersion) {
  auto self = shared_from_this();
  if (auto st = validatePath(path); !st.isOk()) co_return st;
  if (path == "/") co_return makeError(ErrorCode::kInvalidArgument, "remove /: refusing to remove the root");
  std::string full = applyChroot(chroot_, path);
  StartFn start = [full, expectedVersion](ZkHandle& h, PendingOp& op) {
    return zoo_adelete(h.zh, full.c_str(), expectedVersion, voidCompletion, &op);
  };
  RawReply reply = co_await call(start, Retry::kNever);
  if (reply.rc != ZOK) co_return zkError(reply.rc, "remove", path, /*outcomeUnknown=*/true);
  co_return Status::ok();
}

awaitable<Status> ZkClient::removeTree(std::string fullPath, std::string userPath) {
  // Children may be added while we delete; a few rounds settle it, a busy writer wins.
  constexpr int kRounds = 10;
  for (int round = 0; round < kRounds; ++round) {
    StartFn start = [fullPath](ZkHandle& h, PendingOp& op) {
      return zoo_aget_children2(h.zh, fullPath.c_str(), 0, stringsStatCompletion, &op);
    };
    RawReply kids = co_await call(start, Retry::kIdempotent);
    if (kids.rc == ZNONODE) co_return Status::ok();
    if (kids.rc != ZOK) co_return zkError(kids.rc, "removeRecursive: children", userPath);
    for (const auto& kid : kids.strings) {
      Status st = co_await removeTree(joinPath(fullPath, kid), joinPath(userPath, kid));
      if (!st.isOk()) co_return st;
    }
    // Retrying is safe: ZNONODE after a lost reply means the node is gone, which is the goal.
    StartFn removeStart = [fullPath](ZkHandle& h, PendingOp& op) {
      return zoo_adelete(h.zh, fullPath.c_str(), -1, voidCompletion, &op);
    };
    RawReply removed = co_await call(removeStart, Retry::kIdempotent);
    if (removed.rc == ZOK || removed.rc == ZNONODE) co_return Status::ok();
    if (removed.rc != ZNOTEMPTY) co_return zkError(removed.rc, "removeRecursive: remove", userPath);
  }
  co_return makeError(ErrorCode::kConflict, "removeRecursive " + userPath + ": children keep being added");
}

awaitable<Status> ZkClient::removeRecursive(std::string path) {
  auto self = shared_from_this();
  if (auto st = validatePath(path); !st.isOk()) co_return st;
  if (path == "/") co_return makeError(ErrorCode::kInvalidArgument, "removeRecursive /: refusing to remove the root");
  Status st = co_await removeTree(applyChroot(chroot_, path), path);
  co_return st;
}

awaitable<Result<std::vector<std::string>>> ZkClient::children(std::string path) {
  auto self = shared_from_this();
  if (auto st = validatePath(path); !st.isOk()) co_return st.error();
  std::string full = applyChroot(chroot_, path);
  StartFn start = [full](ZkHandle& h, PendingOp& op) {
    return zoo_aget_children2(h.zh, full.c_str(), 0, stringsStatCompletion, &op);
  };
  RawReply reply = co_await call(start, Retry::kIdempotent);
  if (reply.rc != ZOK) co_return zkError(reply.rc, "children", path);
  co_return std::move(reply.strings);
}

awaitable<Result<std::optional<NodeStat>>> ZkClient::exists(std::string path) {
  auto self = shared_from_this();
  if (auto st = validatePath(path); !st.isOk()) co_return st.error();
  std::string full = applyChroot(chroot_, path);
  StartFn start = [full](ZkHandle& h, PendingOp& op) {
    return zoo_aexists(h.zh, full.c_str(), 0, statCompletion, &op);
  };
  RawReply reply = co_await call(start, Retry::kIdempotent);
  if (reply.rc == ZNONODE) co_return std::optional<NodeStat>();
  if (reply.rc != ZOK) co_return zkError(reply.rc, "exists", path);
  co_return std::optional<NodeStat>(reply.stat.value_or(NodeStat{}));
}

awaitable<Result<std::vector<ZkOpResult>>> ZkClient::multi(std::vector<ZkOp> ops) {
  auto self = shared_from_this();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (auto st = validatePath(ops[i].path); !st.isOk()) {
      co_return st.error().prepend("multi op #" + std::to_string(i) + " (" + opKindName(ops[i].kind) + ")");
    }
    if (ops[i].kind == ZkOp::Kind::kCheck && ops[i].version < 0) {
      co_return makeError(ErrorCode::kInvalidArgument,
                          "multi op #" + std::to_string(i) + " (check " + ops[i].path + "): needs a version >= 0");
    }
  }
  if (ops.empty()) co_return std::vector<ZkOpResult>{};
  auto shared = std::make_shared<const std::vector<ZkOp>>(std::move(ops));
  std::string chroot = chroot_;
  const struct ACL_vector* acl = createAcl();
  StartFn start = [shared, chroot, acl](ZkHandle& h, PendingOp& op) {
    const auto& list = *shared;
    auto buffers = std::make_unique<detail::MultiBuffers>();
    size_t n = list.size();
    // Reserved up front: the zoo_op_t entries point into these strings and buffers.
    buffers->kinds.reserve(n);
    buffers->paths.reserve(n);
    buffers->datas.reserve(n);
    buffers->pathBuffers.reserve(n);
    buffers->stats.resize(n);
    buffers->ops.resize(n);
    buffers->results.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const ZkOp& o = list[i];
      buffers->kinds.push_back(o.kind);
      buffers->paths.push_back(applyChroot(chroot, o.path));
      buffers->datas.push_back(o.data);
      buffers->pathBuffers.emplace_back(buffers->paths[i].size() + 32, '\0');
      const char* p = buffers->paths[i].c_str();
      const std::string& d = buffers->datas[i];
      switch (o.kind) {
        case ZkOp::Kind::kCreate:
          zoo_create_op_init(&buffers->ops[i], p, d.data(), static_cast<int>(d.size()), acl, createFlags(o.mode),
                             buffers->pathBuffers[i].data(), static_cast<int>(buffers->pathBuffers[i].size()));
          break;
        case ZkOp::Kind::kSet:
          zoo_set_op_init(&buffers->ops[i], p, d.data(), static_cast<int>(d.size()), o.version, &buffers->stats[i]);
          break;
        case ZkOp::Kind::kRemove:
          zoo_delete_op_init(&buffers->ops[i], p, o.version);
          break;
        case ZkOp::Kind::kCheck:
          zoo_check_op_init(&buffers->ops[i], p, o.version);
          break;
      }
    }
    op.multi = std::move(buffers);
    // The C client (3.8.0) must never see a multi on an unrecoverable handle (expired
    // session, failed auth): it refuses the first op, then frees a stale request path for
    // each later one (`free_duplicate_path` on an uninitialized request in zoo_amulti), which
    // are our buffers: a double free. Seen as heap corruption in a worker resumed from a
    // SIGSTOP past its session timeout, multis issued before its expiry event reached us.
    // zoo_amulti reads the state again, so only an expiry within these few instructions
    // could still reach that path.
    if (zoo_state(h.zh) < 0) return static_cast<int>(ZINVALIDSTATE);
    return zoo_amulti(h.zh, static_cast<int>(n), op.multi->ops.data(), op.multi->results.data(), voidCompletion, &op);
  };
  RawReply reply = co_await call(start, Retry::kNever);
  const auto& list = *shared;
  if (reply.rc != ZOK) {
    // Name the op that failed (the others report ZOK or ZRUNTIMEINCONSISTENCY).
    for (size_t i = 0; i < reply.multiErrors.size() && i < list.size(); ++i) {
      int err = reply.multiErrors[i];
      if (err != ZOK && err != ZRUNTIMEINCONSISTENCY) {
        co_return zkError(err, "multi op #" + std::to_string(i) + " (" + opKindName(list[i].kind) + ")", list[i].path);
      }
    }
    co_return zkError(reply.rc, "multi", "(" + std::to_string(list.size()) + " ops)", /*outcomeUnknown=*/true);
  }
  std::vector<ZkOpResult> results = std::move(reply.multiResults);
  for (auto& r : results) {
    if (r.createdPath.empty()) continue;
    auto relative = stripChroot(chroot_, r.createdPath);
    if (relative) r.createdPath = *relative;
  }
  co_return results;
}

// ---------------------------------------------------------------------------------------------
// Watches.

Result<Subscription> ZkClient::watchData(std::string path, DataCallback callback) {
  return addWatch(true, std::move(path), std::move(callback), nullptr);
}

Result<Subscription> ZkClient::watchChildren(std::string path, ChildrenCallback callback, CoalesceFn coalesce) {
  return addWatch(false, std::move(path), nullptr, std::move(callback), std::move(coalesce));
}

Result<Subscription> ZkClient::addWatch(bool dataWatch, std::string path, DataCallback onData,
                                        ChildrenCallback onChildren, CoalesceFn coalesce) {
  if (auto st = validatePath(path); !st.isOk()) return st.error().prepend(dataWatch ? "watchData" : "watchChildren");
  if (closed_) return makeError(ErrorCode::kUnavailable, "watch " + path + ": ZooKeeper client is closed");
  auto watch = std::make_shared<detail::WatchEntry>();
  watch->id = nextId_++;
  watch->dataWatch = dataWatch;
  watch->fullPath = applyChroot(chroot_, path);
  watch->path = std::move(path);
  watch->onData = std::move(onData);
  watch->onChildren = std::move(onChildren);
  watch->coalesce = std::move(coalesce);
  watches_.emplace(watch->id, watch);
  rearm(watch);
  return Subscription([weak = weak_from_this(), id = watch->id] {
    auto self = weak.lock();
    if (!self) return;
    auto it = self->watches_.find(id);
    if (it == self->watches_.end()) return;
    it->second->cancelled = true;
    self->watches_.erase(it);
  });
}

void ZkClient::rearm(const std::shared_ptr<detail::WatchEntry>& watch) {
  if (watch->cancelled || closed_) return;
  if (watch->inflight) {
    watch->dirty = true;
    return;
  }
  watch->inflight = true;
  asio::co_spawn(executor_, watchLoop(shared_from_this(), watch),
                 [](std::exception_ptr e) { logSpawnFailure(e, "ZooKeeper watch refresh"); });
}

void ZkClient::rearmAll() {
  for (auto& [id, watch] : watches_) rearm(watch);
}

awaitable<void> ZkClient::watchLoop(std::shared_ptr<ZkClient> self, std::shared_ptr<detail::WatchEntry> watch) {
  bool failed = false;
  while (!watch->cancelled && !self->closed_) {
    // The ZooKeeper watch is spent until the next read: changes until then cost nothing and
    // arrive together in it. The window is asked again while it runs (kCoalesceRecheckMin), so
    // one that shrinks meanwhile (the caller now wants the change at once) ends it early.
    while (watch->coalesce && watch->lastRefresh && !watch->cancelled && !self->closed_) {
      const auto window = watch->coalesce();
      const auto due = *watch->lastRefresh + window;
      const auto now = std::chrono::steady_clock::now();
      if (now >= due) break;
      const auto recheck = std::clamp(window / 10, kCoalesceRecheckMin, kCoalesceRecheckMax);
      co_await self->sleepFor(std::min(std::chrono::ceil<std::chrono::milliseconds>(due - now), recheck));
    }
    if (watch->cancelled || self->closed_) break;
    watch->lastRefresh = std::chrono::steady_clock::now();
    watch->dirty = false;
    Status st = co_await self->refreshWatch(*watch);
    if (!st.isOk()) {
      spdlog::warn("ZooKeeper watch on {}: {}", watch->path, st.message());
      failed = true;
      break;
    }
    if (!watch->dirty) break;
  }
  watch->inflight = false;
  // After a connection-level failure the next (re)connect re-arms every watch; a failure
  // while connected is retried after a pause.
  if (failed && self->state_ == SessionState::kConnected && !watch->cancelled) {
    asio::co_spawn(self->executor_, delayedRearm(self, watch),
                   [](std::exception_ptr e) { logSpawnFailure(e, "ZooKeeper watch retry"); });
  }
}

awaitable<void> ZkClient::delayedRearm(std::shared_ptr<ZkClient> self, std::shared_ptr<detail::WatchEntry> watch) {
  co_await self->sleepFor(self->options_.backoffMax);
  self->rearm(watch);
}

awaitable<Status> ZkClient::refreshWatch(detail::WatchEntry& watch) {
  const std::string full = watch.fullPath;
  // Read with a watch set. When the node is missing, an exists-watch waits for its creation;
  // if it appeared in between, read again.
  while (true) {
    if (watch.dataWatch) {
      StartFn start = [full](ZkHandle& h, PendingOp& op) {
        return zoo_aget(h.zh, full.c_str(), 1, dataCompletion, &op);
      };
      RawReply got = co_await call(start, Retry::kIdempotent);
      if (got.rc == ZOK) {
        NodeData value{got.data.value_or(std::string()), got.stat.value_or(NodeStat{})};
        std::pair<bool, int64_t> signature{true, value.stat.mzxid};
        if (!watch.cancelled && watch.lastSignature != signature) {
          watch.lastSignature = signature;
          watch.onData(std::optional<NodeData>(std::move(value)));
        }
        co_return Status::ok();
      }
      if (got.rc != ZNONODE) co_return zkError(got.rc, "watch get", watch.path);
    } else {
      StartFn start = [full](ZkHandle& h, PendingOp& op) {
        return zoo_aget_children2(h.zh, full.c_str(), 1, stringsStatCompletion, &op);
      };
      RawReply kids = co_await call(start, Retry::kIdempotent);
      if (kids.rc == ZOK) {
        std::pair<bool, int64_t> signature{true, kids.stat ? kids.stat->pzxid : 0};
        if (!watch.cancelled && watch.lastSignature != signature) {
          watch.lastSignature = signature;
          watch.onChildren(kids.strings);
        }
        co_return Status::ok();
      }
      if (kids.rc != ZNONODE) co_return zkError(kids.rc, "watch children", watch.path);
    }
    StartFn start = [full](ZkHandle& h, PendingOp& op) {
      return zoo_aexists(h.zh, full.c_str(), 1, statCompletion, &op);
    };
    RawReply present = co_await call(start, Retry::kIdempotent);
    if (present.rc == ZOK) continue;
    if (present.rc != ZNONODE) co_return zkError(present.rc, "watch exists", watch.path);
    std::pair<bool, int64_t> signature{false, 0};
    if (!watch.cancelled && watch.lastSignature != signature) {
      watch.lastSignature = signature;
      if (watch.dataWatch) {
        watch.onData(std::nullopt);
      } else {
        watch.onChildren({});
      }
    }
    co_return Status::ok();
  }
}

}  // namespace tellus::coord
