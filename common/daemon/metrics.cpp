#include "daemon/metrics.h"

#include <cassert>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace tellus::daemon {

namespace {

// Label values escape backslash, double quote and newline (the exposition format's rule).
std::string escapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Counts print as integers ("3", not "3.0"), as scrapers and dashboards have always seen them.
std::string formatValue(double value) {
  if (std::isfinite(value) && value == std::trunc(value) && std::fabs(value) < 9.0e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

void appendSample(std::string& out, const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
                  double value) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out += ',';
      fmt::format_to(std::back_inserter(out), "{}=\"{}\"", labels[i].first, escapeLabelValue(labels[i].second));
    }
    out += '}';
  }
  out += ' ';
  out += formatValue(value);
  out += '\n';
}

std::vector<std::pair<std::string, std::string>> zipLabels(const std::vector<std::string>& names,
                                                           const LabelValues& values) {
  std::vector<std::pair<std::string, std::string>> labels;
  for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) labels.emplace_back(names[i], values[i]);
  return labels;
}

// The series key for `values`: as given while the family has room, else the "_other" series.
template <class Map>
LabelValues seriesKey(const Map& series, const std::vector<std::string>& names, const LabelValues& values) {
  assert(values.size() == names.size());
  LabelValues key = values;
  key.resize(names.size());
  if (series.size() >= kMaxSeriesPerFamily && !series.count(key)) key.assign(names.size(), "_other");
  return key;
}

}  // namespace

std::string_view resultLabel(std::optional<ErrorCode> error) {
  if (!error) return "ok";
  switch (*error) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kAlreadyExists: return "already_exists";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kDeadlineExceeded: return "deadline_exceeded";
    case ErrorCode::kConflict: return "conflict";
    case ErrorCode::kInternal: return "internal";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kPermissionDenied: return "permission_denied";
  }
  return "internal";
}

void Counter::inc(const LabelValues& values, double by) {
  if (!(by > 0)) return;
  series_[seriesKey(series_, labelNames_, values)] += by;
}

double Counter::value(const LabelValues& values) const {
  auto it = series_.find(values);
  return it == series_.end() ? 0 : it->second;
}

void Histogram::observe(const LabelValues& values, double value) {
  if (std::isnan(value)) return;
  Series& s = series_[seriesKey(series_, labelNames_, values)];
  if (s.buckets.empty()) s.buckets.assign(bounds_.size(), 0);
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    if (value <= bounds_[i]) {
      ++s.buckets[i];
      break;
    }
  }
  ++s.count;
  s.sum += value;
}

uint64_t Histogram::count(const LabelValues& values) const {
  auto it = series_.find(values);
  return it == series_.end() ? 0 : it->second.count;
}

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

void MetricsRegistry::gauge(std::string name, std::string help, std::function<std::vector<MetricSample>()> read) {
  families_.push_back(Family{std::move(name), std::move(help), "gauge", std::move(read), nullptr, nullptr});
}

Counter& MetricsRegistry::counter(std::string name, std::string help, std::vector<std::string> labelNames) {
  auto counter = std::unique_ptr<Counter>(new Counter(std::move(labelNames)));
  Counter& ref = *counter;
  families_.push_back(Family{std::move(name), std::move(help), "counter", {}, std::move(counter), nullptr});
  return ref;
}

Histogram& MetricsRegistry::histogram(std::string name, std::string help, std::vector<std::string> labelNames,
                                      std::vector<double> bounds) {
  auto histogram = std::unique_ptr<Histogram>(new Histogram(std::move(labelNames), std::move(bounds)));
  Histogram& ref = *histogram;
  families_.push_back(Family{std::move(name), std::move(help), "histogram", {}, nullptr, std::move(histogram)});
  return ref;
}

void MetricsRegistry::counterFn(std::string name, std::string help, std::function<std::vector<MetricSample>()> read) {
  families_.push_back(Family{std::move(name), std::move(help), "counter", std::move(read), nullptr, nullptr});
}

std::string MetricsRegistry::render() const {
  // Appends only: GCC 12's -Wrestrict misfires on `"literal" + std::string&&` at -O3.
  std::string out;
  for (const auto& family : families_) {
    fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", family.name, family.help, family.name,
                   family.type);
    if (family.read) {
      for (const auto& sample : family.read()) appendSample(out, family.name, sample.labels, sample.value);
    } else if (family.counter) {
      for (const auto& [values, value] : family.counter->series_) {
        appendSample(out, family.name, zipLabels(family.counter->labelNames_, values), value);
      }
    } else if (family.histogram) {
      const Histogram& h = *family.histogram;
      const std::string bucketName = fmt::format("{}_bucket", family.name);
      for (const auto& [values, series] : h.series_) {
        auto labels = zipLabels(h.labelNames_, values);
        uint64_t cumulative = 0;
        for (std::size_t i = 0; i < h.bounds_.size(); ++i) {
          cumulative += series.buckets[i];
          auto withLe = labels;
          withLe.emplace_back("le", formatValue(h.bounds_[i]));
          appendSample(out, bucketName, withLe, static_cast<double>(cumulative));
        }
        auto inf = labels;
        inf.emplace_back("le", "+Inf");
        appendSample(out, bucketName, inf, static_cast<double>(series.count));
        appendSample(out, fmt::format("{}_sum", family.name), labels, series.sum);
        appendSample(out, fmt::format("{}_count", family.name), labels, static_cast<double>(series.count));
      }
    }
  }
  return out;
}

}  // namespace tellus::daemon
