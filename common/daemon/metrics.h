#pragma once
// The metrics a daemon serves on /metrics, in Prometheus' text format (version 0.0.4): every
// family with # HELP and # TYPE, label values escaped. Three kinds:
//   gauge(...)      a function read at scrape time (the daemon's live state; nothing stored);
//   counter(...)    a stored count per label values, only ever increased (`_total` names);
//   histogram(...)  stored observations per label values in fixed buckets (cumulative
//                   `_bucket{le=...}`, `_sum`, `_count`), e.g. durations in seconds.
// Metrics are declared once, with name, help (say the unit) and label names; a counter or
// histogram is then updated through the reference returned, which lives as long as the
// registry. A family keeps at most kMaxSeriesPerFamily label combinations: values seen after
// that are counted under every label = "_other" (label values may come from the network).
// Same threading as the daemon: declare before start, update and render on the io thread.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace tellus::daemon {

inline constexpr std::size_t kMaxSeriesPerFamily = 1000;

// Bucket bounds (seconds) for durations from milliseconds to minutes.
inline const std::vector<double> kDurationBuckets{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                 1,     2.5,   5,    10,    30,   60,  120, 300};

// An outcome as a `result` label: "ok", or the error code ("invalid_argument", "not_found",
// "already_exists", "unavailable", "deadline_exceeded", "conflict", "internal",
// "resource_exhausted", "permission_denied").
std::string_view resultLabel(std::optional<ErrorCode> error);

struct MetricSample {
  std::vector<std::pair<std::string, std::string>> labels;  // name, value; in this order
  double value = 0;
};

// Values of a family's labels, in the order of its label names.
using LabelValues = std::vector<std::string>;

class Counter {
 public:
  // Adds `by` (negative amounts are ignored: a counter never goes down).
  void inc(const LabelValues& values = {}, double by = 1);
  // The current value for these label values (0 if never increased); for tests and gauges.
  double value(const LabelValues& values = {}) const;

 private:
  friend class MetricsRegistry;
  explicit Counter(std::vector<std::string> labelNames) : labelNames_(std::move(labelNames)) {}
  std::vector<std::string> labelNames_;
  std::map<LabelValues, double> series_;
};

class Histogram {
 public:
  void observe(const LabelValues& values, double value);
  void observe(double value) { observe({}, value); }
  // Observations so far for these label values; for tests.
  uint64_t count(const LabelValues& values = {}) const;

 private:
  friend class MetricsRegistry;
  Histogram(std::vector<std::string> labelNames, std::vector<double> bounds)
      : labelNames_(std::move(labelNames)), bounds_(std::move(bounds)) {}
  struct Series {
    std::vector<uint64_t> buckets;  // per bound, not cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  std::vector<std::string> labelNames_;
  std::vector<double> bounds_;  // ascending; +Inf is implicit
  std::map<LabelValues, Series> series_;
};

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // A gauge family: `name` ([a-zA-Z_:][a-zA-Z0-9_:]*), one line of help, and what it reads.
  void gauge(std::string name, std::string help, std::function<std::vector<MetricSample>()> read);
  // A counter family (name ending in _total by convention) with these label names.
  Counter& counter(std::string name, std::string help, std::vector<std::string> labelNames = {});
  // A histogram family; `bounds` ascending (the +Inf bucket is added).
  Histogram& histogram(std::string name, std::string help, std::vector<std::string> labelNames,
                       std::vector<double> bounds = kDurationBuckets);
  // A counter family whose values a function reads at scrape time (totals the daemon keeps
  // itself; they only grow while it runs).
  void counterFn(std::string name, std::string help, std::function<std::vector<MetricSample>()> read);

  // Every family, in declaration order: # HELP, # TYPE, then one line per sample.
  std::string render() const;

  bool empty() const { return families_.empty(); }

 private:
  struct Family {
    std::string name;
    std::string help;
    std::string type;
    std::function<std::vector<MetricSample>()> read;  // gauge
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Histogram> histogram;
  };
  std::vector<Family> families_;
};

}  // namespace tellus::daemon
