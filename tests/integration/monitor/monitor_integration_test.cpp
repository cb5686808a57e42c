// common/monitor against the real /proc: busy, sleeping and memory-hungry children, a busy
// grandchild in its own session, short-lived descendants that are only visible through
// cutime, a vanished root, and the cost of one sampling round with ten container trees.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness/eventually.h"
#include "monitor/container_monitor.h"
#include "monitor/proc_parse.h"
#include "monitor/process_table.h"
#include "monitor/process_tree.h"
#include "proc/subprocess.h"

using namespace std::chrono_literals;
using tellus::harness::eventually;
using tellus::monitor::ContainerMonitor;
using tellus::monitor::ContainerUsage;
using tellus::monitor::ProcessTreeSampler;
using tellus::monitor::SystemConstants;
using tellus::proc::SpawnOptions;
using tellus::proc::Subprocess;

namespace {

using Clock = std::chrono::steady_clock;

SystemConstants constants() {
  auto queried = SystemConstants::query();
  REQUIRE(queried.isOk());
  return *queried;
}

// Every child gets its own group (so the Subprocess destructor kills its grandchildren too)
// and dies with the test.
Subprocess spawnShell(const std::string& script) {
  auto child = Subprocess::spawn(
      SpawnOptions{.argv = {"/bin/sh", "-c", script}, .newProcessGroup = true, .dieWithParent = true});
  REQUIRE(child.isOk());
  return std::move(*child);
}

// A busy loop that ends by itself once its parent is gone (kill -0 is a dash builtin, so
// the loop never forks): nothing keeps burning CPU if the test dies.
const std::string kBusyLoopWhileParentLives = "while kill -0 $PPID 2>/dev/null; do :; done";

ContainerUsage only(const tellus::Result<std::vector<ContainerUsage>>& usages) {
  REQUIRE(usages.isOk());
  REQUIRE(usages->size() == 1);
  return usages->front();
}

// CPU seconds a process has used, from its POSIX CPU clock: a source independent of
// /proc/<pid>/stat (the scheduler's exact runtime, not ticks).
double processCpuSeconds(pid_t pid) {
  clockid_t clock;
  REQUIRE(::clock_getcpuclockid(pid, &clock) == 0);
  timespec ts{};
  REQUIRE(::clock_gettime(clock, &ts) == 0);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// CPU use is a rate: measuring it needs wall time to pass. This is the measurement window,
// not a wait for some condition to become true.
void letTimePass(Clock::time_point until) { std::this_thread::sleep_until(until); }

}  // namespace

TEST_CASE("a busy child shows more than half a core; the figure matches its CPU clock", "[integration][monitor]") {
  Subprocess busy = spawnShell(kBusyLoopWhileParentLives);
  ContainerMonitor monitor(constants());
  REQUIRE(monitor.track("busy", busy.pid()).isOk());
  auto first = only(monitor.sampleAll(Clock::now()));
  CHECK(first.rootAlive);
  CHECK_FALSE(first.cpuMeasured);
  CHECK(first.cpuCores == 0.0);

  // Each poll measures the window since the previous one (>= 250 ms so that 10 ms ticks do
  // not dominate). The machine is shared, so the loop may get less than a core for a while.
  double lastCores = 0.0;
  bool busyEnough = eventually(
      [&] {
        lastCores = only(monitor.sampleAll(Clock::now())).cpuCores;
        return lastCores > 0.5;
      },
      30s, 250ms);
  INFO("last measured cpuCores " << lastCores);
  CHECK(busyEnough);

  // Agreement with the kernel's exact runtime of the same process over a 1 s window.
  double cpuBefore = processCpuSeconds(busy.pid());
  auto windowStart = Clock::now();
  (void)only(monitor.sampleAll(windowStart));
  letTimePass(windowStart + 1s);
  auto windowEnd = Clock::now();
  auto usage = only(monitor.sampleAll(windowEnd));
  double cpuAfter = processCpuSeconds(busy.pid());
  double clockCores = (cpuAfter - cpuBefore) / std::chrono::duration<double>(windowEnd - windowStart).count();
  INFO("monitor " << usage.cpuCores << " cores, CPU clock " << clockCores << " cores");
  CHECK(usage.cpuMeasured);
  CHECK(usage.processes == 1);
  CHECK(std::abs(usage.cpuCores - clockCores) < 0.1);
}

TEST_CASE("a sleeping child shows almost no CPU", "[integration][monitor]") {
  Subprocess sleeper = spawnShell("exec sleep infinity");  // until the test kills it
  ContainerMonitor monitor(constants());
  REQUIRE(monitor.track("sleeper", sleeper.pid()).isOk());
  auto start = Clock::now();
  (void)only(monitor.sampleAll(start));
  letTimePass(start + 1s);
  auto usage = only(monitor.sampleAll(Clock::now()));
  CHECK(usage.rootAlive);
  CHECK(usage.cpuMeasured);
  CHECK(usage.cpuCores < 0.2);
  CHECK(usage.processes == 1);
  CHECK(usage.rssBytes > 0);
}

TEST_CASE("a child's 50 MB allocation shows in its RSS", "[integration][monitor]") {
  constexpr std::uint64_t kAllocated = 50ull * 1024 * 1024;
  // b'x' * n writes every byte, so the pages are resident (a zero-filled bytearray may not be).
  // It then holds them until the test kills it (signal.pause), however long sampling takes.
  Subprocess hungry = spawnShell("exec /usr/bin/env python3 -c \"a = b'x' * (50 * 1024 * 1024); "
                                 "import signal; signal.pause()\"");
  ContainerMonitor monitor(constants());
  REQUIRE(monitor.track("hungry", hungry.pid()).isOk());
  ContainerUsage usage;
  bool grown = eventually(
      [&] {
        usage = only(monitor.sampleAll(Clock::now()));
        return usage.rssBytes >= kAllocated;
      },
      30s, 50ms);
  INFO("rssBytes " << usage.rssBytes);
  REQUIRE(grown);
  // The interpreter itself adds some tens of MB, not hundreds.
  CHECK(usage.rssBytes < kAllocated + 100ull * 1024 * 1024);

  // The alternative source, VmRSS in /proc/<pid>/status, agrees within 1 MB.
  auto vmRssKb = tellus::monitor::parseStatusVmRssKb(readFile("/proc/" + std::to_string(hungry.pid()) + "/status"));
  REQUIRE(vmRssKb.isOk());
  auto statusBytes = static_cast<double>(*vmRssKb) * 1024.0;
  CHECK(std::abs(statusBytes - static_cast<double>(usage.rssBytes)) < 1024.0 * 1024.0);
}

TEST_CASE("a busy grandchild in its own session counts for the root", "[integration][monitor]") {
  // The root shell waits; its child leaves the process group and session (setsid without
  // fork, as the background job is not a group leader) and spins.
  Subprocess root = spawnShell("setsid /bin/sh -c '" + kBusyLoopWhileParentLives + "' & wait");
  ContainerMonitor monitor(constants());
  REQUIRE(monitor.track("tree", root.pid()).isOk());
  (void)only(monitor.sampleAll(Clock::now()));

  ContainerUsage usage;
  bool busyEnough = eventually(
      [&] {
        usage = only(monitor.sampleAll(Clock::now()));
        return usage.processes == 2 && usage.cpuCores > 0.5;
      },
      30s, 250ms);
  INFO("processes " << usage.processes << ", cpuCores " << usage.cpuCores);
  CHECK(busyEnough);

  // It really is in another session and group, and the root itself is idle.
  auto table = tellus::monitor::readProcessTable();
  REQUIRE(table.isOk());
  const auto& children = table->childrenOf(root.pid());
  REQUIRE(children.size() == 1);
  const auto* grandchild = table->find(children.front());
  REQUIRE(grandchild != nullptr);
  CHECK(grandchild->pgrp != root.pid());
  const auto* rootStat = table->find(root.pid());
  REQUIRE(rootStat != nullptr);
  CHECK(rootStat->ownCpuTicks() < grandchild->ownCpuTicks());
}

TEST_CASE("CPU of descendants that lived and were reaped between samples is kept", "[integration][monitor]") {
  // Ten short CPU-bound children, each waited for by the root, then a long sleep. Sampled
  // only before and after, none of the children is ever seen alive.
  Subprocess root = spawnShell(
      "for n in 1 2 3 4 5 6 7 8 9 10; do /bin/sh -c 'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done'; done; "
      "exec sleep 60");
  ProcessTreeSampler sampler(root.pid(), constants());
  auto first = sampler.sample(Clock::now());
  REQUIRE(first.isOk());

  // The root execs sleep once every child has been reaped.
  bool done = eventually(
      [&] {
        auto stat = tellus::monitor::parsePidStat(readFile("/proc/" + std::to_string(root.pid()) + "/stat"));
        return stat.isOk() && stat->comm == "sleep";
      },
      60s, 20ms);
  REQUIRE(done);
  auto last = sampler.sample(Clock::now());
  REQUIRE(last.isOk());
  auto rootStat = tellus::monitor::parsePidStat(readFile("/proc/" + std::to_string(root.pid()) + "/stat"));
  REQUIRE(rootStat.isOk());
  std::uint64_t reaped = rootStat->reapedChildrenCpuTicks();
  INFO("reaped children used " << reaped << " ticks; monitor counted " << last->cpuTicksSinceFirstSample);
  REQUIRE(reaped >= 10);  // the loops burned at least 0.1 s: the check below is meaningful
  // At most what was already used when the first sample was taken is missing.
  CHECK(last->cpuTicksSinceFirstSample >= reaped * 8 / 10);
  CHECK(last->cpuTicksSinceFirstSample <= reaped + rootStat->ownCpuTicks());
}

TEST_CASE("a root that exits is reported without error", "[integration][monitor]") {
  Subprocess doomed = spawnShell("exec sleep 60");
  pid_t pid = doomed.pid();
  ContainerMonitor monitor(constants());
  REQUIRE(monitor.track("doomed", pid).isOk());
  CHECK(only(monitor.sampleAll(Clock::now())).rootAlive);
  (void)doomed.terminate(1s);  // reaped: the pid is gone from /proc
  auto usage = only(monitor.sampleAll(Clock::now()));
  CHECK_FALSE(usage.rootAlive);
  CHECK(usage.processes == 0);
  CHECK(usage.rssBytes == 0);
  CHECK(usage.cpuCores == 0.0);
  CHECK(monitor.untrack("doomed").isOk());

  // A pid that is not running at all from the start.
  REQUIRE(monitor.track("never", pid).isOk());
  auto never = only(monitor.sampleAll(Clock::now()));
  CHECK_FALSE(never.rootAlive);
  CHECK(never.processes == 0);
}

TEST_CASE("one sampling round with ten container trees is cheap", "[integration][monitor]") {
  constexpr int kContainers = 10;
  constexpr int kRounds = 50;
  std::vector<Subprocess> executors;
  ContainerMonitor monitor(constants());
  for (int i = 0; i < kContainers; ++i) {
    // An executor with two children, like one running two exec tasks.
    executors.push_back(spawnShell("sleep 60 & sleep 60 & wait"));
    REQUIRE(monitor.track("container-" + std::to_string(i), executors.back().pid()).isOk());
  }
  bool allStarted = eventually(
      [&] {
        auto usages = monitor.sampleAll(Clock::now());
        REQUIRE(usages.isOk());
        return std::all_of(usages->begin(), usages->end(), [](const auto& u) { return u.processes == 3; });
      },
      10s);
  REQUIRE(allStarted);

  std::vector<double> roundMs;
  for (int round = 0; round < kRounds; ++round) {
    auto start = Clock::now();
    auto usages = monitor.sampleAll(start);
    auto end = Clock::now();
    REQUIRE(usages.isOk());
    REQUIRE(usages->size() == kContainers);
    roundMs.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  std::sort(roundMs.begin(), roundMs.end());
  double mean = 0;
  for (double ms : roundMs) mean += ms / kRounds;
  auto table = tellus::monitor::readProcessTable();
  REQUIRE(table.isOk());
  WARN("sampleAll with " << kContainers << " trees, " << table->size() << " processes on the host: mean "
                         << mean << " ms, median " << roundMs[kRounds / 2] << " ms, max " << roundMs.back()
                         << " ms over " << kRounds << " rounds");
  // A once-a-second call on an event loop must stay far below the period.
  CHECK(roundMs[kRounds / 2] < 50.0);
}
