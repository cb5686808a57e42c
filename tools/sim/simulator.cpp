#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "jobcore/job_core.h"
#include "jobstate/placement.h"
#include "sched/fair_share.h"
#include "sched/job_order.h"
#include "sched/placement.h"
#include "sched/tetrium_round.h"
#include "sim/event_queue.h"
#include "sim/network.h"
#include "tellus.pb.h"

namespace tellus::sim {
namespace {

using sched::JobOrder;
using sched::Placement;
using sched::Resources;

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Job managers that keep stepping without settling within one instant are a bug of the
// driver or the core: the run stops with an error instead of spinning.
constexpr int kMaxJmRoundsPerInstant = 100000;
// Data-less stages (SWAG's workloads) still need placement weights: one byte per task.
constexpr double kTokenBytes = 1.0;

enum class TaskState : uint8_t { kPending, kQueued, kFetching, kComputing, kDone };

struct TaskRt {
  double launchedAt = 0;
  double readySince = 0;
  int32_t site = -1;
  uint32_t attempt = 0;
  int32_t pendingFlows = 0;
  TaskState state = TaskState::kPending;
};

struct StageRt {
  int unfinishedParents = 0;
  bool released = false;
  int launched = 0;
  int finished = 0;
  int queued = 0;
  double meanTaskSeconds = 0;
  double lpSeconds = 0;  // placement model's stage time (Tetrium order key)
  std::vector<int32_t> children;
  std::vector<TaskRt> tasks;
  std::vector<double> outputAtSite;       // bytes written per site
  std::vector<int32_t> finishedAtSite;    // tasks finished per site (placement weights)
  std::vector<std::vector<int32_t>> queue;  // per site; back() launches next
  // For the isolated-time lower bound.
  std::vector<double> bytesOut, bytesIn, workAtSite;
  double longestTask = 0;
  double isolatedPathSeconds = 0;
};

struct SubJobRt {
  int queued = 0;  // waiting tasks here (slots mode: in this site's queues; HOUTU: owned here)
  int running = 0;
  int activePosition = -1;  // in SiteRt::active
};

// A job manager (HOUTU modes): the daemon's decision core, and what the site's master and
// workers know of it.
struct JmRt {
  explicit JmRt(jobcore::CoreConfig config) : core(std::move(config)) {}
  jobcore::JobCore core;
  std::map<std::string, pb::Container> containers;  // granted, by slot key
  std::map<std::string, int> tasksIn;               // running tasks per container
  std::map<jobcore::TaskId, jobcore::LaunchTask> launched;
  uint32_t desire = 0;       // its last request to the master
  double wakeAt = kInfinity; // a kJmWake event is pending for then
};

struct JobRt {
  JobSpec spec;
  std::vector<StageRt> stages;
  std::vector<SubJobRt> sub;  // per site
  std::vector<int32_t> jmSites;
  int stagesLeft = 0;
  int64_t unlaunched = 0;
  double wanBytes = 0;
  int64_t rank = 0;                  // position in the global order
  std::vector<int32_t> siteRank;     // Independent-SRPT: position in each site's order
  std::unordered_map<uint64_t, std::vector<FlowId>> flowsOfTask;
  // HOUTU: the job's state as ZooKeeper would hold it, and its job managers (by site index).
  std::string coreId;
  std::vector<std::optional<pb::TaskMap>> taskmaps;
  std::vector<int32_t> taskmapVersions;
  std::vector<std::unique_ptr<JmRt>> jm;
  // Every recorded output by stage, as the job's `parts` in ZooKeeper would list them.
  std::vector<std::map<uint32_t, pb::PartitionLocation>> outputs;
};

struct SiteRt {
  std::string name;
  int baseSlots = 0;
  int capacity = 0;
  int busy = 0;  // running tasks
  int held = 0;  // containers granted to job managers (HOUTU modes)
  double baseUp = 0, baseDown = 0;
  double up = 0, down = 0;
  std::vector<int64_t> active;  // jobs with queued tasks here
  std::vector<int64_t> jms;     // jobs with a job manager here
  uint32_t nextSlot = 0;        // container ids handed out by its master (one worker)
  bool dirty = false;
  // Several workers (SiteSpec::workers > 1): their ids, which are live, and the free
  // containers as (slot index, worker index), granted lowest first as tellus-master does.
  std::vector<std::string> workerIds;
  std::vector<bool> workerLive;
  int slotsPerWorker = 0;
  std::set<std::pair<uint32_t, int>> freeSlots;
  // Awan leases its master publishes: by job, when the containers its JM here holds come free
  // (the JM's last request), in simulated time.
  std::map<int64_t, std::vector<double>> leaseEnds;
};

// A stage's name in the job spec the job managers see. (fmt, not "s" + std::string: GCC 12's
// -Wrestrict misfires on the latter at -O3.)
std::string stageName(size_t stage) { return fmt::format("s{}", stage); }

uint64_t taskKey(int32_t stage, int32_t task) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(stage)) << 32) | static_cast<uint32_t>(task);
}

class Engine {
 public:
  Engine(const SimConfig& config, WorkloadSource& workload, JobRecordSink* sink)
      : config_(config), policy_(config.policy), workload_(workload), sink_(sink), network_(ups(config), downs(config)) {
    for (const auto& spec : config.sites) {
      SiteRt site;
      site.name = spec.name;
      siteIndex_.emplace(spec.name, static_cast<int>(sites_.size()));
      site.baseSlots = site.capacity = spec.slots;
      site.baseUp = site.up = spec.uplinkBytesPerSecond;
      site.baseDown = site.down = spec.downlinkBytesPerSecond;
      if (spec.workers > 1) {
        site.slotsPerWorker = spec.slots / spec.workers;
        for (int k = 0; k < spec.workers; ++k) {
          site.workerIds.push_back(fmt::format("{}-w{}", spec.name, k + 1));
          site.workerLive.push_back(true);
          for (int j = 0; j < site.slotsPerWorker; ++j) site.freeSlots.emplace(static_cast<uint32_t>(j), k);
        }
      }
      sites_.push_back(std::move(site));
    }
    summary_.policy = policy_.label;
    std::vector<std::string> names;
    for (const auto& site : sites_) names.push_back(site.name);
    tetriumOptions_.wanBudgetRho = policy_.wanBudgetRho;
    tetriumOptions_.costWeightSPerUnit = policy_.costWeight;
    if (policy_.costWeight > 0) tetriumOptions_.prices = jobstate::placementPrices(names, config_.prices);
  }

  Result<RunSummary> run();

 private:
  static std::vector<double> ups(const SimConfig& c) {
    std::vector<double> v;
    for (const auto& s : c.sites) v.push_back(s.uplinkBytesPerSecond);
    return v;
  }
  static std::vector<double> downs(const SimConfig& c) {
    std::vector<double> v;
    for (const auto& s : c.sites) v.push_back(s.downlinkBytesPerSecond);
    return v;
  }
  int siteCount() const { return static_cast<int>(sites_.size()); }
  bool containerMode() const { return policy_.resources != Resources::kSlots; }
  void fail(Error error) {
    if (!failure_) failure_ = std::move(error);
  }

  Status pullNextArrival();
  void onArrival();
  void onFlowDone(const CompletedFlow& flow);
  void onComputeDone(const Event& event);
  void onClusterChange(const Event& event);
  void onJmWake(const Event& event);

  void prepareStage(JobRt& job, int32_t stage);
  void releaseStage(JobRt& job, int32_t stage);
  Status placeStage(JobRt& job, int32_t stage);
  std::vector<sched::SiteResources> siteResources() const;
  void enqueue(JobRt& job, int32_t stage, int32_t task, int site);
  void noteQueued(JobRt& job, int site, int delta);
  void launchTask(JobRt& job, int32_t stage, int32_t task, int site);
  bool launchNextAt(JobRt& job, int site);
  void finishStage(JobRt& job, int32_t stage);
  void finishJob(JobRt& job);
  void killTask(JobRt& job, int32_t stage, int32_t task);

  void markDirty(int site);
  std::vector<int> takeDirtySites();
  void flushScheduling();
  void recomputeOrder();
  int64_t rankAt(const JobRt& job, int site) const;
  std::vector<int64_t> activeByRank(int site) const;
  void dispatchSlots(int site);
  // HOUTU: the simulator as the job managers' driver.
  void startJobManagers(JobRt& job);
  void markJm(int64_t job, int site) { dirtyJms_.emplace(job, site); }
  void markJms(const JobRt& job);
  void runJobManagers();
  void grantContainers(int site);
  void setGrants(JobRt& job, int site);
  bool stepJm(JobRt& job, int site);  // false: the job finished and is gone
  std::vector<jobstate::SiteCapacity> siteCapacities(const JobRt& job) const;
  void applyRelease(JobRt& job, int site, const jobcore::ReleaseStage& release);
  void applyRequest(JobRt& job, int site, const jobcore::ContainerRequest& request);
  void applySteal(JobRt& job, int thief, const jobcore::StealWork& work);
  void revokeContainer(JobRt& job, int site, const std::string& slotKey);
  // Several workers per site: the live ones' ids (one worker: the site's name), and a loss.
  std::set<std::string> liveWorkers(int site) const;
  void loseWorker(int site, int worker);
  // The primary's lineage: the output is removed, the task waits at its owner again.
  void applyLostOutput(JobRt& job, int site, const jobcore::RemoveLostOutput& lost);
  // Hands every JM's recorded decisions of the job to config_.decisions.
  void drainDecisions(JobRt& job);
  // The run's usage (RunSummary::usage), in the units cost::Usage keeps: slot milliseconds
  // (rounded up, as billed) and bytes.
  void addSlotTime(int site, double seconds) {
    if (site < 0 || seconds <= 0) return;
    summary_.usage.addContainerMs(sites_[static_cast<size_t>(site)].name, static_cast<uint64_t>(std::ceil(seconds * 1000.0)));
  }
  void addBytes(int from, int to, double bytes) {
    if (from < 0 || to < 0 || from == to || bytes <= 0) return;
    summary_.usage.addBytes(sites_[static_cast<size_t>(from)].name, sites_[static_cast<size_t>(to)].name,
                            static_cast<uint64_t>(std::llround(bytes)));
  }
  // A task waits at `site` (HOUTU: owned there); enqueue also puts it in the site's queue.
  void markWaiting(JobRt& job, int32_t stage, int32_t task, int site);
  void reassignAfterDrop();
  bool roundMode() const { return policy_.tetriumRounds; }
  // Sites share their slots by the fair scheduler, not by a job order.
  bool fairScheduler() const { return policy_.order == JobOrder::kFair && policy_.fixedOrder.empty(); }
  void runTetriumRound();

  JobRt* findJob(int64_t id) {
    const auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : it->second.get();
  }

