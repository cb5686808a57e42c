#pragma once
// Forcing a ZooKeeper session to expire from the outside (the Curator/Mesos test trick): a
// second handle joins the session with its id and password and closes it, so the server ends
// the session and the original client hears "session expired" on its next contact.

#include <chrono>
#include <cstdint>
#include <string>

#include "util/result.h"

namespace tellus::harness {

Status expireSession(const std::string& connectString, int64_t sessionId, const std::string& password,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

}  // namespace tellus::harness
