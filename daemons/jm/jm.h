#pragma once
// tellus-jm: the job manager of one job at one site (HOUTU §3), a thin driver over
// jobcore::JobCore. It turns ZooKeeper watches (status, taskMaps, outputs, running markers,
// live workers, JMs, epoch), RPCs (grants, usage reports, steal requests), the election's
// outcome and a short in-memory tick into the core's events, and executes the actions the
// core decides: launches, fenced writes of the primary, container requests, steals.
// It reads ZooKeeper only when a watch says something changed (and a slow safety re-read).

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "coord/election.h"
#include "coord/event_flag.h"
#include "coord/coordinator.h"
#include "daemon/daemon.h"
#include "daemon/pause_detector.h"
#include "daemon/server.h"
#include "jobcore/job_core.h"
#include "jobcore/part_listing.h"
#include "jobstate/job_store.h"
#include "net/methods.h"
#include "tellus.pb.h"

namespace tellus::jm {

class JobManager {
 public:
  JobManager(daemon::Runtime& runtime, config::JmConfig config);
  ~JobManager();

  Status start();
  void stop();

 private:
  using Clock = std::chrono::steady_clock;

  double nowS() const;
  void wake() { wake_.set(); }
  void registerMetrics();
  // A grant update from the master: counts the containers granted or revoked since the last.
  void countGrants(std::size_t granted);
  // Ends the process: 0 when there is nothing left to manage (the job is over or deleted),
  // 1 when it could not do its job: then `why` also goes to config_.exit_reason_file, and its
  // worker reports both to the master, which replaces it (or fails the job after
  // max_jm_crashes, with `why` in `tellus status`).
  void exitWith(bool failed, const std::string& why);

  // Appends the decisions the core recorded since the last call to the decision log
  // (decision_log_max_bytes); called after every event that may record one.
  void writeDecisions();

  boost::asio::awaitable<void> mainLoop();
  boost::asio::awaitable<Status> loadJob();
  Status watchJob();
  void watchSiteWorkers(const pb::JobStatus& status);
  boost::asio::awaitable<void> readChangedState();
  boost::asio::awaitable<void> readParts(uint32_t stage);
  boost::asio::awaitable<void> readMarkers();
  boost::asio::awaitable<void> readJms();
  boost::asio::awaitable<Status> registerSelf();

  void joinElection();
  // The core's TakeOver: one conditional epoch bump from the epoch it expects.
  boost::asio::awaitable<void> takeOver(jobcore::TakeOver takeOver);
  // The JM at the silent primary's site answers one jm.Heartbeat with epoch 0 (deadline
  // heartbeat_interval_ms), still knowing no epoch past the one a takeover would bump from.
  boost::asio::awaitable<bool> primaryAnswers(const jobcore::TakeOver& takeOver);
  void stepDown(const std::string& why);
  // Heartbeats: the primary's loop (every heartbeat_interval_ms, to every other JM of the job),
  // one call, and the handler.
  boost::asio::awaitable<void> heartbeatLoop();
  boost::asio::awaitable<void> sendHeartbeat(std::string site, net::Endpoint to, uint64_t epoch);
  Result<pb::JmHeartbeatResponse> onHeartbeat(const pb::JmHeartbeat& beat, const net::CallContext& context);
  // A heartbeat reply said the epoch moved past ours: read the node itself (a reply is no
  // proof) and step down if so.
  boost::asio::awaitable<void> checkEpoch();
  // The outcome of a fenced write: a lost fence (kConflict) means a newer primary.
  Status noteFence(Status written);

  boost::asio::awaitable<void> execute(jobcore::Actions actions);
  boost::asio::awaitable<void> readSiteRecords();
  // Reads every released stage's taskMap into the core; false when a read failed.
  boost::asio::awaitable<bool> rereadTaskMaps();
  // Executes the primary's reassignment of a lost site's tasks; false when it was fenced.
  boost::asio::awaitable<bool> reassignTasks(const jobcore::ReassignTasks& reassignment);
  boost::asio::awaitable<void> requestJm(std::string site);
  boost::asio::awaitable<void> sendContainerRequest(jobcore::ContainerRequest request);
  // Marks the job failed (unless it already ended); false when the write did not land.
  boost::asio::awaitable<bool> failJob(std::string reason);
  boost::asio::awaitable<void> runTask(jobcore::LaunchTask launch);
  // The core's ProbeWorker: the worker's process is gone when a connection to it is refused
  // (any answer, even an error, means it lives; a timeout says nothing): onWorkerGone.
  boost::asio::awaitable<void> probeWorker(jobcore::ProbeWorker probe);
  // The core's ProbeOutput: one byte of the output from each of its holders, one after another.
  boost::asio::awaitable<void> probeOutput(jobcore::ProbeOutput probe);
  boost::asio::awaitable<void> stealWork(jobcore::StealWork steal);
  // Our site's record (its measured inbound rates: the main loop, every kInboundMaxAge) and
  // published queue (other jobs' leases here: a steal answer, at most every kSiteLeasesMaxAge)
  // into the core.
  boost::asio::awaitable<void> refreshInbound();
  boost::asio::awaitable<void> refreshSiteLeases();
  // A master's word that it took containers back for expired leases (JmUpdateResponse).
  void onLeasesTakenBack(const pb::JmUpdateResponse& update);
  boost::asio::awaitable<Result<pb::StealResponse>> giveWork(pb::StealRequest req, net::CallContext ctx);

