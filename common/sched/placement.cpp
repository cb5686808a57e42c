#include "sched/placement.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "lp/linear_program.h"
#include "sched/lp_value.h"
#include "sched/max_min.h"
#include "sched/max_flow.h"

namespace tellus::sched {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// a / b for durations: nothing to move takes no time, something over a zero link forever.
double duration(double amount, double rate) {
  if (amount <= 1e-12) return 0.0;
  if (rate <= 0) return kInf;
  return amount / rate;
}

double sum(const std::vector<double>& values) { return std::accumulate(values.begin(), values.end(), 0.0); }

std::string siteLabel(const std::vector<SiteResources>& sites, std::size_t x) {
  return "site " + (sites[x].name.empty() ? std::to_string(x) : "'" + sites[x].name + "'");
}

Status validateSites(const std::vector<SiteResources>& sites) {
  if (sites.empty()) return makeError(ErrorCode::kInvalidArgument, "no sites");
  for (std::size_t x = 0; x < sites.size(); ++x) {
    const SiteResources& s = sites[x];
    if (s.slots < 0) return makeError(ErrorCode::kInvalidArgument, siteLabel(sites, x) + ": slots must be >= 0");
    if (!std::isfinite(s.upGBps) || s.upGBps < 0) {
      return makeError(ErrorCode::kInvalidArgument, siteLabel(sites, x) + ": uplink bandwidth must be finite and >= 0");
    }
    if (!std::isfinite(s.downGBps) || s.downGBps < 0) {
      return makeError(ErrorCode::kInvalidArgument,
                       siteLabel(sites, x) + ": downlink bandwidth must be finite and >= 0");
    }
  }
  return Status::ok();
}

Status validateStage(const std::vector<SiteResources>& sites, const std::vector<double>& data, int tasks,
                     double taskS, const std::string& dataField) {
  TELLUS_RETURN_IF_ERROR(validateSites(sites));
  if (data.size() != sites.size()) {
    return makeError(ErrorCode::kInvalidArgument, dataField + ": " + std::to_string(data.size()) +
                                                      " values for " + std::to_string(sites.size()) + " sites");
  }
  for (std::size_t x = 0; x < data.size(); ++x) {
    if (!std::isfinite(data[x]) || data[x] < 0) {
      return makeError(ErrorCode::kInvalidArgument, dataField + " at " + siteLabel(sites, x) + ": must be finite and >= 0");
    }
  }
  if (tasks < 0) return makeError(ErrorCode::kInvalidArgument, "tasks must be >= 0");
  if (!std::isfinite(taskS) || taskS < 0) return makeError(ErrorCode::kInvalidArgument, "task time must be finite and >= 0");
  int slots = 0;
  for (const SiteResources& s : sites) slots += s.slots;
  if (tasks > 0 && slots == 0) return makeError(ErrorCode::kInvalidArgument, "no site has a slot for the tasks");
  return Status::ok();
}

// WAN budget W = W_min + ρ(W_max - W_min) (§4.3).
double wanBudget(double minimum, double maximum, double rho) { return minimum + rho * (maximum - minimum); }

// Why the map LP (§3.1, with the WAN budget of §4.3) has no solution, naming the site at fault;
// ok when it has one. Capacities are not limits in the LP (time is free), so it is feasible
// exactly when every site's input can run somewhere: where it is (slots), or at a site with
// slots it can reach (uplink and that site's downlink > 0) — and when the input of sites
// without slots, which has to leave, fits in the WAN budget.
Status mapLpObstacle(const std::vector<SiteResources>& sites, const MapStage& stage, const TetriumOptions& options) {
  const double total = sum(stage.inputGB);
  const bool needsSlots = stage.tasks > 0 && stage.taskS > 0;
  if (total <= 0 || !needsSlots) return Status::ok();  // reads nothing, or no compute: runs anywhere
  double mustLeave = 0;
  for (std::size_t x = 0; x < sites.size(); ++x) {
    if (stage.inputGB[x] <= 0 || sites[x].slots > 0) continue;
    mustLeave += stage.inputGB[x];
    if (sites[x].upGBps <= 0) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("{} holds {} GB of map input but has no slots and a 0 Gbps uplink: its "
                                   "input can neither be processed there nor leave",
                                   siteLabel(sites, x), stage.inputGB[x]));
    }
    bool reachable = false;
    for (std::size_t y = 0; y < sites.size(); ++y) reachable |= y != x && sites[y].slots > 0 && sites[y].downGBps > 0;
    if (!reachable) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("{} holds {} GB of map input but has no slots, and no site with slots can "
                                   "download it (their downlinks are 0 Gbps)",
                                   siteLabel(sites, x), stage.inputGB[x]));
    }
  }
  const double budget = wanBudget(0, total, options.wanBudgetRho);
  if (mustLeave > budget + 1e-9) {
    std::size_t largest = sites.size();
    for (std::size_t x = 0; x < sites.size(); ++x) {
      if (stage.inputGB[x] > 0 && sites[x].slots == 0 &&
          (largest == sites.size() || stage.inputGB[x] > stage.inputGB[largest])) {
        largest = x;
      }
    }
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("WAN budget (rho {}) lets {} GB cross the WAN, but the sites without slots hold "
                                 "{} GB of map input that must leave ({} holds {} GB)",
                                 options.wanBudgetRho, budget, mustLeave, siteLabel(sites, largest),
                                 stage.inputGB[largest]));
  }
  return Status::ok();
}

// The same for the reduce LP (§3.2; Iridium's variant ignores slots). A site whose uplink is 0
// must run every reduce task (its shuffle data cannot leave); a site without slots (Tetrium)
// or with a 0 Gbps downlink while others hold data can run none.
Status reduceLpObstacle(const std::vector<SiteResources>& sites, const ReduceStage& stage, double wanBudgetGB,
                        bool slotsMatter) {
  const std::size_t n = sites.size();
  const double total = sum(stage.shuffleGB);
  const bool computeRows = slotsMatter && stage.tasks > 0 && stage.taskS > 0;
  std::vector<bool> mustTakeAll(n, false), cannotTake(n, false);
  std::vector<std::string> why(n);
  for (std::size_t x = 0; x < n; ++x) {
    mustTakeAll[x] = stage.shuffleGB[x] > 0 && sites[x].upGBps <= 0;
    if (computeRows && sites[x].slots == 0) {
      cannotTake[x] = true;
      why[x] = "has no slots";
    } else if (sites[x].downGBps <= 0 && total - stage.shuffleGB[x] > 0) {
      cannotTake[x] = true;
      why[x] = "has a 0 Gbps downlink while other sites hold shuffle data";
    }
  }
  std::size_t pinned = n;
  for (std::size_t x = 0; x < n; ++x) {
    if (!mustTakeAll[x]) continue;
    if (cannotTake[x]) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("{} holds {} GB of shuffle data behind a 0 Gbps uplink, so every reduce task "
                                   "must run there, but it {}",
                                   siteLabel(sites, x), stage.shuffleGB[x], why[x]));
    }
    if (pinned != n) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("{} and {} both hold shuffle data behind a 0 Gbps uplink: the reduce tasks "
                                   "cannot all run at both",
                                   siteLabel(sites, pinned), siteLabel(sites, x)));
    }
    pinned = x;
  }
  if (std::all_of(cannotTake.begin(), cannotTake.end(), [](bool b) { return b; })) {
    std::string reasons;
    for (std::size_t x = 0; x < n; ++x) reasons += (x ? "; " : "") + siteLabel(sites, x) + " " + why[x];
    return makeError(ErrorCode::kInvalidArgument, "no site can run the reduce tasks: " + reasons);
  }
  // The WAN budget needs sum I_x r_x >= I - W; the best is all tasks at the allowed site
  // holding the most shuffle data (or at the pinned site).
  std::size_t keeper = pinned;
  for (std::size_t x = 0; keeper == n && x < n; ++x) {
    if (!cannotTake[x]) keeper = x;
  }
  if (pinned == n) {
    for (std::size_t x = 0; x < n; ++x)
      if (!cannotTake[x] && stage.shuffleGB[x] > stage.shuffleGB[keeper]) keeper = x;
  }
  if (std::isfinite(wanBudgetGB) && total - stage.shuffleGB[keeper] > wanBudgetGB + 1e-9) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("WAN budget lets {} GB cross the WAN, but the reduce moves at least {} GB: the "
                                 "most any site that can run it keeps is {} GB at {}",
                                 wanBudgetGB, total - stage.shuffleGB[keeper], stage.shuffleGB[keeper],
                                 siteLabel(sites, keeper)));
  }
  return Status::ok();
}

