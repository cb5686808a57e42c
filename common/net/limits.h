#pragma once
// Pure decisions behind the RPC server's transport limits (net/rpc_server.h): who may connect,
// how fast a connection may call, how long a frame may take to arrive, and how often a refusal
// is logged. No sockets and no clock inside (time is passed in), so each is unit-tested alone.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

namespace tellus::net {

// Counts open connections in total and per peer IP, and says whether one more may open.
// One peer IP may stand for many processes (every executor and JM of a host), so the
// per-peer cap is a fuse against one misbehaving host, not a per-process quota.
class ConnectionLimiter {
 public:
  enum class Verdict { kAdmit, kOverTotal, kOverPerPeer };

  // 0 means no limit.
  ConnectionLimiter(std::size_t maxTotal, std::size_t maxPerPeer) : maxTotal_(maxTotal), maxPerPeer_(maxPerPeer) {}

  // Counts the connection when admitted; a refused one is not counted (nothing to release).
  Verdict admit(const std::string& peerIp);
  // Undoes one admit() of peerIp. Releasing an unknown peer is a no-op.
  void release(const std::string& peerIp);

  std::size_t total() const { return total_; }
  std::size_t of(const std::string& peerIp) const;

 private:
  std::size_t maxTotal_;
  std::size_t maxPerPeer_;
  std::size_t total_ = 0;
  std::unordered_map<std::string, std::size_t> perPeer_;  // no entry for a peer with none open
};

// Token bucket: `ratePerSecond` tokens a second, at most `burst` saved up (it starts full).
// ratePerSecond == 0 disables it (take() always succeeds).
class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  TokenBucket(double ratePerSecond, double burst, Clock::time_point now);

  // Takes one token if there is one.
  bool take(Clock::time_point now);

 private:
  double rate_;
  double burst_;
  double tokens_;
  Clock::time_point last_;
};

// How long a frame may take to arrive once its first byte has: `base`, plus the time its
// declared size takes at `minBytesPerSecond` (0: no allowance). A 64 MiB frame on a slow WAN
// link needs minutes, while a slowloris peer trickling a small frame is cut off after `base`.
// frameBytes is std::nullopt while the header is incomplete. base == 0 disables the deadline
// (returns std::nullopt).
std::optional<std::chrono::milliseconds> frameDeadline(std::optional<std::size_t> frameBytes,
                                                       std::chrono::milliseconds base,
                                                       std::uint64_t minBytesPerSecond);

// At most one log line per `interval`; the lines in between are counted so the next one can
// say how many were suppressed (a flood of refused peers must not flood the log).
class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LogThrottle(std::chrono::milliseconds interval) : interval_(interval) {}

  // The number of lines suppressed since the last one when a line may be logged now,
  // std::nullopt when it must be suppressed (and is counted).
  std::optional<std::uint64_t> allow(Clock::time_point now);

 private:
  std::chrono::milliseconds interval_;
  std::optional<Clock::time_point> last_;
  std::uint64_t suppressed_ = 0;
};

}  // namespace tellus::net
