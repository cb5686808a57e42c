#pragma once
// tellus-jm: the job manager of one job at one site (HOUTU §3). Every JM of a job reads the
// job state from ZooKeeper, asks its own master for containers (desire from Af), and runs the
// tasks its site owns in the taskMap. The primary (elected through ZooKeeper; fenced by the
// epoch node) also releases stages with their initial taskMap, finishes the job, and has
// missing JMs replaced.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "coord/zk_client.h"
#include "daemon/daemon.h"
#include "jobstate/job_view.h"
#include "net/rpc_client.h"
#include "net/rpc_server.h"
#include "sched/af.h"
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
  using TaskId = std::pair<uint32_t, uint32_t>;  // (stage, task)
  struct Slot {
    pb::Container container;
    std::map<TaskId, double> tasks;  // running here, with the share of the container each uses
    double cpu = -1;                 // last measured CPU (cores), -1 = no report yet
    double used() const;
  };

  boost::asio::awaitable<void> mainLoop();
  boost::asio::awaitable<Status> loadJob();
  boost::asio::awaitable<Status> refresh();
  boost::asio::awaitable<Status> registerSelf();
  boost::asio::awaitable<void> elect();
  boost::asio::awaitable<bool> takeOverEpoch();
  boost::asio::awaitable<void> primaryDuties();
  boost::asio::awaitable<Status> fencedWrite(std::vector<coord::ZkOp> ops);
  boost::asio::awaitable<void> ensureJms();
  // Lineage: outputs whose only copy was on a dead worker and that are still needed are
  // dropped from the job state, so their owners run the tasks again.
  boost::asio::awaitable<void> recomputeLostOutputs();
  boost::asio::awaitable<void> exchangeWithMaster();
  void launchTasks();
  void applyGrants(const pb::JmUpdateResponse& grants);
  // Estimated share of one container a task of stage s uses (measured, else a whole one).
  double taskShare(uint32_t s) const;
  boost::asio::awaitable<void> stealWork(size_t idleContainers);
  boost::asio::awaitable<Result<pb::StealResponse>> giveWork(pb::StealRequest req, net::CallContext ctx);
  Result<pb::Empty> recordUsage(const pb::ContainerUsageReport& report);
  boost::asio::awaitable<void> runTask(std::string slotKey, TaskId task);
  boost::asio::awaitable<void> failJob(std::string reason);
  void stepDown(const std::string& why);

  daemon::Runtime& runtime_;
  config::JmConfig config_;
  std::string address_;
  net::RpcServer server_;
  net::ClientPool clients_;
  std::shared_ptr<coord::ZkClient> zk_;
  std::vector<coord::Subscription> subscriptions_;

  jobstate::JobView view_;
  pb::JobStatus status_;
  int32_t statusVersion_ = -1;  // version of the status node status_ was read from
  bool loaded_ = false;
  bool registered_ = false;
  bool everRegistered_ = false;
  bool sessionLost_ = false;      // set by the session listener; handled in the loop
  std::string electionNode_;      // our n_ node, "" when not in the election
  bool primary_ = false;
  uint64_t epoch_ = 0;
  int32_t epochVersion_ = -1;     // version of the epoch node we wrote: the fencing token
  std::map<std::string, Clock::time_point> jmMissingSince_;
  std::map<std::string, Clock::time_point> jmRequestedAt_;

  std::map<std::string, Slot> slots_;  // granted containers by "worker/slot"
  std::set<TaskId> running_;
  std::map<TaskId, pb::RunningTask> markers_;           // every running marker of the job, as last read
  bool markersChanged_ = true;                           // set by the watch on the running directory
  Clock::time_point markersReadAt_{};                   // last time every marker was read
  std::map<TaskId, pb::RunningTask> runningElsewhere_;  // markers of tasks not launched by us
  std::map<uint32_t, std::set<uint32_t>> listedParts_;  // parts seen by the last listing, by stage
  std::map<TaskId, Clock::time_point> notBefore_;       // retry backoff after a lost input
  std::set<TaskId> beingStolen_;                         // reserved while a steal CAS is in flight
  std::map<uint32_t, double> stageShare_;                // measured container share per task, by stage
  bool stealing_ = false;
  Clock::time_point lastSteal_{};
  size_t stealRound_ = 0;
  std::map<TaskId, uint32_t> attempts_;
  std::map<TaskId, Clock::time_point> waitingSince_;
  sched::AfState af_;
  Clock::time_point lastAf_;
  double busySamples_ = 0, sampleCount_ = 0;  // utilization over the current Af period
  bool hadWaiting_ = false;
  uint32_t publishedDesire_ = 0, publishedGranted_ = 0;  // as last written to our JmInfo node
  uint32_t desire_ = 0;
  bool stopping_ = false;
};

// Loads the config and runs the JM until its job ends. The body of tellus-jm's main.
int run(const std::string& configPath);

}  // namespace tellus::jm
