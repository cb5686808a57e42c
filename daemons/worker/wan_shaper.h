#pragma once
// WAN emulation on the sending side: each destination site has a token bucket refilled at the
// link's bandwidth, plus a fixed one-way latency per chunk. Pure: the caller passes `now` and
// waits until the returned time before sending.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"

namespace tellus::worker {

class WanShaper {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WanShaper(const std::vector<config::WanLink>& links = {});

  // When `bytes` to `site` may be handed to the network if it is ready at `now`: chunks to
  // one site go out back to back at the link's rate, each delayed by the link's latency.
  // Unknown sites and links without a bandwidth are unlimited.
  Clock::time_point reserve(const std::string& site, size_t bytes, Clock::time_point now);

 private:
  struct Link {
    double bytesPerSecond = 0;  // 0 = unlimited
    std::chrono::milliseconds latency{0};
    Clock::time_point freeAt{};  // when the link has sent everything reserved so far
  };
  std::map<std::string, Link> links_;
};

}  // namespace tellus::worker
