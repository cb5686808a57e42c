#pragma once
// tellus-master: one per site. Publishes the site in ZooKeeper, tracks its workers by
// heartbeat, grants containers to the site's sub-jobs with the fair scheduler against their
// Af desires, accepts jobs (validates, allocates the id, writes the job's state), starts the
// pJM here and asks the other involved sites' masters for sJMs, and answers status, result and
// put calls for any job (job state is in ZooKeeper).

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "coord/coordinator.h"
#include "coord/event_flag.h"
#include "daemon/daemon.h"
#include "daemon/server.h"
#include "jobstate/job_store.h"
#include "master/lease_book.h"
#include "master/status_page.h"
#include "net/http_server.h"
#include "net/methods.h"
#include "sched/fair_share.h"
#include "sched/job_order.h"
#include "tellus.pb.h"

namespace tellus::master {

class Master {
 public:
  Master(daemon::Runtime& runtime, config::MasterConfig config);
  ~Master();

  Status start();
  void stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct WorkerRecord {
    std::string id;
    std::string address;
    uint32_t containers = 0;
    Clock::time_point lastHeartbeat;
    bool alive = true;
    uint32_t jms = 0;  // JMs launched here (to spread them)
    std::map<std::string, double> inboundMbps;  // measured by the worker, by source site
  };
  struct SubJob {
    std::string jobId;
    std::string jmAddress;
    int desire = 0;
    uint32_t remainingTasks = 0;  // as its JM last reported (the site's published queue)
    bool allOrNone = false;       // its spec's atomic_containers: owed containers in one piece
    Clock::time_point lastUpdate;
  };
  // A container slot is identified by (worker, slot); its holder is a job id or "".
  using SlotKey = std::pair<std::string, uint32_t>;

  boost::asio::awaitable<void> publishLoop();
  boost::asio::awaitable<void> scheduleLoop();
  // Compacts the jobs submitted here job_state_retention_ms after they ended
  // (jobstate::JobStore::compactJob): a ZooKeeper holds running jobs, not history.
  boost::asio::awaitable<void> compactionLoop();
  // Puts that never committed (their master died): their workers drop their files, then
  // their pending records go (issue 10: no orphan files).
  boost::asio::awaitable<void> orphanPutLoop();
  boost::asio::awaitable<void> dropOrphanPut(std::string uploadId);
  // Has a live worker of this site delete every file of the put `abort` names.
  boost::asio::awaitable<Status> dropPutFiles(std::string workerId, pb::WriteDatasetRequest abort);
  boost::asio::awaitable<Status> publishSite();
  pb::SiteInfo siteInfo() const;
  void loadConfiguredDatasets();
  boost::asio::awaitable<Status> recordConfiguredDatasets();
  boost::asio::awaitable<void> loadPutDatasets();
  // Fair share of the free containers against the sub-jobs' desires; grant changes are pushed
  // to the JMs as events (their periodic JmUpdate is the fallback).
  void allocate();

  // Job order (docs/design.md, "Job order"): this site's queue, published every
  // queue_publish_ms in /sites/<site>/queue, and — when job_order is not `fair` — the other
  // sites' queues, watched, from which allocate() ranks the sub-jobs here.
  boost::asio::awaitable<void> queueLoop();
  boost::asio::awaitable<Status> publishQueue();
  std::vector<sched::PublishedQueue::Entry> localQueue() const;
  Status watchSiteQueues();
  void onSites(const std::vector<std::string>& sites);
  // Logs (once per change) and counts the sites whose queue turned stale or fresh again.
  void noteStaleQueues();
  // The order in which `shares` (this site's sub-jobs) get free containers: indices into shares.
  std::vector<std::size_t> jobOrderOf(const std::vector<sched::SubJobShare>& shares) const;
  boost::asio::awaitable<void> pushGrants(std::string jobId, std::string jmAddress);
  // Awan leases (docs/design.md, "Leases"): every held container's lease overdue past the
  // grace is extended or taken back (config lease_expiry), one schedule round at a time.
  void expireLeases(Clock::time_point now);
  // A container taken back: its JM is told (so the task's end is no failure of the task), then
  // the worker kills the job's executors of that container.
  boost::asio::awaitable<void> takeBackLease(std::string jobId, SlotKey key);
  // The held containers as (worker, slot) keys, sorted.
  std::vector<SlotKey> heldSlots() const;
  std::vector<pb::Container> grantsOf(const std::string& jobId) const;
  Result<std::string> pickWorkerForJm();
  // Whether `caller` is the JM of `jobId` at this site: the worker this master launched it on,
  // or (one launched before this master restarted) the worker its registration names.
  boost::asio::awaitable<Status> checkJobsJm(std::string jobId, std::optional<net::PeerIdentity> caller);
  // Starts a replacement JM for each job whose JM ran on `workerId` (died with it).
  void replaceJmsOf(const std::string& workerId);
  // `crashed`: the JM process exited non-zero (counted against max_jm_crashes), rather than
  // being lost with its VM.
  // `reason`: what the worker reported (exit status and the JM's own line).
  boost::asio::awaitable<void> replaceJm(std::string jobId, bool crashed, std::string reason);

