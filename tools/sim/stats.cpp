#include "sim/stats.h"

#include <algorithm>
#include <cmath>

namespace tellus::sim {
namespace {
// Up to 1e12 (seconds, bytes ratios...): log(1e18) / log(1.005) bins.
constexpr int kBins = 8400;
}  // namespace

StreamingStats::StreamingStats() : bins_(kBins, 0) {}

int StreamingStats::binOf(double value) const {
  const int bin = static_cast<int>(std::log(value / kSmallest) / std::log(kGrowth));
  return std::clamp(bin, 0, kBins - 1);
}

double StreamingStats::binValue(int bin) const {
  // The geometric middle of the bin: at most half a bin (0.25%) from any sample in it.
  return kSmallest * std::pow(kGrowth, bin + 0.5);
}

void StreamingStats::add(double value) {
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  ++count_;
  sum_ += value;
  if (value < kSmallest) {
    ++tiny_;
  } else {
    ++bins_[static_cast<size_t>(binOf(value))];
  }
}

double StreamingStats::quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // Rank of the sample, 1-based, nearest-rank definition.
  const auto rank = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * static_cast<double>(count_))));
  if (rank <= tiny_) return 0;
  int64_t seen = tiny_;
  for (int bin = 0; bin < kBins; ++bin) {
    seen += bins_[static_cast<size_t>(bin)];
    if (seen >= rank) return std::clamp(binValue(bin), min_, max_);
  }
  return max_;
}

}  // namespace tellus::sim
