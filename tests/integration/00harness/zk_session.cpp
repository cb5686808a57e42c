#include "harness/zk_session.h"

#include <zookeeper/zookeeper.h>

#include <cstring>
#include <thread>

namespace tellus::harness {
namespace {
void ignoreEvents(zhandle_t*, int, int, const char*, void*) {}
// The joining handle's connection chatter is expected noise in test output.
void ignoreLog(const char*) {}
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
  zhandle_t* zh = zookeeper_init2(connectString.c_str(), ignoreEvents, static_cast<int>(timeout.count()), &id, nullptr,
                                  0, ignoreLog);
  if (zh == nullptr) return makeError(ErrorCode::kInternal, "zookeeper_init(" + connectString + ") failed");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (zoo_state(zh) != ZOO_CONNECTED_STATE) {
    if (zoo_state(zh) == ZOO_EXPIRED_SESSION_STATE) {
      zookeeper_close(zh);
      return makeError(ErrorCode::kNotFound, "session " + std::to_string(sessionId) + " has already expired");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      zookeeper_close(zh);
      return makeError(ErrorCode::kDeadlineExceeded, "could not join session " + std::to_string(sessionId));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  int rc = zookeeper_close(zh);  // closing the session server-side is the point
  if (rc != ZOK) return makeError(ErrorCode::kInternal, std::string("closing the joined session: ") + zerror(rc));
  return Status::ok();
}

}  // namespace tellus::harness
