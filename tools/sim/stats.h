#pragma once
// Running statistics whose memory does not grow with the number of samples: exact count,
// mean, min and max, and quantiles from a log-spaced histogram (relative error <= 0.25%),
// so that a day-long trace keeps no per-job state after a job has been written out.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tellus::sim {

class StreamingStats {
 public:
  StreamingStats();
  void add(double value);

  int64_t count() const { return count_; }
  double sum() const { return sum_; }
  double mean() const { return count_ > 0 ? sum_ / static_cast<double>(count_) : 0.0; }
  double min() const { return count_ > 0 ? min_ : 0.0; }
  double max() const { return count_ > 0 ? max_ : 0.0; }
  // q in [0,1]; 0 when empty. Values below 1e-6 are reported as 0.
  double quantile(double q) const;

 private:
  static constexpr double kSmallest = 1e-6;
  static constexpr double kGrowth = 1.005;
  int binOf(double value) const;
  double binValue(int bin) const;

  int64_t count_ = 0;
  double sum_ = 0;
  double min_ = 0;
  double max_ = 0;
  int64_t tiny_ = 0;  // samples below kSmallest (incl. 0)
  std::vector<int64_t> bins_;
};

}  // namespace tellus::sim
