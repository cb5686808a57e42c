#pragma once
// Telling that this process was not running for a while (SIGSTOP, a frozen VM, starvation).
// Such a process cannot learn it from its ZooKeeper client, which reports the session
// connected until its next exchange with the server, however long ago the session expired.
// A loop that runs every few ticks calls tick() each turn; a gap between two turns longer
// than the threshold means the process may have been stopped for that long. A request
// handler that runs right after a resume, before the loop's next turn, asks overdue().
// Pure: the caller passes the time.

#include <chrono>
#include <optional>

namespace tellus::daemon {

class PauseDetector {
 public:
  using Clock = std::chrono::steady_clock;

  // The threshold should be well under the ZooKeeper session timeout (half of it, say) and
  // well over the loop's own period.
  PauseDetector(std::chrono::milliseconds threshold, Clock::time_point now) : threshold_(threshold), last_(now) {}

  // A turn of the loop at `now`: the gap since the previous turn when it exceeds the
  // threshold (the process may have been paused that long), otherwise nullopt.
  std::optional<Clock::duration> tick(Clock::time_point now) {
    const auto gap = now - last_;
    last_ = now;
    if (gap > threshold_) return gap;
    return std::nullopt;
  }

  // Whether the loop's turn is overdue at `now`: the process may have just been resumed and
  // the loop has not seen it yet.
  bool overdue(Clock::time_point now) const { return now - last_ > threshold_; }

  std::chrono::milliseconds threshold() const { return threshold_; }

 private:
  std::chrono::milliseconds threshold_;
  Clock::time_point last_;
};

}  // namespace tellus::daemon