  const SimConfig& config_;
  const PolicyConfig& policy_;
  // Tetrium's knobs for every placement the engine makes itself: ρ, and the policy's cost weight
  // at the sites' prices (in site order, as siteResources lists them).
  sched::TetriumOptions tetriumOptions_;
  WorkloadSource& workload_;
  JobRecordSink* sink_;
  FairShareNetwork network_;
  EventQueue events_;
  std::vector<SiteRt> sites_;
  std::map<int64_t, std::unique_ptr<JobRt>> jobs_;
  std::optional<JobSpec> pendingArrival_;
  bool workloadDone_ = false;
  std::vector<int> dirtySites_;
  std::set<std::pair<int64_t, int>> dirtyJms_;  // (job, site): step its job manager
  std::unordered_map<std::string, int> siteIndex_;
  bool orderDirty_ = false;
  bool roundWanted_ = false;     // Tetrium rounds: slots were freed or work was queued
  bool roundScheduled_ = false;
  bool refreshScheduled_ = false;
  double lastOrderAt_ = -kInfinity;
  double lastRound_ = -kInfinity;  // job managers are created after a stage's placement is complete
  double now_ = 0;
  bool sawArrival_ = false;
  std::optional<Error> failure_;
  RunSummary summary_;
  std::vector<CompletedFlow> completedFlows_;
  std::vector<bool> eventTriggered_;  // cluster events with whenStageDone: already pushed
};

// ---- the event loop ----------------------------------------------------------------------

Result<RunSummary> Engine::run() {
  const auto wallStart = std::chrono::steady_clock::now();
  if (sites_.empty()) return makeError(ErrorCode::kInvalidArgument, "the cluster has no sites");
  for (const auto& site : sites_) {
    if (site.baseSlots < 0 || site.baseUp <= 0 || site.baseDown <= 0) {
      return makeError(ErrorCode::kInvalidArgument, site.name + ": slots must be >= 0 and bandwidth > 0");
    }
  }
  for (const auto& change : config_.clusterEvents) {
    if (change.site < 0 || change.site >= siteCount()) {
      return makeError(ErrorCode::kInvalidArgument, "cluster event for site " + std::to_string(change.site) +
                                                        ", but there are " + std::to_string(siteCount()) + " sites");
    }
    if (change.slotLoss < 0 || change.slotLoss > 1 || change.bandwidthLoss < 0 || change.bandwidthLoss >= 1) {
      return makeError(ErrorCode::kInvalidArgument, "cluster event: slot loss must be in [0,1], bandwidth loss in [0,1)");
    }
    const SiteSpec& spec = config_.sites[static_cast<size_t>(change.site)];
    // A site keeps a worker: the job managers' lost-site handling (all workers gone) is not
    // simulated.
    if (change.loseWorker >= 0 && (!containerMode() || spec.workers < 2 || change.loseWorker >= spec.workers)) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("cluster event: worker {} of {} is lost, but it has {} (a worker loss needs two or "
                                   "more, and job managers: static or af)",
                                   change.loseWorker, spec.name, spec.workers));
    }
    if (change.whenStageDone && *change.whenStageDone < 0) {
      return makeError(ErrorCode::kInvalidArgument, "cluster event: whenStageDone must be a stage index");
    }
  }
  for (const auto& spec : config_.sites) {
    if (spec.workers < 1 || (spec.workers > 1 && spec.slots % spec.workers != 0)) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("{}: {} workers must share its {} slots evenly", spec.name, spec.workers, spec.slots));
    }
  }
  eventTriggered_.assign(config_.clusterEvents.size(), false);
  for (size_t i = 0; i < config_.clusterEvents.size(); ++i) {
    if (config_.clusterEvents[i].whenStageDone) continue;  // pushed by finishStage
    Event event;
    event.time = config_.clusterEvents[i].timeSeconds;
    event.kind = EventKind::kClusterChange;
    event.task = static_cast<int32_t>(i);
    event.stage = 0;  // 0 = apply, 1 = restore
    events_.push(event);
  }
  TELLUS_RETURN_IF_ERROR(pullNextArrival());

  while (!failure_) {
    const double networkTime = network_.nextCompletionTime();
    const double eventTime = events_.empty() ? kInfinity : events_.top().time;
    if (networkTime == kInfinity && eventTime == kInfinity) break;
    if (networkTime <= eventTime) {
      now_ = networkTime;
      completedFlows_.clear();
      network_.completeFlowsAt(now_, completedFlows_);
      for (const auto& flow : completedFlows_) {
        onFlowDone(flow);
        ++summary_.events;
      }
    } else {
      const Event event = events_.pop();
      now_ = event.time;
      ++summary_.events;
      switch (event.kind) {
        case EventKind::kJobArrival: onArrival(); break;
        case EventKind::kTaskComputeDone: onComputeDone(event); break;
        case EventKind::kJmWake: onJmWake(event); break;
        case EventKind::kClusterChange: onClusterChange(event); break;
        case EventKind::kOrderRefresh: refreshScheduled_ = false; break;
        case EventKind::kSchedulingRound:
          roundScheduled_ = false;
          lastRound_ = now_;
          runTetriumRound();
          break;
      }
    }
    flushScheduling();
  }
  if (failure_) return *failure_;
  if (!jobs_.empty()) {
    return makeError(ErrorCode::kInternal, std::to_string(jobs_.size()) +
                                               " jobs never finished (no slots left where their tasks are placed?)");
  }
  summary_.makespanSeconds = summary_.lastFinishSeconds - summary_.firstArrivalSeconds;
  summary_.wallSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
  summary_.eventsPerSecond = summary_.wallSeconds > 0 ? static_cast<double>(summary_.events) / summary_.wallSeconds : 0;
  double slots = 0;
  for (const auto& site : sites_) slots += site.baseSlots;
  summary_.utilization = summary_.makespanSeconds > 0 && slots > 0
                             ? summary_.busySlotSeconds / (slots * summary_.makespanSeconds)
                             : 0;
  summary_.cost = cost::price(summary_.usage, config_.prices);
  return summary_;
}

Status Engine::pullNextArrival() {
  if (workloadDone_) return Status::ok();
  auto next = workload_.next();
  if (!next) return next.status();
  if (!next->has_value()) {
    workloadDone_ = true;
    return Status::ok();
  }
  JobSpec job = std::move(**next);
  TELLUS_RETURN_IF_ERROR(validateJob(job, siteCount()));
  if (job.arrivalSeconds < now_) {
    return makeError(ErrorCode::kInvalidArgument, "job " + std::to_string(job.id) + " arrives at " +
                                                      std::to_string(job.arrivalSeconds) +
                                                      " s, before the previous job: the workload must be sorted");
  }
  if (jobs_.contains(job.id)) {
    return makeError(ErrorCode::kInvalidArgument, "job id " + std::to_string(job.id) + " appears twice");
  }
  Event event;
  event.time = job.arrivalSeconds;
  event.kind = EventKind::kJobArrival;
  event.job = job.id;
  pendingArrival_ = std::move(job);
  events_.push(event);
  return Status::ok();
}

void Engine::onArrival() {
  auto job = std::make_unique<JobRt>();
  job->spec = std::move(*pendingArrival_);
  job->rank = (int64_t{1} << 40) + job->spec.id;  // until an order ranks it (recomputeOrder)
  pendingArrival_.reset();
  if (!sawArrival_) {
    summary_.firstArrivalSeconds = now_;
    sawArrival_ = true;
  }
  const int n = siteCount();
  job->sub.resize(static_cast<size_t>(n));
  job->stages.resize(job->spec.stages.size());
  job->stagesLeft = static_cast<int>(job->spec.stages.size());
  for (size_t s = 0; s < job->spec.stages.size(); ++s) {
    const StageSpec& spec = job->spec.stages[s];
    StageRt& stage = job->stages[s];
    stage.unfinishedParents = static_cast<int>(spec.parents.size());
    for (int32_t parent : spec.parents) job->stages[static_cast<size_t>(parent)].children.push_back(static_cast<int32_t>(s));
    stage.tasks.resize(static_cast<size_t>(spec.numTasks()));
    double total = 0;
    for (float seconds : spec.taskSeconds) total += seconds;
    stage.meanTaskSeconds = total / spec.numTasks();
  }
  JobRt& ref = *job;
  jobs_.emplace(ref.spec.id, std::move(job));
  summary_.peakActiveJobs = std::max<int64_t>(summary_.peakActiveJobs, static_cast<int64_t>(jobs_.size()));
  if (containerMode()) {
    startJobManagers(ref);  // their primary releases the root stages
  } else {
    for (size_t s = 0; s < ref.stages.size(); ++s) {
      if (ref.stages[s].unfinishedParents == 0) releaseStage(ref, static_cast<int32_t>(s));
    }
  }
  const Status pulled = pullNextArrival();
  if (!pulled) fail(pulled.error());
}

// ---- stage release and placement ---------------------------------------------------------

std::vector<sched::SiteResources> Engine::siteResources() const {
  std::vector<sched::SiteResources> resources;
  resources.reserve(sites_.size());
  int total = 0;
  for (const auto& site : sites_) total += site.capacity;
  for (size_t x = 0; x < sites_.size(); ++x) {
    const SiteRt& site = sites_[x];
    // Bandwidth as the LPs see it: the links' capacity. The LPs take it as the rate a whole
    // stage's transfers get (Tetrium constraints 2-3, 7-8), and under per-flow fair sharing a
    // stage opening m flows next to k others gets m/(m+k) of a link; what one more flow would
    // get, 1/(1+k), made a busy link look hundreds of times slower than the stage would find
    // it, and idle slow links attractive (docs/sim.md: Tetrium lost 15-30% to the proportional
    // baseline over a slow WAN at light load). The daemons feed summed measured rates.
    // With every slot gone (all sites dropped to 0) place as if at full strength: the tasks
    // will wait for the slots to come back rather than fail.
    resources.push_back(sched::SiteResources{site.name, total > 0 ? site.capacity : site.baseSlots,
                                             site.up / kGB, site.down / kGB});
  }
  return resources;
}

void Engine::prepareStage(JobRt& job, int32_t s) {
  StageRt& stage = job.stages[static_cast<size_t>(s)];
  stage.released = true;
  const size_t n = sites_.size();
  stage.outputAtSite.assign(n, 0);
  stage.finishedAtSite.assign(n, 0);
  stage.bytesOut.assign(n, 0);
  stage.bytesIn.assign(n, 0);
  stage.workAtSite.assign(n, 0);
}

void Engine::releaseStage(JobRt& job, int32_t s) {
  StageRt& stage = job.stages[static_cast<size_t>(s)];
  prepareStage(job, s);
  stage.queue.assign(sites_.size(), {});
  const auto started = std::chrono::steady_clock::now();
  const Status placed = placeStage(job, s);
  summary_.placementWallSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ++summary_.placementsSolved;
  if (!placed) {
    fail(placed.error().prepend("placing job " + std::to_string(job.spec.id) + " stage " + std::to_string(s)));
    return;
  }
  orderDirty_ = true;
  roundWanted_ = true;
}