// Row x of the map model: the share of tasks reading from x. With no input at all, tasks read
// nothing and start spread evenly (proportionalToData's all-zero rule).
std::vector<double> mapSourceShares(const MapStage& stage) {
  const double total = sum(stage.inputGB);
  std::vector<double> share(stage.inputGB.size(), 0.0);
  for (std::size_t x = 0; x < share.size(); ++x) {
    share[x] = total > 0 ? stage.inputGB[x] / total : 1.0 / static_cast<double>(share.size());
  }
  return share;
}

double waves(int tasks, int slots, bool fractional) {
  if (tasks <= 0) return 0.0;
  if (slots <= 0) return kInf;
  const double w = static_cast<double>(tasks) / slots;
  return fractional ? w : std::ceil(w - 1e-9);
}

// Completes a map placement from its fractions and integer tasks: site totals, times, WAN.
MapPlacement completeMap(const std::vector<SiteResources>& sites, const MapStage& stage,
                         std::vector<std::vector<double>> fraction, std::vector<std::vector<int>> tasks) {
  const std::size_t n = sites.size();
  const std::vector<int> rowTasks =
      stage.tasksPerSource.empty() ? mapTasksPerSource(stage.inputGB, stage.tasks) : stage.tasksPerSource;
  MapPlacement placement;
  placement.tasks = std::move(tasks);
  placement.tasksAtSite.assign(n, 0);
  for (std::size_t x = 0; x < n; ++x)
    for (std::size_t y = 0; y < n; ++y) placement.tasksAtSite[y] += placement.tasks[x][y];
  placement.fraction = std::move(fraction);
  placement.lpTimes = evaluateMapFractions(sites, stage, placement.fraction);
  placement.times = evaluateMap(sites, stage, placement.tasks);
  for (std::size_t x = 0; x < n; ++x) {
    if (rowTasks[x] == 0) continue;
    const double perTask = stage.inputGB[x] / rowTasks[x];
    for (std::size_t y = 0; y < n; ++y)
      if (y != x) placement.wanGB += perTask * placement.tasks[x][y];
  }
  return placement;
}

// Completes a map placement from fractions: integer tasks, times, WAN.
MapPlacement finishMap(const std::vector<SiteResources>& sites, const MapStage& stage,
                       std::vector<std::vector<double>> fraction) {
  const std::size_t n = sites.size();
  const std::vector<int> rowTasks =
      stage.tasksPerSource.empty() ? mapTasksPerSource(stage.inputGB, stage.tasks) : stage.tasksPerSource;
  // Scale row x to its integer task count, then round controlled.
  std::vector<std::vector<double>> cells(n, std::vector<double>(n, 0.0));
  for (std::size_t x = 0; x < n; ++x) {
    double rowFraction = std::accumulate(fraction[x].begin(), fraction[x].end(), 0.0);
    for (std::size_t y = 0; y < n; ++y) {
      if (rowFraction > 0) {
        cells[x][y] = std::max(0.0, fraction[x][y]) / rowFraction * rowTasks[x];
      } else if (y == x) {
        cells[x][y] = rowTasks[x];
      }
    }
  }
  return completeMap(sites, stage, std::move(fraction), roundMatrixKeepingSums(cells));
}

// Completes a reduce placement from its fractions and integer tasks: times, WAN.
ReducePlacement completeReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage,
                               std::vector<double> fraction, std::vector<int> tasks) {
  ReducePlacement placement;
  placement.tasks = std::move(tasks);
  placement.fraction = std::move(fraction);
  placement.lpTimes = evaluateReduceFractions(sites, stage, placement.fraction);
  placement.times = evaluateReduce(sites, stage, placement.tasks);
  for (std::size_t x = 0; x < sites.size(); ++x) {
    const double kept = stage.tasks > 0 ? static_cast<double>(placement.tasks[x]) / stage.tasks : 0.0;
    placement.wanGB += stage.shuffleGB[x] * (1.0 - kept);
  }
  if (stage.tasks == 0) placement.wanGB = 0;
  return placement;
}

ReducePlacement finishReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage,
                             std::vector<double> fraction) {
  for (double& f : fraction) f = std::max(0.0, f);
  std::vector<int> tasks = proportionalToData(fraction, stage.tasks);
  return completeReduce(sites, stage, std::move(fraction), std::move(tasks));
}

std::size_t strongestSite(const std::vector<SiteResources>& sites) {
  std::size_t best = 0;
  for (std::size_t x = 1; x < sites.size(); ++x) {
    if (sites[x].slots > sites[best].slots ||
        (sites[x].slots == sites[best].slots && sites[x].downGBps > sites[best].downGBps)) {
      best = x;
    }
  }
  return best;
}

Status validateOptions(const std::vector<SiteResources>& sites, const TetriumOptions& options) {
  if (!(options.wanBudgetRho >= 0 && options.wanBudgetRho <= 1)) {
    return makeError(ErrorCode::kInvalidArgument, "WAN budget rho must be in [0,1]");
  }
  if (!(options.costWeightSPerUnit >= 0 && options.costWeightSPerUnit <= kMaxCostWeightSPerUnit)) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("cost weight must be in [0, {}] seconds per currency unit", kMaxCostWeightSPerUnit));
  }
  if (options.prices.empty()) return Status::ok();
  if (options.prices.size() != sites.size()) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("prices: {} values for {} sites", options.prices.size(), sites.size()));
  }
  for (std::size_t x = 0; x < sites.size(); ++x) {
    const SitePrices& p = options.prices[x];
    if (!std::isfinite(p.containerHour) || p.containerHour < 0) {
      return makeError(ErrorCode::kInvalidArgument, siteLabel(sites, x) + ": container-hour price must be finite and >= 0");
    }
    if (!p.egressGB.empty() && p.egressGB.size() != sites.size()) {
      return makeError(ErrorCode::kInvalidArgument, fmt::format("{}: {} egress prices for {} sites", siteLabel(sites, x),
                                                                p.egressGB.size(), sites.size()));
    }
    for (double price : p.egressGB) {
      if (!std::isfinite(price) || price < 0) {
        return makeError(ErrorCode::kInvalidArgument, siteLabel(sites, x) + ": egress prices must be finite and >= 0");
      }
    }
  }
  return Status::ok();
}

// Money enters the LPs only with both a weight and prices.
bool weighsMoney(const TetriumOptions& options) { return options.costWeightSPerUnit > 0 && !options.prices.empty(); }

double containerPerTaskS(const std::vector<SitePrices>& prices, std::size_t y) { return prices[y].containerHour / 3600.0; }

double egressPerGB(const std::vector<SitePrices>& prices, std::size_t from, std::size_t to) {
  return from == to || prices[from].egressGB.empty() ? 0.0 : prices[from].egressGB[to];
}

std::vector<std::vector<double>> inPlaceFractions(const MapStage& stage, std::size_t n) {
  const std::vector<double> share = mapSourceShares(stage);
  std::vector<std::vector<double>> fraction(n, std::vector<double>(n, 0.0));
  for (std::size_t x = 0; x < n; ++x) fraction[x][x] = share[x];
  return fraction;
}

}  // namespace

std::vector<int> mapTasksPerSource(const std::vector<double>& inputGB, int tasks) {
  std::vector<int> counts = proportionalToData(inputGB, tasks);
  std::vector<double> quota(inputGB.size(), 0.0);
  const double total = sum(inputGB);
  if (total <= 0) return counts;
  for (std::size_t x = 0; x < quota.size(); ++x) quota[x] = std::max(0.0, inputGB[x]) / total * tasks;
  for (std::size_t x = 0; x < counts.size(); ++x) {
    if (inputGB[x] <= 0 || counts[x] > 0) continue;
    // A site holding input must be read by some task: take one from the site furthest above
    // its quota that can spare one (there is one whenever tasks >= sites holding input).
    std::size_t donor = counts.size();
    for (std::size_t y = 0; y < counts.size(); ++y) {
      if (counts[y] < 2) continue;
      if (donor == counts.size() || counts[y] - quota[y] > counts[donor] - quota[donor] + 1e-12) donor = y;
    }
    if (donor == counts.size()) break;  // fewer tasks than sites holding input (validateMap rejects it)
    --counts[donor];
    ++counts[x];
  }
  return counts;
}

