#include <catch2/catch.hpp>

#include "worker/output_batcher.h"

using tellus::worker::OutputBatcher;
using namespace std::chrono_literals;

namespace {
constexpr auto kLinger = 1000ms;
OutputBatcher::IdleWrite decide(std::chrono::milliseconds sinceWrite, std::chrono::milliseconds idleFor,
                                bool stageRuns, std::chrono::milliseconds linger = kLinger) {
  return OutputBatcher::decideIdleWrite(sinceWrite, idleFor, stageRuns, linger);
}
}  // namespace

TEST_CASE("output batches: a stage idle here is written once the gap since its last write is out",
          "[unit][batch]") {
  CHECK(decide(OutputBatcher::kIdleGap, 0ms, false).action == OutputBatcher::IdleWrite::kWrite);
  // Even if it runs again: the gap bounds how long its outputs wait.
  CHECK(decide(OutputBatcher::kIdleGap + 1ms, 0ms, true).action == OutputBatcher::IdleWrite::kWrite);
  // A linger shorter than the gap is the gap.
  CHECK(decide(20ms, 0ms, false, 20ms).action == OutputBatcher::IdleWrite::kWrite);
}

TEST_CASE("output batches: a stage idle here for kIdleConfirm has ended here: written before the gap",
          "[unit][batch]") {
  // The stage's end here (say its JM gave its last waiting tasks to a thief): its last outputs
  // wait for the confirmation, not the whole gap.
  CHECK(decide(10ms, OutputBatcher::kIdleConfirm, false).action == OutputBatcher::IdleWrite::kWrite);
  auto waiting = decide(10ms, 20ms, false);
  REQUIRE(waiting.action == OutputBatcher::IdleWrite::kWait);
  CHECK(waiting.wait == OutputBatcher::kIdleConfirm - 20ms);
  // The gap runs out first.
  auto gapFirst = decide(OutputBatcher::kIdleGap - 5ms, 0ms, false);
  REQUIRE(gapFirst.action == OutputBatcher::IdleWrite::kWait);
  CHECK(gapFirst.wait == 5ms);
}

TEST_CASE("output batches: a stage launched again here waits for its next finish", "[unit][batch]") {
  // Idle only between two launches of short tasks: more of the stage comes to share the write.
  CHECK(decide(10ms, 0ms, true).action == OutputBatcher::IdleWrite::kNextFinish);
  CHECK(decide(10ms, OutputBatcher::kIdleConfirm * 2, true).action == OutputBatcher::IdleWrite::kNextFinish);
}
