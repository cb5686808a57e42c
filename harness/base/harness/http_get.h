#pragma once
// Plain-HTTP reads of the daemons' status ports for tests: one blocking GET, and the sum of a
// metric's samples in a Prometheus text body.

#include <string>
#include <vector>

namespace tellus::harness {

struct HttpResult {
  unsigned status = 0;
  std::string contentType;
  std::string body;
};

// One GET of `target` from `hostPort` ("host:port"), blocking, bounded by 10 s. Throws on a
// connection or protocol error (boost::system::system_error).
HttpResult httpGet(const std::string& hostPort, const std::string& target);

// The sum of every sample of `name` (exactly that name, with or without labels) whose labels
// contain all of `labels` (`key="value"`); 0 when there is none.
double metricSum(const std::string& metrics, const std::string& name, const std::vector<std::string>& labels = {});

}  // namespace tellus::harness
