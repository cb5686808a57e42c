// The metrics registry renders Prometheus' text format exactly as the daemons always served it.
#include <catch2/catch.hpp>

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

}  // namespace
}  // namespace tellus::daemon