std::vector<int> proportionalToData(const std::vector<double>& weights, int total) {
  std::vector<int> counts(weights.size(), 0);
  if (weights.empty() || total <= 0) return counts;
  double weightSum = 0;
  for (double w : weights) weightSum += std::max(0.0, w);
  std::vector<double> exact(weights.size());
  for (std::size_t i = 0; i < weights.size(); ++i) {
    exact[i] = weightSum > 0 ? std::max(0.0, weights[i]) / weightSum * total
                             : static_cast<double>(total) / static_cast<double>(weights.size());
  }
  int assigned = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    counts[i] = static_cast<int>(std::floor(exact[i] + 1e-9));
    assigned += counts[i];
  }
  std::vector<std::size_t> byRemainder(exact.size());
  std::iota(byRemainder.begin(), byRemainder.end(), 0);
  std::stable_sort(byRemainder.begin(), byRemainder.end(), [&](std::size_t a, std::size_t b) {
    return exact[a] - counts[a] > exact[b] - counts[b] + 1e-12;
  });
  for (std::size_t k = 0; assigned < total; k = (k + 1) % byRemainder.size()) {
    ++counts[byRemainder[k]];
    ++assigned;
  }
  // Floating noise could overshoot by one in pathological inputs; take back from the smallest remainder.
  for (std::size_t k = byRemainder.size(); assigned > total && k > 0; --k) {
    if (counts[byRemainder[k - 1]] > 0) {
      --counts[byRemainder[k - 1]];
      --assigned;
    }
  }
  return counts;
}

std::vector<std::vector<int>> roundMatrixKeepingSums(const std::vector<std::vector<double>>& cells) {
  const std::size_t rows = cells.size();
  const std::size_t columns = rows == 0 ? 0 : cells[0].size();
  std::vector<std::vector<int>> rounded(rows, std::vector<int>(columns, 0));
  std::vector<std::int64_t> rowNeed(rows, 0);
  std::vector<double> columnFraction(columns, 0.0);
  for (std::size_t i = 0; i < rows; ++i) {
    double rowSum = 0;
    for (std::size_t j = 0; j < columns; ++j) {
      const double v = std::max(0.0, cells[i][j]);
      rowSum += v;
      rounded[i][j] = static_cast<int>(std::floor(v + 1e-9));
      columnFraction[j] += v - rounded[i][j];
    }
    std::int64_t rowFloor = 0;
    for (int v : rounded[i]) rowFloor += v;
    rowNeed[i] = std::llround(rowSum) - rowFloor;
  }
  // Residual fractional parts form a flow: rows supply their integer deficit, each cell with a
  // fractional part carries at most 1, columns take floor (phase 1) then up to ceil (phase 2)
  // of their fractional residual. Both phases have a fractional solution, so integral max-flows
  // exist; phase 2 only augments, so columns keep their floors.
  const std::size_t source = rows + columns, sink = source + 1;
  MaxFlow flow(sink + 1);
  std::vector<std::vector<std::size_t>> cellEdge(rows, std::vector<std::size_t>(columns, SIZE_MAX));
  for (std::size_t i = 0; i < rows; ++i) {
    if (rowNeed[i] > 0) flow.addEdge(source, i, rowNeed[i]);
    for (std::size_t j = 0; j < columns; ++j) {
      if (std::max(0.0, cells[i][j]) - rounded[i][j] > 1e-9) cellEdge[i][j] = flow.addEdge(i, rows + j, 1);
    }
  }
  std::vector<std::size_t> columnEdge(columns);
  for (std::size_t j = 0; j < columns; ++j) {
    columnEdge[j] = flow.addEdge(rows + j, sink, static_cast<std::int64_t>(std::floor(columnFraction[j] + 1e-6)));
  }
  flow.run(source, sink);
  for (std::size_t j = 0; j < columns; ++j) {
    const double floorPart = std::floor(columnFraction[j] + 1e-6);
    if (columnFraction[j] - floorPart > 1e-6) flow.addCapacity(columnEdge[j], 1);
  }
  flow.run(source, sink);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < columns; ++j)
      if (cellEdge[i][j] != SIZE_MAX) rounded[i][j] += static_cast<int>(flow.flowOn(cellEdge[i][j]));
  return rounded;
}

double mapMoney(const MapStage& stage, const std::vector<std::vector<int>>& tasks,
                const std::vector<SitePrices>& prices) {
  if (prices.empty()) return 0.0;
  double money = 0;
  for (std::size_t x = 0; x < tasks.size(); ++x) {
    const int reading = std::accumulate(tasks[x].begin(), tasks[x].end(), 0);
    const double perTaskGB = reading > 0 ? stage.inputGB[x] / reading : 0.0;
    for (std::size_t y = 0; y < tasks[x].size(); ++y) {
      money += tasks[x][y] * (stage.taskS * containerPerTaskS(prices, y) + perTaskGB * egressPerGB(prices, x, y));
    }
  }
  return money;
}

double reduceMoney(const ReduceStage& stage, const std::vector<int>& tasks, const std::vector<SitePrices>& prices) {
  if (prices.empty() || stage.tasks <= 0) return 0.0;
  double money = 0;
  for (std::size_t y = 0; y < tasks.size(); ++y) {
    const double r = static_cast<double>(tasks[y]) / stage.tasks;
    money += tasks[y] * stage.taskS * containerPerTaskS(prices, y);
    for (std::size_t x = 0; x < tasks.size(); ++x) money += stage.shuffleGB[x] * r * egressPerGB(prices, x, y);
  }
  return money;
}

double placementObjective(const StageTimes& times, double money, const TetriumOptions& options) {
  return weighsMoney(options) ? times.totalS() + options.costWeightSPerUnit * money : times.totalS();
}

Status validateMap(const std::vector<SiteResources>& sites, const MapStage& stage) {
  TELLUS_RETURN_IF_ERROR(
      validateStage(sites, stage.inputGB, stage.tasks, stage.taskS, "map input_gb").prepend("map stage"));
  // One map task reads one site's input, so a stage with fewer tasks than sites holding input
  // would leave some input unread (and unmoved): reject it, naming the first such site.
  if (!stage.tasksPerSource.empty()) {
    // A given split: one row per site, the stage's tasks exactly, and no input left unread.
    if (stage.tasksPerSource.size() != sites.size()) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("map stage: tasks per source: {} values for {} sites",
                                   stage.tasksPerSource.size(), sites.size()));
    }
    long long given = 0;
    for (std::size_t x = 0; x < sites.size(); ++x) {
      const int rows = stage.tasksPerSource[x];
      if (rows < 0) return makeError(ErrorCode::kInvalidArgument, "map stage: tasks reading " + siteLabel(sites, x) + " must be >= 0");
      if (stage.inputGB[x] > 0 && rows == 0) {
        return makeError(ErrorCode::kInvalidArgument,
                         "map stage: " + siteLabel(sites, x) + " holds input but no task reads it");
      }
      given += rows;
    }
    if (given != stage.tasks) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("map stage: tasks per source sum to {}, not the stage's {} tasks", given, stage.tasks));
    }
    return Status::ok();
  }
  std::size_t holding = 0;
  for (double gb : stage.inputGB) holding += gb > 0 ? 1 : 0;
  if (stage.tasks > 0 && static_cast<std::size_t>(stage.tasks) < holding) {
    const std::vector<int> counts = proportionalToData(stage.inputGB, stage.tasks);
    std::size_t unread = 0;
    while (unread < counts.size() && !(stage.inputGB[unread] > 0 && counts[unread] == 0)) ++unread;
    return makeError(ErrorCode::kInvalidArgument,
                     "map stage: " + siteLabel(sites, unread) + " holds input but no task would read it (" +
                         std::to_string(stage.tasks) + " tasks for " + std::to_string(holding) +
                         " sites holding input; a task reads one site)");
  }
  return Status::ok();
}

Status validateReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage) {
  return validateStage(sites, stage.shuffleGB, stage.tasks, stage.taskS, "shuffle_gb").prepend("reduce stage");
}

