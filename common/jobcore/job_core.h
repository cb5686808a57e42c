#pragma once
// The decisions of one job manager (HOUTU §3-4) as a state machine with no I/O and no clock of
// its own. A driver (tellus-jm over ZooKeeper and RPC; a simulator over its event queue) feeds
// it what it observed — the job's state, grants, usage, task outcomes, steal requests, the
// election's outcome — and executes what step() asks for: launches, stage releases, lineage
// removals, container requests, steals, JM replacements, the job's end.
//
// Time is the driver's monotonic clock in seconds (any origin), passed to every call that
// needs it. Every method must be called from one thread (the driver's event loop), one event
// at a time. docs/design.md has the event/action table.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jobcore/decision.h"
#include "jobstate/job_view.h"
#include "jobstate/placement.h"
#include "sched/af.h"
#include "sched/lease.h"
#include "sched/parades.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::jobcore {

using TaskId = std::pair<uint32_t, uint32_t>;  // (stage, task)

// "3/7": how tasks are named in logs and in Parades' queue.
std::string taskLabel(const TaskId& id);
// "<worker>/<slot>": a container's key.
std::string slotKeyOf(const pb::ContainerId& id);

// Timing and retry knobs; the defaults are the daemon's.
struct CoreTimings {
  double afPeriodS = 1.0;          // L: Af period
  double stealIntervalS = 0.3;     // at most one steal attempt per interval
  double inputRetryS = 0.5;        // backoff after a launch met a missing input or a live predecessor
  double localityWaitS = 10.0;     // a stage below its job's min_locality is held back at most this long
  double jmGraceS = 2.0;           // a JM that never appeared gets this long before one is requested
  double jmRequestIntervalS = 5.0; // between two requests for the same site's JM
  double masterRefreshS = 1.0;     // a container request is repeated at least this often while unmet
  // A changed desire or grant count is published (the JM's JmInfo rewritten: three ZooKeeper
  // requests) at most this often; a changed role at once. Only status displays read them.
  // The daemon sets it from publish_interval_ms; the simulator, where a publish costs
  // nothing, publishes at once (its wake-ups, and so its steal timing, stay as they were).
  double publishIntervalS = 0.0;
  // A site whose every worker vanished (a partition, or a whole-site loss) comes back worker by
  // worker: a worker still missing this long after the first one is back is taken as lost
  // (its outputs are recomputed); until then its outputs are kept.
  double siteReturnGraceS = 5.0;
  // A worker that vanished holds its outputs this long before they are taken as lost. The
  // workers of a site cut off together vanish one by one as their ZooKeeper sessions expire,
  // over up to about a session timeout: deciding at the first one would count a raw input as
  // still held by a sibling that is about to vanish too, and recompute an output that cannot
  // run anywhere (lossUndecided). The daemon sets it to its session timeout; 0 = at once.
  double lossSettleS = 0.0;
  uint32_t defaultMaxAttempts = 4; // when the spec sets none
  // Takeover without waiting for a ZooKeeper session to expire: a secondary that heard the
  // primary of the current epoch (onPrimaryHeartbeat) and then hears nothing this long takes
  // over. The daemon sets heartbeat_interval_ms × heartbeat_misses; 0 = off (only the
  // election leader takes over, at once: the simulator, which elects no one this way).
  double primaryMissS = 0.0;
  double takeOverRetryS = 0.2;     // after a takeover that did not land (ZooKeeper busy or away)
  // A site of the job with no registered JM and no live worker for this long is lost: the
  // primary gives its movable waiting tasks to the live sites (see ReassignTasks). Its JM and
  // workers vanish only when their sessions expire, so the site was silent for a session
  // timeout before this window starts. The daemon sets it from site_lost_after_ms.
  double siteLostS = 6.0;
  // Between two probes of the same output's holders (ProbeOutput) while a reader's claim stands
  // and no holder gave a clear answer.
  double probeRetryS = 1.0;
};

struct CoreConfig {
  std::string jobId;
  std::string site;
  CoreTimings timings;
  sched::AfParams af;                     // Af's δ and ρ (HOUTU §4.2)
  sched::ParadesParams parades;           // Parades' τ and δ (HOUTU §4.3)
  jobstate::PlacementOptions placement;   // e.g. Tetrium's WAN budget ρ
  sched::LeaseParams lease;               // Awan's lease estimate (paper 004 eq. 1): k, δ, default
  // Waiting tasks of one stage Parades looks at per step. Tasks of a stage at a site are
  // alike (same locality level, released together), so the head of the queue is what its
  // longest-waiting-first rule picks; the bound keeps a step O(containers + stages) for
  // stages of 10^4 tasks.
  size_t launchWindow = 256;
  // The primary trusts an output record only once its stage's finish records name it
  // (onPartRecorded's finish keys, onFinishRecords): a forged or inconsistent record is removed and its
  // task runs again. A driver whose records cannot be forged (the simulator) leaves it off.
  bool verifyOutputs = false;
  // Keep a record of this JM's placements, steals given and re-runs (jobcore/decision.h) for
  // takeDecisions(): the differential test's log. Off: nothing is kept.
  bool recordDecisions = false;
};

// How an attempt ended, as the driver saw it.
enum class AttemptEnd {
  kSucceeded,
  kWorkerUnreachable,  // the container's worker is gone (VM loss): not the task's fault
  kInputNotReady,      // an input is unreachable or a predecessor still runs: retry later
  kTaskFailed,         // the task itself failed: counts toward max attempts
};
// The class of an RPC error code returned by worker.RunTask.
AttemptEnd classifyRunTaskError(ErrorCode code);