Status Engine::placeStage(JobRt& job, int32_t s) {
  const StageSpec& spec = job.spec.stages[static_cast<size_t>(s)];
  StageRt& stage = job.stages[static_cast<size_t>(s)];
  const int n = siteCount();
  const std::vector<sched::SiteResources> resources = siteResources();
  std::vector<int32_t> siteOfTask(static_cast<size_t>(spec.numTasks()), -1);
  // Launch order per site, first to launch first.
  std::vector<std::vector<int32_t>> order(static_cast<size_t>(n));

  if (spec.isRoot()) {
    sched::MapStage map;
    map.inputGB.assign(static_cast<size_t>(n), 0);
    map.tasks = spec.numTasks();
    map.taskS = stage.meanTaskSeconds;
    const double bytesPerTask = spec.inputBytes / spec.numTasks();
    const double weight = (bytesPerTask > 0 ? bytesPerTask : kTokenBytes) / kGB;
    std::vector<std::vector<int32_t>> tasksFrom(static_cast<size_t>(n));
    for (int32_t t = 0; t < spec.numTasks(); ++t) {
      const int32_t x = spec.blockSite[static_cast<size_t>(t)];
      map.inputGB[static_cast<size_t>(x)] += weight;
      tasksFrom[static_cast<size_t>(x)].push_back(t);
    }
    // In Tetrium's round mode tasks wait where their data is; each round places them anew.
    auto placement = sched::placeMap(roundMode() ? Placement::kInPlace : policy_.placement, resources, map,
                                     tetriumOptions_);
    if (!placement) return placement.status();
    stage.lpSeconds = placement->lpTimes.totalS();
    // tasks[x][y] of the tasks whose block is at x run at y.
    std::vector<std::vector<std::vector<int32_t>>> fromTo(static_cast<size_t>(n),
                                                          std::vector<std::vector<int32_t>>(static_cast<size_t>(n)));
    for (int x = 0; x < n; ++x) {
      auto& pool = tasksFrom[static_cast<size_t>(x)];
      size_t next = 0;
      for (int y = 0; y < n && next < pool.size(); ++y) {
        const int count = placement->tasks[static_cast<size_t>(x)][static_cast<size_t>(y)];
        for (int i = 0; i < count && next < pool.size(); ++i) {
          fromTo[static_cast<size_t>(x)][static_cast<size_t>(y)].push_back(pool[next++]);
        }
      }
      // Rounding never leaves a task unplaced, but if it did the task would run where its data is.
      for (; next < pool.size(); ++next) fromTo[static_cast<size_t>(x)][static_cast<size_t>(x)].push_back(pool[next]);
    }
    std::vector<std::vector<int>> counts(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(n), 0));
    for (int x = 0; x < n; ++x) {
      for (int y = 0; y < n; ++y) {
        counts[static_cast<size_t>(x)][static_cast<size_t>(y)] =
            static_cast<int>(fromTo[static_cast<size_t>(x)][static_cast<size_t>(y)].size());
      }
    }
    if (policy_.placement == Placement::kTetrium && !roundMode()) {
      // Tetrium §3.3: remote tasks first, slowest uplinks first, spread across sources.
      const std::vector<std::vector<int>> sources = sched::orderMapTasks(resources, counts);
      for (int y = 0; y < n; ++y) {
        std::vector<size_t> taken(static_cast<size_t>(n), 0);
        for (int x : sources[static_cast<size_t>(y)]) {
          auto& list = fromTo[static_cast<size_t>(x)][static_cast<size_t>(y)];
          if (taken[static_cast<size_t>(x)] < list.size()) order[static_cast<size_t>(y)].push_back(list[taken[static_cast<size_t>(x)]++]);
        }
        for (int x = 0; x < n; ++x) {  // anything the order did not list, in index order
          auto& list = fromTo[static_cast<size_t>(x)][static_cast<size_t>(y)];
          for (size_t i = taken[static_cast<size_t>(x)]; i < list.size(); ++i) order[static_cast<size_t>(y)].push_back(list[i]);
        }
      }
    } else {
      for (int y = 0; y < n; ++y) {
        for (int x = 0; x < n; ++x) {
          for (int32_t t : fromTo[static_cast<size_t>(x)][static_cast<size_t>(y)]) order[static_cast<size_t>(y)].push_back(t);
        }
        std::sort(order[static_cast<size_t>(y)].begin(), order[static_cast<size_t>(y)].end());
      }
    }
  } else {
    sched::ReduceStage reduce;
    reduce.shuffleGB.assign(static_cast<size_t>(n), 0);
    reduce.tasks = spec.numTasks();
    reduce.taskS = stage.meanTaskSeconds;
    double totalBytes = 0;
    for (int32_t parent : spec.parents) {
      const StageRt& p = job.stages[static_cast<size_t>(parent)];
      for (int x = 0; x < n; ++x) {
        reduce.shuffleGB[static_cast<size_t>(x)] += p.outputAtSite[static_cast<size_t>(x)] / kGB;
        totalBytes += p.outputAtSite[static_cast<size_t>(x)];
      }
    }
    if (totalBytes <= 0) {  // data-less parents: weigh sites by where the parent tasks ran
      for (int32_t parent : spec.parents) {
        const StageRt& p = job.stages[static_cast<size_t>(parent)];
        for (int x = 0; x < n; ++x) {
          reduce.shuffleGB[static_cast<size_t>(x)] += p.finishedAtSite[static_cast<size_t>(x)] * kTokenBytes / kGB;
        }
      }
    }
    auto placement = sched::placeReduce(roundMode() ? Placement::kProportional : policy_.placement, resources, reduce,
                                        tetriumOptions_);
    if (!placement) return placement.status();
    stage.lpSeconds = placement->lpTimes.totalS();
    // Every reduce task reads the same share of the shuffle, so §3.3's largest-first order
    // is the index order; it is still asked for, so a skewed partitioning would be honored.
    const std::vector<size_t> launchOrder = sched::orderReduceTasks(
        std::vector<double>(static_cast<size_t>(spec.numTasks()), totalBytes / spec.numTasks() / kGB));
    size_t next = 0;
    for (int x = 0; x < n; ++x) {
      for (int i = 0; i < placement->tasks[static_cast<size_t>(x)] && next < launchOrder.size(); ++i) {
        order[static_cast<size_t>(x)].push_back(static_cast<int32_t>(launchOrder[next++]));
      }
    }
    for (; next < launchOrder.size(); ++next) order[0].push_back(static_cast<int32_t>(launchOrder[next]));
  }

  for (int y = 0; y < n; ++y) {
    auto& list = order[static_cast<size_t>(y)];
    // The queue pops from the back.
    for (auto it = list.rbegin(); it != list.rend(); ++it) enqueue(job, s, *it, y);
  }
  return Status::ok();
}

void Engine::enqueue(JobRt& job, int32_t s, int32_t t, int site) {
  // The queue pops from the back: callers push the task that should launch next last.
  job.stages[static_cast<size_t>(s)].queue[static_cast<size_t>(site)].push_back(t);
  markWaiting(job, s, t, site);
}

void Engine::noteQueued(JobRt& job, int site, int delta) {
  SubJobRt& sub = job.sub[static_cast<size_t>(site)];
  SiteRt& where = sites_[static_cast<size_t>(site)];
  const bool wasActive = sub.queued > 0;
  sub.queued += delta;
  job.unlaunched += delta;
  if (!wasActive && sub.queued > 0) {
    sub.activePosition = static_cast<int>(where.active.size());
    where.active.push_back(job.spec.id);
  } else if (wasActive && sub.queued == 0) {
    const int position = sub.activePosition;
    const int64_t moved = where.active.back();
    where.active[static_cast<size_t>(position)] = moved;
    where.active.pop_back();
    if (moved != job.spec.id) findJob(moved)->sub[static_cast<size_t>(site)].activePosition = position;
    sub.activePosition = -1;
  }
  markDirty(site);
}

// ---- task life ---------------------------------------------------------------------------

bool Engine::launchNextAt(JobRt& job, int site) {
  for (size_t s = 0; s < job.stages.size(); ++s) {
    StageRt& stage = job.stages[s];
    if (!stage.released || stage.queue.empty()) continue;
    auto& queue = stage.queue[static_cast<size_t>(site)];
    if (queue.empty()) continue;
    const int32_t t = queue.back();
    queue.pop_back();
    launchTask(job, static_cast<int32_t>(s), t, site);
    return true;
  }
  return false;
}

void Engine::launchTask(JobRt& job, int32_t s, int32_t t, int site) {
  const StageSpec& spec = job.spec.stages[static_cast<size_t>(s)];
  StageRt& stage = job.stages[static_cast<size_t>(s)];
  TaskRt& task = stage.tasks[static_cast<size_t>(t)];
  // The caller took the task out of the queue of the site it waited at (task.site); it may
  // run elsewhere (a steal, a Tetrium round).
  --stage.queued;
  noteQueued(job, task.site, -1);
  task.state = TaskState::kFetching;
  task.site = site;
  task.launchedAt = now_;
  ++task.attempt;
  ++stage.launched;
  ++summary_.tasksLaunched;
  SiteRt& where = sites_[static_cast<size_t>(site)];
  ++where.busy;
  ++job.sub[static_cast<size_t>(site)].running;
  const double seconds = spec.taskSeconds[static_cast<size_t>(t)];
  stage.workAtSite[static_cast<size_t>(site)] += seconds;
  stage.longestTask = std::max(stage.longestTask, seconds);

  const FlowTag tag{job.spec.id, s, t, task.attempt};
  std::vector<FlowId> flows;
  auto startFlow = [&](int from, double bytes) {
    if (from == site || bytes <= 0) return;
    flows.push_back(network_.addFlow(now_, from, site, bytes, tag));
    stage.bytesOut[static_cast<size_t>(from)] += bytes;
    stage.bytesIn[static_cast<size_t>(site)] += bytes;
  };
  if (spec.isRoot()) {
    ++summary_.rootLaunches;
    if (spec.blockSite[static_cast<size_t>(t)] == site) ++summary_.rootLocalLaunches;
    startFlow(spec.blockSite[static_cast<size_t>(t)], spec.inputBytes / spec.numTasks());
  } else {
    for (int32_t parent : spec.parents) {
      const StageRt& p = job.stages[static_cast<size_t>(parent)];
      for (int x = 0; x < siteCount(); ++x) startFlow(x, p.outputAtSite[static_cast<size_t>(x)] / spec.numTasks());
    }
  }
  task.pendingFlows = static_cast<int32_t>(flows.size());
  if (flows.empty()) {
    task.state = TaskState::kComputing;
    Event done;
    done.time = now_ + seconds;
    done.kind = EventKind::kTaskComputeDone;
    done.job = job.spec.id;
    done.stage = s;
    done.task = t;
    done.attempt = task.attempt;
    events_.push(done);
  } else {
    job.flowsOfTask[taskKey(s, t)] = std::move(flows);
  }
}

