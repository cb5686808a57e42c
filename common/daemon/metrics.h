#pragma once
// The metrics a daemon serves on /metrics, in Prometheus' text format (version 0.0.4). A
// daemon registers each metric family once with a function that reads its current samples;
// nothing is stored, so a scrape always sees the daemon's live state.
// Same threading as the daemon: register before start, render on the io thread.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tellus::daemon {

struct MetricSample {
  std::vector<std::pair<std::string, std::string>> labels;  // name, value; in this order
  double value = 0;
};

class MetricsRegistry {
 public:
  // A gauge family: `name` ([a-zA-Z_:][a-zA-Z0-9_:]*), one line of help, and what it reads.
  void gauge(std::string name, std::string help, std::function<std::vector<MetricSample>()> read);
  // A counter family (values only grow while the daemon runs; by convention named `..._total`).
  void counter(std::string name, std::string help, std::function<std::vector<MetricSample>()> read);

  // Every family, in registration order: # HELP, # TYPE, then one line per sample.
  std::string render() const;

  bool empty() const { return families_.empty(); }

 private:
  struct Family {
    std::string name;
    std::string help;
    std::string type;
    std::function<std::vector<MetricSample>()> read;
  };
  std::vector<Family> families_;
};

}  // namespace tellus::daemon