// ---- actions -----------------------------------------------------------------------------

struct LaunchTask {
  std::string slotKey;
  pb::Container container;
  TaskId task;
  uint32_t attempt = 0;
  pb::RunTaskRequest request;  // complete but for jm_address, which the driver knows
  double waitedS = 0;          // from ready to launched in this JM's queue (its metrics)
};

struct ReleaseStage {
  uint32_t stage = 0;
  pb::TaskMap taskmap;  // with the primary's epoch
};

struct RemoveLostOutput {
  TaskId task;
  std::string deadWorker;
  std::string why;  // for the log: its worker is dead, or the record is not trusted
};

struct ContainerRequest {
  uint32_t desire = 0;
  std::vector<pb::ContainerId> release;  // idle containers handed back
  // Awan leases (docs/design.md, "Leases"): for every container held and kept, how long until
  // the work put on it should end (0: idle), by the estimate of paper 004 eq. 1.
  std::vector<std::pair<pb::ContainerId, double>> leases;
  // Unfinished tasks of released stages owned here: the sub-job's entry in the site's
  // published queue, which the masters' job order ranks by (docs/design.md, "Job order").
  uint32_t remainingTasks = 0;
  bool allOrNone = false;  // the spec's atomic_containers
};

struct StealWork {
  uint32_t maxTasks = 0;
  std::vector<std::string> victims;  // sites to ask, in order, until one gives work
};

// The primary gives tasks of a lost site (CoreTimings::siteLostS) to live sites: one fenced
// compare-and-set of the stage's taskMap moving each task of `to` that `from` still owns
// (JobCore::moveTasks), then onTasksReassigned. Only tasks that can run elsewhere now: not
// recorded, no running marker, not pinned by residency, inputs on live workers.
struct ReassignTasks {
  uint32_t stage = 0;
  std::string from;                                // the lost site
  std::map<std::string, std::vector<uint32_t>> to; // receiving site -> its tasks
};

// A reader found an output on none of its copies while the output's own worker lives (its data
// directory wiped, or the worker back on a fresh VM under the same id): the reader's word alone
// removes nothing, so the primary asks the holders themselves. The driver reads one byte of
// `bucket` from each holder of `location` — its own worker, then its copies, in that order — and
// reports each answer with onOutputProbed. Reads only: not fenced, in any order.
struct ProbeOutput {
  TaskId task;
  uint32_t bucket = 0;
  pb::PartitionLocation location;  // the record as it was when the probe was decided
};
// Ask whether a worker's process lives (a connection refused says it is gone: onWorkerGone).
// Asked of the worker of a launch that ended kWorkerUnreachable; of a worker holding the
// running marker of a task owned here that this JM did not launch (a predecessor's, whose VM
// may be what the JM replaces); and of one holding an output of our task that no listing has
// shown probeRetryS after the task's end (its batch should have landed), so that their tasks
// need not wait for its session to expire and lossSettleS.
struct ProbeWorker {
  std::string site;     // its site while it is live (its liveness node names its address)
  std::string worker;
  std::string address;  // where to ask when known (an output's record); else its liveness node's
};

enum class HolderAnswer {
  kServed,       // it read the byte: the holder has the output
  kNotHeld,      // the holder answered that it holds no such partition (kNotFound)
  kUnreachable,  // no answer, or another error: says nothing
};

// Become primary: bump the epoch from `expectedEpoch` (a conditional write: of JMs taking over
// from the same epoch exactly one wins), then onBecamePrimary; either way onTakeOverEnded.
struct TakeOver {
  uint64_t expectedEpoch = 0;
  bool byHeartbeats = false;  // the primary missed its heartbeats (else: the election's leader)
  std::string primarySite;    // byHeartbeats: where the silent primary is
  std::string why;            // for the log
};

// What the driver must do now. Primary-only actions (releases, lostOutputs, reassignments,
// succeed, startJms) must be written fenced by the epoch, in this order: lostOutputs,
// reassignments, releases, succeed.
struct Actions {
  std::vector<LaunchTask> launches;
  std::vector<RemoveLostOutput> lostOutputs;
  std::vector<ProbeOutput> probes;  // primary: ask these outputs' holders (any time, unfenced)
  std::vector<ProbeWorker> probeWorkers;  // ask whether these workers live (any time)
  // Running markers of executions on gone workers (onWorkerGone), still in their session:
  // remove each if it still names that worker, so that a worker may start the task again (it
  // refuses a start while the task's marker exists).
  std::vector<std::pair<TaskId, std::string>> clearMarkers;
  std::vector<ReassignTasks> reassignments;
  // The primary has stages to release: read every site's record and call onSiteRecords().
  bool needSiteRecords = false;
  std::vector<ReleaseStage> releases;
  bool succeed = false;                  // every stage is done: mark the job succeeded
  std::optional<std::string> fail;       // fail the job with this reason
  std::vector<std::string> startJms;     // ask these sites' masters for a JM
  std::optional<ContainerRequest> request;
  std::optional<StealWork> steal;
  bool publish = false;                  // desire/grant/role changed: rewrite our JmInfo
  std::optional<TakeOver> takeOver;      // a secondary (or the election's leader) takes over
  // The primary must read these stages' finish records and call onFinishRecords().
  std::vector<uint32_t> readFinishRecords;
  // Nothing left to manage: the job is over (or deleted). Say goodbye to the master and exit
  // 0 (docs/design.md, "exit codes"); exitReason says why, for the log.
  bool exit = false;
  std::string exitReason;
  // The earliest time at which step() may decide something new without a new event (a
  // Parades wait threshold, a backoff, the Af period, a retried request). The driver calls
  // step() again by then; nullopt: only an event can change anything.
  std::optional<double> wakeAt;

