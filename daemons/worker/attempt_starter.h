#pragma once
// The worker's group commit of task starts. Every task's running marker and audit node are
// written before it runs (jobstate::JobStore::startAttempt), one ZooKeeper transaction each:
// at a burst of launches that is one round trip per task, each in line behind the last. Here
// the starts of a job that arrive while its previous transaction is in flight wait for it and
// then go together in the next one: a lone start still goes at once, a burst costs a few
// transactions. Each start's result is what startAttempt would have returned for it.
// Threading: the server's executor only.

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coord/event_flag.h"
#include "daemon/server.h"
#include "jobstate/job_store.h"

namespace tellus::worker {

class AttemptStarter {
 public:
  AttemptStarter(daemon::Server& server, jobstate::JobStore& store, std::string workerId)
      : server_(server), store_(store), workerId_(std::move(workerId)) {}

  // Starts an attempt of `task` of `jobId` (JobStore::startAttempt), together with the other
  // starts of the job waiting at the time.
  boost::asio::awaitable<Result<std::string>> start(std::string jobId, jobstate::TaskId task, pb::RunningTask marker);

  // Transactions written and starts they held (the worker's metrics).
  struct Counts {
    uint64_t transactions = 0;
    uint64_t starts = 0;
  };
  const Counts& counts() const { return counts_; }

 private:
  struct Pending {
    explicit Pending(boost::asio::any_io_executor executor) : done(std::move(executor)) {}
    jobstate::JobStore::AttemptStart start;
    std::optional<Result<std::string>> result;
    coord::EventFlag done;
  };
  struct Queue {
    std::vector<std::shared_ptr<Pending>> waiting;
  };
  // Writes the job's waiting starts, kMaxStartsPerMulti at a time, until none waits.
  boost::asio::awaitable<void> write(std::string jobId);

  daemon::Server& server_;
  jobstate::JobStore& store_;
  const std::string workerId_;
  std::map<std::string, Queue> queues_;  // by job: present while its write runs
  Counts counts_;
};

}  // namespace tellus::worker
