#pragma once
// Live progress of a job for `tellus submit --wait` and `tellus status --watch` on a terminal:
// one bar per stage with its per-site counts, throughput and ETA, redrawn in place with ANSI
// cursor movement. Pure: statuses and times (seconds on the caller's clock) come in, text goes
// out; the CLI polls the master's status summary and writes the frames.

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tellus.pb.h"

namespace tellus::cli {

// Tasks finished per second, over a sliding window of samples of a cumulative count.
class Throughput {
 public:
  explicit Throughput(double windowSeconds = 30.0) : window_(windowSeconds) {}
  // The count at `nowSeconds` (non-decreasing times). The count may drop (lost outputs are
  // recomputed); the rate is then taken as 0 until it grows again.
  void add(double nowSeconds, uint64_t done);
  // nullopt until two samples span some time.
  std::optional<double> perSecond() const;
  // Seconds until `remaining` more are done at the current rate: 0 when none remain, nullopt
  // when the rate is unknown or zero.
  std::optional<double> etaSeconds(uint64_t remaining) const;

 private:
  double window_;
  std::deque<std::pair<double, uint64_t>> samples_;  // the first is the newest at or before the window's start
};

// The throughput of each stage and of the whole job, fed with every status polled.
class JobProgress {
 public:
  explicit JobProgress(double windowSeconds = 30.0) : window_(windowSeconds), total_(windowSeconds) {}
  void add(double nowSeconds, const pb::JobStatusResponse& status);
  // The frame for `status` (the last one added) at `nowSeconds` since the watch started: a
  // header line (job, state, elapsed time, the job's ETA) and one line per stage:
  //   map     [#########-----------]  9/20  45%  1.5/s  ETA 7s   us-east 5/10  eu-west 4/10
  // No line is longer than `width` columns (a wrapped line would break the redraw).
  std::vector<std::string> render(const pb::JobStatusResponse& status, double nowSeconds, int width) const;

 private:
  double window_;
  std::vector<Throughput> stages_;
  Throughput total_;
};

// `width` columns of '#' (done) and '-' between brackets; an empty bar for total 0.
std::string progressBar(uint64_t done, uint64_t total, int width);
// "42s", "3m05s", "2h07m".
std::string formatDuration(double seconds);
// What replaces the `previousLines` lines drawn last with `lines` on an ANSI terminal: the
// cursor goes up over the old frame, and every line is cleared before it is written.
std::string redrawFrame(const std::vector<std::string>& lines, size_t previousLines);

}  // namespace tellus::cli
