#pragma once
// CPU and memory use of one process tree: a container's executor and everything it started
// (an exec operator's `sh -c cmd` and that command's own children, possibly in their own
// process group — membership follows ppid, never pgrp).
//
// How CPU is accounted. Each member contributes T = its own CPU (utime+stime) plus the CPU of
// the children it has reaped (cutime+cstime, which the kernel accumulates recursively when a
// parent waits for a child). Between two samples the tree used
//     sum over members now of (T_now - T_before)          [T_before = 0 for new members]
//   - sum over vanished members reaped inside the tree of T_before
// because a member that exits and is waited for by a member brings its final T into its
// reaper's cutime: its whole life is then counted once, including the part since the last
// sample, and short-lived descendants that were never seen (a 50 ms `sh -c`) still count.
//
// What can still be lost or misattributed (cgroup accounting would not have these limits):
// - a member whose reaper is outside the tree (it was orphaned and reparented to init or a
//   subreaper outside the tree): the CPU of its last interval is lost;
// - a process that leaves the tree before it is first seen (a double-fork daemon whose
//   intermediate parent exits within one sampling interval) is never counted;
// - when a member and its parent both vanish within one interval we assume the parent
//   reaped it; if it had been orphaned instead, the interval undercounts (never below 0).
// Once seen, a member stays a member while it lives, even if it is reparented away (a
// daemonizing grandchild keeps counting for its container). Members are identified by
// (pid, start time) so that a reused pid is never mistaken for a member.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <unordered_map>

#include "monitor/process_table.h"
#include "util/result.h"

namespace tellus::monitor {

// Identifies one process for its whole life (a pid alone can be reused after it exits).
struct ProcessKey {
  pid_t pid = 0;
  std::uint64_t startTimeTicks = 0;
  bool operator==(const ProcessKey&) const = default;
};

struct ProcessKeyHash {
  std::size_t operator()(const ProcessKey& key) const noexcept {
    return std::hash<std::uint64_t>()((static_cast<std::uint64_t>(key.pid) << 40) ^ key.startTimeTicks);
  }
};

struct TreeSample {
  // The root process is running (a zombie root counts as running until its parent reaps it).
  // Members it left behind are still reported after it is gone.
  bool rootAlive = false;
  // False on the first sample (there is no earlier one to measure from; cpuCores is 0 then,
  // deliberately not "average since process start", which would mislead Af for an executor
  // that idled for an hour and just became busy) and when no time elapsed since the last one.
  bool cpuMeasured = false;
  // CPU seconds used since the previous sample / wall seconds elapsed: 1.0 = one core busy.
  double cpuCores = 0.0;
  // CPU ticks used by the tree since the first sample (monotonic; see the header comment).
  std::uint64_t cpuTicksSinceFirstSample = 0;
  // Sum of the members' resident set sizes (shared pages count once per process).
  std::uint64_t rssBytes = 0;
  std::size_t processes = 0;
  std::int64_t threads = 0;
};

// Pure accounting over successive ProcessTable snapshots (no I/O; unit-tested with synthetic
// tables). Feed it snapshots in time order.
class ProcessTreeAccountant {
 public:
  ProcessTreeAccountant(pid_t rootPid, SystemConstants constants);

  pid_t rootPid() const { return rootPid_; }
  TreeSample update(const ProcessTable& table, std::chrono::steady_clock::time_point now);

 private:
  struct Member {
    pid_t ppid = 0;
    std::uint64_t cpuTicks = 0;  // own + reaped children's
  };
  using Members = std::unordered_map<ProcessKey, Member, ProcessKeyHash>;

  Members collectMembers(const ProcessTable& table, bool rootAlive) const;
  std::int64_t ticksSincePrevious(const Members& current) const;

  pid_t rootPid_;
  SystemConstants constants_;
  // The root's start time, learned on the first sample that sees it; a process later found
  // under the same pid with another start time is an unrelated process that reused the pid.
  std::optional<std::uint64_t> rootStartTimeTicks_;
  // Set once the root has been seen missing: the pid may be reused from then on.
  bool rootGone_ = false;
  Members members_;  // as of the previous sample
  std::optional<std::chrono::steady_clock::time_point> previousSampleTime_;
  std::uint64_t ticksSinceFirstSample_ = 0;
};

// Samples one process tree from /proc. Each sample() scans /proc once; to sample many trees
// per round use ContainerMonitor, which shares one scan among them.
class ProcessTreeSampler {
 public:
  ProcessTreeSampler(pid_t rootPid, SystemConstants constants, std::filesystem::path procRoot = "/proc");

  pid_t rootPid() const { return accountant_.rootPid(); }
  // kUnavailable only if /proc cannot be read; a root that has exited is not an error (see
  // TreeSample::rootAlive).
  Result<TreeSample> sample(std::chrono::steady_clock::time_point now);

 private:
  ProcessTreeAccountant accountant_;
  std::filesystem::path procRoot_;
};

}  // namespace tellus::monitor
