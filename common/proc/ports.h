#pragma once
// Loopback port helpers for tests and for local clusters started on one machine.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace tellus::proc {

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0 and read it back).
// Inherently racy: another process may take it before the caller binds it, so callers that
// start servers must detect a bind failure.
Result<uint16_t> findFreePort();

// `count` distinct free ports: all are held open at once, so they never repeat within one call.
Result<std::vector<uint16_t>> findFreePorts(size_t count);

// Waits until something accepts TCP connections on host:port (host is a numeric IPv4 address,
// normally "127.0.0.1"). kDeadlineExceeded when the deadline passes first.
Status waitForTcpPort(const std::string& host, uint16_t port, std::chrono::steady_clock::time_point deadline);

}  // namespace tellus::proc
