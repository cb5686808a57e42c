// common/monitor without I/O: the /proc parsers on literal file contents, the CPU math, and
// process-tree accounting over synthetic process tables.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "monitor/container_monitor.h"
#include "monitor/proc_parse.h"
#include "monitor/process_table.h"
#include "monitor/process_tree.h"

using namespace std::chrono_literals;
using tellus::ErrorCode;
using namespace tellus::monitor;

namespace {

// A real line (cat reading its own stat), fields 1..52.
constexpr const char* kCatStat =
    "1210 (cat) R 1203 1203 28146 0 -1 4194304 98 0 0 0 7 3 11 2 20 0 1 0 382995 3133440 380 "
    "18446744073709551615 94643846299648 94643846319529 140734709525696 0 0 0 0 0 0 0 0 0 17 0 0 0 0 "
    "0 0 94643846335536 94643846337152 94644422201344 140734709533314 140734709533334 "
    "140734709533334 140734709534699 0\n";

// "<pid> (<comm>) " followed by fields 3..24 with the given values in the interesting slots.
std::string statLine(const std::string& pidAndComm, const std::string& utime = "7") {
  return pidAndComm + " S 1 1 1 0 -1 4194304 98 0 0 0 " + utime + " 3 11 2 20 0 4 0 382995 3133440 380\n";
}

const SystemConstants kConstants{100, 4096};

PidStat process(pid_t pid, pid_t ppid, std::uint64_t ownTicks, std::uint64_t reapedTicks = 0,
                std::int64_t rssPages = 0, std::uint64_t startTime = 0) {
  PidStat stat;
  stat.pid = pid;
  stat.ppid = ppid;
  stat.pgrp = pid;  // every process in its own group: the tree must follow ppid, not pgrp
  stat.comm = fmt::format("p{}", pid);
  stat.state = 'S';
  stat.utimeTicks = ownTicks;
  stat.cutimeTicks = reapedTicks;
  stat.numThreads = 1;
  stat.startTimeTicks = startTime == 0 ? static_cast<std::uint64_t>(pid) * 10 : startTime;
  stat.rssPages = rssPages;
  return stat;
}

const auto kT0 = std::chrono::steady_clock::time_point{} + 1000s;

}  // namespace

TEST_CASE("parsePidStat reads the fields of a real line", "[unit][monitor]") {
  auto stat = parsePidStat(kCatStat);
  REQUIRE(stat.isOk());
  CHECK(stat->pid == 1210);
  CHECK(stat->comm == "cat");
  CHECK(stat->state == 'R');
  CHECK(stat->ppid == 1203);
  CHECK(stat->pgrp == 1203);
  CHECK(stat->utimeTicks == 7);
  CHECK(stat->stimeTicks == 3);
  CHECK(stat->cutimeTicks == 11);
  CHECK(stat->cstimeTicks == 2);
  CHECK(stat->numThreads == 1);
  CHECK(stat->startTimeTicks == 382995);
  CHECK(stat->rssPages == 380);
  CHECK(stat->ownCpuTicks() == 10);
  CHECK(stat->reapedChildrenCpuTicks() == 13);
}

TEST_CASE("parsePidStat takes the command name up to the last ')'", "[unit][monitor]") {
  SECTION("spaces") {
    auto stat = parsePidStat(statLine("42 (Web Content)"));
    REQUIRE(stat.isOk());
    CHECK(stat->comm == "Web Content");
    CHECK(stat->utimeTicks == 7);
  }
  SECTION("nested parentheses") {
    auto stat = parsePidStat(statLine("42 (my (weird) proc)"));
    REQUIRE(stat.isOk());
    CHECK(stat->comm == "my (weird) proc");
    CHECK(stat->ppid == 1);
  }
  SECTION("a ')' followed by text that looks like fields") {
    auto stat = parsePidStat(statLine("42 (a) S 9 9 (b)", "55"));
    REQUIRE(stat.isOk());
    CHECK(stat->comm == "a) S 9 9 (b");
    CHECK(stat->ppid == 1);
    CHECK(stat->utimeTicks == 55);
  }
  SECTION("empty name") {
    auto stat = parsePidStat(statLine("42 ()"));
    REQUIRE(stat.isOk());
    CHECK(stat->comm.empty());
  }
  SECTION("no trailing newline and extra fields of a newer kernel") {
    auto stat = parsePidStat("42 (x) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 9 0 12 1 2 3 4 5 6 7 8 9");
    REQUIRE(stat.isOk());
    CHECK(stat->rssPages == 12);
  }
}