void Engine::onFlowDone(const CompletedFlow& flow) {
  JobRt* job = findJob(flow.tag.job);
  if (job == nullptr) return;
  job->wanBytes += flow.bytes;
  summary_.wanBytes += flow.bytes;
  addBytes(flow.source, flow.destination, flow.bytes);
  TaskRt& task = job->stages[static_cast<size_t>(flow.tag.stage)].tasks[static_cast<size_t>(flow.tag.task)];
  if (task.attempt != flow.tag.attempt || task.state != TaskState::kFetching) return;
  if (--task.pendingFlows > 0) return;
  job->flowsOfTask.erase(taskKey(flow.tag.stage, flow.tag.task));
  task.state = TaskState::kComputing;
  Event done;
  done.time = now_ + job->spec.stages[static_cast<size_t>(flow.tag.stage)].taskSeconds[static_cast<size_t>(flow.tag.task)];
  done.kind = EventKind::kTaskComputeDone;
  done.job = flow.tag.job;
  done.stage = flow.tag.stage;
  done.task = flow.tag.task;
  done.attempt = task.attempt;
  events_.push(done);
}

void Engine::onComputeDone(const Event& event) {
  JobRt* job = findJob(event.job);
  if (job == nullptr) return;
  StageRt& stage = job->stages[static_cast<size_t>(event.stage)];
  TaskRt& task = stage.tasks[static_cast<size_t>(event.task)];
  if (task.attempt != event.attempt || task.state != TaskState::kComputing) return;
  const StageSpec& spec = job->spec.stages[static_cast<size_t>(event.stage)];
  task.state = TaskState::kDone;
  const int site = task.site;
  summary_.busySlotSeconds += now_ - task.launchedAt;
  addSlotTime(site, now_ - task.launchedAt);
  SiteRt& where = sites_[static_cast<size_t>(site)];
  --where.busy;
  --job->sub[static_cast<size_t>(site)].running;
  ++stage.finished;
  roundWanted_ = true;
  const double outputBytes = spec.outputBytes / spec.numTasks();
  stage.outputAtSite[static_cast<size_t>(site)] += outputBytes;
  ++stage.finishedAtSite[static_cast<size_t>(site)];
  markDirty(site);
  if (containerMode()) {
    // The worker records the output; every job manager of the job sees the record.
    JmRt& jm = *job->jm[static_cast<size_t>(site)];
    const jobcore::TaskId id{static_cast<uint32_t>(event.stage), static_cast<uint32_t>(event.task)};
    const auto launched = jm.launched.find(id);
    if (launched == jm.launched.end()) {
      fail(makeError(ErrorCode::kInternal, "job " + std::to_string(event.job) + " task " + jobcore::taskLabel(id) +
                                               " finished without a launch by its job manager"));
      return;
    }
    const jobcore::LaunchTask launch = std::move(launched->second);
    jm.launched.erase(launched);
    --jm.tasksIn[launch.slotKey];
    pb::PartitionLocation location;
    location.set_site(sites_[static_cast<size_t>(site)].name);
    location.set_worker_id(launch.container.id().worker_id());
    location.set_worker_address("sim");
    // One byte for data-less stages, so that placement still sees where outputs are.
    location.add_bucket_bytes(static_cast<uint64_t>(std::max(kTokenBytes, std::round(outputBytes))));
    location.set_attempt(launch.attempt);
    location.set_elapsed_s(now_ - task.launchedAt);
    jm.core.onTaskEnded(launch, jobcore::AttemptEnd::kSucceeded, &location, "", now_);
    // Every JM's watch on the stage's records shows it, the launching JM's too (as tellus-jm's
    // does: so a later listing without it, after lineage removed it, forgets it there too).
    for (int32_t other : job->jmSites) job->jm[static_cast<size_t>(other)]->core.onPartRecorded(id.first, id.second, location);
    job->outputs[id.first][id.second] = location;
    markJms(*job);
  }
  if (stage.finished == spec.numTasks()) finishStage(*job, event.stage);
}

void Engine::finishStage(JobRt& job, int32_t s) {
  StageRt& stage = job.stages[static_cast<size_t>(s)];
  const StageSpec& spec = job.spec.stages[static_cast<size_t>(s)];
  // Isolated lower bound: compute needs at least work/slots (and the longest task) at every
  // site; the network at least the busiest uplink/downlink time; the two can overlap.
  double compute = stage.longestTask;
  double network = 0;
  for (size_t x = 0; x < sites_.size(); ++x) {
    const double slots = std::max(1, sites_[x].baseSlots);
    compute = std::max(compute, stage.workAtSite[x] / slots);
    network = std::max(network, stage.bytesOut[x] / sites_[x].baseUp);
    network = std::max(network, stage.bytesIn[x] / sites_[x].baseDown);
  }
  double before = 0;
  for (int32_t parent : spec.parents) before = std::max(before, job.stages[static_cast<size_t>(parent)].isolatedPathSeconds);
  stage.isolatedPathSeconds = before + std::max(compute, network);
  // Free what later stages do not need.
  stage.queue.clear();
  stage.queue.shrink_to_fit();
  stage.bytesOut = {};
  stage.bytesIn = {};
  stage.workAtSite = {};
  --job.stagesLeft;
  for (size_t i = 0; i < config_.clusterEvents.size(); ++i) {
    const auto& when = config_.clusterEvents[i].whenStageDone;
    if (!when || *when != s || eventTriggered_[i]) continue;
    eventTriggered_[i] = true;
    Event event;
    event.time = now_;
    event.kind = EventKind::kClusterChange;
    event.task = static_cast<int32_t>(i);
    event.stage = 0;
    events_.push(event);
  }
  // HOUTU: the primary job manager releases the next stages and ends the job.
  for (int32_t child : stage.children) {
    if (--job.stages[static_cast<size_t>(child)].unfinishedParents == 0 && !containerMode()) releaseStage(job, child);
  }
  orderDirty_ = true;
  if (job.stagesLeft == 0 && !containerMode()) finishJob(job);
}

void Engine::finishJob(JobRt& job) {
  drainDecisions(job);
  JobRecord record;
  record.id = job.spec.id;
  record.name = job.spec.name;
  record.arrivalSeconds = job.spec.arrivalSeconds;
  record.finishSeconds = now_;
  record.responseSeconds = now_ - job.spec.arrivalSeconds;
  for (const auto& stage : job.stages) record.isolatedSeconds = std::max(record.isolatedSeconds, stage.isolatedPathSeconds);
  record.slowdown = record.isolatedSeconds > 0 ? record.responseSeconds / record.isolatedSeconds : 1.0;
  record.wanBytes = job.wanBytes;
  record.tasks = job.spec.totalTasks();
  record.stages = static_cast<int32_t>(job.spec.stages.size());
  ++summary_.jobs;
  summary_.response.add(record.responseSeconds);
  summary_.slowdown.add(record.slowdown);
  summary_.lastFinishSeconds = std::max(summary_.lastFinishSeconds, now_);
  if (sink_ != nullptr) sink_->onJobFinished(record);
  // Job managers exit and hand their containers back.
  for (int32_t site : job.jmSites) {
    SiteRt& where = sites_[static_cast<size_t>(site)];
    where.held -= static_cast<int>(job.jm[static_cast<size_t>(site)]->containers.size());
    where.jms.erase(std::remove(where.jms.begin(), where.jms.end(), job.spec.id), where.jms.end());
    where.leaseEnds.erase(job.spec.id);
    markDirty(site);
  }
  orderDirty_ = true;
  jobs_.erase(job.spec.id);
}

void Engine::killTask(JobRt& job, int32_t s, int32_t t) {
  StageRt& stage = job.stages[static_cast<size_t>(s)];
  TaskRt& task = stage.tasks[static_cast<size_t>(t)];
  const auto flows = job.flowsOfTask.find(taskKey(s, t));
  if (flows != job.flowsOfTask.end()) {
    for (FlowId id : flows->second) {
      const int source = network_.sourceOf(id);
      const double delivered = network_.cancelFlow(now_, id);
      addBytes(source, task.site, delivered);
      job.wanBytes += delivered;
      summary_.wanBytes += delivered;
    }
    job.flowsOfTask.erase(flows);
  }
  const int site = task.site;
  summary_.busySlotSeconds += now_ - task.launchedAt;
  addSlotTime(site, now_ - task.launchedAt);
  --sites_[static_cast<size_t>(site)].busy;
  --job.sub[static_cast<size_t>(site)].running;
  --stage.launched;
  ++task.attempt;  // its pending completion event is now stale
  ++summary_.tasksKilled;
  if (!containerMode()) {
    enqueue(job, s, t, site);
    return;
  }
  // The container died with its VM: the job manager hears that the worker is gone (not the
  // task's fault) and the task waits at its owner again.
  JmRt& jm = *job.jm[static_cast<size_t>(site)];
  const jobcore::TaskId id{static_cast<uint32_t>(s), static_cast<uint32_t>(t)};
  const auto launched = jm.launched.find(id);
  if (launched != jm.launched.end()) {
    const jobcore::LaunchTask launch = std::move(launched->second);
    jm.launched.erase(launched);
    --jm.tasksIn[launch.slotKey];
    revokeContainer(job, site, launch.slotKey);
    jm.core.onTaskEnded(launch, jobcore::AttemptEnd::kWorkerUnreachable, nullptr, "spot VM lost", now_);
    setGrants(job, site);
  }
  markWaiting(job, s, t, site);
  markJm(job.spec.id, site);
}

// ---- scheduling --------------------------------------------------------------------------

void Engine::markDirty(int site) {
  SiteRt& where = sites_[static_cast<size_t>(site)];
  if (!where.dirty) {
    where.dirty = true;
    dirtySites_.push_back(site);
  }
}

void Engine::flushScheduling() {
  if (failure_) return;
  if (roundMode()) {
    // Tetrium schedules in rounds over batches of free slots (§5 "Batching of Slots"): at
    // most one round per interval, and only when slots were freed or work was queued.
    takeDirtySites();
    if (roundWanted_ && !roundScheduled_) {
      Event round;
      round.time = std::max(now_, lastRound_ + policy_.roundIntervalSeconds);
      round.kind = EventKind::kSchedulingRound;
      events_.push(round);
      roundScheduled_ = true;
      roundWanted_ = false;
    }
    return;
  }
  if (containerMode()) {
    runJobManagers();
    return;
  }
  if (orderDirty_ && now_ >= lastOrderAt_ + policy_.orderRefreshSeconds) {
    recomputeOrder();
    orderDirty_ = false;
    lastOrderAt_ = now_;
  } else if (orderDirty_ && !refreshScheduled_) {
    Event refresh;
    refresh.time = lastOrderAt_ + policy_.orderRefreshSeconds;
    refresh.kind = EventKind::kOrderRefresh;
    events_.push(refresh);
    refreshScheduled_ = true;
  }
  for (int site : takeDirtySites()) dispatchSlots(site);
  // Launching does not dirty sites again.
  takeDirtySites();
}

