#include "worker/output_batcher.h"

#include <algorithm>

#include "util/log.h"

namespace tellus::worker {

using boost::asio::awaitable;

void OutputBatcher::add(const std::string& jobId, uint32_t stage, jobstate::BatchItem item, int64_t markerSession,
                        Due due) {
  Key key{jobId, stage};
  auto& q = queues_[key];
  if (!q.due) q.due = std::make_unique<coord::EventFlag>(server_.runtime().io().get_executor());
  q.items.push_back(std::move(item));
  q.sessions.push_back(markerSession);
  if (due == Due::kNow) q.now = true;
  if (due != Due::kLinger) q.idleSince = std::chrono::steady_clock::now();
  if (due != Due::kLinger || q.items.size() >= options_.maxTasks) q.due->set();
  if (!q.flushing) {
    q.flushing = true;
    server_.spawn(flush(std::move(key)), "recording a batch of outputs");
  }
}

OutputBatcher::IdleWrite OutputBatcher::decideIdleWrite(std::chrono::steady_clock::duration sinceWrite,
                                                         std::chrono::steady_clock::duration idleFor, bool stageRuns,
                                                         std::chrono::milliseconds linger) {
  // Woken early because nothing else of the stage runs here: that is a moment between two
  // launches as often as the stage's end here. Short tasks went ~3 to a batch when such a
  // write went at once: ~20,000 batch nodes for 100,000 tasks, which every listing of the
  // stage and every cold `tellus status` read. A worker given one task of a stage at a time
  // (one container, or tasks finishing together) wrote every task of it alone.
  if (sinceWrite >= linger) return {IdleWrite::kWrite};
  if (stageRuns) return {IdleWrite::kNextFinish};  // launched again: not its end here
  if (idleFor >= kIdleConfirm) return {IdleWrite::kWrite};
  return {IdleWrite::kWait, std::chrono::ceil<std::chrono::milliseconds>(std::min<std::chrono::steady_clock::duration>(
                                linger - sinceWrite, kIdleConfirm - idleFor))};
}

size_t OutputBatcher::pending() const {
  size_t n = 0;
  for (const auto& [key, q] : queues_) n += q.items.size();
  return n;
}

awaitable<void> OutputBatcher::flush(Key key) {
  const auto& [jobId, stage] = key;
  std::chrono::milliseconds backoff{100};
  for (;;) {
    if (server_.stopping()) co_return;  // our markers go with our session, as in a VM loss
    {
      auto& q = queues_[key];
      if (q.items.empty()) {
        queues_.erase(key);  // nothing of the stage left: the next execution starts a new flush
        co_return;
      }
      // Once per linger: at once after a quiet one.
      std::chrono::milliseconds wait{0};
      auto known = known_.find(key);
      if (known != known_.end()) {
        const auto since = std::chrono::steady_clock::now() - known->second.lastWrite;
        if (since < options_.linger) wait = std::chrono::ceil<std::chrono::milliseconds>(options_.linger - since);
      }
      if (wait.count() > 0) (void)co_await q.due->waitFor(wait);
      known = known_.find(key);
      if (known != known_.end() && q.items.size() < options_.maxTasks && !q.now) {
        const auto now = std::chrono::steady_clock::now();
        const auto next = decideIdleWrite(now - known->second.lastWrite, now - q.idleSince,
                                          stageRuns_(jobId, stage), options_.linger);
        if (next.action == IdleWrite::kNextFinish) {
          q.due->reset();
          continue;
        }
        if (next.action == IdleWrite::kWait) {
          // A Due::kNow item or a full batch ends the wait early.
          q.due->reset();
          (void)co_await q.due->waitFor(next.wait);
          queues_[key].due->set();
          continue;  // decided afresh: stopping, launched again, a kNow item, a full batch
        }
      }
    }
    // The queue may have grown meanwhile: written up to maxTasks at a time.
    auto& q = queues_[key];
    q.due->reset();
    const bool now = std::exchange(q.now, false);
    // One batch, one marker session (recordBatch removes the markers only while it lives):
    // executions of an older session go in a batch of their own, and the rest right after.
    const size_t limit = std::min<size_t>(q.items.size(), options_.maxTasks);
    size_t n = 1;
    while (n < limit && q.sessions[n] == q.sessions.front()) ++n;
    const int64_t session = q.sessions.front();
    std::vector<jobstate::BatchItem> batch(std::make_move_iterator(q.items.begin()),
                                           std::make_move_iterator(q.items.begin() + static_cast<std::ptrdiff_t>(n)));
    std::vector<int64_t> sessions(q.sessions.begin(), q.sessions.begin() + static_cast<std::ptrdiff_t>(n));
    q.items.erase(q.items.begin(), q.items.begin() + static_cast<std::ptrdiff_t>(n));
    q.sessions.erase(q.sessions.begin(), q.sessions.begin() + static_cast<std::ptrdiff_t>(n));
    if (q.items.size() >= options_.maxTasks || (!q.sessions.empty() && q.sessions.front() != session)) q.due->set();
    if (now && !q.items.empty()) {  // what waited with a kNow item goes right after this batch
      q.now = true;
      q.due->set();
    }
    // Taken out while written (another stage's flush may evict entries meanwhile), put back after.
    jobstate::StageRecords known;
    if (auto it = known_.find(key); it != known_.end()) {
      known = std::move(it->second.records);
      known_.erase(it);
    }
    auto written = co_await store_.recordBatch(jobId, stage, batch, session, &known);
    if (known_.size() >= kMaxKnownStages) {
      known_.erase(std::min_element(known_.begin(), known_.end(), [](const auto& a, const auto& b) {
        return a.second.lastUse < b.second.lastUse;
      }));
    }
    known_[key] = Known{++uses_, std::move(known), std::chrono::steady_clock::now()};
    auto& after = queues_[key];
    if (written) {
      spdlog::debug("job {} stage {}: recorded a batch of {} executions ({} outputs)", jobId, stage, n, written->size());
      backoff = std::chrono::milliseconds(100);
      continue;
    }
    // Retried (recordBatch rode out what a connection loss allows): unless the job is gone,
    // try again later. While we hold the batch its tasks stay marked running.
    if (written.error().code == ErrorCode::kNotFound || written.error().code == ErrorCode::kInvalidArgument ||
        server_.stopping()) {
      spdlog::warn("job {} stage {}: dropping a batch of {} outputs: {}", jobId, stage, n, written.message());
      continue;
    }
    spdlog::warn("job {} stage {}: recording a batch of {} outputs: {}; again in {} ms", jobId, stage, n,
                 written.message(), backoff.count());
    after.items.insert(after.items.begin(), std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
    after.sessions.insert(after.sessions.begin(), sessions.begin(), sessions.end());
    co_await server_.sleepFor(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    after.due->set();
  }
}

}  // namespace tellus::worker