  bool empty() const;
};

// A victim's answer to a steal request: tasks reserved for the thief until settled.
struct StealOffer {
  uint32_t stage = 0;
  std::vector<uint32_t> tasks;
  std::string thief;
  // Nothing qualified yet: the time (from now) when the first waiting task will.
  std::optional<double> retryAfterS;
};

// ---- the core ----------------------------------------------------------------------------

class JobCore {
 public:
  explicit JobCore(CoreConfig config);

  // -- the job's state, as read (full values; a newer reading replaces an older one) --
  // The spec and, for dataset stages, their inputs (indexed by stage; others empty).
  Status onJobLoaded(const pb::JobSpec& spec, const std::vector<pb::StageInputs>& inputs);
  // The status as read. One that is inconsistent (unknown state, no sites, another job's id)
  // fails the job with the reason; a terminal one ends this JM.
  void onStatus(const pb::JobStatus& status, int32_t version);
  // The status node does not decode: the job fails with the reason (the fail write replaces
  // the node, so every JM then reads a terminal status).
  void onStatusUnreadable(const std::string& reason);
  // The job's status node is gone (/jobs/<id> deleted): nothing left to manage; step() exits.
  void onJobDeleted();
  // A taskMap that does not match its stage (task count, owners that are not sites of the
  // job) is not applied: the job fails with the reason rather than hang on it. `moved`: when
  // the caller knows which tasks changed owner since the last map this core saw (tellus-sim,
  // which made the change), only those are compared; without it every owner is, O(tasks) per
  // steal for each JM of the job.
  void onTaskMap(uint32_t stage, const pb::TaskMap& map, int32_t version, const std::vector<uint32_t>* moved = nullptr);
  // The taskMap node does not decode: the job fails with the reason.
  void onTaskMapUnreadable(uint32_t stage, const std::string& reason);
  // The stage's outputs as its record nodes are listed, told as they change (PartListing
  // turns the nodes a driver reads into these calls): each costs O(log tasks), so a new batch
  // costs what it records, not what the stage holds.
  // The listing shows the task's output: new, or under another record. `finishKey`
  // (JobStore::outputNode) is checked by the primary against the stage's finish records when
  // verifyOutputs is on; empty: none given (a driver whose records cannot be forged). A record
  // for a task the stage does not have is ignored (it would make the stage look complete).
  void onPartRecorded(uint32_t stage, uint32_t task, const pb::PartitionLocation& location,
                      const std::string& finishKey = {});
  // The listing no longer shows the task's output (lineage removed it): a part a listing showed
  // is forgotten; one only our own task recorded (no listing showed it yet) is kept.
  void onPartUnlisted(uint32_t stage, uint32_t task);
  // The stage's listing has been told in full (every onPartRecorded/onPartUnlisted of it): the
  // first time opens the stage to launches, steals and the primary's decisions (see listed()).
  void onPartsListed(uint32_t stage);
  // The stage's finish records, after step() asked for them (readFinishRecords): a part whose
  // finish key is not among them names no finished execution and is removed (lostOutputs).
  void onFinishRecords(uint32_t stage, const std::set<std::string>& records);
  // Reading them failed: asked again on a later step.
  void onFinishRecordsUnread(uint32_t stage) { readingFinish_.erase(stage); }
  // Every running marker of the job. The first call opens every listed stage to launches
  // (see listed()).
  void onRunningMarkers(const std::map<TaskId, pb::RunningTask>& markers);
  // The live workers of one of the job's sites (their liveness nodes), less those found gone
  // (onWorkerGone) that are still listed.
  void onLiveWorkers(const std::string& site, const std::set<std::string>& workers);
  // A worker's process is gone: a call to it broke and a new connection is refused (the driver
  // asks after a RunTask ends kWorkerUnreachable). A process that died neither records its
  // outputs nor resumes (a paused one keeps its connections), so it is dead from now on, not
  // when its ZooKeeper session expires: its running markers stop holding their tasks, the
  // outputs it had not recorded are run again, its recorded ones are lost unless a copy serves
  // them, all without waiting lossSettleS, and none of its containers is used. Until its
  // liveness node is gone; after that a worker of that id is a new process.
  void onWorkerGone(const std::string& worker, double now);
  bool workerGone(const std::string& worker) const { return gone_.count(worker) > 0; }
  // A clearMarkers entry could not be removed for now (ZooKeeper away): asked again once the
  // marker is listed again.
  void onMarkerClearFailed(const TaskId& id) { clearedMarkers_.erase(id); }
  // Sites with a registered JM (their JmInfo nodes).
  void onJms(const std::set<std::string>& sites);
  // The sites' published records, after step() asked for them (needSiteRecords).
  void onSiteRecords(const std::vector<pb::SiteInfo>& sites);
  // The same, as capacities the driver measured itself (a simulator knows them exactly).
  void onSiteCapacities(std::vector<jobstate::SiteCapacity> sites);
  // -- election, epochs and the primary's liveness --
  void onBecamePrimary(uint64_t epoch);
  void onLostPrimary();
  // The epoch node as read (its watch). A newer epoch starts a fresh window for its primary
  // (which just acted); a primary of an older epoch is fenced: it stops acting as primary and
  // this returns true (the driver withdraws it from the election).
  bool onEpoch(uint64_t epoch, double now);
  // A heartbeat from the primary of `epoch` at `site`. It counts only for the epoch the node
  // holds as last read (a claim from the network is not trusted beyond that).
  void onPrimaryHeartbeat(const std::string& site, uint64_t epoch, double now);
  // This JM's place in the election (the ZooKeeper recipe; nullopt: none, or in doubt). The
  // leader (0) takes over when the primary of the current epoch has been silent for
  // primaryMissS (at once when there never was one). The next in line (1) takes over when it
  // heard that primary and then missed it for primaryMissS: the JM the election would pick
  // once the silent primary's session expires, so the new primary heads the election then.
  void onElectionPosition(std::optional<size_t> position);
  // The TakeOver action ended: won (onBecamePrimary was called) or not (retried after
  // takeOverRetryS if still due).
  void onTakeOverEnded(bool won, double now);