StageTimes evaluateMap(const std::vector<SiteResources>& sites, const MapStage& stage,
                       const std::vector<std::vector<int>>& tasks, bool fractionalWaves) {
  const std::size_t n = sites.size();
  std::vector<double> upload(n, 0.0), download(n, 0.0);
  std::vector<int> atSite(n, 0);
  for (std::size_t x = 0; x < n; ++x) {
    const int reading = std::accumulate(tasks[x].begin(), tasks[x].end(), 0);
    const double perTask = reading > 0 ? stage.inputGB[x] / reading : 0.0;
    for (std::size_t y = 0; y < n; ++y) {
      atSite[y] += tasks[x][y];
      if (y == x) continue;
      upload[x] += perTask * tasks[x][y];
      download[y] += perTask * tasks[x][y];
    }
  }
  StageTimes times;
  for (std::size_t x = 0; x < n; ++x) {
    times.transferS = std::max({times.transferS, duration(upload[x], sites[x].upGBps),
                                duration(download[x], sites[x].downGBps)});
    times.computeS = std::max(times.computeS, stage.taskS * waves(atSite[x], sites[x].slots, fractionalWaves));
  }
  return times;
}

StageTimes evaluateMapFractions(const std::vector<SiteResources>& sites, const MapStage& stage,
                                const std::vector<std::vector<double>>& fraction) {
  const std::size_t n = sites.size();
  const double total = sum(stage.inputGB);
  StageTimes times;
  for (std::size_t x = 0; x < n; ++x) {
    double out = 0, in = 0, work = 0;
    for (std::size_t y = 0; y < n; ++y) {
      work += fraction[y][x];
      if (y == x) continue;
      out += fraction[x][y];
      in += fraction[y][x];
    }
    times.transferS = std::max({times.transferS, duration(total * out, sites[x].upGBps),
                                duration(total * in, sites[x].downGBps)});
    const double tasks = work * stage.tasks;
    const double compute = tasks <= 1e-9 ? 0.0 : (sites[x].slots > 0 ? stage.taskS * tasks / sites[x].slots : kInf);
    times.computeS = std::max(times.computeS, compute);
  }
  return times;
}

StageTimes evaluateReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage,
                          const std::vector<int>& tasks, bool fractionalWaves) {
  StageTimes times;
  const double total = sum(stage.shuffleGB);
  for (std::size_t x = 0; x < sites.size(); ++x) {
    const double r = stage.tasks > 0 ? static_cast<double>(tasks[x]) / stage.tasks : 0.0;
    times.transferS = std::max({times.transferS, duration(stage.shuffleGB[x] * (1.0 - r), sites[x].upGBps),
                                duration((total - stage.shuffleGB[x]) * r, sites[x].downGBps)});
    times.computeS = std::max(times.computeS, stage.taskS * waves(tasks[x], sites[x].slots, fractionalWaves));
  }
  if (stage.tasks == 0) times.transferS = 0;
  return times;
}

StageTimes evaluateReduceFractions(const std::vector<SiteResources>& sites, const ReduceStage& stage,
                                   const std::vector<double>& fraction) {
  StageTimes times;
  const double total = sum(stage.shuffleGB);
  for (std::size_t x = 0; x < sites.size(); ++x) {
    const double r = fraction[x];
    times.transferS = std::max({times.transferS, duration(stage.shuffleGB[x] * (1.0 - r), sites[x].upGBps),
                                duration((total - stage.shuffleGB[x]) * r, sites[x].downGBps)});
    const double tasks = r * stage.tasks;
    const double compute = tasks <= 1e-9 ? 0.0 : (sites[x].slots > 0 ? stage.taskS * tasks / sites[x].slots : kInf);
    times.computeS = std::max(times.computeS, compute);
  }
  return times;
}

Result<MapPlacement> inPlaceMap(const std::vector<SiteResources>& sites, const MapStage& stage) {
  TELLUS_RETURN_IF_ERROR(validateMap(sites, stage));
  return finishMap(sites, stage, inPlaceFractions(stage, sites.size()));
}

Result<ReducePlacement> inPlaceReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage) {
  TELLUS_RETURN_IF_ERROR(validateReduce(sites, stage));
  double slots = 0;
  for (const auto& site : sites) slots += site.slots;
  std::vector<double> fraction(sites.size());
  for (std::size_t x = 0; x < sites.size(); ++x) {
    fraction[x] = slots > 0 ? sites[x].slots / slots : 1.0 / static_cast<double>(sites.size());
  }
  return finishReduce(sites, stage, std::move(fraction));
}

namespace {

Result<MapPlacement> placeMapByPolicy(Placement policy, const std::vector<SiteResources>& sites,
                                      const MapStage& stage, const TetriumOptions& options) {
  switch (policy) {
    case Placement::kTetrium: return tetriumMap(sites, stage, options);
    case Placement::kMaxMin: return maxMinMap(sites, stage);
    case Placement::kCentralized: return centralizedMap(sites, stage);
    case Placement::kInPlace:
    case Placement::kProportional:
    case Placement::kIridium: return inPlaceMap(sites, stage);
  }
  return makeError(ErrorCode::kInvalidArgument, "unknown placement policy");
}

Result<ReducePlacement> placeReduceByPolicy(Placement policy, const std::vector<SiteResources>& sites,
                                            const ReduceStage& stage, const TetriumOptions& options) {
  switch (policy) {
    case Placement::kTetrium: return tetriumReduce(sites, stage, options);
    case Placement::kMaxMin: return maxMinReduce(sites, stage);
    case Placement::kCentralized: return centralizedReduce(sites, stage);
    case Placement::kIridium: return iridiumReduce(sites, stage);
    case Placement::kProportional: return proportionalReduce(sites, stage);
    case Placement::kInPlace: return inPlaceReduce(sites, stage);
  }
  return makeError(ErrorCode::kInvalidArgument, "unknown placement policy");
}

}  // namespace

Result<MapPlacement> placeMap(Placement policy, const std::vector<SiteResources>& sites, const MapStage& stage,
                              const TetriumOptions& options) {
  TELLUS_RETURN_IF_ERROR(validateOptions(sites, options));
  auto placed = placeMapByPolicy(policy, sites, stage, options);
  if (placed) placed->money = mapMoney(stage, placed->tasks, options.prices);
  return placed;
}

Result<ReducePlacement> placeReduce(Placement policy, const std::vector<SiteResources>& sites,
                                    const ReduceStage& stage, const TetriumOptions& options) {
  TELLUS_RETURN_IF_ERROR(validateOptions(sites, options));
  auto placed = placeReduceByPolicy(policy, sites, stage, options);
  if (placed) placed->money = reduceMoney(stage, placed->tasks, options.prices);
  return placed;
}

Result<ReducePlacement> proportionalReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage) {
  TELLUS_RETURN_IF_ERROR(validateReduce(sites, stage));
  const double total = sum(stage.shuffleGB);
  std::vector<double> fraction(sites.size());
  for (std::size_t x = 0; x < sites.size(); ++x) {
    fraction[x] = total > 0 ? stage.shuffleGB[x] / total : 1.0 / static_cast<double>(sites.size());
  }
  return finishReduce(sites, stage, std::move(fraction));
}

Result<MapPlacement> centralizedMap(const std::vector<SiteResources>& sites, const MapStage& stage) {
  TELLUS_RETURN_IF_ERROR(validateMap(sites, stage));
  const std::size_t center = strongestSite(sites);
  const std::vector<double> share = mapSourceShares(stage);
  std::vector<std::vector<double>> fraction(sites.size(), std::vector<double>(sites.size(), 0.0));
  for (std::size_t x = 0; x < sites.size(); ++x) fraction[x][center] = share[x];
  return finishMap(sites, stage, std::move(fraction));
}

Result<ReducePlacement> centralizedReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage) {
  TELLUS_RETURN_IF_ERROR(validateReduce(sites, stage));
  std::vector<double> fraction(sites.size(), 0.0);
  fraction[strongestSite(sites)] = 1.0;
  return finishReduce(sites, stage, std::move(fraction));
}

