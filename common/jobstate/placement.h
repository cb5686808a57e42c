#pragma once
// The initial taskMap of a released stage (HOUTU §4.3 step 6): which site's JM owns each
// task, by the job's placement policy. Pure: the pJM passes what it knows of the sites.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cost/cost.h"
#include "jobstate/job_view.h"
#include "sched/placement.h"
#include "sched/policies.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::jobstate {

// What the pJM knows of each involved site when it releases a stage.
struct SiteCapacity {
  std::string site;
  int slots = 1;          // containers the site offers
  double upGBps = 1.0;    // WAN uplink (measured or configured)
  double downGBps = 1.0;  // WAN downlink
  double taskS = 1.0;     // expected task duration there (stage mean so far, or 1)
  std::optional<cost::Prices> prices;  // what the site charges; unknown = free to the placement
};

// Capacities from the sites' published records: slots = containers offered; down = the sum of
// measured inbound rates, up = the sum of what the other sites measured from it (defaults
// when nothing was measured yet); prices = the record's, when it has valid ones (a record
// anyone may have written: invalid prices count as unknown). Pure, so it is tested on its own.
std::vector<SiteCapacity> siteCapacities(const std::vector<pb::SiteInfo>& sites);

// The placement's view of the sites' prices (sched::SitePrices, in the order of `sites`): each
// site's container-hour price and its egress price to every other site of the list. A site
// without an entry costs 0, as an unpriced site is charged 0 by cost::price.
std::vector<sched::SitePrices> placementPrices(const std::vector<std::string>& sites,
                                               const std::map<std::string, cost::Prices>& prices);

struct PlacementOptions {
  double wanBudgetRho = 1.0;  // Tetrium's WAN budget knob (§4.3), in [0, 1]
};

// Owner site of every task of stage s under `placement` (sched/policies.h; docs/jobs.md):
//  - dataset stages: proportional, in-place and iridium put each task where its partition is
//    (HOUTU's proportional-to-data initial assignment); tetrium solves the map LP and moves
//    tasks between sites as it says; centralized puts every movable task at the strongest
//    site. A residency-local partition always stays.
//  - other stages: per-site counts from sched::proportionalToData over the bytes each site
//    holds (proportional) or over the sites' slots (in-place: Spark's reducers go wherever
//    slots free up), the reduce LP (tetrium), Iridium's shuffle-time LP (iridium) or the
//    strongest site (centralized); tasks are handed out in index order, site by site.
//  - a stage reading raw records pinned by residency (jobstate/residency.h) runs wholly at
//    their site, under every policy.
// Tetrium weighs money when the job's spec has a cost_weight (sched::TetriumOptions): at the
// sites' `prices`, a site without prices counting as free.
// `sites` must include every site holding input of s.
Result<pb::TaskMap> initialTaskMap(const JobView& job, uint32_t s, sched::Placement placement,
                                   const std::vector<SiteCapacity>& sites, const PlacementOptions& options = {});

}  // namespace tellus::jobstate