  // Every live worker of the site kills the job's JM and executors (by job id); what they
  // killed, and the workers not reached.
  boost::asio::awaitable<pb::KillResponse> stopJobTasks(std::string jobId);
  // The same for a job seen ending (spawned: nobody waits for the counts).
  boost::asio::awaitable<void> stopEndedJob(std::string jobId);

  // RPC handlers
  boost::asio::awaitable<Result<pb::SubmitResponse>> submit(pb::SubmitRequest req, net::CallContext ctx);
  boost::asio::awaitable<Result<pb::StartJmResponse>> startJm(pb::StartJmRequest req, net::CallContext ctx);
  boost::asio::awaitable<Result<pb::JobStatusResponse>> status(pb::JobRequest req, net::CallContext ctx);
  // The Status RPC's answer for a job whose status node decoded as `jobStatus` (status() reads
  // and checks it; the web page's job list has it already).
  boost::asio::awaitable<Result<pb::JobStatusResponse>> describeJob(pb::JobRequest req, pb::JobStatus jobStatus);
  // Keeps what a status call read of a stage's batches for the next call (statusRecords_),
  // dropping others' to stay within kMaxStatusRecordEntries.
  void keepStatusRecords(std::pair<std::string, uint32_t> key, jobstate::StageRecords records);
  boost::asio::awaitable<Result<pb::ListJobsResponse>> list(pb::ListJobsRequest req, net::CallContext ctx);
  boost::asio::awaitable<Result<pb::ListSitesResponse>> sites(pb::ListSitesRequest req, net::CallContext ctx);
  boost::asio::awaitable<Result<pb::KillResponse>> kill(pb::JobRequest req, net::CallContext ctx);
  boost::asio::awaitable<Result<pb::ResultResponse>> result(pb::ResultRequest req, net::CallContext ctx);
  struct ResultMeta;
  // Checks that `caller` may read the job's result (its owner's, kept with the cached entry).
  boost::asio::awaitable<Result<ResultMeta*>> resultMeta(const std::string& jobId,
                                                         const std::optional<net::PeerIdentity>& caller);
  boost::asio::awaitable<Result<pb::PutResponse>> put(pb::PutRequest req, net::CallContext ctx);
  // A put whose partitions are all stored becomes visible in one write of the dataset record.
  boost::asio::awaitable<Status> publishUpload(std::string uploadId);
  // A failed or idle put: its workers drop every file of it, and it is forgotten.
  boost::asio::awaitable<void> abortUpload(std::string uploadId, std::string why);
  // The error for a chunk of a put that is not in progress: with its cause when it was dropped
  // recently.
  Error droppedPut(const std::string& uploadId) const;
  // `tellus logs`: resolves a task's execution from the job's state (its audit node names the
  // worker; the worker's registration names its site) and reads the log through the master of
  // that site (one hop), or a JM's log through the master of the JM's site.
  boost::asio::awaitable<Result<pb::LogsResponse>> logs(pb::LogsRequest req, net::CallContext ctx);
  // The log on a worker of this site: execution `req.attempt_id` on `req.worker_id`, or the
  // job's JM log (the registered JM's worker, else the live worker whose log changed last).
  boost::asio::awaitable<Result<pb::LogsResponse>> localLog(pb::LogsRequest req, net::CallContext ctx);
  // The site where a worker is registered; nullopt when it is registered nowhere (its VM is gone).
  boost::asio::awaitable<Result<std::optional<std::string>>> siteOfWorker(const std::string& workerId);
  // The RPC address of a live site's master.
  boost::asio::awaitable<Result<net::Endpoint>> siteMaster(const std::string& site);
  Result<pb::RegisterWorkerResponse> registerWorker(const pb::RegisterWorkerRequest& req);
  Result<pb::HeartbeatResponse> heartbeat(const pb::WorkerHeartbeat& req);
  Result<pb::JmUpdateResponse> jmUpdate(const pb::JmUpdateRequest& req);