namespace {

// Whole-wave refinement. The LP counts fractional waves, but a site runs ceil(M/S) waves, so
// the rounded LP optimum can pay for a partial wave it does not need. With W* the LP's
// fractional wave count, capping T_map at w·t for w = ceil(W*) (and w + 1) and minimizing the
// transfer alone gives placements whose ceil evaluation is often better; in place (no
// transfer) wins for stages with fewer tasks than slots. Candidates are compared by their
// integer evaluation; the LP relaxation (fraction, lpTimes) is reported unchanged.
constexpr double kTieWeight = 1e-3;

// With a cost weight "better" is the smaller time + weight·money (placementObjective), so the
// refinement never trades back the money the weighted LP saved; without one it is the faster.
// As fast (within a relative 1e-6) with less WAN traffic is better too: the LP minimizes a
// maximum, so traffic on links that are not its bottleneck costs it nothing, and its optimum
// often spreads tasks that move several times the data of an equally fast plan. That traffic
// slows every other flow on those links (tellus-sim: Tetrium lost 15-30% to the proportional
// baseline over a slow WAN, job after job tying it in the model while moving up to 3x the data).
template <class Placement>
void keepBetter(Placement& best, Placement&& candidate, const TetriumOptions& options) {
  const double c = placementObjective(candidate.times, candidate.money, options);
  const double b = placementObjective(best.times, best.money, options);
  if (c < b - 1e-9 || (c <= b + 1e-6 * std::max(1.0, b) && candidate.wanGB < best.wanGB - 1e-9)) {
    best.tasks = std::move(candidate.tasks);
    best.times = candidate.times;
    best.wanGB = candidate.wanGB;
    best.money = candidate.money;
    if constexpr (std::is_same_v<Placement, MapPlacement>) best.tasksAtSite = std::move(candidate.tasksAtSite);
  }
}

MapPlacement priced(MapPlacement placement, const MapStage& stage, const TetriumOptions& options) {
  placement.money = mapMoney(stage, placement.tasks, options.prices);
  return placement;
}

ReducePlacement priced(ReducePlacement placement, const ReduceStage& stage, const TetriumOptions& options) {
  placement.money = reduceMoney(stage, placement.tasks, options.prices);
  return placement;
}


// Reduce LP over r_x, T_shuf, T_red. objectiveCompute: weight of T_red in the objective;
// shuffleCap: optional upper bound on T_shuf; budget: optional WAN budget.
struct ReduceLpSpec {
  double shuffleWeight = 1, computeWeight = 1;
  double shuffleCap = kInf;
  double computeCap = kInf;
  double wanBudget = kInf;
  bool computeRowsOnlyWithSlots = false;
  // Objective coefficient of r_x: weight · money of running all tasks at x (linear in r_x);
  // empty = time only.
  std::vector<double> moneyObjective;
};

Result<std::pair<std::vector<double>, double>> solveReduceLp(const std::vector<SiteResources>& sites,
                                                              const ReduceStage& stage, const ReduceLpSpec& spec) {
  const std::size_t n = sites.size();
  const double total = sum(stage.shuffleGB);
  lp::LinearProgram program;
  std::vector<std::size_t> r(n);
  for (std::size_t x = 0; x < n; ++x) {
    const double money = spec.moneyObjective.empty() ? 0.0 : spec.moneyObjective[x];
    r[x] = program.addVariable(0, 1, money, "r_" + std::to_string(x));
  }
  const std::size_t shuffle = program.addVariable(0, spec.shuffleCap, spec.shuffleWeight, "T_shuf");
  const std::size_t compute = program.addVariable(0, spec.computeCap, spec.computeWeight, "T_red");
  std::vector<std::pair<std::size_t, double>> all;
  for (std::size_t x = 0; x < n; ++x) {
    // I_x (1 - r_x) <= up_x T_shuf
    program.addLessEqual({{r[x], -stage.shuffleGB[x]}, {shuffle, -sites[x].upGBps}}, -stage.shuffleGB[x]);
    // (I - I_x) r_x <= down_x T_shuf
    program.addLessEqual({{r[x], total - stage.shuffleGB[x]}, {shuffle, -sites[x].downGBps}}, 0);
    if (!spec.computeRowsOnlyWithSlots || sites[x].slots > 0) {
      // t n r_x <= S_x T_red
      program.addLessEqual({{r[x], stage.taskS * stage.tasks}, {compute, -static_cast<double>(sites[x].slots)}}, 0);
    }
    all.emplace_back(r[x], 1.0);
  }
  program.addEqual(all, 1.0);
  if (std::isfinite(spec.wanBudget)) {
    // sum I_x (1 - r_x) <= W  <=>  sum I_x r_x >= I - W
    std::vector<std::pair<std::size_t, double>> kept;
    for (std::size_t x = 0; x < n; ++x) kept.emplace_back(r[x], stage.shuffleGB[x]);
    program.addGreaterEqual(kept, total - spec.wanBudget - 1e-9);
  }
  auto solved = program.solve();
  if (!solved) return solved.error();
  std::vector<double> fraction(n);
  for (std::size_t x = 0; x < n; ++x) fraction[x] = solved->values[r[x]];
  return std::make_pair(std::move(fraction), solved->values[shuffle]);
}

}  // namespace

Result<ReducePlacement> iridiumReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage) {
  TELLUS_RETURN_IF_ERROR(validateReduce(sites, stage));
  TELLUS_RETURN_IF_ERROR(reduceLpObstacle(sites, stage, kInf, false).prepend("iridium reduce LP"));
  ReduceLpSpec networkOnly;
  networkOnly.computeWeight = 0;
  networkOnly.computeRowsOnlyWithSlots = true;
  auto first = solveReduceLp(sites, stage, networkOnly);
  if (!first) return Status(first.error().prepend("iridium reduce LP"));
  ReduceLpSpec tieBreak = networkOnly;
  tieBreak.shuffleWeight = 0;
  tieBreak.computeWeight = 1;
  tieBreak.shuffleCap = first->second * (1 + 1e-9) + 1e-12;
  auto second = solveReduceLp(sites, stage, tieBreak);
  if (!second) return finishReduce(sites, stage, first->first);
  return finishReduce(sites, stage, second->first);
}

namespace {

ReduceLpSpec tetriumReduceSpec(const ReduceStage& stage, const TetriumOptions& options) {
  ReduceLpSpec spec;
  if (weighsMoney(options)) {
    // A fraction r_y of the tasks at y costs r_y·n·t task-seconds there, and every other site x
    // sends it I_x·r_y GB at x's egress price to y (reduceMoney, fractional).
    const std::size_t n = stage.shuffleGB.size();
    spec.moneyObjective.assign(n, 0.0);
    for (std::size_t y = 0; y < n; ++y) {
      double money = stage.tasks * stage.taskS * containerPerTaskS(options.prices, y);
      for (std::size_t x = 0; x < n; ++x) money += stage.shuffleGB[x] * egressPerGB(options.prices, x, y);
      spec.moneyObjective[y] = options.costWeightSPerUnit * money;
    }
  }
  if (options.wanBudgetRho < 1) {
    // W_min: keep everything at the site holding the most shuffle data (the LP of eq. 11-13
    // has this closed form); W_max: all of the stage's input.
    const double total = sum(stage.shuffleGB);
    const double largest = *std::max_element(stage.shuffleGB.begin(), stage.shuffleGB.end());
    spec.wanBudget = wanBudget(total - largest, total, options.wanBudgetRho);
  }
  return spec;
}

}  // namespace

Result<StageTimes> tetriumReduceLpTimes(const std::vector<SiteResources>& sites, const ReduceStage& stage,
                                        const TetriumOptions& options) {
  TELLUS_RETURN_IF_ERROR(validateReduce(sites, stage));
  TELLUS_RETURN_IF_ERROR(validateOptions(sites, options));
  if (stage.tasks == 0) return StageTimes{};
  TELLUS_RETURN_IF_ERROR(
      reduceLpObstacle(sites, stage, tetriumReduceSpec(stage, options).wanBudget, true).prepend("tetrium reduce LP"));
  if (options.wanBudgetRho >= 1) {
    const StageTimes value = detail::reduceLpValue(sites, stage);
    if (!std::isfinite(value.totalS())) {
      return makeError(ErrorCode::kInvalidArgument, "tetrium reduce LP: LP is infeasible");
    }
    return value;
  }
  // Time only (see the header): the WAN budget without the money objective.
  auto solved = solveReduceLp(sites, stage, tetriumReduceSpec(stage, TetriumOptions{options.wanBudgetRho}));
  if (!solved) return Status(solved.error().prepend("tetrium reduce LP"));
  return evaluateReduceFractions(sites, stage, solved->first);
}