TEST_CASE("parsePidStat rejects malformed content with a clear error", "[unit][monitor]") {
  auto expectError = [](const std::string& content, const std::string& fragment) {
    auto stat = parsePidStat(content);
    REQUIRE_FALSE(stat.isOk());
    CHECK(stat.error().code == ErrorCode::kInvalidArgument);
    INFO(stat.message());
    CHECK(stat.message().find(fragment) != std::string::npos);
    CHECK(stat.message().find("/proc/[pid]/stat") != std::string::npos);
  };
  expectError("", "no '('");
  expectError("42 cat S 1 1", "no '('");
  expectError("42 (cat S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 9 0 12", "no ')'");
  expectError(")42 (cat", "no ')'");
  // Truncated right after utime: a partial read must not yield zeros.
  expectError("42 (cat) S 1 1 1 0 -1 0 0 0 0 0 5", "truncated");
  expectError("42 (cat) ", "truncated");
  expectError(statLine("x (cat)"), "pid");
  expectError(statLine("0 (cat)"), "pid is not positive");
  expectError(statLine("42 (cat)", "12a"), "utime (field 14)");
  expectError(statLine("42 (cat)", "-5"), "utime (field 14)");
  expectError("42 (cat) SS 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 9 0 12", "state (field 3)");
  expectError("42 (cat) S 1 1 1 0 -1 0 0 0 0 0 5 6 -3 0 20 0 1 0 9 0 12", "cutime (field 16) is negative");
  expectError("42 (cat) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 -1 0 9 0 12", "num_threads is negative");
  expectError("42 (cat) S x 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 9 0 12", "ppid (field 4)");
}

TEST_CASE("parsePidStat treats a transiently negative rss as nothing resident", "[unit][monitor]") {
  auto stat = parsePidStat("42 (cat) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 9 0 -2");
  REQUIRE(stat.isOk());
  CHECK(stat->rssPages == 0);
}

TEST_CASE("parseStatusVmRssKb", "[unit][monitor]") {
  SECTION("normal status file") {
    auto kb = parseStatusVmRssKb(
        "Name:\tpython3\nState:\tS (sleeping)\nVmPeak:\t   60000 kB\nVmRSS:\t   53420 kB\nRssAnon:\t   51000 kB\n");
    REQUIRE(kb.isOk());
    CHECK(*kb == 53420);
  }
  SECTION("last line without newline") {
    auto kb = parseStatusVmRssKb("Name:\tx\nVmRSS:\t7 kB");
    REQUIRE(kb.isOk());
    CHECK(*kb == 7);
  }
  SECTION("kernel thread: no VmRSS") {
    auto kb = parseStatusVmRssKb("Name:\tkthreadd\nState:\tS (sleeping)\nThreads:\t1\n");
    REQUIRE_FALSE(kb.isOk());
    CHECK(kb.error().code == ErrorCode::kNotFound);
  }
  SECTION("malformed") {
    for (const char* content : {"VmRSS:\t\n", "VmRSS:\t12 MB\n", "VmRSS:\tabc kB\n", "VmRSS: 1 2 kB\n"}) {
      auto kb = parseStatusVmRssKb(content);
      REQUIRE_FALSE(kb.isOk());
      CHECK(kb.error().code == ErrorCode::kInvalidArgument);
      CHECK(kb.message().find("VmRSS") != std::string::npos);
    }
  }
}

TEST_CASE("parseHostCpuLine", "[unit][monitor]") {
  SECTION("modern kernel") {
    auto cpu = parseHostCpuLine(
        "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\nintr 12345\n");
    REQUIRE(cpu.isOk());
    CHECK(cpu->user == 100);
    CHECK(cpu->steal == 1);
    CHECK(cpu->total() == 1181);
    CHECK(cpu->busy() == 1181 - 1000 - 20);
  }
  SECTION("old kernel with four fields") {
    auto cpu = parseHostCpuLine("cpu 1 2 3 4\n");
    REQUIRE(cpu.isOk());
    CHECK(cpu->total() == 10);
    CHECK(cpu->iowait == 0);
  }
  SECTION("errors") {
    CHECK_FALSE(parseHostCpuLine("cpu0 1 2 3 4\n").isOk());  // per-CPU line only
    CHECK_FALSE(parseHostCpuLine("").isOk());
    auto shortLine = parseHostCpuLine("cpu  1 2 3\n");
    REQUIRE_FALSE(shortLine.isOk());
    CHECK(shortLine.message().find("need at least 4") != std::string::npos);
    auto bad = parseHostCpuLine("cpu  1 2 x 4\n");
    REQUIRE_FALSE(bad.isOk());
    CHECK(bad.message().find("cpu system") != std::string::npos);
  }
}