  // -- resources --
  void onGrants(const std::vector<pb::Container>& granted);
  void onUsage(const pb::ContainerUsageReport& report);
  // What this site's workers measured fetching from each other site, bytes/s (its SiteInfo's
  // inbound rates): the transfer term of a lease estimate.
  void onInboundRates(std::map<std::string, double> bytesPerS) { inbound_ = std::move(bytesPerS); }
  // When the containers other jobs hold at this site should come free (their leases as the
  // site's master published them, in our clock). A victim of a steal that is owed containers
  // counts the soonest of them as its own: a local container about to free up can beat moving
  // the input (paper 004 §III-C).
  void onSiteLeases(std::vector<double> endsAt) { siteLeaseEnds_ = std::move(endsAt); }
  // Containers the master took back for an expired lease (its lease_expiry: kill): the task on
  // each is being killed. Its end is not counted against it, and its next lease is twice the
  // one that ran out (a task longer than every estimate is not killed forever).
  void onLeasesTakenBack(const std::vector<pb::ContainerId>& containers);
  // Accuracy (paper 004 eq. 3) of this JM's lease estimates over its finished executions: all
  // of them, and those estimated from a compute history (not the default lease of a stage
  // none of whose tasks had finished).
  struct LeaseAccuracy {
    double mean = 0;
    uint64_t executions = 0;
    double fromHistoryMean = 0;
    uint64_t fromHistory = 0;
  };
  LeaseAccuracy leaseAccuracy() const;

  // -- task outcomes (for launches this core made) --
  void onTaskEnded(const LaunchTask& launch, AttemptEnd end, const pb::PartitionLocation* location,
                   const std::string& message, double now);
  // The worker found input `lost` on none of its copies (RunTaskResponse.lost_input: its own
  // worker unreachable, the last copy without it). The attempt ends as kInputNotReady. A claim
  // about a partition this launch does not read changes nothing, and a reader's word alone never
  // removes an output: the primary drops it (its task runs again) once it finds the output's own
  // worker dead too, or, while that worker lives, once the holders themselves answer that they
  // hold it no longer (ProbeOutput). A claim not repeated within kClaimLifeS is forgotten.
  void onInputLost(const LaunchTask& launch, const pb::PartitionKey& lost, const std::string& message, double now);
  // A secondary's claims reach the primary, which alone re-runs outputs: the secondary answers
  // each primary heartbeat with lostInputClaims() (JmHeartbeatResponse.lost_inputs), and the
  // primary takes each claim as onInputLost would. At most kMaxReportedLostInputs are sent or
  // read, and at most that many outputs whose worker lives are held as claimed at once.
  static constexpr size_t kMaxReportedLostInputs = 256;
  static constexpr double kClaimLifeS = 30.0;
  std::vector<TaskId> lostInputClaims() const;
  void onLostInputsReported(const std::vector<TaskId>& claims, double now);
  // The ProbeOutput action ended: `answers` by holder, in its order (missing ones count as
  // unreachable). The output is dropped when no holder served it, its own worker answered
  // kNotHeld, and every copy's did too or is dead; a record changed since the probe was decided
  // is left alone; with no clear answer the holders are asked again after probeRetryS.
  void onOutputProbed(const ProbeOutput& probe, const std::vector<HolderAnswer>& answers, double now);

  // -- primary writes, as they ended --
  // ok: written (or already there); false: not written (fenced or unavailable).
  void onStageReleased(const ReleaseStage& release, bool ok);
  void onLostOutputRemoved(const RemoveLostOutput& removal, bool ok);
  // The reassignment's fenced compare-and-set ended: `map` as written (null: not written;
  // decided afresh on a later step).
  void onTasksReassigned(const ReassignTasks& reassignment, const pb::TaskMap* map, int32_t version);
  void onContainerRequestSent(const ContainerRequest& request);
  // The fail action's status write ended; when it did not land, the next step asks again.
  void onFailWritten(bool ok);
  // The same for the succeed action (asked for once while its write may have landed: the
  // steps until the status watch says so must not write it again).
  void onSucceedWritten(bool ok);
  void onPublished(uint32_t desire, uint32_t granted);