  config::JmConfig config_;
  jobcore::JobCore core_;
  Clock::time_point origin_ = Clock::now();
  // RPC, clients, ZooKeeper; declared before everything that holds on to them.
  daemon::Server server_;
  std::optional<jobstate::JobStore> store_;  // over the coordinator: every read and write of the job's state
  std::vector<coord::Subscription> subscriptions_;
  std::map<std::string, coord::Subscription> workerWatches_;  // by site
  coord::EventFlag wake_;

  // What the watches reported, read by the main loop (names are read there, values are not).
  std::map<uint32_t, std::optional<std::set<std::string>>> partNames_;  // new listing of record nodes per stage
  // Record nodes read so far, by stage (each tells the core only what a listing changed).
  std::map<uint32_t, jobcore::PartListing> partListings_;
  std::optional<std::vector<jobcore::TaskId>> markerNames_;
  std::map<jobcore::TaskId, pb::RunningTask> markers_;
  std::set<jobcore::TaskId> markerListing_;
  std::set<jobcore::TaskId> markersUnread_;  // listed, contents not read: tasks we ran then
  // Markers that went while their task was not recorded in our view, held (shown to the core
  // as still running) until a listing of their stage's records begun after the markers' has
  // been read: a batch removes its tasks' markers and records them in one transaction, but
  // markers and records are listed apart, and a task seen neither running nor recorded was
  // launched a second time (bench-chaos worker-stop). ZooKeeper's reads of one session are in
  // order, so that listing shows the record if one landed; without it (ZooKeeper away) the
  // hold ends at the time kept here.
  std::map<jobcore::TaskId, std::pair<pb::RunningTask, Clock::time_point>> markersHeld_;
  // Lists stage s's record nodes now and reads the new ones into the core; false when the
  // listing could not be read.
  boost::asio::awaitable<bool> relistParts(uint32_t s);
  // Hands the core the listed markers plus the held ones, dropping holds that are over.
  void applyMarkers();
  // The task's output is recorded in the core's view.
  bool recorded(const jobcore::TaskId& id) const;
  Clock::time_point markersReadAt_{};
  // Our site's measured inbound link rates, sent with steal requests.
  std::vector<pb::LinkRate> inbound_;                // our site's record: measured rates into it
  std::optional<Clock::time_point> inboundReadAt_;     // when refreshInbound last started
  bool inboundKnown_ = false;                          // a refreshInbound has read the record
  std::optional<Clock::time_point> siteLeasesReadAt_;  // when refreshSiteLeases last started
  std::optional<std::vector<std::string>> jmNames_;
  std::set<std::string> jmSites_;          // sites with a registered JM, as last listed
  std::map<std::string, pb::JmInfo> jms_;  // the job's JMs, by site (addresses for stealing)
  // Metrics (declared in start(); the registry owns them). docs/operations.md lists them.
  struct Metrics {
    daemon::Histogram* taskSeconds = nullptr;     // by operator (stage kind) and result
    daemon::Histogram* launchSeconds = nullptr;   // RunTask call minus the task's own run time
    daemon::Histogram* queueWait = nullptr;       // ready -> launched, by operator
    daemon::Counter* launches = nullptr;
    daemon::Counter* steals = nullptr;            // by result
    daemon::Counter* tasksGiven = nullptr;        // to thieves
    daemon::Counter* grantChanges = nullptr;      // by direction: granted / revoked
    daemon::Counter* failovers = nullptr;         // this JM took over as primary
    daemon::Histogram* takeoverSeconds = nullptr;  // takeover decided -> primary (epoch bumped)
    daemon::Counter* heartbeatsMissed = nullptr;   // heartbeats that got no reply in time
  };
  Metrics metrics_;
  std::size_t grantedContainers_ = 0;  // as of the last grant update (for grantChanges)

  // Registration and election.
  bool registered_ = false;
  // The main loop's turns (from its start): a gap past the threshold and the JM takes itself
  // for paused (it confirms its registration before acting; giveWork gives nothing meanwhile).
  std::optional<daemon::PauseDetector> pause_;
  int32_t registeredVersion_ = -1;  // our registration's version as we last wrote it (-1: unknown)
  bool everRegistered_ = false;
  // The session expired: the released stages' taskMaps are read before the next step. The
  // primary may have given this site's tasks away meanwhile (a lost site); the re-armed
  // watches deliver that too, but not necessarily before the first step on the new session.
  bool taskMapsStale_ = false;
  // The session our registration node was last created under: a node of that session found
  // on a later one is our own, left over while ZooKeeper had no quorum to expire it.
  int64_t registeredSession_ = 0;
  std::unique_ptr<coord::LeaderElection> election_;
  std::set<std::string> heartbeatsInFlight_;  // by site: at most one call each
  bool checkingEpoch_ = false;
  int32_t epochVersion_ = -1;  // version of the epoch node we wrote: the fencing token
  std::optional<jobstate::Versioned<uint64_t>> epochNode_;  // as last watched

  bool requestInFlight_ = false;

  // The decision log (off unless decision_log_max_bytes and decision_log_file are set): the
  // file, its size so far (counting what earlier JMs of the job here wrote), and whether the
  // bound was hit (logged once, nothing more written).
  std::ofstream decisionLog_;
  uint64_t decisionLogBytes_ = 0;
  bool decisionLogFull_ = false;
};

// Loads the config and runs the JM until its job ends. The body of tellus-jm's main.
int run(const std::string& configPath);

}  // namespace tellus::jm
