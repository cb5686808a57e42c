#pragma once
// The worker's output batches: finished executions of a (job, stage) are recorded in
// ZooKeeper together, as one batch node written in one transaction that also folds their
// audit nodes and removes their running markers (jobstate::JobStore::recordBatch). Until the
// batch is written a task stays marked running, so no JM re-runs it or takes it for lost; if
// this worker dies first its outputs die with it, and the tasks run again like any lost output.
//
// A (job, stage) is written at most once per `linger`: an execution that finishes after a
// quiet `linger` is written at once (slow tasks' outputs are not held back), the ones that
// finish within `linger` of the last write wait for the next one (many fast tasks go in one
// batch). A batch is also written at once when it holds `maxTasks` executions, or when nothing
// else of its stage runs on this worker (the stage's last outputs here) and the stage stayed
// idle here for kIdleConfirm: between two launches the stage is idle here too, but only for the
// JM's round trip. When the execution that leaves the stage idle here is of the stage's
// last wave at its JM (RunTaskRequest.stage_tail), the batch is written at once: no more of the
// stage is coming to share the write, and the stage's end waits for it. One flush per
// (job, stage) at a time, each a coroutine spawned on the server (counted in its stop).
// Threading: the server's executor only.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "coord/event_flag.h"
#include "daemon/server.h"
#include "jobstate/job_store.h"

namespace tellus::worker {

struct OutputBatchOptions {
  uint32_t maxTasks = 200;
  std::chrono::milliseconds linger{1000};
};

class OutputBatcher {
 public:
  // `stageRuns`: whether more outputs of (job, stage) are on their way here now (a task of it
  // runs on this worker, or an output's copy is being made).
  using StageRunsFn = std::function<bool(const std::string& jobId, uint32_t stage)>;
  OutputBatcher(daemon::Server& server, jobstate::JobStore& store, OutputBatchOptions options, StageRunsFn stageRuns)
      : server_(server), store_(store), options_(options), stageRuns_(std::move(stageRuns)) {}

  // When a queued execution is written (see the top).
  enum class Due {
    kLinger,     // with the next write of its stage, at most once per linger
    kStageIdle,  // nothing else of the stage runs here now: once that lasts kIdleConfirm
    kNow,        // and of the stage's last wave at its JM: at once
  };
  // Queues a finished execution of `stage` of `jobId` (its location names the execution).
  // `markerSession`: the ZooKeeper session that wrote the task's running marker.
  void add(const std::string& jobId, uint32_t stage, jobstate::BatchItem item, int64_t markerSession, Due due);
  // Executions queued and not written yet (for the log and tests).
  size_t pending() const;

  // The idle rule (see the top), for a batch neither full nor holding a Due::kNow item once
  // the linger wait ended: write it now, wait (at most `wait`; a due item ends that early), or
  // leave it to the next finish of the stage here, which runs again. `sinceWrite`: since the
  // stage's last write here; `idleFor`: since its last execution that left it idle here.
  struct IdleWrite {
    enum Action { kWrite, kWait, kNextFinish } action;
    std::chrono::milliseconds wait{0};
  };
  static IdleWrite decideIdleWrite(std::chrono::steady_clock::duration sinceWrite,
                                   std::chrono::steady_clock::duration idleFor, bool stageRuns,
                                   std::chrono::milliseconds linger);
  // How long a stage idle here stays so before its end here is taken as real: longer than a
  // JM's round trip between two launches (a few ms; tens on a loaded host).
  static constexpr std::chrono::milliseconds kIdleConfirm{50};

 private:
  using Key = std::pair<std::string, uint32_t>;
  struct Queue {
    std::vector<jobstate::BatchItem> items;
    std::vector<int64_t> sessions;  // by item: the session of its marker
    std::unique_ptr<coord::EventFlag> due;  // set: write now
    bool now = false;                       // an item is Due::kNow: not even kIdleConfirm
    std::chrono::steady_clock::time_point idleSince{};  // the last item that left the stage idle here
    bool flushing = false;
  };
  boost::asio::awaitable<void> flush(Key key);

  daemon::Server& server_;
  jobstate::JobStore& store_;
  OutputBatchOptions options_;
  StageRunsFn stageRuns_;
  std::map<Key, Queue> queues_;
  // The record nodes of the stages this worker wrote to lately (so each write reads only new
  // ones), least recently used first out beyond kMaxKnownStages.
  static constexpr size_t kMaxKnownStages = 64;
  struct Known {
    uint64_t lastUse = 0;
    jobstate::StageRecords records;
    std::chrono::steady_clock::time_point lastWrite{};
  };
  std::map<Key, Known> known_;
  uint64_t uses_ = 0;
};

}  // namespace tellus::worker