  // -- stealing --
  // As victim (HOUTU Alg. 2 ONRECEIVESTEAL): the thief's request is an update of its idle
  // containers here, and Parades picks what it may take — tasks with input at the thief's
  // site once they waited τ·p, any after 2τ·p — out of the waiting tasks our own idle
  // containers will not start. A task is offered only when the thief would finish it first:
  // its input's transfer to the thief (at `inboundToThief`, bytes/s from each site, as the
  // thief's site measured them) plus the stage's mean task time beats its wait in our queue
  // plus that time. Reserved until settleSteal. Empty when the thief is not a site of this
  // job, or nothing qualifies yet.
  StealOffer offerSteal(const std::string& thief, uint32_t maxTasks, double now,
                        const std::map<std::string, double>& inboundToThief = {});
  // The offer's taskMap compare-and-set ended: `moved` are the tasks now the thief's, `map`
  // the taskMap as written (null on failure; a pointer, not a copy of a map of 10^4 owners).
  void settleSteal(const StealOffer& offer, const std::vector<uint32_t>& moved, const pb::TaskMap* map,
                   int32_t version);
  // As thief: the StealWork action ended; `gotWork` when a victim gave tasks, else the
  // victims' earliest retryAfterS (nullopt: none had anything waiting; ask less often).
  void onStealEnded(bool gotWork, std::optional<double> retryAfterS = std::nullopt);

  // Fails the job (a fault the driver found, e.g. a container with a bad address).
  void failJob(std::string reason);

  // Everything to do now.
  Actions step(double now);

  // The decisions recorded since the last call (recordDecisions), oldest first: a release
  // written (onStageReleased), a steal given (settleSteal), a lost output removed
  // (onLostOutputRemoved), an attempt that must run again (onTaskEnded). The driver drains it
  // after each event it fed.
  std::vector<Decision> takeDecisions() { return std::exchange(decisions_, {}); }

  // -- read-only views for the driver and tests --
  bool loaded() const { return loaded_; }
  bool primary() const { return primary_; }
  uint64_t epoch() const { return epoch_; }
  // The newest epoch this JM knows of (the epoch node as read, or its own).
  uint64_t knownEpoch() const { return knownEpoch_; }
  const jobstate::JobView& view() const { return view_; }
  const pb::JobStatus& status() const { return status_; }
  int32_t statusVersion() const { return statusVersion_; }
  uint32_t desire() const { return desire_; }
  size_t granted() const { return slots_.size(); }
  bool running(const TaskId& id) const { return running_.count(id) > 0; }
  // Stage s's outputs and the job's running markers have each been listed at least once
  // (onPartsListed, onRunningMarkers). Before that a task another JM finished or still runs looks
  // waiting here: nothing of the stage is launched or offered to a thief, and the primary
  // decides nothing on its outputs (lineage, releases downstream, the job's success).
  bool listed(uint32_t s) const { return markersListed_ && s < partsListed_.size() && partsListed_[s]; }
  // Stage s is released and at most as many of its outputs are still to come as the job has
  // sites: its next records may end it, and what waits on its end (the release of the stages
  // reading it, the job's success) should not wait for a coalesced listing. The driver lists
  // such a stage's records at every change: at most that many more listings per stage.
  bool awaitingLastOutputs(uint32_t s) const;
  uint32_t attempts(const TaskId& id) const;
  // The taskMap gives the task to this site, or it is not known yet (a running marker of such
  // a task may hold one of our containers).
  bool ownedHereOrUnknown(const TaskId& id) const;
  // Whether a running marker's contents can matter to a decision (refreshRunningElsewhere): not
  // for a task we launched and have not seen end, nor one with a known output, nor one another
  // site owns (of those the name is all it needs). The JM reads only these markers.
  bool markerContentsNeeded(const TaskId& id) const;

  // Applies a steal to a taskMap: every task of `tasks` still owned by `from` goes to `to`.
  // Returns the tasks moved. Pure; the victim's driver uses it inside its compare-and-set.
  static std::vector<uint32_t> moveTasks(pb::TaskMap& map, const std::vector<uint32_t>& tasks, const std::string& from,
                                         const std::string& to);

 private:
  struct Slot {
    pb::Container container;
    std::map<TaskId, double> tasks;  // running here, with the share of the container each uses
    double cpu = -1;                 // last measured CPU (cores), -1 = no report yet
    double used() const;
  };

