// Pricing a job's usage (cost/cost.h) and the prices' wire form (cost/cost_proto.h): the same
// function prices `tellus cost` and `tellus-sim`, so its arithmetic is pinned here.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "cost/cost.h"
#include "cost/cost_proto.h"

using namespace tellus;
using namespace tellus::cost;

namespace {

Prices pricesOf(double containerHour, std::string market, std::map<std::string, double> egress, double egressDefault) {
  Prices p;
  p.container_hour = containerHour;
  p.market = std::move(market);
  p.egress_gb = std::move(egress);
  p.egress_default_gb = egressDefault;
  return p;
}

}  // namespace

TEST_CASE("usage is priced per site and per site pair, egress at the sender's price", "[unit][cost]") {
  Usage usage;
  usage.addContainerMs("us-east", 3'600'000);  // one container-hour
  usage.addContainerMs("eu-west", 1'800'000);  // half of one
  usage.addContainerMs("us-east", 1'800'000);
  usage.addBytes("us-east", "eu-west", 2'000'000'000);  // 2 GB
  usage.addBytes("eu-west", "us-east", 500'000'000);    // 0.5 GB
  usage.addBytes("eu-west", "ap-south", 1'000'000'000);

  const std::map<std::string, Prices> prices{
      {"us-east", pricesOf(0.10, "on-demand", {{"eu-west", 0.02}}, 0.09)},
      {"eu-west", pricesOf(0.04, "spot", {}, 0.05)},
  };
  const JobCost c = price(usage, prices);
  REQUIRE(c.sites.size() == 2);
  CHECK(c.sites[0].site == "eu-west");  // by name
  CHECK(c.sites[0].container_seconds == Approx(1800));
  CHECK(c.sites[0].container_cost == Approx(0.02));
  CHECK(c.sites[0].market == "spot");
  CHECK(c.sites[1].site == "us-east");
  CHECK(c.sites[1].container_seconds == Approx(5400));
  CHECK(c.sites[1].container_cost == Approx(0.15));
  REQUIRE(c.pairs.size() == 3);
  CHECK(c.pairs[0].from == "eu-west");
  CHECK(c.pairs[0].to == "ap-south");
  CHECK(c.pairs[0].egress_cost == Approx(0.05));  // eu-west's default
  CHECK(c.pairs[1].to == "us-east");
  CHECK(c.pairs[1].egress_cost == Approx(0.025));
  CHECK(c.pairs[2].from == "us-east");
  CHECK(c.pairs[2].egress_cost == Approx(0.04));  // us-east's price to eu-west, not its default
  CHECK(c.container_cost == Approx(0.17));
  CHECK(c.egress_cost == Approx(0.115));
  CHECK(c.total == Approx(0.285));
  CHECK(c.unpriced.empty());
}

TEST_CASE("zero prices cost nothing but keep the usage; unknown prices are told apart", "[unit][cost]") {
  Usage usage;
  usage.addContainerMs("a", 1500);
  usage.addContainerMs("b", 10);
  usage.addBytes("b", "a", 42);
  const JobCost c = price(usage, {{"a", Prices{}}});
  CHECK(c.total == 0);
  REQUIRE(c.sites.size() == 2);
  CHECK(c.sites[0].priced);
  CHECK(c.sites[0].container_seconds == Approx(1.5));
  CHECK(c.sites[0].market == "on-demand");
  CHECK_FALSE(c.sites[1].priced);
  CHECK(c.sites[1].container_seconds == Approx(0.01));
  REQUIRE(c.pairs.size() == 1);
  CHECK(c.pairs[0].bytes == 42);
  CHECK_FALSE(c.pairs[0].priced);
  CHECK(c.unpriced == std::vector<std::string>{"b"});
  CHECK(price(Usage{}, {}).total == 0);
}

TEST_CASE("usage sums saturate instead of wrapping", "[unit][cost]") {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  Usage a;
  a.addContainerMs("s", max - 1);
  a.addBytes("s", "t", max);
  Usage b;
  b.addContainerMs("s", 5);
  b.addBytes("s", "t", 1);
  b.addBytes("t", "s", 7);
  a.add(b);
  CHECK(a.containerMs.at("s") == max);
  CHECK(a.bytes.at({"s", "t"}) == max);
  CHECK(a.bytes.at({"t", "s"}) == 7);
}

TEST_CASE("prices: validity, markets and the egress lookup", "[unit][cost]") {
  CHECK(isValidPrice(0));
  CHECK(isValidPrice(0.123));
  CHECK(isValidPrice(kMaxPrice));
  CHECK_FALSE(isValidPrice(-0.01));
  CHECK_FALSE(isValidPrice(kMaxPrice * 2));
  CHECK_FALSE(isValidPrice(std::numeric_limits<double>::infinity()));
  CHECK_FALSE(isValidPrice(std::nan("")));
  CHECK(isMarket("spot"));
  CHECK(isMarket("on-demand"));
  CHECK_FALSE(isMarket("reserved"));
  const auto p = pricesOf(1, "spot", {{"b", 0.5}}, 0.25);
  CHECK(p.egressTo("b") == 0.5);
  CHECK(p.egressTo("c") == 0.25);
}

TEST_CASE("published prices round-trip; a hostile record is refused with the site named", "[unit][cost]") {
  const auto p = pricesOf(0.3, "spot", {{"eu-west", 0.01}, {"ap-south", 0.2}}, 0.09);
  auto back = fromProto(toProto(p), "us-east");
  REQUIRE(back.isOk());
  CHECK(back->container_hour == p.container_hour);
  CHECK(back->market == "spot");
  CHECK(back->egress_gb == p.egress_gb);
  CHECK(back->egress_default_gb == p.egress_default_gb);

  // A record of a master that predates prices: all zero, on-demand.
  auto old = fromProto(pb::SitePrices(), "old");
  REQUIRE(old.isOk());
  CHECK(old->container_hour == 0);
  CHECK(old->market == "on-demand");

  const auto refused = [](const pb::SitePrices& in) {
    auto r = fromProto(in, "us-east");
    return r.isOk() ? std::string() : r.message();
  };
  pb::SitePrices bad = toProto(p);
  bad.set_container_hour(-1);
  CHECK_THAT(refused(bad), Catch::Contains("us-east") && Catch::Contains("container_hour"));
  bad = toProto(p);
  bad.set_container_hour(std::numeric_limits<double>::quiet_NaN());
  CHECK_FALSE(refused(bad).empty());
  bad = toProto(p);
  bad.set_egress_default_gb(std::numeric_limits<double>::infinity());
  CHECK_FALSE(refused(bad).empty());
  bad = toProto(p);
  bad.set_market("free");
  CHECK_THAT(refused(bad), Catch::Contains("market"));
  bad = toProto(p);
  (*bad.mutable_egress_gb())["../x"] = 1;
  CHECK_THAT(refused(bad), Catch::Contains("not a site id"));
  bad = toProto(p);
  (*bad.mutable_egress_gb())["x"] = -3;
  CHECK_THAT(refused(bad), Catch::Contains("not a price"));
  bad = toProto(p);
  for (size_t i = 0; i <= kMaxEgressPrices; ++i) (*bad.mutable_egress_gb())[fmt::format("s{}", i)] = 1;
  CHECK_THAT(refused(bad), Catch::Contains("egress prices"));
}

TEST_CASE("a priced job's wire form keeps every line", "[unit][cost]") {
  Usage usage;
  usage.addContainerMs("a", 7200'000);
  usage.addBytes("a", "b", 3'000'000'000);
  const auto c = price(usage, {{"a", pricesOf(1, "spot", {}, 0.1)}});
  const pb::JobCost w = toProto(c);
  REQUIRE(w.sites_size() == 1);
  CHECK(w.sites(0).site() == "a");
  CHECK(w.sites(0).container_seconds() == Approx(7200));
  CHECK(w.sites(0).container_cost() == Approx(2));
  CHECK(w.sites(0).market() == "spot");
  CHECK(w.sites(0).priced());
  REQUIRE(w.pairs_size() == 1);
  CHECK(w.pairs(0).from_site() == "a");
  CHECK(w.pairs(0).to_site() == "b");
  CHECK(w.pairs(0).bytes() == 3'000'000'000);
  CHECK(w.pairs(0).egress_cost() == Approx(0.3));
  CHECK(w.total() == Approx(2.3));
  CHECK(w.unpriced_sites_size() == 0);
}
