#include "sched/lp_value.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tellus::sched::detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Sorts candidate kinks (adding 0, dropping negatives and non-finite values) in place.
void prepareKinks(std::vector<double>& kinks) {
  kinks.push_back(0.0);
  std::erase_if(kinks, [](double b) { return !std::isfinite(b) || b < 0; });
  std::sort(kinks.begin(), kinks.end());
  kinks.erase(std::unique(kinks.begin(), kinks.end()), kinks.end());
}

// Smallest T >= 0 with gap(T) >= 0, for a gap that is non-decreasing, piecewise linear with
// its kinks among the sorted `kinks` (see prepareKinks), and constant or linear beyond them.
template <class Gap>
double smallestFeasible(const std::vector<double>& kinks, const Gap& gap) {
  constexpr double kSlack = 1e-12;
  if (gap(kinks.front()) >= -kSlack) return kinks.front();
  if (gap(kinks.back()) < -kSlack) {
    // Past the last kink every term is linear: the gap may still grow.
    const double last = kinks.back();
    const double further = last + 1.0 + last;
    const double g0 = gap(last), g1 = gap(further);
    if (g1 <= g0 + kSlack) return kInf;
    return last + (0.0 - g0) * (further - last) / (g1 - g0);
  }
  std::size_t lo = 0, hi = kinks.size() - 1;  // gap(lo) < 0 <= gap(hi)
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    if (gap(kinks[mid]) >= -kSlack) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  const double a = kinks[lo], b = kinks[hi];
  const double ga = gap(a), gb = gap(b);
  if (gb - ga <= 0) return b;
  return std::clamp(a + (0.0 - ga) * (b - a) / (gb - ga), a, b);
}

// Golden-section minimization of a convex function that may be +inf on a left part of the
// interval (infeasible compute bounds are always the small ones).
template <class F>
std::pair<double, double> minimizeConvex(double lo, double hi, const F& f) {
  constexpr double kRatio = 0.6180339887498949;
  double a = lo, b = hi;
  double x1 = b - kRatio * (b - a), x2 = a + kRatio * (b - a);
  double f1 = f(x1), f2 = f(x2);
  for (int i = 0; i < 64 && b - a > 1e-12 * std::max(1.0, b); ++i) {
    if (f1 <= f2 && std::isfinite(f1)) {
      b = x2;
      x2 = x1;
      f2 = f1;
      x1 = b - kRatio * (b - a);
      f1 = f(x1);
    } else {
      a = x1;
      x1 = x2;
      f1 = f2;
      x2 = a + kRatio * (b - a);
      f2 = f(x2);
    }
  }
  double best = lo, bestValue = f(lo);
  for (double x : {x1, x2, a, b, hi}) {
    const double v = f(x);
    if (v < bestValue) {
      best = x;
      bestValue = v;
    }
  }
  return {best, bestValue};
}

}  // namespace

StageTimes mapLpValue(const std::vector<SiteResources>& sites, const MapStage& stage) {
  const std::size_t n = sites.size();
  const double total = std::accumulate(stage.inputGB.begin(), stage.inputGB.end(), 0.0);
  const double work = stage.taskS * stage.tasks;
  if (stage.tasks == 0) return {};
  std::vector<double> share(n);
  for (std::size_t x = 0; x < n; ++x) share[x] = total > 0 ? stage.inputGB[x] / total : 1.0 / static_cast<double>(n);
  double slots = 0, minSlots = kInf;
  for (const auto& s : sites) {
    slots += s.slots;
    if (s.slots > 0) minSlots = std::min(minSlots, static_cast<double>(s.slots));
  }
  if (slots == 0) return {kInf, kInf};
  // Zero-time tasks make the compute rows vacuous: everything runs where it is, for free.
  if (work == 0) return {};

  std::vector<double> excess(n), spare(n), kinks;
  kinks.reserve(n + 1);
  // Least T_aggr for a compute bound: exporters ship their excess, importers take it.
  auto aggrFor = [&](double computeS) -> double {
    double exported = 0, spareSum = 0, aggr = 0;
    for (std::size_t x = 0; x < n; ++x) {
      const double capacity = computeS * sites[x].slots / work;
      excess[x] = std::max(0.0, share[x] - capacity);
      spare[x] = std::max(0.0, capacity - share[x]);
      exported += excess[x];
      spareSum += spare[x];
      if (excess[x] > 1e-15) {
        if (total <= 0) continue;
        aggr = std::max(aggr, sites[x].upGBps > 0 ? total * excess[x] / sites[x].upGBps : kInf);
      }
    }
    if (exported > spareSum + 1e-12) return kInf;
    if (exported <= 1e-15 || total <= 0) return aggr;
    kinks.clear();
    for (std::size_t y = 0; y < n; ++y)
      if (sites[y].downGBps > 0) kinks.push_back(spare[y] * total / sites[y].downGBps);
    prepareKinks(kinks);
    const double importS = smallestFeasible(kinks, [&](double t) {
      double can = 0;
      for (std::size_t y = 0; y < n; ++y) can += std::min(spare[y], t * sites[y].downGBps / total);
      return can - exported;
    });
    return std::max(aggr, importS);
  };
  const double lo = work / slots;
  const double hi = std::max(lo, 2.0 * work / minSlots);
  const auto [computeS, value] = minimizeConvex(lo, hi, [&](double c) { return c + aggrFor(c); });
  if (!std::isfinite(value)) return {kInf, kInf};
  return StageTimes{value - computeS, computeS};
}