Result<ReducePlacement> tetriumReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage,
                                      const TetriumOptions& options) {
  TELLUS_RETURN_IF_ERROR(validateReduce(sites, stage));
  TELLUS_RETURN_IF_ERROR(validateOptions(sites, options));
  if (stage.tasks == 0) return proportionalReduce(sites, stage);
  const ReduceLpSpec spec = tetriumReduceSpec(stage, options);
  TELLUS_RETURN_IF_ERROR(reduceLpObstacle(sites, stage, spec.wanBudget, true).prepend("tetrium reduce LP"));
  auto solved = solveReduceLp(sites, stage, spec);
  if (!solved) return Status(solved.error().prepend("tetrium reduce LP"));
  ReducePlacement placement = priced(finishReduce(sites, stage, solved->first), stage, options);
  if (!options.refineWholeWaves) return placement;
  // Whole-wave refinement, as for maps (see keepBetter above).
  if (stage.taskS > 0) {
    const double waves = std::ceil(placement.lpTimes.computeS / stage.taskS - 1e-9);
    for (double w : {waves, waves + 1}) {
      ReduceLpSpec capped = spec;
      capped.computeCap = w * stage.taskS;
      capped.computeWeight = kTieWeight;
      auto refined = solveReduceLp(sites, stage, capped);
      if (refined) keepBetter(placement, priced(finishReduce(sites, stage, refined->first), stage, options), options);
    }
  }
  auto proportional = proportionalReduce(sites, stage);
  if (proportional && proportional->wanGB <= spec.wanBudget + 1e-9) {
    keepBetter(placement, priced(std::move(proportional.value()), stage, options), options);
  }
  if (weighsMoney(options)) {
    // As for maps: the time-only placement is a candidate of the weighted objective too.
    TetriumOptions timeOnly = options;
    timeOnly.costWeightSPerUnit = 0;
    auto fastest = tetriumReduce(sites, stage, timeOnly);
    if (fastest) keepBetter(placement, std::move(fastest.value()), options);
  }
  return placement;
}

namespace {

// The LP of §3.1 over m[x][y] only constrains, per site, the total it uploads (row sums off
// the diagonal), downloads (column sums off the diagonal) and runs. Since the core network is
// congestion-free, we solve it over local l_x, export e_x and import g_x (3n+2 columns instead
// of n^2+2) and rebuild an m matrix with those marginals afterwards: the optimum is the same
// and the LP stays tiny at 100 sites. `computeCapS` bounds T_map (whole-wave refinement).
Result<std::vector<std::vector<double>>> solveMapLpPerPair(const std::vector<SiteResources>& sites,
                                                           const MapStage& stage, const TetriumOptions& options,
                                                           double computeCapS, double computeWeight);

Result<std::vector<std::vector<double>>> solveMapLp(const std::vector<SiteResources>& sites, const MapStage& stage,
                                                    const TetriumOptions& options, double computeCapS,
                                                    double computeWeight) {
  if (weighsMoney(options)) return solveMapLpPerPair(sites, stage, options, computeCapS, computeWeight);
  const std::size_t n = sites.size();
  const double total = sum(stage.inputGB);
  const std::vector<double> share = mapSourceShares(stage);
  const double work = stage.taskS * stage.tasks;
  lp::LinearProgram program;
  std::vector<std::size_t> local(n), exported(n), imported(n);
  for (std::size_t x = 0; x < n; ++x) {
    local[x] = program.addVariable(0, share[x], 0, "l_" + std::to_string(x));
    exported[x] = program.addVariable(0, share[x], 0, "e_" + std::to_string(x));
    imported[x] = program.addVariable(0, 1, 0, "g_" + std::to_string(x));
  }
  const std::size_t aggr = program.addVariable(0, lp::kInfinity, 1, "T_aggr");
  const std::size_t compute = program.addVariable(0, computeCapS, computeWeight, "T_map");
  std::vector<std::pair<std::size_t, double>> balance, wan;
  for (std::size_t x = 0; x < n; ++x) {
    program.addEqual({{local[x], 1}, {exported[x], 1}}, share[x]);
    program.addLessEqual({{exported[x], total}, {aggr, -sites[x].upGBps}}, 0);
    program.addLessEqual({{imported[x], total}, {aggr, -sites[x].downGBps}}, 0);
    program.addLessEqual({{local[x], work}, {imported[x], work}, {compute, -static_cast<double>(sites[x].slots)}}, 0);
    balance.emplace_back(exported[x], 1);
    balance.emplace_back(imported[x], -1);
    wan.emplace_back(exported[x], total);
  }
  program.addEqual(balance, 0);
  if (options.wanBudgetRho < 1) program.addLessEqual(wan, wanBudget(0, total, options.wanBudgetRho) + 1e-9);
  auto solved = program.solve();
  if (!solved) return solved.error();

  std::vector<double> l(n), e(n), g(n);
  for (std::size_t x = 0; x < n; ++x) {
    l[x] = solved->values[local[x]];
    e[x] = solved->values[exported[x]];
    g[x] = solved->values[imported[x]];
    // A site that both exports and imports can keep the difference local instead: the same
    // work per site with less traffic, and then exporters and importers are disjoint.
    const double both = std::min(e[x], g[x]);
    e[x] -= both;
    g[x] -= both;
    l[x] += both;
  }
  // North-west corner transport from exporters to importers: few non-zero cells.
  std::vector<std::vector<double>> fraction(n, std::vector<double>(n, 0.0));
  for (std::size_t x = 0; x < n; ++x) fraction[x][x] = l[x];
  std::size_t y = 0;
  for (std::size_t x = 0; x < n; ++x) {
    double left = e[x];
    while (left > 1e-12 && y < n) {
      const double moved = std::min(left, g[y]);
      if (moved > 0 && y != x) {
        fraction[x][y] += moved;
        left -= moved;
        g[y] -= moved;
      }
      if (g[y] <= 1e-12 || y == x) ++y;
    }
    if (left > 1e-9) fraction[x][x] += left;  // numerical residue: keep it local
  }
  return fraction;
}

// The map LP over m[x][y] itself, minimizing T_aggr + computeWeight·T_map + w·money: egress is
// priced per (sender, receiver) pair, so the marginals of solveMapLp no longer determine the
// objective. n² + 2 columns: used only when money is weighed.
Result<std::vector<std::vector<double>>> solveMapLpPerPair(const std::vector<SiteResources>& sites,
                                                           const MapStage& stage, const TetriumOptions& options,
                                                           double computeCapS, double computeWeight) {
  const std::size_t n = sites.size();
  const double total = sum(stage.inputGB);
  const std::vector<double> share = mapSourceShares(stage);
  const double work = stage.taskS * stage.tasks;
  const double weight = options.costWeightSPerUnit;
  lp::LinearProgram program;
  std::vector<std::vector<std::size_t>> m(n, std::vector<std::size_t>(n));
  for (std::size_t x = 0; x < n; ++x) {
    for (std::size_t y = 0; y < n; ++y) {
      // m_xy of the tasks run at y for work·m_xy task-seconds and fetch total·m_xy GB from x.
      const double money = work * containerPerTaskS(options.prices, y) + total * egressPerGB(options.prices, x, y);
      m[x][y] = program.addVariable(0, share[x], weight * money, fmt::format("m_{}_{}", x, y));
    }
  }
  const std::size_t aggr = program.addVariable(0, lp::kInfinity, 1, "T_aggr");
  const std::size_t compute = program.addVariable(0, computeCapS, computeWeight, "T_map");
  std::vector<std::pair<std::size_t, double>> wan;
  for (std::size_t x = 0; x < n; ++x) {
    std::vector<std::pair<std::size_t, double>> row, upload{{aggr, -sites[x].upGBps}},
        download{{aggr, -sites[x].downGBps}}, runs{{compute, -static_cast<double>(sites[x].slots)}};
    for (std::size_t y = 0; y < n; ++y) {
      row.emplace_back(m[x][y], 1);
      runs.emplace_back(m[y][x], work);
      if (y == x) continue;
      upload.emplace_back(m[x][y], total);
      download.emplace_back(m[y][x], total);
      wan.emplace_back(m[x][y], total);
    }
    program.addEqual(row, share[x]);
    program.addLessEqual(upload, 0);
    program.addLessEqual(download, 0);
    program.addLessEqual(runs, 0);
  }
  if (options.wanBudgetRho < 1) program.addLessEqual(wan, wanBudget(0, total, options.wanBudgetRho) + 1e-9);
  auto solved = program.solve();
  if (!solved) return solved.error();
  std::vector<std::vector<double>> fraction(n, std::vector<double>(n, 0.0));
  for (std::size_t x = 0; x < n; ++x)
    for (std::size_t y = 0; y < n; ++y) fraction[x][y] = std::max(0.0, solved->values[m[x][y]]);
  return fraction;
}

}  // namespace

