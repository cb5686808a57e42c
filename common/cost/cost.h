#pragma once
// What a job costs (pure, no I/O, no clock): the usage a job accumulated — container time per
// site and bytes sent per ordered site pair — priced with each site's declared prices (the
// `prices` section of a master's config, published in its site record). The master answering
// `tellus status` / `tellus cost` and `tellus-sim` both price through price(), so the CLI and
// the simulator never disagree on what a unit of usage costs.
//
// Egress is charged by the sending site (clouds bill the bytes leaving a region): the bytes of
// the pair (from, to) at from's `egress_gb` price for `to` (or its default). 1 GB = 1e9 bytes.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tellus::cost {

inline constexpr double kBytesPerGb = 1e9;
// A price outside [0, kMaxPrice] (or not finite) is refused wherever it is read: a config, a
// site record someone else wrote.
inline constexpr double kMaxPrice = 1e9;
// At most this many per-site egress prices in one site's prices (they are published in the site
// record, read by every master).
inline constexpr size_t kMaxEgressPrices = 1024;

bool isValidPrice(double price);

// on-demand | spot: a label shown next to a site's container cost (the price is what counts).
bool isMarket(std::string_view market);
inline constexpr const char* kMarketForm = "on-demand|spot";

struct Prices {
  double container_hour = 0;          // currency units per container-hour
  std::string market = "on-demand";
  std::map<std::string, double> egress_gb;  // per GB sent to that site
  double egress_default_gb = 0;       // per GB sent to any other site
  // The price per GB of sending to `site`.
  double egressTo(const std::string& site) const;
};

// A job's usage. Sums saturate at UINT64_MAX (they add values read from ZooKeeper).
struct Usage {
  std::map<std::string, uint64_t> containerMs;                   // by site that ran executions
  std::map<std::pair<std::string, std::string>, uint64_t> bytes;  // (from, to): bytes sent
  void addContainerMs(const std::string& site, uint64_t ms);
  void addBytes(const std::string& from, const std::string& to, uint64_t n);
  void add(const Usage& other);
  bool operator==(const Usage&) const = default;
};

struct SiteCost {
  std::string site;
  double container_seconds = 0;
  double container_cost = 0;
  std::string market;   // of its prices ("" when unpriced)
  bool priced = false;  // false: no prices known for the site (charged 0)
};
struct PairCost {
  std::string from, to;
  uint64_t bytes = 0;
  double egress_cost = 0;
  bool priced = false;  // false: no prices known for `from` (charged 0)
};
struct JobCost {
  std::vector<SiteCost> sites;  // by site name
  std::vector<PairCost> pairs;  // by (from, to)
  double container_cost = 0;
  double egress_cost = 0;
  double total = 0;
  std::vector<std::string> unpriced;  // sites with usage but no known prices
};

// Prices `usage` with each site's `prices` (a site without an entry costs 0 and is listed in
// `unpriced`, so a reader can tell "free" from "unknown").
JobCost price(const Usage& usage, const std::map<std::string, Prices>& prices);

}  // namespace tellus::cost
