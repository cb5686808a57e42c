#include "harness/zk_session.h"

#include <zookeeper/zookeeper.h>

#include <cstring>

#include "harness/eventually.h"

namespace tellus::harness {
namespace {
void ignoreEvents(zhandle_t*, int, int, const char*, void*) {}
// The joining handle's connection chatter is expected noise in test output.
void ignoreLog(const char*) {}

// One attempt to join the session: a connected handle (the session now lives on it), or
// kNotFound once the server reports the session expired.
Result<zhandle_t*> joinSession(const std::string& connectString, const clientid_t& id, std::chrono::milliseconds timeout) {
  zhandle_t* zh = zookeeper_init2(connectString.c_str(), ignoreEvents, static_cast<int>(timeout.count()), &id, nullptr,
                                  0, ignoreLog);
  if (zh == nullptr) return makeError(ErrorCode::kInternal, "zookeeper_init(" + connectString + ") failed");
  int state = 0;
  bool settled = eventually(
      [&] {
        state = zoo_state(zh);
        return state == ZOO_CONNECTED_STATE || state == ZOO_EXPIRED_SESSION_STATE;
      },
      timeout);
  if (settled && state == ZOO_CONNECTED_STATE) return zh;
  zookeeper_close(zh);
  if (settled) return makeError(ErrorCode::kNotFound, "the server reports session " + std::to_string(id.client_id) + " expired");
  return makeError(ErrorCode::kDeadlineExceeded, "could not join session " + std::to_string(id.client_id));
}
}  // namespace

Status expireSession(const std::string& connectString, int64_t sessionId, const std::string& password,
                     std::chrono::milliseconds timeout) {
  clientid_t id{};
  id.client_id = sessionId;
  if (password.size() != sizeof(id.passwd)) {
    return makeError(ErrorCode::kInvalidArgument,
                     "session password must be " + std::to_string(sizeof(id.passwd)) + " bytes");
  }
  std::memcpy(id.passwd, password.data(), sizeof(id.passwd));
  // The original client reconnects as soon as the session moves to our handle and can win it
  // back before our close reaches the server; that close then fails ("session moved") and the
  // session lives on. So join and close until the server itself says the session is gone.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (bool closed = false;; closed = true) {
    auto joined = joinSession(connectString, id, timeout);
    if (!joined && joined.error().code == ErrorCode::kNotFound) {
      if (closed) return Status::ok();
      return makeError(ErrorCode::kNotFound, "session " + std::to_string(sessionId) + " has already expired");
    }
    if (!joined) return joined.status();
    zookeeper_close(*joined);  // closing the session server-side is the point
    if (std::chrono::steady_clock::now() >= deadline) {
      return makeError(ErrorCode::kDeadlineExceeded, "session " + std::to_string(sessionId) + " still alive after closing it");
    }
  }
}

}  // namespace tellus::harness