Result<StageTimes> tetriumMapLpTimes(const std::vector<SiteResources>& sites, const MapStage& stage,
                                     const TetriumOptions& options) {
  TELLUS_RETURN_IF_ERROR(validateMap(sites, stage));
  TELLUS_RETURN_IF_ERROR(validateOptions(sites, options));
  if (stage.tasks == 0) return StageTimes{};
  TELLUS_RETURN_IF_ERROR(mapLpObstacle(sites, stage, options).prepend("tetrium map LP"));
  if (options.wanBudgetRho >= 1) {
    const StageTimes value = detail::mapLpValue(sites, stage);
    if (!std::isfinite(value.totalS())) return makeError(ErrorCode::kInvalidArgument, "tetrium map LP: LP is infeasible");
    return value;
  }
  // Time only (see the header): the WAN budget without the money objective.
  auto relaxed = solveMapLp(sites, stage, TetriumOptions{options.wanBudgetRho}, lp::kInfinity, 1.0);
  if (!relaxed) return Status(relaxed.error().prepend("tetrium map LP"));
  return evaluateMapFractions(sites, stage, relaxed.value());
}

Result<MapPlacement> tetriumMap(const std::vector<SiteResources>& sites, const MapStage& stage,
                                const TetriumOptions& options) {
  TELLUS_RETURN_IF_ERROR(validateMap(sites, stage));
  TELLUS_RETURN_IF_ERROR(validateOptions(sites, options));
  if (stage.tasks == 0) return inPlaceMap(sites, stage);
  TELLUS_RETURN_IF_ERROR(mapLpObstacle(sites, stage, options).prepend("tetrium map LP"));
  auto relaxed = solveMapLp(sites, stage, options, lp::kInfinity, 1.0);
  if (!relaxed) return Status(relaxed.error().prepend("tetrium map LP"));
  MapPlacement placement = priced(finishMap(sites, stage, std::move(relaxed.value())), stage, options);
  if (!options.refineWholeWaves) return placement;
  if (stage.taskS > 0) {
    const double waves = std::ceil(placement.lpTimes.computeS / stage.taskS - 1e-9);
    for (double w : {waves, waves + 1}) {
      auto capped = solveMapLp(sites, stage, options, w * stage.taskS, kTieWeight);
      if (capped) keepBetter(placement, priced(finishMap(sites, stage, std::move(capped.value())), stage, options), options);
    }
  }
  // In place moves no data, so it is always within the WAN budget.
  keepBetter(placement, priced(finishMap(sites, stage, inPlaceFractions(stage, sites.size())), stage, options), options);
  if (weighsMoney(options)) {
    // The time-only placement is a candidate too: weighing money never ends up worse, on
    // time + weight·money, than ignoring it (the rounding of the weighted LP can be).
    TetriumOptions timeOnly = options;
    timeOnly.costWeightSPerUnit = 0;
    auto fastest = tetriumMap(sites, stage, timeOnly);
    if (fastest) keepBetter(placement, std::move(fastest.value()), options);
  }
  return placement;
}

namespace {

// Paper 002's link bandwidth b_sd in MB/s: the slower of s's uplink and d's downlink (sites
// publish one uplink and one downlink each, not a matrix).
std::vector<std::vector<double>> linkMBps(const std::vector<SiteResources>& sites) {
  std::vector<std::vector<double>> links(sites.size(), std::vector<double>(sites.size(), 0.0));
  for (std::size_t s = 0; s < sites.size(); ++s) {
    for (std::size_t d = 0; d < sites.size(); ++d) {
      if (d != s) links[s][d] = std::min(sites[s].upGBps, sites[d].downGBps) * 1000.0;
    }
  }
  return links;
}

// The site of each task under max-min over one stage's tasks (see maxMinMap). transferS[c][y]:
// transfer time to site y of a task of class c (tasks of a class read the same input);
// taskClass[i]: the class of task i.
Result<std::vector<std::size_t>> maxMinSiteOfTask(const std::vector<SiteResources>& sites,
                                                  const std::vector<std::vector<double>>& transferS,
                                                  const std::vector<std::size_t>& taskClass, double taskS,
                                                  double budgetS) {
  const std::size_t n = sites.size();
  const std::size_t tasks = taskClass.size();
  std::vector<std::size_t> siteOfTask(tasks, 0);
  if (tasks == 0) return siteOfTask;
  // An upper bound on the optimum's slowest task: list scheduling, each task where it would
  // finish first behind the tasks already placed. No task of the optimum costs more, so waves
  // starting after it need no datacenter in the problem (keeps it small).
  std::vector<int> load(n, 0);
  double bound = 0;
  for (std::size_t i = 0; i < tasks; ++i) {
    std::size_t best = n;
    double bestCost = kInf;
    for (std::size_t y = 0; y < n; ++y) {
      if (sites[y].slots <= 0) continue;
      const double cost = transferS[taskClass[i]][y] + taskS * (load[y] / sites[y].slots + 1);
      if (cost < bestCost) {
        best = y;
        bestCost = cost;
      }
    }
    if (best == n) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("max-min: task {} cannot run anywhere: no site with slots can fetch its input "
                                   "(0 GB/s links)",
                                   i));
    }
    ++load[best];
    siteOfTask[i] = best;
    bound = std::max(bound, bestCost);
  }
  // Datacenters of the problem: wave k of site y has y's slots, and a task there finishes
  // (k+1)·taskS after its transfer. Without compute time, slots never delay a task: one
  // datacenter per site takes them all.
  MaxMinProblem problem;
  problem.jobs = tasks;
  std::vector<std::size_t> siteOfColumn;
  std::vector<double> computeOfColumn;
  for (std::size_t y = 0; y < n; ++y) {
    const int slots = sites[y].slots;
    if (slots <= 0) continue;
    const int taskCount = static_cast<int>(tasks);
    const int wavesAtY = taskS > 0 ? std::min((taskCount + slots - 1) / slots,
                                              static_cast<int>(std::floor(bound / taskS * (1 + 1e-9))))
                                   : 1;
    for (int k = 0; k < wavesAtY; ++k) {
      problem.slots.push_back(taskS > 0 ? slots : taskCount);
      problem.datacenterNames.push_back(fmt::format("{} (wave {})", siteLabel(sites, y), k + 1));
      siteOfColumn.push_back(y);
      computeOfColumn.push_back(taskS * (k + 1));
    }
  }
  // Too large for the search (a level per task, each a few max-flows over a task-datacenter
  // edge per pair): keep the list schedule, a placement within the slots — and the
  // lexicographic optimum when the tasks are alike (a reduce stage, or a map reading one
  // site), since it then takes the cheapest wave positions in order.
  if (tasks * tasks * siteOfColumn.size() > kMaxMinStageWork) return siteOfTask;
  problem.tasks.resize(tasks);
  for (std::size_t i = 0; i < tasks; ++i) {
    problem.tasks[i].job = i;  // each task its own "job": max-min over the stage's tasks
    problem.tasks[i].costS.reserve(siteOfColumn.size());
    for (std::size_t c = 0; c < siteOfColumn.size(); ++c) {
      problem.tasks[i].costS.push_back(transferS[taskClass[i]][siteOfColumn[c]] + computeOfColumn[c]);
    }
  }
  auto solved = maxMinFairAssign(problem, MaxMinOptions{budgetS});
  if (!solved) return solved.error().prepend("max-min");
  for (std::size_t i = 0; i < tasks; ++i) {
    siteOfTask[i] = siteOfColumn[static_cast<std::size_t>(solved->datacenterOfTask[i])];
  }
  return siteOfTask;
}

}  // namespace