  boost::asio::awaitable<Result<std::vector<pb::SiteInfo>>> liveSites();
  // Each live site's published prices (ours from the config), for pricing a job's usage.
  boost::asio::awaitable<std::map<std::string, cost::Prices>> sitePrices();
  // sitePrices() read at most once per kPricesMaxAge: prices change only when a master
  // restarts, and `tellus status --watch` asks twice a second.
  std::optional<std::pair<std::chrono::steady_clock::time_point, std::map<std::string, cost::Prices>>> pricesRead_;
  // Sites without a running master (not in `live`) that hold part of `dataset`.
  boost::asio::awaitable<Result<std::vector<std::string>>> downSitesHolding(const std::string& dataset,
                                                                           const std::vector<pb::SiteInfo>& live);
  boost::asio::awaitable<Result<pb::JobStatus>> readStatus(const std::string& jobId);
  // Job owners (docs/security.md): whether the caller may `action` the job, from the owner its
  // status records (read only when the answer depends on it; a status that does not decode
  // records no owner). kPermissionDenied when not; kNotFound when there is no such job.
  boost::asio::awaitable<Status> checkOwner(const net::CallContext& ctx, const std::string& jobId,
                                            std::string_view action);

  // HTTP: the web page's files (web/, compiled in) and GET /status (status_page.h), which
  // shows jobs only with `http_jobs` (the port is plaintext and names no caller).
  void registerHttpPages();
  boost::asio::awaitable<net::HttpResponse> statusPage(net::HttpRequest request);
  // The newest `count` jobs as the page shows them, rebuilt at most once a second (each
  // costs a few ZooKeeper reads per stage): the JSON array and how many jobs exist.
  boost::asio::awaitable<std::pair<nlohmann::json, std::size_t>> pageJobs(uint32_t count);

  config::MasterConfig config_;
  // RPC, HTTP, clients, ZooKeeper; declared before everything that holds on to them.
  daemon::Server server_;
  std::optional<jobstate::JobStore> store_;  // over the coordinator: every read and write of job state
  std::vector<coord::Subscription> subscriptions_;
  // The output batches status calls have read, by (job, stage) (JobStore::outputs' `known`):
  // a status asked again and again reads only the batches that are new since the last one.
  std::map<std::pair<std::string, uint32_t>, jobstate::StageRecords> statusRecords_;