  void refreshRunningElsewhere();
  // Work this sub-job still has: its unfinished tasks of listed released stages.
  size_t unfinishedHereCount() const;
  // stealable_ for this step (decideLaunches asks for steals, decideContainers sizes by it).
  void countStealable();
  // A task at the head of its stage's queue here, ready to launch: when it started waiting, and
  // its stage's mean task time (what Parades' locality thresholds scale with).
  struct LaunchCandidate {
    TaskId id;
    double since = 0;
    double meanS = 0;
  };
  // The job's min_locality (paper 004 §IV): a dataset stage whose waiting tasks here (entries
  // `from`.. of `waiting`) are local below that fraction is held back — taken out of
  // `waiting` — for at most locality_wait, meanwhile thieves at its data's sites may take them.
  void holdBackBelowMinLocality(uint32_t s, std::vector<LaunchCandidate>& waiting, size_t from, double now,
                                Actions& out);
  // Paper 004 eq. 1 for task `id` at worker `worker` (its stage is its similarity class).
  using ShuffleCache = std::map<uint32_t, std::map<std::string, double>>;
  // Sets *fromHistory when a compute history was used.
  double leaseEstimateS(const TaskId& id, const std::string& worker, ShuffleCache& shuffles, bool* fromHistory) const;
  // Stage s has a compute history now: its running launches leased for the default are
  // restated from it (sent with the next container request).
  void restateDefaultLeases(uint32_t s);
  // A finished execution: its compute time into the history, its lease's accuracy counted.
  void noteLease(const LaunchTask& launch, const pb::PartitionLocation& location, double now);
  double taskShare(uint32_t stage) const;
  // The unfinished tasks of released stage s owned here / elsewhere: rebuilt when its taskMap
  // is first known or replaced (applyTaskMap moves only the tasks whose owner changed), kept
  // up to date as outputs are recorded or removed (so a step does not scan every task).
  void indexOwners(uint32_t s);
  // The tasks whose owner in `map` is not the one we hold for stage s, among `candidates` when
  // given (else among all); nullopt when we hold no map of its size (every task is new then).
  std::optional<std::vector<uint32_t>> changedOwners(uint32_t s, const pb::TaskMap& map,
                                                     const std::vector<uint32_t>* candidates = nullptr) const;
  // Stage s's task map becomes `map` (of a version not older than ours); `changed` is
  // changedOwners(s, map), which a caller validating the changes has at hand.
  void applyTaskMap(uint32_t s, const pb::TaskMap& map, int32_t version,
                    const std::optional<std::vector<uint32_t>>& changed);
  void notePart(uint32_t s, uint32_t t, bool recorded);
  // Every change of a stage's parts (view_.stages[s].parts) goes through these two, which keep
  // partWorkers_ and partElapsedS_ in step.
  void setPart(uint32_t s, uint32_t t, const pb::PartitionLocation& location);
  std::map<uint32_t, pb::PartitionLocation>::iterator erasePart(uint32_t s,
                                                                std::map<uint32_t, pb::PartitionLocation>::iterator it);
  void erasePart(uint32_t s, uint32_t t);
  // A reader found output `output` (`bucket` of it, when known) on none of its copies: claimed
  // lost while its own worker is dead, else held for its holders to be asked (suspects_).
  void claimLost(TaskId output, std::optional<uint32_t> bucket, double now);
  // Primary: the probes of claimed outputs whose worker lives, and the suspects' expiry.
  void decideProbes(double now, Actions& out);
  // Whether every part of stage s is on a worker in `live`: the common case, answered without
  // walking the parts (a step would otherwise cost O(finished tasks) per stage).
  bool partsAllOn(uint32_t s, const std::set<std::string>& live) const;
  void decideLaunches(double now, Actions& out);
  // Calls visit(t) for each task of stage s owned here and unfinished that neither runs (ours
  // or a predecessor's) nor is being stolen, in task order, until it returns false.
  template <class Visit>
  void forEachQueuedHere(uint32_t s, Visit&& visit) const;
  void wakeAt(double when, double now, Actions& out) const;
  // Every upstream output task t of stage s reads is recorded (cheaper than taskInputs).
  bool inputsReady(uint32_t s, uint32_t t) const;
  // Input bytes task t of stage s reads, by the site holding them; `shuffles` caches a shuffle
  // stage's sources (the same for all its tasks).
  std::map<std::string, double> inputBytesBySource(uint32_t s, uint32_t t, ShuffleCache& shuffles) const;
  // The thief would finish the task before we would (see offerSteal). `givenBytes`: the input
  // bytes of the tasks this offer already gives, by source; they cross the same links to the
  // thief at the same time, so this task's input arrives after theirs.
  bool thiefFinishesFirst(const std::map<std::string, double>& inputBytes,
                          const std::map<std::string, double>& givenBytes, uint32_t s, size_t queuePosition,
                          const std::string& thief, const std::map<std::string, double>& inboundToThief,
                          double now) const;
  // Mean elapsed time of the stage's finished tasks (Parades' p), 0 before the first.
  double stageMeanS(uint32_t s) const;
  // Workers at this site holding input of task t (Parades' node-local level); shuffle
  // stages' workers are computed once per step in `shuffleWorkers`. The names are views of
  // the job view's and of `shuffleWorkers`' strings.
  void addPreferredWorkers(uint32_t s, uint32_t t, std::map<uint32_t, std::vector<std::string>>& shuffleWorkers,
                           std::vector<std::string_view>& out) const;
  // The next entry of paradesView_ (`used` of them taken), its lists emptied.
  sched::WaitingTask& nextParadesEntry(size_t& used);
  // Stage u's outputs are still needed: the job's result, or read by a stage not done yet.
  // nullopt while a released stage reading them is not listed (whether it is done is unknown).
  std::optional<bool> outputsNeeded(uint32_t u) const;
  void decidePrimary(double now, Actions& out);
  // A secondary (or the election's leader) whose primary went silent takes over.
  void decideTakeOver(double now, Actions& out);
  // Sites with no JM and no live worker for siteLostS: their movable waiting tasks go to the
  // live sites (primary; ReassignTasks). `live`: every live worker of the job's sites.
  void decideLostSites(double now, const std::set<std::string>& live, Actions& out);
  // Every input of task t of stage s is on a live worker (a raw partition: it or a replica);
  // `shuffleLive` caches, by upstream stage, whether all its outputs are.
  bool inputsLive(uint32_t s, uint32_t t, const std::set<std::string>& live,
                  std::map<uint32_t, bool>& shuffleLive) const;
  // A raw partition's task input is on no live worker, neither it nor a replica.
  bool rawInputLost(uint32_t s, uint32_t t, const std::set<std::string>& live) const;
  // Sites coming back from having no live worker: starts and ends their grace (siteReturnGraceS).
  void noteReturningSites(double now, Actions& out);
  // The output of task t of stage u is on a dead worker, but that is not (yet) a loss: no live
  // worker holds a copy of the raw partition it read (it could not run again anywhere), or its
  // worker belongs to a site coming back within its grace.
  bool lossUndecided(uint32_t u, uint32_t t, const pb::PartitionLocation& loc, const std::set<std::string>& live) const;
  // Every site's live workers, when every site of the job has reported them.
  const std::optional<std::set<std::string>>& allLiveWorkers() const { return allLive_; }
  // Rebuilds allLive_ from liveWorkers_ and the status's sites (each time either changes):
  // steps read it many times, and a 50-site simulation spent 13% of its time rebuilding it.
  void refreshAllLive();
  // verifyOutputs: every part of stage s is confirmed by its finish record.
  bool stageVerified(uint32_t s) const;
  // Asks for finish records of complete stages with parts not confirmed yet; queues removal
  // of parts found untrusted. False while a stage's trust is open (nothing is released then).
  bool decideVerification(Actions& out);
  void decideContainers(double now, Actions& out);
  void finishAttempt(const LaunchTask& launch);
  // Stops using `worker`'s idle containers (it is unreachable or gone) until granted again.
  void dropIdleSlotsOn(const std::string& worker);
  // Callers building a decision in a loop (one per task of a release) test
  // config_.recordDecisions first: off, nothing is built.
  void record(Decision decision) {
    if (config_.recordDecisions) decisions_.push_back(std::move(decision));
  }

