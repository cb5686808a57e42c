#include "cost/cost.h"

#include <cmath>
#include <limits>
#include <set>

namespace tellus::cost {

namespace {

uint64_t saturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}

}  // namespace

bool isValidPrice(double price) { return std::isfinite(price) && price >= 0 && price <= kMaxPrice; }

bool isMarket(std::string_view market) { return market == "on-demand" || market == "spot"; }

double Prices::egressTo(const std::string& site) const {
  auto it = egress_gb.find(site);
  return it != egress_gb.end() ? it->second : egress_default_gb;
}

void Usage::addContainerMs(const std::string& site, uint64_t ms) {
  auto& total = containerMs[site];
  total = saturatingAdd(total, ms);
}

void Usage::addBytes(const std::string& from, const std::string& to, uint64_t n) {
  auto& total = bytes[{from, to}];
  total = saturatingAdd(total, n);
}

void Usage::add(const Usage& other) {
  for (const auto& [site, ms] : other.containerMs) addContainerMs(site, ms);
  for (const auto& [pair, n] : other.bytes) addBytes(pair.first, pair.second, n);
}

JobCost price(const Usage& usage, const std::map<std::string, Prices>& prices) {
  JobCost out;
  std::set<std::string> unpriced;
  for (const auto& [site, ms] : usage.containerMs) {
    SiteCost c;
    c.site = site;
    c.container_seconds = static_cast<double>(ms) / 1000.0;
    if (auto p = prices.find(site); p != prices.end()) {
      c.priced = true;
      c.market = p->second.market;
      c.container_cost = c.container_seconds / 3600.0 * p->second.container_hour;
    } else {
      unpriced.insert(site);
    }
    out.container_cost += c.container_cost;
    out.sites.push_back(std::move(c));
  }
  for (const auto& [pair, n] : usage.bytes) {
    PairCost c;
    c.from = pair.first;
    c.to = pair.second;
    c.bytes = n;
    if (auto p = prices.find(pair.first); p != prices.end()) {
      c.priced = true;
      c.egress_cost = static_cast<double>(n) / kBytesPerGb * p->second.egressTo(pair.second);
    } else {
      unpriced.insert(pair.first);
    }
    out.egress_cost += c.egress_cost;
    out.pairs.push_back(std::move(c));
  }
  out.total = out.container_cost + out.egress_cost;
  out.unpriced.assign(unpriced.begin(), unpriced.end());
  return out;
}

}  // namespace tellus::cost
