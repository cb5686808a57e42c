#pragma once
// ZooKeeper return codes -> Tellus errors, retry classification and backoff. Pure; the
// codes are the C client's ZOO_ERRORS values (ZNONODE, ZCONNECTIONLOSS, ...).

#include <chrono>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tellus::coord {

// "get /jobs/7: no node (ZNONODE)". Codes: ZNONODE -> kNotFound, ZNODEEXISTS ->
// kAlreadyExists, ZBADVERSION/ZNOTEMPTY -> kConflict, connection loss, timeouts, expired or
// closing sessions -> kUnavailable, bad arguments -> kInvalidArgument, the rest -> kInternal.
// `outcomeUnknown` adds that a write may or may not have been applied (set for
// non-idempotent writes that failed with a connection-level error).
Error zkError(int rc, std::string_view operation, std::string_view path, bool outcomeUnknown = false);

// The symbolic name of a return code ("ZNONODE"), "ZUNKNOWN(<n>)" for unknown codes.
std::string zkCodeName(int rc);

// Connection-level failures after which the request may or may not have reached the server.
bool isConnectionError(int rc);

// Whether an idempotent request (a read, a versionless set, a create that tolerates
// ZNODEEXISTS) may be retried after `rc`: connection loss, operation timeout, throttling,
// and a lost session (the client opens a new one; reads do not depend on the session).
bool isRetryableForIdempotent(int rc);

// Capped exponential backoff: initial, 2x initial, ... up to `max`.
class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max)
      : initial_(initial), max_(max), next_(initial) {}
  std::chrono::milliseconds next() {
    auto current = next_;
    next_ = std::min(next_ * 2, max_);
    return current;
  }
  void reset() { next_ = initial_; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds max_;
  std::chrono::milliseconds next_;
};

}  // namespace tellus::coord