Result<MapPlacement> maxMinMap(const std::vector<SiteResources>& sites, const MapStage& stage, double timeBudgetS) {
  TELLUS_RETURN_IF_ERROR(validateMap(sites, stage));
  const std::size_t n = sites.size();
  const std::vector<int> rowTasks =
      stage.tasksPerSource.empty() ? mapTasksPerSource(stage.inputGB, stage.tasks) : stage.tasksPerSource;
  // A task reading x moves x's input divided among the tasks reading x (the map model above).
  const std::vector<std::vector<double>> links = linkMBps(sites);
  std::vector<std::vector<double>> transferS(n, std::vector<double>(n, 0.0));
  std::vector<std::size_t> taskClass;
  for (std::size_t x = 0; x < n; ++x) {
    if (rowTasks[x] <= 0) continue;
    std::vector<double> inputMB(n, 0.0);
    inputMB[x] = stage.inputGB[x] / rowTasks[x] * 1000.0;
    for (std::size_t y = 0; y < n; ++y) transferS[x][y] = maxMinTransferS(inputMB, links, y);
    taskClass.insert(taskClass.end(), static_cast<std::size_t>(rowTasks[x]), x);
  }
  auto siteOfTask = maxMinSiteOfTask(sites, transferS, taskClass, stage.taskS, timeBudgetS);
  if (!siteOfTask) return siteOfTask.error().prepend("map stage");
  std::vector<std::vector<int>> tasks(n, std::vector<int>(n, 0));
  for (std::size_t i = 0; i < taskClass.size(); ++i) ++tasks[taskClass[i]][(*siteOfTask)[i]];
  // Fractions of the data, as the other policies report them: row x splits x's share like its tasks.
  const std::vector<double> share = mapSourceShares(stage);
  std::vector<std::vector<double>> fraction(n, std::vector<double>(n, 0.0));
  for (std::size_t x = 0; x < n; ++x) {
    if (rowTasks[x] <= 0) {
      fraction[x][x] = share[x];
      continue;
    }
    for (std::size_t y = 0; y < n; ++y) fraction[x][y] = share[x] * tasks[x][y] / rowTasks[x];
  }
  return completeMap(sites, stage, std::move(fraction), std::move(tasks));
}

Result<ReducePlacement> maxMinReduce(const std::vector<SiteResources>& sites, const ReduceStage& stage,
                                     double timeBudgetS) {
  TELLUS_RETURN_IF_ERROR(validateReduce(sites, stage));
  const std::size_t n = sites.size();
  // Every reduce task reads its 1/n share of each site's shuffle data: one class of tasks.
  std::vector<double> inputMB(n, 0.0);
  for (std::size_t x = 0; x < n && stage.tasks > 0; ++x) inputMB[x] = stage.shuffleGB[x] / stage.tasks * 1000.0;
  const std::vector<std::vector<double>> links = linkMBps(sites);
  std::vector<std::vector<double>> transferS(1, std::vector<double>(n, 0.0));
  for (std::size_t y = 0; y < n; ++y) transferS[0][y] = maxMinTransferS(inputMB, links, y);
  const std::vector<std::size_t> taskClass(static_cast<std::size_t>(stage.tasks), 0);
  auto siteOfTask = maxMinSiteOfTask(sites, transferS, taskClass, stage.taskS, timeBudgetS);
  if (!siteOfTask) return siteOfTask.error().prepend("reduce stage");
  std::vector<int> tasks(n, 0);
  for (std::size_t y : *siteOfTask) ++tasks[y];
  std::vector<double> fraction(n, 0.0);
  for (std::size_t y = 0; y < n && stage.tasks > 0; ++y) fraction[y] = static_cast<double>(tasks[y]) / stage.tasks;
  return completeReduce(sites, stage, std::move(fraction), std::move(tasks));
}

std::vector<std::vector<int>> orderMapTasks(const std::vector<SiteResources>& sites,
                                            const std::vector<std::vector<int>>& tasks) {
  const std::size_t n = sites.size();
  std::vector<std::vector<int>> order(n);
  for (std::size_t y = 0; y < n; ++y) {
    std::vector<std::size_t> sources;
    for (std::size_t x = 0; x < n; ++x)
      if (x != y && tasks[x][y] > 0) sources.push_back(x);
    // Slowest uplink first: those tasks take longest to fetch their input.
    std::stable_sort(sources.begin(), sources.end(),
                     [&](std::size_t a, std::size_t b) { return sites[a].upGBps < sites[b].upGBps; });
    std::vector<int> left(n);
    for (std::size_t x : sources) left[x] = tasks[x][y];
    for (bool any = true; any;) {
      any = false;
      for (std::size_t x : sources) {
        if (left[x] > 0) {
          order[y].push_back(static_cast<int>(x));
          --left[x];
          any = true;
        }
      }
    }
    order[y].insert(order[y].end(), static_cast<std::size_t>(std::max(0, tasks[y][y])), static_cast<int>(y));
  }
  return order;
}

std::vector<std::size_t> orderReduceTasks(const std::vector<double>& taskInputGB) {
  std::vector<std::size_t> order(taskInputGB.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return taskInputGB[a] > taskInputGB[b]; });
  return order;
}

namespace {

// Integer least squares: f' >= 0 over `chosen`, sum f' = total, minimizing sum (f' - f*)^2.
// Unit steps on a separable convex objective are optimal.
double splitWithin(const std::vector<std::size_t>& chosen, const std::vector<int>& ideal, long long total,
                   std::vector<int>& out) {
  long long placed = 0;
  for (std::size_t i : chosen) {
    out[i] = ideal[i];
    placed += ideal[i];
  }
  while (placed < total) {
    // Add where f' - f* is smallest (cost of +1 is 2(f'-f*)+1).
    std::size_t best = chosen[0];
    for (std::size_t i : chosen)
      if (out[i] - ideal[i] < out[best] - ideal[best]) best = i;
    ++out[best];
    ++placed;
  }
  while (placed > total) {
    std::size_t best = SIZE_MAX;
    for (std::size_t i : chosen)
      if (out[i] > 0 && (best == SIZE_MAX || out[i] - ideal[i] > out[best] - ideal[best])) best = i;
    --out[best];
    --placed;
  }
  double q = 0;
  for (std::size_t i : chosen) q += std::pow(static_cast<double>(out[i] - ideal[i]), 2);
  return q;
}

}  // namespace

Result<Reassignment> reassignKSites(const std::vector<int>& current, const std::vector<int>& ideal, int k) {
  const std::size_t n = current.size();
  if (ideal.size() != n) return makeError(ErrorCode::kInvalidArgument, "current and ideal differ in size");
  if (k < 0) return makeError(ErrorCode::kInvalidArgument, "k must be >= 0");
  for (std::size_t i = 0; i < n; ++i) {
    if (current[i] < 0 || ideal[i] < 0) return makeError(ErrorCode::kInvalidArgument, "task counts must be >= 0");
  }
  const std::size_t changeable = std::min<std::size_t>(static_cast<std::size_t>(k), n);
  auto evaluate = [&](const std::vector<std::size_t>& chosen, std::vector<int>& out) -> double {
    out = current;
    double q = 0;
    std::vector<bool> in(n, false);
    for (std::size_t i : chosen) in[i] = true;
    for (std::size_t i = 0; i < n; ++i)
      if (!in[i]) q += std::pow(static_cast<double>(current[i] - ideal[i]), 2);
    if (chosen.empty()) return q;
    long long total = 0;
    for (std::size_t i : chosen) total += current[i];
    return q + splitWithin(chosen, ideal, total, out);
  };

  Reassignment best;
  double bestQ = evaluate({}, best.tasks);
  // C(n, changeable), capped to decide whether exhaustive search is affordable.
  double combinations = 1;
  for (std::size_t i = 0; i < changeable; ++i) combinations = combinations * static_cast<double>(n - i) / (i + 1);
  std::vector<int> candidate;
  if (changeable >= 2 && combinations <= 20000) {
    best.exhaustive = true;
    std::vector<bool> mask(n, false);
    std::fill(mask.begin(), mask.begin() + static_cast<std::ptrdiff_t>(changeable), true);
    do {
      std::vector<std::size_t> chosen;
      for (std::size_t i = 0; i < n; ++i)
        if (mask[i]) chosen.push_back(i);
      const double q = evaluate(chosen, candidate);
      if (q < bestQ - 1e-9) {
        bestQ = q;
        best.tasks = candidate;
      }
    } while (std::prev_permutation(mask.begin(), mask.end()));
  } else {
    // One site alone cannot move tasks (its total is fixed), so k < 2 changes nothing.
    best.exhaustive = changeable < 2;
    if (changeable >= 2) {
      std::vector<std::size_t> byGap(n);
      std::iota(byGap.begin(), byGap.end(), 0);
      std::stable_sort(byGap.begin(), byGap.end(), [&](std::size_t a, std::size_t b) {
        return std::abs(current[a] - ideal[a]) > std::abs(current[b] - ideal[b]);
      });
      byGap.resize(changeable);
      std::sort(byGap.begin(), byGap.end());
      const double q = evaluate(byGap, candidate);
      if (q < bestQ - 1e-9) {
        bestQ = q;
        best.tasks = candidate;
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    if (best.tasks[i] != current[i]) best.changed.push_back(i);
  best.distance = std::sqrt(bestQ);
  return best;
}

}  // namespace tellus::sched
