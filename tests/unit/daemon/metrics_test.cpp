// The metrics registry renders Prometheus' text format exactly as the daemons always served it.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <limits>

#include "daemon/metrics.h"

namespace tellus::daemon {
namespace {

TEST_CASE("gauges render with help, type, labels and integer counts", "[unit][daemon]") {
  MetricsRegistry metrics;
  CHECK(metrics.empty());
  int workers = 3;
  metrics.gauge("tellus_master_workers", "Live workers registered with this master.",
                [&] { return std::vector<MetricSample>{{{{"site", "eu"}}, double(workers)}}; });
  metrics.gauge("tellus_master_containers", "Containers offered by live workers.", [] {
    return std::vector<MetricSample>{{{{"site", "eu"}, {"state", "total"}}, 8}, {{{"site", "eu"}, {"state", "free"}}, 5}};
  });
  workers = 4;  // read at render time, not at registration
  CHECK(metrics.render() ==
        "# HELP tellus_master_workers Live workers registered with this master.\n"
        "# TYPE tellus_master_workers gauge\n"
        "tellus_master_workers{site=\"eu\"} 4\n"
        "# HELP tellus_master_containers Containers offered by live workers.\n"
        "# TYPE tellus_master_containers gauge\n"
        "tellus_master_containers{site=\"eu\",state=\"total\"} 8\n"
        "tellus_master_containers{site=\"eu\",state=\"free\"} 5\n");
}

TEST_CASE("label values are escaped and non-integers keep their fraction", "[unit][daemon]") {
  MetricsRegistry metrics;
  metrics.gauge("tellus_test", "Test.", [] {
    return std::vector<MetricSample>{{{{"path", "a\"b\\c\nd"}}, 2.5},
                                     {{}, std::numeric_limits<double>::infinity()},
                                     {{}, -7}};
  });
  CHECK(metrics.render() ==
        "# HELP tellus_test Test.\n# TYPE tellus_test gauge\n"
        "tellus_test{path=\"a\\\"b\\\\c\\nd\"} 2.5\n"
        "tellus_test +Inf\n"
        "tellus_test -7\n");
}

TEST_CASE("counters keep a series per label values and never go down", "[unit][daemon]") {
  MetricsRegistry metrics;
  Counter& errors = metrics.counter("tellus_rpc_server_errors_total", "RPC calls answered with an error.",
                                    {"method", "code"});
  Counter& plain = metrics.counter("tellus_jm_launches_total", "Tasks launched.");
  errors.inc({"jm.Steal", "unavailable"});
  errors.inc({"jm.Steal", "unavailable"}, 2);
  errors.inc({"master.Put", "with \"quote\""});
  errors.inc({"jm.Steal", "unavailable"}, -5);  // ignored
  plain.inc();
  CHECK(errors.value({"jm.Steal", "unavailable"}) == 3);
  CHECK(errors.value({"nothing", "here"}) == 0);
  CHECK(metrics.render() ==
        "# HELP tellus_rpc_server_errors_total RPC calls answered with an error.\n"
        "# TYPE tellus_rpc_server_errors_total counter\n"
        "tellus_rpc_server_errors_total{method=\"jm.Steal\",code=\"unavailable\"} 3\n"
        "tellus_rpc_server_errors_total{method=\"master.Put\",code=\"with \\\"quote\\\"\"} 1\n"
        "# HELP tellus_jm_launches_total Tasks launched.\n"
        "# TYPE tellus_jm_launches_total counter\n"
        "tellus_jm_launches_total 1\n");
}

TEST_CASE("histograms render cumulative buckets, +Inf, sum and count", "[unit][daemon]") {
  MetricsRegistry metrics;
  Histogram& tasks = metrics.histogram("tellus_task_seconds", "Task run time in seconds.", {"kind"}, {0.5, 2});
  tasks.observe({"map"}, 0.25);
  tasks.observe({"map"}, 0.5);  // a bound is inclusive (le)
  tasks.observe({"map"}, 1.5);
  tasks.observe({"map"}, 10);
  CHECK(tasks.count({"map"}) == 4);
  CHECK(tasks.count({"reduce"}) == 0);
  CHECK(metrics.render() ==
        "# HELP tellus_task_seconds Task run time in seconds.\n"
        "# TYPE tellus_task_seconds histogram\n"
        "tellus_task_seconds_bucket{kind=\"map\",le=\"0.5\"} 2\n"
        "tellus_task_seconds_bucket{kind=\"map\",le=\"2\"} 3\n"
        "tellus_task_seconds_bucket{kind=\"map\",le=\"+Inf\"} 4\n"
        "tellus_task_seconds_sum{kind=\"map\"} 12.25\n"
        "tellus_task_seconds_count{kind=\"map\"} 4\n");
}

TEST_CASE("a family keeps a bounded number of series", "[unit][daemon]") {
  MetricsRegistry metrics;
  Counter& c = metrics.counter("tellus_test_total", "Test.", {"peer"});
  for (std::size_t i = 0; i < kMaxSeriesPerFamily + 10; ++i) c.inc({fmt::format("p{}", i)});
  CHECK(c.value({"p0"}) == 1);
  CHECK(c.value({"_other"}) == 10);
  const std::string text = metrics.render();
  std::size_t lines = 0;
  for (char ch : text) lines += ch == '\n';
  CHECK(lines == 2 + kMaxSeriesPerFamily + 1);
}

}  // namespace
}  // namespace tellus::daemon
