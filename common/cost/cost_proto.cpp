#include "cost/cost_proto.h"

#include <fmt/format.h>

#include <algorithm>

namespace tellus::cost {

namespace {

// The site ids of config/values.h (cost does not depend on config): [a-z0-9][a-z0-9-]*.
bool isSiteName(std::string_view s) {
  const auto lowerAlnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  return !s.empty() && s.size() <= 64 && lowerAlnum(s.front()) &&
         std::all_of(s.begin(), s.end(), [&](char c) { return lowerAlnum(c) || c == '-'; });
}

}  // namespace

pb::SitePrices toProto(const Prices& prices) {
  pb::SitePrices out;
  out.set_container_hour(prices.container_hour);
  out.set_market(prices.market);
  for (const auto& [site, price] : prices.egress_gb) (*out.mutable_egress_gb())[site] = price;
  out.set_egress_default_gb(prices.egress_default_gb);
  return out;
}

Result<Prices> fromProto(const pb::SitePrices& in, std::string_view site) {
  const auto bad = [&](const std::string& what) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("prices of site '{}': {}", site.substr(0, 64), what));
  };
  Prices out;
  if (!isValidPrice(in.container_hour())) return bad(fmt::format("container_hour {} is not a price", in.container_hour()));
  out.container_hour = in.container_hour();
  // An old master publishes no prices at all: its market is empty, and it charges nothing.
  if (!in.market().empty()) {
    if (!isMarket(in.market())) return bad(fmt::format("unknown market '{}'", in.market().substr(0, 64)));
    out.market = in.market();
  }
  if (!isValidPrice(in.egress_default_gb())) return bad(fmt::format("egress_default_gb {} is not a price", in.egress_default_gb()));
  out.egress_default_gb = in.egress_default_gb();
  if (static_cast<size_t>(in.egress_gb_size()) > kMaxEgressPrices) {
    return bad(fmt::format("{} egress prices, at most {}", in.egress_gb_size(), kMaxEgressPrices));
  }
  for (const auto& [to, price] : in.egress_gb()) {
    if (!isSiteName(to)) return bad(fmt::format("egress to '{}', not a site id", to.substr(0, 64)));
    if (!isValidPrice(price)) return bad(fmt::format("egress to '{}' of {}, not a price", to, price));
    out.egress_gb[to] = price;
  }
  return out;
}

pb::JobCost toProto(const JobCost& cost) {
  pb::JobCost out;
  for (const auto& s : cost.sites) {
    auto* o = out.add_sites();
    o->set_site(s.site);
    o->set_container_seconds(s.container_seconds);
    o->set_container_cost(s.container_cost);
    o->set_market(s.market);
    o->set_priced(s.priced);
  }
  for (const auto& p : cost.pairs) {
    auto* o = out.add_pairs();
    o->set_from_site(p.from);
    o->set_to_site(p.to);
    o->set_bytes(p.bytes);
    o->set_egress_cost(p.egress_cost);
    o->set_priced(p.priced);
  }
  out.set_container_cost(cost.container_cost);
  out.set_egress_cost(cost.egress_cost);
  out.set_total(cost.total);
  for (const auto& site : cost.unpriced) out.add_unpriced_sites(site);
  return out;
}

}  // namespace tellus::cost
