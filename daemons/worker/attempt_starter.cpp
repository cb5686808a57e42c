#include "worker/attempt_starter.h"

#include <algorithm>
#include <iterator>

namespace tellus::worker {

using boost::asio::awaitable;

awaitable<Result<std::string>> AttemptStarter::start(std::string jobId, jobstate::TaskId task, pb::RunningTask marker) {
  auto pending = std::make_shared<Pending>(co_await boost::asio::this_coro::executor);
  pending->start = jobstate::JobStore::AttemptStart{task, std::move(marker)};
  auto [queue, idle] = queues_.try_emplace(jobId);
  queue->second.waiting.push_back(pending);
  // The first start of a quiet job writes at once (the write runs on the next turn of the
  // loop, so the starts that arrived with it go too); later ones join the next write.
  if (idle) server_.spawn(write(std::move(jobId)), "starting tasks");
  co_await pending->done.wait();
  co_return std::move(*pending->result);
}

awaitable<void> AttemptStarter::write(std::string jobId) {
  for (;;) {
    auto queue = queues_.find(jobId);
    if (queue->second.waiting.empty()) {
      queues_.erase(queue);
      co_return;
    }
    auto& waiting = queue->second.waiting;
    const size_t n = std::min(waiting.size(), jobstate::JobStore::kMaxStartsPerMulti);
    std::vector<std::shared_ptr<Pending>> batch(waiting.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(n));
    waiting.erase(waiting.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<jobstate::JobStore::AttemptStart> starts;
    for (const auto& p : batch) starts.push_back(p->start);
    auto results = co_await store_.startAttempts(jobId, std::move(starts), workerId_);
    ++counts_.transactions;
    counts_.starts += n;
    for (size_t i = 0; i < n; ++i) {
      batch[i]->result = results ? std::move((*results)[i]) : Result<std::string>(results.error());
      batch[i]->done.set();
    }
  }
}

}  // namespace tellus::worker
