#include "daemon/metrics.h"

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

}  // namespace

void MetricsRegistry::gauge(std::string name, std::string help, std::function<std::vector<MetricSample>()> read) {
  families_.push_back(Family{std::move(name), std::move(help), "gauge", std::move(read)});
}

void MetricsRegistry::counter(std::string name, std::string help, std::function<std::vector<MetricSample>()> read) {
  families_.push_back(Family{std::move(name), std::move(help), "counter", std::move(read)});
}

std::string MetricsRegistry::render() const {
  // Appends only: GCC 12's -Wrestrict misfires on `"literal" + std::string&&` at -O3.
  std::string out;
  for (const auto& family : families_) {
    fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", family.name, family.help, family.name,
                   family.type);
    for (const auto& sample : family.read()) {
      out += family.name;
      if (!sample.labels.empty()) {
        out += '{';
        for (std::size_t i = 0; i < sample.labels.size(); ++i) {
          if (i > 0) out += ',';
          fmt::format_to(std::back_inserter(out), "{}=\"{}\"", sample.labels[i].first,
                         escapeLabelValue(sample.labels[i].second));
        }
        out += '}';
      }
      out += ' ';
      out += formatValue(sample.value);
      out += '\n';
    }
  }
  return out;
}

}  // namespace tellus::daemon
