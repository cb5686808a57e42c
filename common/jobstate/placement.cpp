#include "jobstate/placement.h"

#include <map>

#include "cost/cost_proto.h"
#include "jobstate/residency.h"

namespace tellus::jobstate {

namespace {

constexpr double kGB = 1e9;

std::vector<sched::SiteResources> resources(const std::vector<SiteCapacity>& sites) {
  std::vector<sched::SiteResources> out;
  for (const auto& s : sites) out.push_back(sched::SiteResources{s.site, std::max(1, s.slots), s.upGBps, s.downGBps});
  return out;
}

double meanTaskS(const std::vector<SiteCapacity>& sites) {
  double sum = 0;
  for (const auto& s : sites) sum += s.taskS;
  return sites.empty() ? 1.0 : sum / static_cast<double>(sites.size());
}

}  // namespace

std::vector<SiteCapacity> siteCapacities(const std::vector<pb::SiteInfo>& sites) {
  std::vector<SiteCapacity> out;
  std::map<std::string, double> upMbps;
  for (const auto& s : sites) {
    for (const auto& rate : s.inbound()) upMbps[rate.from_site()] += rate.mbps();
  }
  for (const auto& s : sites) {
    SiteCapacity cap;
    cap.site = s.site();
    cap.slots = static_cast<int>(std::max<uint32_t>(1, s.containers_total()));
    double down = 0;
    for (const auto& rate : s.inbound()) down += rate.mbps();
    // Mbit/s -> GB/s (the LPs' unit); unmeasured links keep the 1 GB/s default.
    if (down > 0) cap.downGBps = down / 8 / 1000;
    if (upMbps[s.site()] > 0) cap.upGBps = upMbps[s.site()] / 8 / 1000;
    if (s.has_prices()) {
      auto prices = cost::fromProto(s.prices(), s.site());
      if (prices) cap.prices = std::move(prices).value();
    }
    out.push_back(cap);
  }
  return out;
}

std::vector<sched::SitePrices> placementPrices(const std::vector<std::string>& sites,
                                               const std::map<std::string, cost::Prices>& prices) {
  std::vector<sched::SitePrices> out(sites.size());
  for (size_t x = 0; x < sites.size(); ++x) {
    const auto it = prices.find(sites[x]);
    if (it == prices.end()) continue;
    out[x].containerHour = it->second.container_hour;
    out[x].egressGB.reserve(sites.size());
    for (size_t y = 0; y < sites.size(); ++y) out[x].egressGB.push_back(y == x ? 0.0 : it->second.egressTo(sites[y]));
  }
  return out;
}

Result<pb::TaskMap> initialTaskMap(const JobView& job, uint32_t s, sched::Placement placement,
                                   const std::vector<SiteCapacity>& sites, const PlacementOptions& options) {
  using sched::Placement;
  if (sites.empty()) return makeError(ErrorCode::kInvalidArgument, "no sites to place stage " + std::to_string(s));
  sched::TetriumOptions tetrium{options.wanBudgetRho};
  tetrium.costWeightSPerUnit = job.spec.cost_weight();
  if (tetrium.costWeightSPerUnit > 0) {
    std::vector<std::string> names;
    std::map<std::string, cost::Prices> prices;
    for (const auto& site : sites) {
      names.push_back(site.site);
      if (site.prices) prices.emplace(site.site, *site.prices);
    }
    tetrium.prices = placementPrices(names, prices);
  }
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < sites.size(); ++i) index[sites[i].site] = i;
  const uint32_t n = taskCount(job, s);
  pb::TaskMap map;
  auto res = resources(sites);

  if (isDatasetStage(job.spec, s)) {
    const auto& parts = job.stages[s].inputs.partitions();
    std::vector<std::string> owner(n);
    for (uint32_t t = 0; t < n; ++t) {
      const auto& site = parts[static_cast<int>(t)].site();
      if (!index.count(site)) return makeError(ErrorCode::kInvalidArgument, "input site " + site + " is not a job site");
      owner[t] = site;
    }
    if (placement == Placement::kTetrium || placement == Placement::kCentralized || placement == Placement::kMaxMin) {
      sched::MapStage stage;
      stage.inputGB.assign(sites.size(), 0);
      for (const auto& p : parts) stage.inputGB[index[p.site()]] += static_cast<double>(p.bytes()) / kGB;
      stage.tasks = static_cast<int>(n);
      stage.taskS = meanTaskS(sites);
      // The LP's rows are the real tasks: one per partition at its site. (Apportioning n by
      // bytes would plan moves of tasks a site does not have and leave others unplanned.)
      stage.tasksPerSource.assign(sites.size(), 0);
      for (const auto& p : parts) ++stage.tasksPerSource[index[p.site()]];
      auto plan = sched::placeMap(placement, res, stage, tetrium);
      if (!plan) return plan.error().prepend("placing stage " + std::to_string(s));
      // plan->tasks[x][y]: how many of the tasks reading at x run at y. Hand x's movable tasks
      // out in index order; residency-local partitions never leave x.
      for (size_t x = 0; x < sites.size(); ++x) {
        std::vector<uint32_t> movable;
        for (uint32_t t = 0; t < n; ++t) {
          if (owner[t] == sites[x].site && !parts[static_cast<int>(t)].residency_local()) movable.push_back(t);
        }
        size_t next = 0;
        for (size_t y = 0; y < sites.size(); ++y) {
          if (y == x) continue;
          for (int k = 0; k < plan->tasks[x][y] && next < movable.size(); ++k) owner[movable[next++]] = sites[y].site;
        }
      }
    }
    for (const auto& o : owner) map.add_owner_site(o);
    return map;
  }

  // Residency in meaning: a stage reading raw records pinned at a site runs there, whatever the
  // policy would say.
  auto pinning = stagePinning(job);
  if (!pinning) return pinning.error();
  if (const auto& at = (*pinning)[s].tasksAt; !at.empty()) {
    if (!index.count(at)) return makeError(ErrorCode::kInvalidArgument, "pinned site " + at + " is not a job site");
    for (uint32_t t = 0; t < n; ++t) map.add_owner_site(at);
    return map;
  }

  auto bytes = inputBytesBySite(job, s);
  sched::ReduceStage stage;
  for (const auto& site : sites) stage.shuffleGB.push_back((bytes.count(site.site) ? bytes[site.site] : 0.0) / kGB);
  stage.tasks = static_cast<int>(n);
  stage.taskS = meanTaskS(sites);
  auto plan = sched::placeReduce(placement, res, stage, tetrium);
  if (!plan) return plan.error().prepend("placing stage " + std::to_string(s));
  const std::vector<int>& counts = plan->tasks;
  for (size_t i = 0; i < sites.size(); ++i) {
    for (int k = 0; k < counts[i]; ++k) map.add_owner_site(sites[i].site);
  }
  if (static_cast<uint32_t>(map.owner_site_size()) != n) {
    return makeError(ErrorCode::kInternal, "placement of stage " + std::to_string(s) + " lost tasks");
  }
  return map;
}

}  // namespace tellus::jobstate