  std::map<std::string, WorkerRecord> workers_;
  std::map<SlotKey, std::string> slots_;  // every live worker's slots -> holder job ("" = free)
  std::map<std::string, SubJob> subJobs_;
  LeaseBook leases_{std::chrono::milliseconds(config_.lease_default_ms), std::chrono::milliseconds(config_.lease_max_ms),
                    std::chrono::milliseconds(config_.lease_grace_ms)};
  // Containers taken back for an expired lease whose JM has not been told yet, by job
  // (JmUpdateResponse.lease_expired; bounded by the site's containers).
  std::map<std::string, std::vector<pb::ContainerId>> leaseExpired_;
  std::map<std::string, pb::SiteDataset> datasets_;  // configured + put, by name
  // Puts in progress, by upload id: nothing of them is visible until every partition is stored.
  struct Upload {
    std::string dataset;
    bool residencyLocal = false;
    uint32_t partitions = 0;                                   // in this put
    std::map<uint32_t, std::vector<std::string>> targets;      // partition -> workers storing it
    std::map<uint32_t, pb::DatasetPartition> stored;           // complete partitions (index unset)
    Clock::time_point lastChunk;
    std::vector<std::string> workers;  // in its pending record: the only workers it may use
    // Set once the pending record is written (or the put dropped): no chunk reaches a worker
    // before.
    std::shared_ptr<coord::EventFlag> recorded;
    // A partition's chunks reach its workers in offset order, one at a time, whatever order
    // their calls resume in here (a new connection, a reply overtaking another): the offset
    // each partition's next chunk must have, and the chunks waiting for their turn.
    std::map<uint32_t, uint64_t> nextOffset;
    std::map<std::pair<uint32_t, uint64_t>, std::shared_ptr<coord::EventFlag>> turns;
  };
  std::map<std::string, Upload> uploads_;
  std::deque<std::pair<std::string, std::string>> droppedPuts_;  // upload id, why: the last few
  std::set<std::string> publishing_;  // datasets whose record is being written
  std::string publishedSite_;         // the site record as last written (skip identical rewrites)
  int64_t publishedSession_ = 0;
  // job -> worker running this site's JM: as launched here (set before the launch, so that the
  // JM's first update is known), or as its registration named when this master restarted.
  std::map<std::string, std::string> jmWorker_;
  std::map<std::string, uint32_t> jmCrashes_;    // job -> non-zero exits of its JM here
  // The status of every job holding containers or a JM here, kept by a watch (nullopt: the
  // job's status node is gone); the schedule loop frees what ended jobs hold.
  struct WatchedJob {
    coord::Subscription watch;
    bool ended = false;
    int64_t submitUnixMs = 0;  // from the status (0 until read): the job's FCFS rank
  };
  std::map<std::string, WatchedJob> watchedJobs_;
  // Jobs compactionLoop need not read again: compacted, or over and submitted at another site.
  std::set<std::string> settledJobs_;
  // Orphan puts already reported as not droppable yet (a worker of theirs is down): logged once.
  std::set<std::string> orphanPutsWarned_;
  // What `tellus result` needs of a succeeded job, read once for all the chunks that follow (a
  // finished job's outputs do not move). Bounded: the least recently read entry goes first.
  struct ResultMeta {
    uint32_t stage = 0;                                // the last stage
    uint32_t tasks = 0;                                // its outputs
    std::map<uint32_t, pb::PartitionLocation> parts;   // read on first use, by task
    std::string owner;                                 // the job's, as its status records it
    uint64_t lastUse = 0;
  };
  std::map<std::string, ResultMeta> resultMeta_;
  uint64_t resultUses_ = 0;
  uint64_t nextPut_ = 0;
  bool sitePublished_ = false;
  std::deque<FailureEvent> failures_;  // recent, for the web page (bounded: kMaxFailures)
  // Metrics (declared in start(); the registry owns them).
  daemon::Counter* containerChanges_ = nullptr;      // by direction: granted / revoked
  daemon::Counter* leaseOverdue_ = nullptr;          // leases overdue past the grace, by action
  daemon::Counter* workersLost_ = nullptr;
  daemon::Histogram* workerLossDetection_ = nullptr;  // last heartbeat -> declared lost
  daemon::Counter* jmReplacements_ = nullptr;         // by cause
  struct JobsPage {
    Clock::time_point builtAt;
    uint32_t count = 0;
    nlohmann::json jobs;
    std::size_t total = 0;
  };
  std::optional<JobsPage> jobsPage_;

  // Job order: other sites' queues by site (nullopt: no node, or one that does not decode).
  struct RemoteQueue {
    coord::Subscription watch;
    std::optional<sched::PublishedQueue> queue;
    std::string lastError;  // logged once per distinct error
  };
  std::map<std::string, RemoteQueue> remoteQueues_;
  std::set<std::string> staleQueues_;  // sites whose queue is stale now (ignored by the order)
  int64_t queueSession_ = 0;           // the session our queue node was created in
  daemon::Counter* staleQueueEvents_ = nullptr;  // a site's queue found stale, by site
};

// Loads the config and runs the master until SIGTERM. The body of tellus-master's main.
int run(const std::string& configPath);

}  // namespace tellus::master