TEST_CASE("cpuCoresBetween", "[unit][monitor]") {
  CHECK(cpuCoresBetween(0, 100, 1.0, 100) == Approx(1.0));
  CHECK(cpuCoresBetween(1000, 1250, 2.0, 100) == Approx(1.25));
  CHECK(cpuCoresBetween(0, 50, 0.5, 100) == Approx(1.0));
  CHECK(cpuCoresBetween(0, 200, 1.0, 1000) == Approx(0.2));
  CHECK(cpuCoresBetween(5, 5, 1.0, 100) == 0.0);
  // Nothing measurable: no elapsed time, bad tick rate, a counter that went backwards.
  CHECK(cpuCoresBetween(0, 100, 0.0, 100) == 0.0);
  CHECK(cpuCoresBetween(0, 100, -1.0, 100) == 0.0);
  CHECK(cpuCoresBetween(0, 100, 1.0, 0) == 0.0);
  CHECK(cpuCoresBetween(100, 50, 1.0, 100) == 0.0);
}

TEST_CASE("ProcessTable indexes children by ppid", "[unit][monitor]") {
  auto table = ProcessTable::fromStats({process(1, 0, 0), process(10, 1, 0), process(11, 1, 0), process(20, 10, 0)});
  CHECK(table.size() == 4);
  CHECK(table.childrenOf(1).size() == 2);
  CHECK(table.childrenOf(10) == std::vector<pid_t>{20});
  CHECK(table.childrenOf(20).empty());
  CHECK(table.find(99) == nullptr);
  REQUIRE(table.find(20) != nullptr);
  CHECK(table.find(20)->ppid == 10);
}

TEST_CASE("a tree's first sample has no CPU measurement, later ones do", "[unit][monitor]") {
  ProcessTreeAccountant tree(100, kConstants);
  // 1 = init, 50 = worker, 100 = executor, 101 = sh -c (own group), 102 = its busy child;
  // 200 = an unrelated process.
  auto first = tree.update(ProcessTable::fromStats({process(1, 0, 0), process(50, 1, 0), process(100, 50, 10, 0, 100),
                                                    process(101, 100, 1, 0, 10), process(102, 101, 0, 0, 1000),
                                                    process(200, 1, 5000, 0, 99999)}),
                           kT0);
  CHECK(first.rootAlive);
  CHECK_FALSE(first.cpuMeasured);
  CHECK(first.cpuCores == 0.0);
  CHECK(first.processes == 3);
  CHECK(first.threads == 3);
  CHECK(first.rssBytes == (100 + 10 + 1000) * 4096ull);

  // Two seconds later the grandchild burned 150 ticks (1.5 s), the root 50: 1 core on average.
  auto second = tree.update(ProcessTable::fromStats({process(1, 0, 0), process(50, 1, 0), process(100, 50, 60, 0, 100),
                                                     process(101, 100, 1, 0, 10), process(102, 101, 150, 0, 1000),
                                                     process(200, 1, 9000, 0, 99999)}),
                            kT0 + 2s);
  CHECK(second.cpuMeasured);
  CHECK(second.cpuCores == Approx(1.0));
  CHECK(second.cpuTicksSinceFirstSample == 200);
}

TEST_CASE("a child reaped inside the tree is counted once, to its end", "[unit][monitor]") {
  ProcessTreeAccountant tree(100, kConstants);
  (void)tree.update(ProcessTable::fromStats({process(100, 50, 10), process(101, 100, 50)}), kT0);
  // 101 used 20 more ticks, exited and was reaped: the root's cutime now holds its 70.
  auto sample = tree.update(ProcessTable::fromStats({process(100, 50, 10, 70)}), kT0 + 1s);
  CHECK(sample.cpuTicksSinceFirstSample == 20);
  CHECK(sample.cpuCores == Approx(0.2));
  CHECK(sample.processes == 1);
}

