#pragma once
// Deterministic random numbers for the simulator. The standard library's distributions are
// implementation-defined (libstdc++ and libc++ give different normal/exponential streams),
// so every distribution here is written out by inverse transform on top of xoshiro256**:
// the same seed gives the same workload on every platform, byte for byte.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tellus::sim {

class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t next();
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n); n > 0.
  uint64_t below(uint64_t n);
  double exponential(double mean);
  // Pareto with shape `shape` (> 1) scaled so that its mean is `mean`.
  double pareto(double shape, double mean);
  // exp(uniform(log lo, log hi)): every order of magnitude equally likely.
  double logUniform(double lo, double hi);
  // An independent stream derived from this generator's seed and `stream`, so that adding
  // draws to one part of the workload does not shift the numbers of another.
  [[nodiscard]] Rng fork(uint64_t stream) const;

 private:
  uint64_t seed_;
  uint64_t s_[4];
};

// Zipf over ranks 1..n: P(rank k) ∝ 1 / k^skew. skew = 0 is uniform.
class ZipfDistribution {
 public:
  ZipfDistribution(int n, double skew);
  // A rank in [0, n), 0 being the most likely.
  int sample(Rng& rng) const;
  // Normalized weights, summing to 1.
  const std::vector<double>& weights() const { return weights_; }

 private:
  std::vector<double> weights_;
  std::vector<double> cumulative_;
};

// Pareto with shape `shape` truncated to [lo, hi], with lo solved so that the mean is `mean`
// and hi = maxOverMean x mean. The untruncated Pareto of paper 001 (β = 1.259) has infinite
// variance: a job's slowest of hundreds of tasks then dominates every response time and
// hides the scheduling policy, so the simulator bounds the tail (docs/sim.md).
class BoundedPareto {
 public:
  BoundedPareto(double shape, double mean, double maxOverMean);
  double sample(Rng& rng) const;
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  static double meanOf(double shape, double lo, double hi);

 private:
  double shape_, lo_, hi_;
};

// A uniformly random permutation of 0..n-1 (Fisher-Yates).
std::vector<int> randomPermutation(int n, Rng& rng);

}  // namespace tellus::sim