  CoreConfig config_;
  bool loaded_ = false;
  jobstate::JobView view_;
  std::vector<bool> pinnedStages_;  // by stage: its tasks read pinned raw records, never stolen
  pb::JobStatus status_;
  int32_t statusVersion_ = -1;
  bool primary_ = false;
  uint64_t epoch_ = 0;
  // The primary's liveness as this JM sees it: the newest epoch known (epochRead_: the node
  // was read at least once), when it was first seen (the new primary just acted), the last
  // heartbeat of its primary and from where.
  bool epochRead_ = false;
  uint64_t knownEpoch_ = 0;
  double epochSeenAt_ = 0;
  std::optional<double> heardAt_;
  std::string heardFrom_;
  std::optional<size_t> electionPosition_;
  bool takingOver_ = false;
  double takeOverNotBefore_ = 0;

  std::map<TaskId, pb::RunningTask> markers_;
  std::map<TaskId, pb::RunningTask> runningElsewhere_;  // markers of tasks we did not launch
  std::map<uint32_t, std::set<uint32_t>> listedParts_;  // parts the last listing showed, by stage
  std::vector<std::map<std::string, uint32_t>> partWorkers_;  // by stage: parts per worker id
  std::vector<double> partElapsedS_;  // by stage: the parts' elapsed_s summed (stageMeanS without a walk)
  // The gate of listed(): by stage, whether onPartsListed ever came; whether onRunningMarkers did.
  // A JM's watches deliver these after it may first step (a replacement JM re-ran finished
  // tasks on a step before them), so the core waits for them rather than the driver's ordering.
  std::vector<bool> partsListed_;
  bool markersListed_ = false;
  std::map<std::string, std::set<std::string>> liveWorkers_;  // by site, less gone_
  std::map<std::string, std::string> gone_;                    // onWorkerGone: worker -> its site
  // Workers whose process onWorkerGone found gone, live-listed or not, until one of that id is
  // listed live again (a new process): their losses need no lossSettleS.
  std::set<std::string> deadProcess_;
  // Our tasks' outputs known from their end and not listed yet -> when they ended.
  std::map<TaskId, double> unlistedSince_;
  // Tasks whose last launch here ended with its worker unreachable -> that worker: a marker of
  // theirs whose contents were not read is the launch's if the worker is gone.
  std::map<TaskId, std::string> endedUnreachableOn_;
  // ProbeWorker: workers to ask on the next step (a launch there ended unreachable), and when
  // each was last asked (a marker's worker is asked once; an unreachable one again after
  // probeRetryS).
  struct ProbeReason {
    std::string address;
    double at = 0;  // when the launch there ended: a probe from before says nothing about it
  };
  std::map<std::string, ProbeReason> toProbe_;  // by worker
  std::map<std::string, double> probedWorkerAt_;
  void decideWorkerProbes(double now, Actions& out);
  // Markers of gone workers' executions seen by refreshRunningElsewhere: to clear (next step)
  // and cleared (not asked again while the listing still shows them).
  std::map<TaskId, std::string> staleMarkers_;
  std::set<TaskId> clearedMarkers_;
  void clearMarkerOf(const TaskId& id, const std::string& worker) {
    if (!clearedMarkers_.count(id)) staleMarkers_.emplace(id, worker);
  }
  bool markersChanged_ = false;  // runningElsewhere_ was rebuilt since decideWorkerProbes looked
  std::optional<std::set<std::string>> allLive_;               // see allLiveWorkers()
  std::map<std::string, std::set<std::string>> everLive_;     // by site: every worker seen live
  // By site: workers missing since the site had no live worker at all, not back yet.
  std::map<std::string, std::set<std::string>> returning_;
  std::map<std::string, double> returnedAt_;  // by site: when its first worker was back
  std::set<std::string> jms_;
  std::optional<std::vector<jobstate::SiteCapacity>> siteCapacities_;  // fresh, for pending releases

