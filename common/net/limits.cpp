#include "net/limits.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace tellus::net {

ConnectionLimiter::Verdict ConnectionLimiter::admit(const std::string& peerIp) {
  if (maxTotal_ != 0 && total_ >= maxTotal_) return Verdict::kOverTotal;
  std::size_t& mine = perPeer_[peerIp];
  if (maxPerPeer_ != 0 && mine >= maxPerPeer_) return Verdict::kOverPerPeer;
  ++mine;
  ++total_;
  return Verdict::kAdmit;
}

void ConnectionLimiter::release(const std::string& peerIp) {
  auto it = perPeer_.find(peerIp);
  if (it == perPeer_.end() || it->second == 0) return;
  --total_;
  if (--it->second == 0) perPeer_.erase(it);
}

std::size_t ConnectionLimiter::of(const std::string& peerIp) const {
  auto it = perPeer_.find(peerIp);
  return it == perPeer_.end() ? 0 : it->second;
}

TokenBucket::TokenBucket(double ratePerSecond, double burst, Clock::time_point now)
    : rate_(std::max(0.0, ratePerSecond)), burst_(std::max(1.0, burst)), tokens_(burst_), last_(now) {}

bool TokenBucket::take(Clock::time_point now) {
  if (rate_ <= 0) return true;
  if (now > last_) {
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * rate_);
    last_ = now;
  }
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

std::optional<std::chrono::milliseconds> frameDeadline(std::optional<std::size_t> frameBytes,
                                                       std::chrono::milliseconds base,
                                                       std::uint64_t minBytesPerSecond) {
  if (base.count() <= 0) return std::nullopt;
  if (!frameBytes || minBytesPerSecond == 0) return base;
  // Whole milliseconds, rounded up; frames are at most 4 GiB, so this cannot overflow.
  const std::uint64_t allowanceMs = (static_cast<std::uint64_t>(*frameBytes) * 1000 + minBytesPerSecond - 1) /
                                    minBytesPerSecond;
  return base + std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(allowanceMs));
}

std::optional<std::uint64_t> LogThrottle::allow(Clock::time_point now) {
  if (last_ && now - *last_ < interval_) {
    ++suppressed_;
    return std::nullopt;
  }
  last_ = now;
  return std::exchange(suppressed_, 0);
}

}  // namespace tellus::net