StageTimes reduceLpValue(const std::vector<SiteResources>& sites, const ReduceStage& stage) {
  const std::size_t n = sites.size();
  const double total = std::accumulate(stage.shuffleGB.begin(), stage.shuffleGB.end(), 0.0);
  const double work = stage.taskS * stage.tasks;
  if (stage.tasks == 0) return {};
  double slots = 0, minSlots = kInf;
  for (const auto& s : sites) {
    slots += s.slots;
    if (s.slots > 0) minSlots = std::min(minSlots, static_cast<double>(s.slots));
  }
  if (slots == 0) return {kInf, kInf};

  std::vector<double> cap(n), kinks;
  kinks.reserve(2 * n + 1);
  // lo_x(T) = max(0, 1 - T up_x / I_x): site x must keep this much of its data's reduce work.
  auto low = [&](std::size_t x, double t) {
    const double in = stage.shuffleGB[x];
    if (in <= 0) return 0.0;
    return sites[x].upGBps > 0 ? std::max(0.0, 1.0 - t * sites[x].upGBps / in) : 1.0;
  };
  // hi_x(T) = min(cap_x, T down_x / (I - I_x)).
  auto high = [&](std::size_t x, double t) {
    const double other = total - stage.shuffleGB[x];
    const double byNetwork = other > 0 ? (sites[x].downGBps > 0 ? t * sites[x].downGBps / other : 0.0) : 1.0;
    return std::min(cap[x], byNetwork);
  };
  auto shuffleFor = [&](double computeS) -> double {
    for (std::size_t x = 0; x < n; ++x) cap[x] = work > 0 ? std::min(1.0, computeS * sites[x].slots / work) : (sites[x].slots > 0 ? 1.0 : 0.0);
    if (total <= 0) {
      double capSum = std::accumulate(cap.begin(), cap.end(), 0.0);
      return capSum >= 1 - 1e-12 ? 0.0 : kInf;
    }
    double need = 0;
    kinks.clear();
    for (std::size_t x = 0; x < n; ++x) {
      const double in = stage.shuffleGB[x], other = total - in, up = sites[x].upGBps, down = sites[x].downGBps;
      // Per site: lo_x(T) <= hi_x(T), both monotone, closed form.
      if (in > 0) {
        if (up <= 0) {
          if (cap[x] < 1 - 1e-12) return kInf;
          if (other > 0) {
            if (down <= 0) return kInf;
            need = std::max(need, other / down);
          }
        } else {
          need = std::max(need, (1 - cap[x]) * in / up);
          if (other > 0) {
            const double rate = up / in + (down > 0 ? down / other : 0.0);
            need = std::max(need, 1.0 / rate);
          }
          kinks.push_back(in / up);
        }
      }
      if (other > 0 && down > 0) kinks.push_back(cap[x] * other / down);
    }
    prepareKinks(kinks);
    const double sumLow = smallestFeasible(kinks, [&](double t) {
      double s = 0;
      for (std::size_t x = 0; x < n; ++x) s += low(x, t);
      return 1.0 - s;
    });
    const double sumHigh = smallestFeasible(kinks, [&](double t) {
      double s = 0;
      for (std::size_t x = 0; x < n; ++x) s += high(x, t);
      return s - 1.0;
    });
    return std::max({need, sumLow, sumHigh});
  };
  const double lo = work > 0 ? work / slots : 0.0;
  const double hi = work > 0 ? std::max(lo, work / minSlots) : 0.0;
  if (hi <= lo) {
    const double shuffle = shuffleFor(lo);
    return std::isfinite(shuffle) ? StageTimes{shuffle, lo} : StageTimes{kInf, kInf};
  }
  const auto [computeS, value] = minimizeConvex(lo, hi, [&](double c) { return c + shuffleFor(c); });
  if (!std::isfinite(value)) return {kInf, kInf};
  return StageTimes{value - computeS, computeS};
}

}  // namespace tellus::sched::detail
