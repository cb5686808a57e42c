#include "sched/lease.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tellus::sched {

void ComputeHistory::record(const std::string& similarity, const std::string& node, double computeS) {
  if (!std::isfinite(computeS) || computeS < 0) return;
  auto& records = records_[similarity][node];
  records.push_back(computeS);
  if (records.size() > k_) records.pop_front();
}

std::optional<double> ComputeHistory::meanS(const std::string& similarity, const std::string& node) const {
  auto cls = records_.find(similarity);
  if (cls == records_.end()) return std::nullopt;
  auto mean = [](const std::deque<double>& records) {
    double sum = 0;
    for (double r : records) sum += r;
    return sum / static_cast<double>(records.size());
  };
  if (auto here = cls->second.find(node); here != cls->second.end() && !here->second.empty()) return mean(here->second);
  double sum = 0;
  std::size_t count = 0;
  for (const auto& [n, records] : cls->second) {
    for (double r : records) sum += r;
    count += records.size();
  }
  if (count == 0) return std::nullopt;
  return sum / static_cast<double>(count);
}

double leaseEstimateS(const std::map<std::string, double>& remoteBytes,
                      const std::map<std::string, double>& inboundBytesPerS, std::optional<double> computeMeanS,
                      const LeaseParams& params) {
  if (!computeMeanS) return params.defaultS;
  double transferS = 0;
  for (const auto& [site, bytes] : remoteBytes) {
    if (bytes <= 0) continue;
    auto rate = inboundBytesPerS.find(site);
    if (rate == inboundBytesPerS.end() || !(rate->second > 0)) return params.defaultS;
    transferS += bytes / rate->second;
  }
  return std::max(0.0, transferS + *computeMeanS + params.slackS);
}

std::optional<double> leaseAccuracy(double runtimeS, double predictionS) {
  if (!(runtimeS > 0)) return std::nullopt;
  return std::max(0.0, 1.0 - std::abs(runtimeS - predictionS) / runtimeS);
}

double localityLevel(const std::vector<double>& taskBandwidths, double bMin) {
  if (taskBandwidths.empty()) return 1.0;
  const auto local = std::count_if(taskBandwidths.begin(), taskBandwidths.end(), [&](double b) { return b >= bMin; });
  return static_cast<double>(local) / static_cast<double>(taskBandwidths.size());
}

bool LocalityGate::admit(std::size_t key, double level, double now) {
  if (level >= minLevel_) {
    skippedSince_.erase(key);
    return true;
  }
  auto [it, first] = skippedSince_.try_emplace(key, now);
  if (now - it->second >= maxSkipS_) {
    skippedSince_.erase(it);
    return true;
  }
  return false;
}

std::optional<double> LocalityGate::nextDeadline() const {
  std::optional<double> out;
  for (const auto& [key, since] : skippedSince_) {
    if (!out || since + maxSkipS_ < *out) out = since + maxSkipS_;
  }
  return out;
}

double queuedStartAt(std::vector<double> freeAt, std::size_t position, double taskS) {
  if (freeAt.empty()) return std::numeric_limits<double>::infinity();
  std::sort(freeAt.begin(), freeAt.end());
  const std::size_t c = freeAt.size();
  return freeAt[position % c] + static_cast<double>(position / c) * taskS;
}

}  // namespace tellus::sched
