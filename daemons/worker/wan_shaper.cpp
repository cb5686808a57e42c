#include "worker/wan_shaper.h"

#include <algorithm>

namespace tellus::worker {

WanShaper::WanShaper(const std::vector<config::WanLink>& links) {
  for (const auto& l : links) {
    Link link;
    link.bytesPerSecond = l.bandwidth_mbps * 1e6 / 8;
    link.latency = std::chrono::milliseconds(l.latency_ms);
    links_[l.to_site] = link;
  }
}

WanShaper::Clock::time_point WanShaper::reserve(const std::string& site, size_t bytes, Clock::time_point now) {
  auto it = links_.find(site);
  if (it == links_.end()) return now;
  Link& link = it->second;
  Clock::time_point start = std::max(now, link.freeAt);
  if (link.bytesPerSecond > 0) {
    auto transmit = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(static_cast<double>(bytes) / link.bytesPerSecond));
    link.freeAt = start + transmit;
  } else {
    link.freeAt = start;
  }
  return link.freeAt + link.latency;
}

}  // namespace tellus::worker
