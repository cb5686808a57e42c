#pragma once
// Pure parsers for the /proc files the resource monitor reads (HOUTU §4.2: a worker samples
// every container's CPU and memory use; Af sizes requests from that utilization). No I/O
// here: callers hand in file contents, so every format corner is unit-tested with literals.
// Field meanings and numbering follow proc(5).

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tellus::monitor {

// The fields of /proc/<pid>/stat the monitor needs. Times are in clock ticks
// (sysconf(_SC_CLK_TCK)), rss in pages (sysconf(_SC_PAGESIZE)).
struct PidStat {
  pid_t pid = 0;
  std::string comm;  // the command name without its parentheses; may contain ' ', '(' and ')'
  char state = '?';  // R, S, D, Z, T, ...
  pid_t ppid = 0;
  pid_t pgrp = 0;
  std::uint64_t utimeTicks = 0;
  std::uint64_t stimeTicks = 0;
  // CPU of children this process has waited for (recursively: a reaped child brings its own
  // reaped children's time along). Lets the monitor keep the CPU of short-lived descendants.
  std::uint64_t cutimeTicks = 0;
  std::uint64_t cstimeTicks = 0;
  std::int64_t numThreads = 0;
  std::uint64_t startTimeTicks = 0;  // since boot; with pid, identifies a process across pid reuse
  std::int64_t rssPages = 0;

  std::uint64_t ownCpuTicks() const { return utimeTicks + stimeTicks; }
  std::uint64_t reapedChildrenCpuTicks() const { return cutimeTicks + cstimeTicks; }
};

// Parses the one line of /proc/<pid>/stat. The command name is delimited by the FIRST '('
// and the LAST ')' (a process may name itself "a) (b"), and the fields after it are
// whitespace-separated. Needs every field up to rss (field 24); later fields are ignored so
// that newer kernels adding fields still parse. kInvalidArgument naming the problem for
// truncated or malformed content.
Result<PidStat> parsePidStat(std::string_view content);

// VmRSS of /proc/<pid>/status in kB ("VmRSS:\t  1234 kB"). An alternative to PidStat::rssPages
// that needs no page size. kNotFound when there is no VmRSS line (kernel threads, zombies);
// kInvalidArgument when the line is malformed.
Result<std::uint64_t> parseStatusVmRssKb(std::string_view content);

// The aggregate "cpu " line of /proc/stat (all CPUs), in clock ticks. guest/guest_nice are
// already included in user/nice by the kernel and are therefore not summed again.
struct HostCpuTicks {
  std::uint64_t user = 0;
  std::uint64_t nice = 0;
  std::uint64_t system = 0;
  std::uint64_t idle = 0;
  std::uint64_t iowait = 0;
  std::uint64_t irq = 0;
  std::uint64_t softirq = 0;
  std::uint64_t steal = 0;

  std::uint64_t total() const { return user + nice + system + idle + iowait + irq + softirq + steal; }
  // Time spent doing work (not idle, not waiting for I/O).
  std::uint64_t busy() const { return total() - idle - iowait; }
};

// Finds the "cpu " line in the full /proc/stat content (the first line on Linux) and parses
// it. Kernels older than 2.6.11 print only the first four fields; missing later fields are 0.
Result<HostCpuTicks> parseHostCpuLine(std::string_view procStatContent);

// CPU cores used on average between two cumulative tick counts taken `wallSeconds` apart:
// 1.0 means one core busy for the whole interval. Returns 0 when the interval is not
// positive, ticksPerSecond is not positive, or the count went backwards (nothing to measure).
double cpuCoresBetween(std::uint64_t prevTicks, std::uint64_t nextTicks, double wallSeconds,
                       long ticksPerSecond);

}  // namespace tellus::monitor