  std::map<std::string, Slot> slots_;  // granted containers by slot key
  std::set<TaskId> running_;           // launched by us, not ended
  std::map<TaskId, double> launchedAt_;
  std::map<TaskId, double> leaseS_;  // each running launch's lease estimate (at launch: eq. 3 scores it)
  std::set<TaskId> leaseFromHistory_;  // those estimated from a compute history
  // Launches leased for the default (their stage had no history) whose stage has one now: the
  // lease restated from it, which is what the master publishes to the site's other jobs.
  std::map<TaskId, double> restatedLeaseS_;
  std::map<TaskId, std::string> defaultLeasedOn_;  // running launches still on the default, by worker
  sched::ComputeHistory computeHistory_;
  std::map<std::string, double> inbound_;  // bytes/s into this site, by source
  std::vector<double> siteLeaseEnds_;      // other jobs' containers here (onSiteLeases)
  double leaseAccuracySum_ = 0, historyAccuracySum_ = 0;
  uint64_t leaseAccuracyN_ = 0, historyAccuracyN_ = 0;
  bool leasesChanged_ = false;  // a launch since the last request: its lease is not sent yet
  // Tasks whose container the master took back for an expired lease, and the lease their next
  // launch gets at least (twice the one that ran out).
  std::set<TaskId> leaseTakenBack_;
  std::map<TaskId, double> leaseFloorS_;
  std::optional<sched::LocalityGate> localityGate_;  // the spec sets min_locality > 0
  std::map<TaskId, uint32_t> attempts_;
  std::map<TaskId, double> notBefore_;
  std::map<TaskId, double> waitingSince_;
  std::set<TaskId> beingStolen_;
  std::map<uint32_t, double> stageShare_;
  std::vector<std::set<uint32_t>> unfinishedHere_, unfinishedElsewhere_;  // by stage
  std::optional<std::string> failure_;
  bool failReported_ = false;
  bool succeedReported_ = false;
  bool deleted_ = false;
  bool outsider_ = false;  // this JM's site is not among the job's
  std::map<std::string, double> vanishedAt_;  // worker holding a needed output -> first seen not live
  // Parades' view of the waiting tasks, rebuilt by each step and steal offer in place: a step
  // of a large stage views hundreds of tasks, and fresh entries cost allocations each.
  std::vector<sched::WaitingTask> paradesView_;
  // Outputs a reader found on no copy (onInputLost; a secondary's, onLostInputsReported), until
  // their part changes.
  std::set<TaskId> claimedLost_;
  // Outputs a reader found on no copy while their own worker lives, until their part changes or
  // the claim is kClaimLifeS old: the bucket it read, when known, the last claim, and the probe.
  struct Suspect {
    std::optional<uint32_t> bucket;
    double claimedAt = 0;
    std::optional<double> probedAt;  // the last probe's answer, when it settled nothing
    bool probing = false;
  };
  std::map<TaskId, Suspect> suspects_;
  // Outputs whose holders answered that they hold them no longer: the primary drops them.
  std::set<TaskId> notHeld_;
  // A secondary's own outputs known only from their task's end whose worker was seen missing
  // since -> when first seen so: forgotten (and re-run) after lossSettleS unless listed first.
  std::map<TaskId, double> unconfirmedSince_;

  // Output trust (verifyOutputs), by stage: each part's finish key as last listed, the parts
  // confirmed (task -> the key confirmed), those found untrusted, stages being read.
  std::vector<std::map<uint32_t, std::string>> finishKeys_;
  std::vector<std::map<uint32_t, std::string>> verified_;
  std::vector<std::set<uint32_t>> untrusted_;
  std::set<uint32_t> readingFinish_;

  // Af
  sched::AfState af_;
  double lastAf_ = 0;
  double busyArea_ = 0, heldTime_ = 0;  // utilization over the current period (time-weighted)
  double lastSample_ = -1;
  double busyNow_ = 0;                  // busy fraction of the held containers since lastSample_
  bool hadWaiting_ = false;
  uint32_t desire_ = 0;
  std::optional<uint32_t> sentDesire_;
  uint32_t sentRemaining_ = 0;
  double lastRequest_ = 0;
  uint32_t publishedDesire_ = 0, publishedGranted_ = 0;
  bool publishedPrimary_ = false;
  std::optional<double> publishAskedAt_;  // when step() last asked for a publish

  // Lost sites (primary): when each site was first seen with no JM and no live worker; the
  // stages whose reassignment is being written.
  std::map<std::string, double> siteGoneSince_;
  std::set<uint32_t> reassigning_;

  // JM replacement (primary)
  std::map<std::string, double> jmMissingSince_;
  std::map<std::string, double> jmRequestedAt_;
  // A takeover by heartbeats: the silent primary's site while it is being taken over, then
  // (won) the site to ask for a JM at once, before its predecessor's node expires.
  std::string takingOverFrom_;
  std::set<std::string> replaceAtOnce_;

  // stealing as thief
  std::vector<Decision> decisions_;  // recordDecisions: not yet taken

  bool stealing_ = false;
  double lastSteal_ = -1e18;
  size_t stealRound_ = 0;
  size_t stealable_ = 0;        // other sites' tasks neither done nor running (last step)
  double stealBackoffS_ = 0;    // wait before the next attempt beyond the steal interval
};

}  // namespace tellus::jobcore