std::vector<int> Engine::takeDirtySites() {
  // In site order, so that the outcome does not depend on which event came first.
  std::vector<int> sites;
  sites.swap(dirtySites_);
  std::sort(sites.begin(), sites.end());
  for (int site : sites) sites_[static_cast<size_t>(site)].dirty = false;
  return sites;
}

void Engine::recomputeOrder() {
  const auto started = std::chrono::steady_clock::now();
  std::vector<JobRt*> candidates;
  for (auto& [id, job] : jobs_) {
    if (job->unlaunched > 0) candidates.push_back(job.get());
  }
  const int n = siteCount();
  // Jobs with nothing queued are not ordered; they rank after every ordered job.
  for (auto& [id, job] : jobs_) job->rank = (int64_t{1} << 40) + id;
  auto assignGlobal = [&](const std::vector<size_t>& order) {
    for (size_t i = 0; i < order.size(); ++i) candidates[order[i]]->rank = static_cast<int64_t>(i);
  };
  if (!policy_.fixedOrder.empty()) {
    std::unordered_map<int64_t, size_t> position;
    for (size_t i = 0; i < policy_.fixedOrder.size(); ++i) position.emplace(policy_.fixedOrder[i], i);
    std::vector<size_t> order(candidates.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto key = [&](size_t i) {
      const auto it = position.find(candidates[i]->spec.id);
      return it == position.end() ? policy_.fixedOrder.size() + static_cast<size_t>(candidates[i]->spec.id) : it->second;
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
    assignGlobal(order);
    ++summary_.ordersComputed;
    return;
  }
  switch (policy_.order) {
    case JobOrder::kFair: return;  // decided per dispatch by the fair scheduler
    case JobOrder::kTetrium: {
      std::vector<sched::JobOrderKey> keys;
      for (JobRt* job : candidates) {
        double remaining = 0;
        for (size_t s = 0; s < job->stages.size(); ++s) {
          const StageRt& stage = job->stages[s];
          if (!stage.released || stage.finished == static_cast<int>(stage.tasks.size())) continue;
          remaining += stage.lpSeconds * stage.queued / static_cast<double>(stage.tasks.size());
        }
        keys.push_back(sched::JobOrderKey{job->stagesLeft, remaining});
      }
      assignGlobal(sched::tetriumJobOrder(keys));
      break;
    }
    default: {
      sched::OrderingInput input;
      for (JobRt* job : candidates) {
        sched::QueuedJob queued;
        queued.id = std::to_string(job->spec.id);
        queued.arrivalS = job->spec.arrivalSeconds;
        queued.remainingTasks.resize(static_cast<size_t>(n));
        for (int x = 0; x < n; ++x) queued.remainingTasks[static_cast<size_t>(x)] = job->sub[static_cast<size_t>(x)].queued;
        input.jobs.push_back(std::move(queued));
      }
      if (policy_.normalizeBySlots) {
        for (const auto& site : sites_) input.slots.push_back(std::max(1, site.capacity));
      }
      const sched::SiteOrders orders = sched::computeOrders(input, policy_.order);
      if (policy_.order == JobOrder::kIndependentSrpt) {
        for (JobRt* job : candidates) job->siteRank.assign(static_cast<size_t>(n), std::numeric_limits<int32_t>::max());
        for (int x = 0; x < n && static_cast<size_t>(x) < orders.perSite.size(); ++x) {
          const auto& order = orders.perSite[static_cast<size_t>(x)];
          for (size_t i = 0; i < order.size(); ++i) {
            candidates[order[i]]->siteRank[static_cast<size_t>(x)] = static_cast<int32_t>(i);
          }
        }
      } else if (!orders.perSite.empty()) {
        assignGlobal(orders.perSite[0]);
      }
      break;
    }
  }
  ++summary_.ordersComputed;
  summary_.orderWallSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

int64_t Engine::rankAt(const JobRt& job, int site) const {
  if (!policy_.fixedOrder.empty()) return job.rank;
  switch (policy_.order) {
    case JobOrder::kFair: return job.spec.id;
    case JobOrder::kIndependentSrpt:
      return job.siteRank.empty() ? std::numeric_limits<int32_t>::max() : job.siteRank[static_cast<size_t>(site)];
    default: return job.rank;
  }
}

std::vector<int64_t> Engine::activeByRank(int site) const {
  std::vector<std::pair<int64_t, int64_t>> ranked;
  for (int64_t id : sites_[static_cast<size_t>(site)].active) {
    ranked.emplace_back(rankAt(*jobs_.at(id), site), id);
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<int64_t> ids;
  ids.reserve(ranked.size());
  for (const auto& [rank, id] : ranked) ids.push_back(id);
  return ids;
}

void Engine::dispatchSlots(int site) {
  SiteRt& where = sites_[static_cast<size_t>(site)];
  int free = where.capacity - where.busy;
  if (free <= 0 || where.active.empty()) return;
  if (fairScheduler()) {
    // The site's fair scheduler (HOUTU §4.4) over the jobs waiting here, one slot per task.
    std::vector<int64_t> ids = where.active;
    std::sort(ids.begin(), ids.end());
    std::vector<sched::SubJobShare> shares;
    shares.reserve(ids.size());
    for (int64_t id : ids) {
      const SubJobRt& sub = jobs_.at(id)->sub[static_cast<size_t>(site)];
      shares.push_back(sched::SubJobShare{"", sub.running + sub.queued, sub.running, 1.0});
    }
    const std::vector<int> grants = sched::fairShare(shares, free);
    for (size_t i = 0; i < ids.size(); ++i) {
      JobRt& job = *jobs_.at(ids[i]);
      for (int g = 0; g < grants[i]; ++g) {
        if (!launchNextAt(job, site)) break;
      }
    }
    return;
  }
  for (int64_t id : activeByRank(site)) {
    JobRt& job = *jobs_.at(id);
    while (free > 0 && launchNextAt(job, site)) --free;
    if (free == 0) break;
  }
}

// ---- HOUTU: job managers, containers, Af, Parades ----------------------------------------

void Engine::startJobManagers(JobRt& job) {
  // The job as tellus-jm sees it: a root stage reads one partition per task, at the site of
  // its block; every later stage reads its parents' outputs through a shuffle.
  const size_t stages = job.spec.stages.size();
  pb::JobSpec spec;
  spec.set_name(job.spec.name.empty() ? "job" : job.spec.name);
  spec.set_placement(std::string(sched::name(policy_.placement)));
  spec.set_no_stealing(!policy_.stealing || (policy_.resources != Resources::kAf && !policy_.staticSteals));
  // The simulated operator aggregates (its output copies no raw record): residency pins the
  // tasks reading pinned blocks, not the stages after them.
  spec.add_derived_operators("sim");
  spec.set_cost_weight(policy_.costWeight);
  // The simulator models no copies of finished outputs (a lost worker loses its outputs, as
  // with output_replicas: 0): its workers never make one.
  spec.set_output_replicas(0);
  std::vector<pb::StageInputs> inputs(stages);
  std::set<int> jobSites;
  std::vector<int> rootTasksAt(sites_.size(), 0);
  if (job.spec.submitSite >= 0) jobSites.insert(job.spec.submitSite);
  for (size_t s = 0; s < stages; ++s) {
    const StageSpec& stage = job.spec.stages[s];
    auto* st = spec.add_stages();
    st->set_name(stageName(s));
    st->set_op("sim");
    if (stage.isRoot()) {
      st->add_inputs()->set_dataset("input");
      const double bytes = std::max(kTokenBytes, std::round(stage.inputBytes / stage.numTasks()));
      for (int32_t t = 0; t < stage.numTasks(); ++t) {
        const int x = stage.blockSite[static_cast<size_t>(t)];
        auto* part = inputs[s].add_partitions();
        const SiteRt& at = sites_[static_cast<size_t>(x)];
        part->set_site(at.name);
        // On the site's first worker, with a copy on every other (tellus put keeps two).
        part->set_worker_id(at.workerIds.empty() ? at.name : at.workerIds[0]);
        for (size_t k = 1; k < at.workerIds.size(); ++k) part->add_replicas()->set_worker_id(at.workerIds[k]);
        part->set_bytes(static_cast<uint64_t>(bytes));
        part->set_dataset_file(fmt::format("block-{}", t));
        if (!stage.pinned.empty()) part->set_residency_local(stage.pinned[static_cast<size_t>(t)]);
        jobSites.insert(x);
        ++rootTasksAt[static_cast<size_t>(x)];
      }
    } else {
      st->set_tasks(static_cast<uint32_t>(stage.numTasks()));
      for (int32_t parent : stage.parents) {
        auto* in = st->add_inputs();
        in->set_stage(stageName(static_cast<size_t>(parent)));
        in->set_edge(pb::EDGE_SHUFFLE);
      }
    }
  }
  if (policy_.resources == Resources::kStatic) {
    // Spark-style static allocation, sized once for the whole job: enough containers for the
    // most root tasks any site holds.
    const int most = *std::max_element(rootTasksAt.begin(), rootTasksAt.end());
    spec.set_static_containers(static_cast<uint32_t>(policy_.staticContainers > 0 ? policy_.staticContainers : std::max(1, most)));
  }
  job.coreId = fmt::format("job-{}", job.spec.id);
  pb::JobStatus status;
  status.set_job_id(job.coreId);
  status.set_name(spec.name());
  status.set_state(pb::JOB_RUNNING);
  std::set<std::string> names;
  for (int x : jobSites) {
    status.add_sites(sites_[static_cast<size_t>(x)].name);
    names.insert(sites_[static_cast<size_t>(x)].name);
  }
  status.set_submit_site(job.spec.submitSite >= 0 ? sites_[static_cast<size_t>(job.spec.submitSite)].name : status.sites(0));
  job.taskmaps.assign(stages, std::nullopt);
  job.taskmapVersions.assign(stages, -1);
  job.outputs.assign(stages, {});
  job.jm.resize(sites_.size());
  jobcore::CoreConfig config;
  config.jobId = job.coreId;
  config.timings.afPeriodS = policy_.periodSeconds;
  config.timings.stealIntervalS = policy_.stealIntervalSeconds;
  // The simulated master never loses a request: no need to repeat one.
  config.timings.masterRefreshS = kInfinity;
  config.af = policy_.af;
  config.parades = policy_.parades;
  config.placement.wanBudgetRho = policy_.wanBudgetRho;
  config.recordDecisions = config_.decisions != nullptr;
  for (int x : jobSites) {
    config.site = sites_[static_cast<size_t>(x)].name;
    auto jm = std::make_unique<JmRt>(config);
    const Status loaded = jm->core.onJobLoaded(spec, inputs);
    if (!loaded) {
      fail(loaded.error().prepend("job " + std::to_string(job.spec.id)));
      return;
    }
    jm->core.onStatus(status, 0);
    // The job's first listings, which the core waits for before it launches: at arrival no
    // stage has an output and nothing runs (later outputs come as onPartRecorded).
    for (size_t s = 0; s < stages; ++s) jm->core.onPartsListed(static_cast<uint32_t>(s));
    jm->core.onRunningMarkers({});
    for (int y : jobSites) jm->core.onLiveWorkers(sites_[static_cast<size_t>(y)].name, liveWorkers(y));
    jm->core.onJms(names);
    // The submit site's job manager wins the election; the others stand by.
    if (config.site == status.submit_site()) jm->core.onBecamePrimary(1);
    job.jm[static_cast<size_t>(x)] = std::move(jm);
    job.jmSites.push_back(x);
    sites_[static_cast<size_t>(x)].jms.push_back(job.spec.id);
    markJm(job.spec.id, x);
  }
}

void Engine::markJms(const JobRt& job) {
  for (int32_t site : job.jmSites) markJm(job.spec.id, site);
}

void Engine::onJmWake(const Event& event) {
  JobRt* job = findJob(event.job);
  if (job == nullptr) return;
  JmRt& jm = *job->jm[static_cast<size_t>(event.stage)];
  if (event.time >= jm.wakeAt) jm.wakeAt = kInfinity;
  markJm(event.job, event.stage);
}

void Engine::runJobManagers() {
  // One instant: the masters grant, then every job manager that saw something steps, until
  // nothing changes (each step's actions are events for others).
  for (int rounds = 0; !failure_ && (!dirtySites_.empty() || !dirtyJms_.empty()); ++rounds) {
    if (rounds == kMaxJmRoundsPerInstant) {
      fail(makeError(ErrorCode::kInternal, "job managers did not settle at t=" + std::to_string(now_)));
      return;
    }
    if (orderDirty_) {
      recomputeOrder();
      orderDirty_ = false;
    }
    for (int site : takeDirtySites()) grantContainers(site);
    const auto jms = std::exchange(dirtyJms_, {});
    for (const auto& [id, site] : jms) {
      JobRt* job = findJob(id);
      if (job != nullptr && !stepJm(*job, site)) continue;
      if (failure_) return;
    }
  }
}

std::vector<jobstate::SiteCapacity> Engine::siteCapacities(const JobRt& job) const {
  // What the primary reads from the sites' records, measured exactly: containers, the
  // bandwidth one more flow would get, and the job's mean task time.
  const std::vector<sched::SiteResources> resources = siteResources();
  const double taskS = job.spec.totalTaskSeconds() / static_cast<double>(std::max<int64_t>(1, job.spec.totalTasks()));
  std::vector<jobstate::SiteCapacity> capacities;
  for (int32_t x : job.jmSites) {
    const auto& r = resources[static_cast<size_t>(x)];
    capacities.push_back(jobstate::SiteCapacity{r.name, r.slots, r.upGBps, r.downGBps, taskS, std::nullopt});
    // What the primary reads from the site records: the site's published prices, if any.
    if (const auto it = config_.prices.find(r.name); it != config_.prices.end()) capacities.back().prices = it->second;
  }
  return capacities;
}

bool Engine::stepJm(JobRt& job, int site) {
  JmRt& jm = *job.jm[static_cast<size_t>(site)];
  jobcore::Actions actions = jm.core.step(now_);
  // Only for error messages: built when one is needed, not on every step.
  auto where = [&] { return fmt::format("job {} at {}", job.spec.id, sites_[static_cast<size_t>(site)].name); };
  if (actions.fail) {
    fail(makeError(ErrorCode::kInternal, where() + " failed: " + *actions.fail));
    return false;
  }
  // Job managers never die in the simulation and a site never loses every worker; no reader
  // misses an output, and a worker lost is no longer live when its job managers next step.
  if (!actions.startJms.empty() || !actions.reassignments.empty()) {
    fail(makeError(ErrorCode::kInternal, where() + ": a job manager asked for a new job manager or a lost site's tasks moved"));
    return false;
  }
  if (!actions.probes.empty() || !actions.probeWorkers.empty() || !actions.clearMarkers.empty()) {
    fail(makeError(ErrorCode::kInternal, where() + ": a job manager asked whether an output's holders or a worker live"));
    return false;
  }
  for (const auto& lost : actions.lostOutputs) applyLostOutput(job, site, lost);
  if (actions.needSiteRecords) {
    jm.core.onSiteCapacities(siteCapacities(job));
    markJm(job.spec.id, site);
  }
  for (const auto& release : actions.releases) applyRelease(job, site, release);
  if (actions.request) applyRequest(job, site, *actions.request);
  for (const auto& launch : actions.launches) {
    const auto [s, t] = launch.task;
    TaskRt& task = job.stages[s].tasks[t];
    if (task.state != TaskState::kQueued || task.site != site) {
      fail(makeError(ErrorCode::kInternal, where() + " launched task " + jobcore::taskLabel(launch.task) +
                                               ", which does not wait there"));
      return false;
    }
    ++jm.tasksIn[launch.slotKey];
    jm.launched.emplace(launch.task, launch);
    launchTask(job, static_cast<int32_t>(s), static_cast<int32_t>(t), site);
  }
  if (actions.steal) applySteal(job, site, *actions.steal);
  if (actions.publish) jm.core.onPublished(jm.core.desire(), static_cast<uint32_t>(jm.core.granted()));
  if (actions.wakeAt && (*actions.wakeAt < jm.wakeAt || jm.wakeAt <= now_)) {
    jm.wakeAt = *actions.wakeAt;
    Event wake;
    wake.time = jm.wakeAt;
    wake.kind = EventKind::kJmWake;
    wake.job = job.spec.id;
    wake.stage = site;
    events_.push(wake);
  }
  if (actions.succeed) {
    finishJob(job);  // the status write: every job manager exits with the job
    return false;
  }
  drainDecisions(job);
  return true;
}

void Engine::drainDecisions(JobRt& job) {
  if (config_.decisions == nullptr) return;
  for (int32_t x : job.jmSites) {
    for (const auto& d : job.jm[static_cast<size_t>(x)]->core.takeDecisions()) {
      config_.decisions->onDecision(job.spec.id, sites_[static_cast<size_t>(x)].name, d);
    }
  }
}

void Engine::applyLostOutput(JobRt& job, int site, const jobcore::RemoveLostOutput& lost) {
  // The primary's fenced removal of the record, which every job manager's watch then lists.
  const auto [s, t] = lost.task;
  auto& outputs = job.outputs[s];
  const auto recorded = outputs.find(t);
  const bool unlisted = recorded != outputs.end();
  if (unlisted) {
    const int at = siteIndex_.at(recorded->second.site());
    outputs.erase(recorded);
    StageRt& stage = job.stages[s];
    const StageSpec& spec = job.spec.stages[s];
    if (stage.tasks[t].state == TaskState::kDone) {
      if (stage.finished == spec.numTasks()) {
        // The stage is not complete any more: what finishStage counted and freed comes back.
        ++job.stagesLeft;
        const size_t n = sites_.size();
        stage.bytesOut.assign(n, 0);
        stage.bytesIn.assign(n, 0);
        stage.workAtSite.assign(n, 0);
        for (int32_t child : stage.children) ++job.stages[static_cast<size_t>(child)].unfinishedParents;
        orderDirty_ = true;
      }
      --stage.finished;
      stage.outputAtSite[static_cast<size_t>(at)] -= spec.outputBytes / spec.numTasks();
      --stage.finishedAtSite[static_cast<size_t>(at)];
      markWaiting(job, static_cast<int32_t>(s), static_cast<int32_t>(t), siteIndex_.at(job.taskmaps[s]->owner_site(static_cast<int>(t))));
    }
  }
  job.jm[static_cast<size_t>(site)]->core.onLostOutputRemoved(lost, true);
  // Every job manager's listing no longer shows the record.
  if (unlisted) {
    for (int32_t x : job.jmSites) job.jm[static_cast<size_t>(x)]->core.onPartUnlisted(s, t);
  }
  markJms(job);
}

std::set<std::string> Engine::liveWorkers(int site) const {
  const SiteRt& where = sites_[static_cast<size_t>(site)];
  if (where.workerIds.empty()) return {where.name};
  std::set<std::string> live;
  for (size_t k = 0; k < where.workerIds.size(); ++k) {
    if (where.workerLive[k]) live.insert(where.workerIds[k]);
  }
  return live;
}

void Engine::loseWorker(int site, int worker) {
  SiteRt& where = sites_[static_cast<size_t>(site)];
  const auto k = static_cast<size_t>(worker);
  if (!where.workerLive[k]) return;  // (run() checked the index)
  const std::string id = where.workerIds[k];
  where.workerLive[k] = false;
  std::erase_if(where.freeSlots, [&](const auto& slot) { return slot.second == worker; });
  where.capacity -= where.slotsPerWorker;
  std::vector<int64_t> ids = where.jms;
  std::sort(ids.begin(), ids.end());
  for (int64_t jobId : ids) {
    JobRt& job = *jobs_.at(jobId);
    JmRt& jm = *job.jm[static_cast<size_t>(site)];
    // Its running tasks die with it (their job manager hears the worker is unreachable) ...
    std::vector<jobcore::TaskId> dying;
    for (const auto& [task, launch] : jm.launched) {
      if (launch.container.id().worker_id() == id) dying.push_back(task);
    }
    for (const auto& [s, t] : dying) killTask(job, static_cast<int32_t>(s), static_cast<int32_t>(t));
    // ... and its idle containers are gone.
    std::vector<std::string> idle;
    for (const auto& [key, container] : jm.containers) {
      if (container.id().worker_id() == id) idle.push_back(key);
    }
    for (const auto& key : idle) revokeContainer(job, site, key);
    if (!idle.empty()) setGrants(job, site);
  }
  // Every job manager of a job at this site sees its live workers without it.
  const std::set<std::string> live = liveWorkers(site);
  for (auto& [jobId, job] : jobs_) {
    if (job->jm.empty() || !job->jm[static_cast<size_t>(site)]) continue;
    for (int32_t x : job->jmSites) job->jm[static_cast<size_t>(x)]->core.onLiveWorkers(where.name, live);
    markJms(*job);
  }
  markDirty(site);
}

void Engine::applyRelease(JobRt& job, int site, const jobcore::ReleaseStage& release) {
  // The primary's fenced write of the stage's task map, seen by every job manager.
  const uint32_t s = release.stage;
  job.taskmaps[s] = release.taskmap;
  job.taskmapVersions[s] = 0;
  job.jm[static_cast<size_t>(site)]->core.onStageReleased(release, true);
  for (int32_t other : job.jmSites) {
    if (other != site) job.jm[static_cast<size_t>(other)]->core.onTaskMap(s, release.taskmap, 0);
  }
  ++summary_.placementsSolved;
  prepareStage(job, static_cast<int32_t>(s));
  for (int t = 0; t < release.taskmap.owner_site_size(); ++t) {
    markWaiting(job, static_cast<int32_t>(s), t, siteIndex_.at(release.taskmap.owner_site(t)));
  }
  orderDirty_ = true;
  markJms(job);
}

void Engine::markWaiting(JobRt& job, int32_t s, int32_t t, int site) {
  StageRt& stage = job.stages[static_cast<size_t>(s)];
  TaskRt& task = stage.tasks[static_cast<size_t>(t)];
  task.state = TaskState::kQueued;
  task.site = site;
  task.readySince = now_;
  ++stage.queued;
  noteQueued(job, site, +1);
}

void Engine::applyRequest(JobRt& job, int site, const jobcore::ContainerRequest& request) {
  JmRt& jm = *job.jm[static_cast<size_t>(site)];
  for (const auto& id : request.release) revokeContainer(job, site, jobcore::slotKeyOf(id));
  jm.desire = request.desire;
  auto& ends = sites_[static_cast<size_t>(site)].leaseEnds[job.spec.id];
  ends.clear();
  for (const auto& [id, endsInS] : request.leases) ends.push_back(now_ + endsInS);
  jm.core.onContainerRequestSent(request);
  markDirty(site);  // the master may grant (to it or to others)
}

void Engine::revokeContainer(JobRt& job, int site, const std::string& slotKey) {
  JmRt& jm = *job.jm[static_cast<size_t>(site)];
  const auto held = jm.containers.find(slotKey);
  if (held == jm.containers.end()) return;
  SiteRt& where = sites_[static_cast<size_t>(site)];
  const auto worker = std::find(where.workerIds.begin(), where.workerIds.end(), held->second.id().worker_id());
  if (worker != where.workerIds.end() && where.workerLive[static_cast<size_t>(worker - where.workerIds.begin())]) {
    where.freeSlots.emplace(held->second.id().slot(), static_cast<int>(worker - where.workerIds.begin()));
  }
  jm.containers.erase(held);
  jm.tasksIn.erase(slotKey);
  --sites_[static_cast<size_t>(site)].held;
  markDirty(site);
}

void Engine::setGrants(JobRt& job, int site) {
  JmRt& jm = *job.jm[static_cast<size_t>(site)];
  std::vector<pb::Container> granted;
  granted.reserve(jm.containers.size());
  for (const auto& [key, container] : jm.containers) granted.push_back(container);
  jm.core.onGrants(granted);
  markJm(job.spec.id, site);
}

void Engine::grantContainers(int site) {
  // The site's master hands free containers to job managers whose desire is unmet: by the
  // fair scheduler (HOUTU §4.4), or in the job order when one is set.
  SiteRt& where = sites_[static_cast<size_t>(site)];
  const int free = where.capacity - where.held;
  if (free <= 0 || where.jms.empty()) return;
  std::vector<int64_t> ids = where.jms;
  std::vector<int> grants(ids.size(), 0);
  auto held = [&](int64_t id) { return static_cast<int>(jobs_.at(id)->jm[static_cast<size_t>(site)]->containers.size()); };
  auto desire = [&](int64_t id) { return static_cast<int>(jobs_.at(id)->jm[static_cast<size_t>(site)]->desire); };
  if (fairScheduler()) {
    std::sort(ids.begin(), ids.end());
    std::vector<sched::SubJobShare> shares;
    for (int64_t id : ids) shares.push_back(sched::SubJobShare{"", desire(id), held(id), 1.0});
    grants = sched::fairShare(shares, free);
  } else {
    std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) {
      const int64_t ra = rankAt(*jobs_.at(a), site), rb = rankAt(*jobs_.at(b), site);
      return ra != rb ? ra < rb : a < b;
    });
    // The same grant rule as tellus-master's job order.
    std::vector<sched::SubJobShare> shares;
    std::vector<size_t> order;
    for (int64_t id : ids) {
      order.push_back(shares.size());
      shares.push_back(sched::SubJobShare{"", desire(id), held(id), 1.0});
    }
    grants = sched::grantInOrder(shares, order, free);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (grants[i] <= 0) continue;
    JobRt& job = *jobs_.at(ids[i]);
    JmRt& jm = *job.jm[static_cast<size_t>(site)];
    for (int g = 0; g < grants[i]; ++g) {
      pb::Container container;
      if (where.workerIds.empty()) {
        container.mutable_id()->set_worker_id(where.name);
        container.mutable_id()->set_slot(where.nextSlot++);
      } else {
        if (where.freeSlots.empty()) break;  // (capacity counts only live workers' slots)
        const auto [slot, worker] = *where.freeSlots.begin();
        where.freeSlots.erase(where.freeSlots.begin());
        container.mutable_id()->set_worker_id(where.workerIds[static_cast<size_t>(worker)]);
        container.mutable_id()->set_slot(slot);
      }
      container.set_worker_address("sim");
      container.set_site(where.name);
      jm.containers.emplace(jobcore::slotKeyOf(container.id()), container);
      ++where.held;
    }
    setGrants(job, site);
  }
}

void Engine::applySteal(JobRt& job, int thief, const jobcore::StealWork& work) {
  // The thief asks the victims in turn; a victim offers waiting tasks and moves them to the
  // thief with a compare-and-set of the stage's task map, which every job manager then sees.
  const std::string& thiefName = sites_[static_cast<size_t>(thief)].name;
  // What the thief's site measures: the rate one more flow from each site would get.
  std::map<std::string, double> inbound;
  const SiteRt& to = sites_[static_cast<size_t>(thief)];
  for (int32_t x : job.jmSites) {
    if (x == thief || !policy_.measuredLinks) continue;
    const SiteRt& from = sites_[static_cast<size_t>(x)];
    inbound[from.name] = std::min(from.up / (1 + network_.flowsOut(x)), to.down / (1 + network_.flowsIn(thief)));
  }
  bool gotWork = false;
  std::optional<double> retryAfter;
  for (const auto& victimName : work.victims) {
    const auto index = siteIndex_.find(victimName);
    if (index == siteIndex_.end() || !job.jm[static_cast<size_t>(index->second)]) continue;
    const int victim = index->second;
    JmRt& jm = *job.jm[static_cast<size_t>(victim)];
    if (policy_.leases) {
      // The victim's JM reads its site's published leases (other jobs' containers there).
      std::vector<double> ends;
      for (const auto& [id, jobEnds] : sites_[static_cast<size_t>(victim)].leaseEnds) {
        if (id != job.spec.id) ends.insert(ends.end(), jobEnds.begin(), jobEnds.end());
      }
      jm.core.onSiteLeases(std::move(ends));
    }
    const jobcore::StealOffer offer = jm.core.offerSteal(thiefName, work.maxTasks, now_, inbound);
    if (offer.retryAfterS && (!retryAfter || *offer.retryAfterS < *retryAfter)) retryAfter = offer.retryAfterS;
    if (offer.tasks.empty()) continue;
    pb::TaskMap& map = *job.taskmaps[offer.stage];
    const std::vector<uint32_t> moved = jobcore::JobCore::moveTasks(map, offer.tasks, victimName, thiefName);
    const int32_t version = ++job.taskmapVersions[offer.stage];
    jm.core.settleSteal(offer, moved, &map, version);
    for (int32_t other : job.jmSites) {
      // The watch of a real JM brings the whole map; the moved tasks spare each core comparing
      // every owner (tens of thousands per steal in a large stage).
      if (other != victim) job.jm[static_cast<size_t>(other)]->core.onTaskMap(offer.stage, map, version, &moved);
    }
    for (uint32_t t : moved) {
      TaskRt& task = job.stages[offer.stage].tasks[t];
      noteQueued(job, victim, -1);
      noteQueued(job, thief, +1);
      task.site = thief;
      task.readySince = now_;
    }
    summary_.tasksStolen += static_cast<int64_t>(moved.size());
    markJm(job.spec.id, victim);
    if (!moved.empty()) {
      gotWork = true;
      break;
    }
  }
  job.jm[static_cast<size_t>(thief)]->core.onStealEnded(gotWork, retryAfter);
  markJm(job.spec.id, thief);
}

// ---- resource dynamics -------------------------------------------------------------------

void Engine::onClusterChange(const Event& event) {
  const ClusterEventSpec& change = config_.clusterEvents[static_cast<size_t>(event.task)];
  if (change.loseWorker >= 0) {
    loseWorker(change.site, change.loseWorker);
    roundWanted_ = true;
    return;
  }
  SiteRt& where = sites_[static_cast<size_t>(change.site)];
  const bool restore = event.stage == 1;
  const double slotKeep = restore ? 1.0 : 1.0 - change.slotLoss;
  const double bandwidthKeep = restore ? 1.0 : 1.0 - change.bandwidthLoss;
  where.capacity = static_cast<int>(std::floor(where.baseSlots * slotKeep + 1e-9));
  where.up = where.baseUp * bandwidthKeep;
  where.down = where.baseDown * bandwidthKeep;
  network_.setBandwidth(now_, change.site, where.up, where.down);
  if (!restore && change.durationSeconds < kInfinity) {
    Event back = event;
    back.time = now_ + change.durationSeconds;
    back.stage = 1;
    events_.push(back);
  }
  if (!restore && change.killsTasks) {
    // Spot VMs are gone with their containers: give back idle containers first, then kill
    // the most recently launched tasks (they lose the least work).
    if (containerMode()) {
      std::vector<int64_t> ids = where.jms;
      std::sort(ids.begin(), ids.end());
      for (int64_t id : ids) {
        JobRt& job = *jobs_.at(id);
        JmRt& jm = *job.jm[static_cast<size_t>(change.site)];
        std::vector<std::string> idle;
        for (const auto& [key, container] : jm.containers) {
          if (jm.tasksIn[key] == 0) idle.push_back(key);
        }
        for (size_t i = 0; i < idle.size() && where.held > where.capacity; ++i) revokeContainer(job, change.site, idle[i]);
        if (!idle.empty()) setGrants(job, change.site);
      }
    }
    struct Victim {
      double launchedAt;
      int64_t job;
      int32_t stage, task;
    };
    std::vector<Victim> running;
    for (auto& [id, job] : jobs_) {
      for (size_t s = 0; s < job->stages.size(); ++s) {
        const StageRt& stage = job->stages[s];
        if (!stage.released) continue;
        for (size_t t = 0; t < stage.tasks.size(); ++t) {
          const TaskRt& task = stage.tasks[t];
          if (task.site == change.site && (task.state == TaskState::kFetching || task.state == TaskState::kComputing)) {
            running.push_back(Victim{task.launchedAt, id, static_cast<int32_t>(s), static_cast<int32_t>(t)});
          }
        }
      }
    }
    std::sort(running.begin(), running.end(), [](const Victim& a, const Victim& b) {
      if (a.launchedAt != b.launchedAt) return a.launchedAt > b.launchedAt;
      if (a.job != b.job) return a.job < b.job;
      return a.stage != b.stage ? a.stage < b.stage : a.task < b.task;
    });
    const int over = containerMode() ? where.held - where.capacity : where.busy - where.capacity;
    for (int i = 0; i < over && static_cast<size_t>(i) < running.size(); ++i) {
      JobRt& job = *jobs_.at(running[static_cast<size_t>(i)].job);
      killTask(job, running[static_cast<size_t>(i)].stage, running[static_cast<size_t>(i)].task);
    }
  }
  if (!restore && policy_.reassignK > 0) reassignAfterDrop();
  roundWanted_ = true;
  for (int x = 0; x < siteCount(); ++x) markDirty(x);
}

void Engine::runTetriumRound() {
  // One Tetrium scheduling instance (§4.1, §4.4) over the slots free right now: every job's
  // current stage (its queued tasks) is ordered and placed by the library's round, and each
  // allocated job launches d_x tasks at each site x, remote map tasks first (§3.3).
  const int n = siteCount();
  std::vector<sched::SiteResources> resources = siteResources();
  int freeTotal = 0;
  for (int x = 0; x < n; ++x) {
    const SiteRt& site = sites_[static_cast<size_t>(x)];
    resources[static_cast<size_t>(x)].slots = std::max(0, site.capacity - site.busy);
    freeTotal += resources[static_cast<size_t>(x)].slots;
  }
  if (freeTotal == 0) return;
  struct Candidate {
    JobRt* job;
    int32_t stage;
  };
  std::vector<Candidate> candidates;
  std::vector<sched::TetriumJob> input;
  for (auto& [id, job] : jobs_) {
    for (size_t s = 0; s < job->stages.size(); ++s) {
      StageRt& stage = job->stages[s];
      if (!stage.released || stage.queued == 0) continue;
      const StageSpec& spec = job->spec.stages[s];
      sched::TetriumJob tj;
      tj.id = std::to_string(id);
      tj.remainingStages = job->stagesLeft;
      if (spec.isRoot()) {
        tj.kind = sched::StageKind::kMap;
        tj.map.inputGB.assign(static_cast<size_t>(n), 0);
        tj.map.tasks = stage.queued;
        tj.map.taskS = stage.meanTaskSeconds;
        const double weight = std::max(kTokenBytes, spec.inputBytes / spec.numTasks()) / kGB;
        for (int x = 0; x < n; ++x) {
          for (int32_t t : stage.queue[static_cast<size_t>(x)]) {
            tj.map.inputGB[static_cast<size_t>(spec.blockSite[static_cast<size_t>(t)])] += weight;
          }
        }
      } else {
        tj.kind = sched::StageKind::kReduce;
        tj.reduce.shuffleGB.assign(static_cast<size_t>(n), 0);
        tj.reduce.tasks = stage.queued;
        tj.reduce.taskS = stage.meanTaskSeconds;
        for (int32_t parent : spec.parents) {
          for (int x = 0; x < n; ++x) {
            tj.reduce.shuffleGB[static_cast<size_t>(x)] +=
                std::max(kTokenBytes, job->stages[static_cast<size_t>(parent)].outputAtSite[static_cast<size_t>(x)]) / kGB;
          }
        }
      }
      candidates.push_back(Candidate{job.get(), static_cast<int32_t>(s)});
      input.push_back(std::move(tj));
      break;  // a job's current stage: its first stage with queued tasks
    }
  }
  if (input.empty()) return;
  const auto started = std::chrono::steady_clock::now();
  sched::TetriumRoundOptions options;
  options.placement = tetriumOptions_;
  options.fairnessEpsilon = policy_.fairnessEpsilon;
  auto round = sched::tetriumSchedulingRound(resources, input, options);
  summary_.placementWallSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ++summary_.placementsSolved;
  if (!round) {
    fail(round.error().prepend("Tetrium round at t=" + std::to_string(now_)));
    return;
  }
  // Takes a queued task of the stage, preferring one waiting at `site` with its block at
  // `blockSite` (-1: any block).
  auto takeQueued = [&](JobRt& job, int32_t s, int site, int blockSite) -> int32_t {
    StageRt& stage = job.stages[static_cast<size_t>(s)];
    const StageSpec& spec = job.spec.stages[static_cast<size_t>(s)];
    auto matches = [&](int32_t t) { return blockSite < 0 || spec.blockSite[static_cast<size_t>(t)] == blockSite; };
    auto takeFrom = [&](int from) -> int32_t {
      auto& queue = stage.queue[static_cast<size_t>(from)];
      for (auto it = queue.rbegin(); it != queue.rend(); ++it) {
        if (matches(*it)) {
          const int32_t t = *it;
          queue.erase(std::next(it).base());
          return t;
        }
      }
      return -1;
    };
    const int32_t here = takeFrom(site);
    if (here >= 0) return here;
    for (int x = 0; x < n; ++x) {
      if (x == site) continue;
      const int32_t t = takeFrom(x);
      if (t >= 0) return t;
    }
    return -1;
  };
  for (const sched::JobAllocation& allocation : round->allocations) {
    JobRt& job = *candidates[allocation.job].job;
    const int32_t s = candidates[allocation.job].stage;
    if (job.spec.stages[static_cast<size_t>(s)].isRoot()) {
      const std::vector<std::vector<int>> sources = sched::orderMapTasks(resources, allocation.map.tasks);
      for (int y = 0; y < n; ++y) {
        int budget = allocation.slots[static_cast<size_t>(y)];
        std::vector<int> left(static_cast<size_t>(n), 0);
        for (int x = 0; x < n; ++x) left[static_cast<size_t>(x)] = allocation.map.tasks[static_cast<size_t>(x)][static_cast<size_t>(y)];
        for (int x : sources[static_cast<size_t>(y)]) {
          if (budget == 0) break;
          if (left[static_cast<size_t>(x)] == 0) continue;
          const int32_t t = takeQueued(job, s, x, x);
          if (t < 0) continue;
          --left[static_cast<size_t>(x)];
          launchTask(job, s, t, y);
          --budget;
        }
      }
    } else {
      for (int x = 0; x < n; ++x) {
        for (int i = 0; i < allocation.slots[static_cast<size_t>(x)]; ++i) {
          const int32_t t = takeQueued(job, s, x, -1);
          if (t < 0) break;
          launchTask(job, s, t, x);
        }
      }
    }
  }
}

void Engine::reassignAfterDrop() {
  // Tetrium §4.2: recompute every queued stage's ideal placement under the new resources and
  // move queued tasks between at most k sites towards it.
  const int n = siteCount();
  const std::vector<sched::SiteResources> resources = siteResources();
  for (auto& [id, job] : jobs_) {
    for (size_t s = 0; s < job->stages.size(); ++s) {
      StageRt& stage = job->stages[s];
      if (!stage.released || stage.queued == 0) continue;
      const StageSpec& spec = job->spec.stages[s];
      std::vector<int> current(static_cast<size_t>(n), 0);
      for (int x = 0; x < n; ++x) current[static_cast<size_t>(x)] = static_cast<int>(stage.queue[static_cast<size_t>(x)].size());
      std::vector<int> ideal;
      if (spec.isRoot()) {
        sched::MapStage map;
        map.inputGB.assign(static_cast<size_t>(n), 0);
        map.tasks = stage.queued;
        map.taskS = stage.meanTaskSeconds;
        const double weight = std::max(kTokenBytes, spec.inputBytes / spec.numTasks()) / kGB;
        for (int x = 0; x < n; ++x) {
          for (int32_t t : stage.queue[static_cast<size_t>(x)]) map.inputGB[static_cast<size_t>(spec.blockSite[static_cast<size_t>(t)])] += weight;
        }
        auto placed = policy_.placement == Placement::kTetrium
                          ? sched::tetriumMap(resources, map, tetriumOptions_)
                          : sched::inPlaceMap(resources, map);
        if (!placed) {
          fail(placed.error().prepend("re-placing job " + std::to_string(id)));
          return;
        }
        ideal = placed->tasksAtSite;
      } else {
        sched::ReduceStage reduce;
        reduce.shuffleGB.assign(static_cast<size_t>(n), 0);
        reduce.tasks = stage.queued;
        reduce.taskS = stage.meanTaskSeconds;
        for (int32_t parent : spec.parents) {
          for (int x = 0; x < n; ++x) {
            reduce.shuffleGB[static_cast<size_t>(x)] +=
                std::max(kTokenBytes, job->stages[static_cast<size_t>(parent)].outputAtSite[static_cast<size_t>(x)]) / kGB;
          }
        }
        auto placed = policy_.placement == Placement::kTetrium
                          ? sched::tetriumReduce(resources, reduce, tetriumOptions_)
                          : sched::proportionalReduce(resources, reduce);
        if (!placed) {
          fail(placed.error().prepend("re-placing job " + std::to_string(id)));
          return;
        }
        ideal = placed->tasks;
      }
      auto moved = sched::reassignKSites(current, ideal, policy_.reassignK);
      if (!moved) {
        fail(moved.error().prepend("k-site re-assignment of job " + std::to_string(id)));
        return;
      }
      // Take the surplus from the end of over-full queues (the tasks that would launch last)
      // and give it to the sites that gained, to launch next.
      std::vector<int32_t> pool;
      for (int x = 0; x < n; ++x) {
        auto& queue = stage.queue[static_cast<size_t>(x)];
        const int surplus = current[static_cast<size_t>(x)] - moved->tasks[static_cast<size_t>(x)];
        for (int i = 0; i < surplus && !queue.empty(); ++i) {
          pool.push_back(queue.front());
          queue.erase(queue.begin());
          --stage.queued;
          noteQueued(*job, x, -1);
        }
      }
      size_t next = 0;
      for (int y = 0; y < n && next < pool.size(); ++y) {
        const int deficit = moved->tasks[static_cast<size_t>(y)] - current[static_cast<size_t>(y)];
        for (int i = 0; i < deficit && next < pool.size(); ++i) enqueue(*job, static_cast<int32_t>(s), pool[next++], y);
      }
      // Whatever the rounding left goes back where it came from (cannot happen when the
      // totals match, which reassignKSites guarantees).
      for (; next < pool.size(); ++next) {
        enqueue(*job, static_cast<int32_t>(s), pool[next], stage.tasks[static_cast<size_t>(pool[next])].site);
      }
      summary_.tasksReassigned += static_cast<int64_t>(pool.size());
    }
  }
  orderDirty_ = true;
}

}  // namespace

Result<RunSummary> runSimulation(const SimConfig& config, WorkloadSource& workload, JobRecordSink* sink) {
  Engine engine(config, workload, sink);
  return engine.run();
}

}  // namespace tellus::sim