TEST_CASE("a chain that exits within one interval is counted once", "[unit][monitor]") {
  ProcessTreeAccountant tree(100, kConstants);
  // sh (101, 5 ticks) waits for cmd (102, 40 ticks).
  (void)tree.update(ProcessTable::fromStats({process(100, 50, 0), process(101, 100, 5), process(102, 101, 40)}), kT0);
  // cmd ran 10 more, sh 2 more; cmd is reaped by sh, sh by the root: root cutime = 7 + 50.
  auto sample = tree.update(ProcessTable::fromStats({process(100, 50, 0, 57)}), kT0 + 1s);
  CHECK(sample.cpuTicksSinceFirstSample == 12);
}

TEST_CASE("descendants never seen alive still count through cutime", "[unit][monitor]") {
  ProcessTreeAccountant tree(100, kConstants);
  (void)tree.update(ProcessTable::fromStats({process(100, 50, 0, 5)}), kT0);
  // Many short `sh -c` commands started and were reaped between samples.
  auto sample = tree.update(ProcessTable::fromStats({process(100, 50, 0, 35)}), kT0 + 1s);
  CHECK(sample.cpuTicksSinceFirstSample == 30);
  CHECK(sample.cpuCores == Approx(0.3));
}

TEST_CASE("a new descendant's CPU counts from its start", "[unit][monitor]") {
  ProcessTreeAccountant tree(100, kConstants);
  (void)tree.update(ProcessTable::fromStats({process(100, 50, 0)}), kT0);
  auto sample = tree.update(ProcessTable::fromStats({process(100, 50, 0), process(300, 100, 40)}), kT0 + 1s);
  CHECK(sample.cpuTicksSinceFirstSample == 40);
  CHECK(sample.processes == 2);
}

TEST_CASE("a member reparented away keeps counting until it exits", "[unit][monitor]") {
  ProcessTreeAccountant tree(100, kConstants);
  (void)tree.update(ProcessTable::fromStats({process(1, 0, 0), process(100, 50, 0), process(101, 100, 0),
                                             process(102, 101, 10, 0, 7)}),
                    kT0);
  // 101 exited (reaped by the root, 0 ticks); 102 was orphaned to init and keeps working.
  auto orphaned = tree.update(ProcessTable::fromStats({process(1, 0, 0), process(100, 50, 0), process(102, 1, 60, 0, 7)}),
                              kT0 + 1s);
  CHECK(orphaned.processes == 2);
  CHECK(orphaned.rssBytes == 7 * 4096ull);
  CHECK(orphaned.cpuTicksSinceFirstSample == 50);
  // init reaped 102: its last interval is lost, nothing is subtracted, nothing goes negative.
  auto gone = tree.update(ProcessTable::fromStats({process(1, 0, 0, 90), process(100, 50, 0)}), kT0 + 2s);
  CHECK(gone.processes == 1);
  CHECK(gone.cpuTicksSinceFirstSample == 50);
  CHECK(gone.cpuCores == 0.0);
}

TEST_CASE("a reused pid is not a member", "[unit][monitor]") {
  ProcessTreeAccountant tree(100, kConstants);
  (void)tree.update(ProcessTable::fromStats({process(100, 50, 0), process(101, 100, 10, 0, 0, 1000)}), kT0);
  // 101 exited (reaped by the root) and an unrelated process under init got pid 101.
  auto sample = tree.update(
      ProcessTable::fromStats({process(1, 0, 0), process(100, 50, 0, 10), process(101, 1, 500, 0, 0, 2000)}), kT0 + 1s);
  CHECK(sample.processes == 1);
  CHECK(sample.cpuTicksSinceFirstSample == 0);
}

TEST_CASE("a vanished root is reported, not an error, and its pid is never re-adopted", "[unit][monitor]") {
  ProcessTreeAccountant tree(100, kConstants);
  auto alive = tree.update(ProcessTable::fromStats({process(100, 50, 10, 0, 3, 1000)}), kT0);
  CHECK(alive.rootAlive);
  auto gone = tree.update(ProcessTable::fromStats({process(50, 1, 0)}), kT0 + 1s);
  CHECK_FALSE(gone.rootAlive);
  CHECK(gone.processes == 0);
  CHECK(gone.rssBytes == 0);
  CHECK(gone.cpuCores == 0.0);
  auto reused = tree.update(ProcessTable::fromStats({process(50, 1, 0), process(100, 1, 900, 0, 3, 5000)}), kT0 + 2s);
  CHECK_FALSE(reused.rootAlive);
  CHECK(reused.processes == 0);

  // A root that was never seen (exited before the first sample) is not adopted later either.
  ProcessTreeAccountant late(100, kConstants);
  CHECK_FALSE(late.update(ProcessTable::fromStats({process(50, 1, 0)}), kT0).rootAlive);
  CHECK_FALSE(late.update(ProcessTable::fromStats({process(100, 1, 0)}), kT0 + 1s).rootAlive);
}

