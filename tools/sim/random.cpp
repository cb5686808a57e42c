#include "sim/random.h"

#include <algorithm>
#include <cassert>

namespace tellus::sim {
namespace {

uint64_t splitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed) : seed_(seed) {
  uint64_t state = seed;
  for (auto& word : s_) word = splitMix64(state);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

uint64_t Rng::below(uint64_t n) {
  assert(n > 0);
  // Rejection keeps the result unbiased for every n.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x = next();
  while (x >= limit) x = next();
  return x % n;
}

double Rng::exponential(double mean) { return -mean * std::log1p(-uniform()); }

double Rng::pareto(double shape, double mean) {
  assert(shape > 1.0);
  const double scale = mean * (shape - 1.0) / shape;
  // 1 - uniform() is in (0, 1], so the power is finite.
  return scale / std::pow(1.0 - uniform(), 1.0 / shape);
}

double Rng::logUniform(double lo, double hi) {
  assert(lo > 0 && hi >= lo);
  return std::exp(uniform(std::log(lo), std::log(hi)));
}

Rng Rng::fork(uint64_t stream) const {
  uint64_t state = seed_ ^ (0xd1b54a32d192ed03ULL * (stream + 1));
  return Rng(splitMix64(state));
}

ZipfDistribution::ZipfDistribution(int n, double skew) {
  assert(n > 0);
  weights_.resize(static_cast<size_t>(n));
  double total = 0;
  for (int k = 0; k < n; ++k) {
    weights_[static_cast<size_t>(k)] = 1.0 / std::pow(static_cast<double>(k + 1), skew);
    total += weights_[static_cast<size_t>(k)];
  }
  cumulative_.resize(weights_.size());
  double running = 0;
  for (size_t k = 0; k < weights_.size(); ++k) {
    weights_[k] /= total;
    running += weights_[k];
    cumulative_[k] = running;
  }
  cumulative_.back() = 1.0;
}

int ZipfDistribution::sample(Rng& rng) const {
  const double u = rng.uniform();
  const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
  return static_cast<int>(std::min<std::ptrdiff_t>(it - cumulative_.begin(),
                                              static_cast<std::ptrdiff_t>(cumulative_.size()) - 1));
}

BoundedPareto::BoundedPareto(double shape, double mean, double maxOverMean) : shape_(shape), hi_(mean * maxOverMean) {
  assert(shape > 0 && shape != 1.0 && mean > 0 && maxOverMean > 1);
  // meanOf is increasing in lo; lo in (0, mean).
  double a = 1e-12 * mean, b = mean;
  for (int i = 0; i < 200; ++i) {
    const double mid = (a + b) / 2;
    (meanOf(shape, mid, hi_) < mean ? a : b) = mid;
  }
  lo_ = (a + b) / 2;
}

double BoundedPareto::meanOf(double shape, double lo, double hi) {
  const double ratio = std::pow(lo / hi, shape);
  return shape * std::pow(lo, shape) / (1 - ratio) * (std::pow(lo, 1 - shape) - std::pow(hi, 1 - shape)) / (shape - 1);
}

double BoundedPareto::sample(Rng& rng) const {
  const double u = rng.uniform();
  const double ratio = std::pow(lo_ / hi_, shape_);
  return lo_ / std::pow(1 - u * (1 - ratio), 1 / shape_);
}

std::vector<int> randomPermutation(int n, Rng& rng) {
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  for (int i = n - 1; i > 0; --i) {
    const auto j = static_cast<size_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[j]);
  }
  return order;
}

}  // namespace tellus::sim
