#pragma once
// cost:: values to and from their protobuf forms: a site's prices as published in its site
// record (SiteInfo.prices) and a job's priced usage in a status answer (JobStatusResponse.cost).

#include <string_view>

#include "cost/cost.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::cost {

pb::SitePrices toProto(const Prices& prices);
// A site record is written by another master (or anyone with ZooKeeper access): every price
// must be valid (isValidPrice), the market known, at most kMaxEgressPrices egress prices keyed
// by site ids. kInvalidArgument naming `site` otherwise.
Result<Prices> fromProto(const pb::SitePrices& prices, std::string_view site);

pb::JobCost toProto(const JobCost& cost);

}  // namespace tellus::cost