TEST_CASE("a sample at the same instant measures nothing", "[unit][monitor]") {
  ProcessTreeAccountant tree(100, kConstants);
  (void)tree.update(ProcessTable::fromStats({process(100, 50, 0)}), kT0);
  auto sample = tree.update(ProcessTable::fromStats({process(100, 50, 50)}), kT0);
  CHECK_FALSE(sample.cpuMeasured);
  CHECK(sample.cpuCores == 0.0);
}

TEST_CASE("ContainerMonitor validates track/untrack", "[unit][monitor]") {
  ContainerMonitor monitor(kConstants);
  CHECK(monitor.track("c1", 100).isOk());
  auto duplicate = monitor.track("c1", 200);
  REQUIRE_FALSE(duplicate.isOk());
  CHECK(duplicate.code() == ErrorCode::kAlreadyExists);
  CHECK(duplicate.message().find("c1") != std::string::npos);
  CHECK(monitor.track("", 100).code() == ErrorCode::kInvalidArgument);
  CHECK(monitor.track("c2", 0).code() == ErrorCode::kInvalidArgument);
  CHECK(monitor.track("c2", -5).code() == ErrorCode::kInvalidArgument);
  CHECK(monitor.isTracking("c1"));
  CHECK(monitor.trackedCount() == 1);
  CHECK(monitor.untrack("nope").code() == ErrorCode::kNotFound);
  CHECK(monitor.untrack("c1").isOk());
  CHECK_FALSE(monitor.isTracking("c1"));
  CHECK(monitor.trackedCount() == 0);
}

TEST_CASE("ContainerMonitor reports every container from one snapshot", "[unit][monitor]") {
  ContainerMonitor monitor(kConstants);
  REQUIRE(monitor.track("b", 200).isOk());
  REQUIRE(monitor.track("a", 100).isOk());
  REQUIRE(monitor.track("gone", 300).isOk());
  (void)monitor.sampleAll(ProcessTable::fromStats({process(100, 50, 0, 0, 1), process(101, 100, 0, 0, 2),
                                                   process(200, 50, 0, 0, 4)}),
                          kT0);
  auto usages = monitor.sampleAll(ProcessTable::fromStats({process(100, 50, 0, 0, 1), process(101, 100, 100, 0, 2),
                                                           process(200, 50, 25, 0, 4)}),
                                  kT0 + 1s);
  REQUIRE(usages.size() == 3);
  CHECK(usages[0].containerId == "a");
  CHECK(usages[0].rootPid == 100);
  CHECK(usages[0].rootAlive);
  CHECK(usages[0].cpuMeasured);
  CHECK(usages[0].cpuCores == Approx(1.0));
  CHECK(usages[0].processes == 2);
  CHECK(usages[0].rssBytes == 3 * 4096ull);
  CHECK(usages[1].containerId == "b");
  CHECK(usages[1].cpuCores == Approx(0.25));
  CHECK(usages[1].rssBytes == 4 * 4096ull);
  CHECK(usages[2].containerId == "gone");
  CHECK_FALSE(usages[2].rootAlive);
  CHECK(usages[2].processes == 0);
}

TEST_CASE("processTree collects a root and all its descendants, root first", "[unit][monitor]") {
  auto stat = [](pid_t pid, pid_t ppid) {
    tellus::monitor::PidStat s;
    s.pid = pid;
    s.ppid = ppid;
    s.comm = fmt::format("p{}", pid);
    return s;
  };
  auto table = tellus::monitor::ProcessTable::fromStats({stat(1, 0), stat(10, 1), stat(11, 10), stat(12, 11),
                                                          stat(13, 10), stat(20, 1)});
  auto tree = tellus::monitor::processTree(table, 10);
  std::sort(tree.begin() + 1, tree.end());
  CHECK(tree == std::vector<pid_t>{10, 11, 12, 13});
  CHECK(tellus::monitor::processTree(table, 20) == std::vector<pid_t>{20});
}
