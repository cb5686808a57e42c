#pragma once
// One snapshot of every process on the host, read from /proc in a single pass. The resource
// monitor reads it once per sampling round and then walks each container's process tree in
// memory, so the cost of a round grows with the number of processes on the host, not with
// processes × containers.

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <unordered_map>
#include <vector>

#include "monitor/proc_parse.h"
#include "util/result.h"

namespace tellus::monitor {

// Units of /proc numbers on this host.
struct SystemConstants {
  long ticksPerSecond = 100;  // sysconf(_SC_CLK_TCK)
  long pageSizeBytes = 4096;  // sysconf(_SC_PAGESIZE)

  // Queries sysconf. kInternal if either value is unavailable (never on Linux).
  static Result<SystemConstants> query();
};

class ProcessTable {
 public:
  ProcessTable() = default;
  // A table over the given processes (later duplicates of a pid replace earlier ones).
  // Used by readProcessTable and by unit tests that build synthetic hosts.
  static ProcessTable fromStats(std::vector<PidStat> stats);

  // nullptr when `pid` was not running at snapshot time.
  const PidStat* find(pid_t pid) const;
  // The pids whose ppid is `pid` (empty if none), in no particular order.
  const std::vector<pid_t>& childrenOf(pid_t pid) const;
  std::size_t size() const { return byPid_.size(); }
  const std::unordered_map<pid_t, PidStat>& all() const { return byPid_; }

  // /proc/<pid>/stat files that existed but could not be parsed during the scan (skipped).
  std::size_t malformedEntries() const { return malformedEntries_; }
  void setMalformedEntries(std::size_t count) { malformedEntries_ = count; }

 private:
  std::unordered_map<pid_t, PidStat> byPid_;
  std::unordered_map<pid_t, std::vector<pid_t>> childrenByPid_;
  std::size_t malformedEntries_ = 0;
};

// Reads /proc/<pid>/stat for every numeric entry under `procRoot`. Processes that exit during
// the scan are skipped silently (they are simply absent from the snapshot); entries whose
// content does not parse are skipped and counted in malformedEntries(). kUnavailable when
// `procRoot` cannot be listed. Reads only small in-memory files: it never waits on a process.
Result<ProcessTable> readProcessTable(const std::filesystem::path& procRoot = "/proc");

// `root` and all its descendants (by ppid) in `table`, root first. Pure.
std::vector<pid_t> processTree(const ProcessTable& table, pid_t root);

// Sends `sig` to `root` and every descendant, all collected before the first signal so that
// none escapes by being reparented. Used where a process group cannot be: a task's command
// stays in its worker's group (so a VM kill reaches it) yet must die with its task.
void signalProcessTree(pid_t root, int sig);

}  // namespace tellus::monitor
