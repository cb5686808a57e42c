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

TEST_CASE("output batches: a stage idle here for kIdleConfirm has ended here: written before the linger",
          "[unit][batch]") {
  // The stage's end here (say its JM gave its last waiting tasks to a thief): its last outputs
  // wait for the confirmation, not the linger.
  CHECK(decide(10ms, OutputBatcher::kIdleConfirm, false).action == OutputBatcher::IdleWrite::kWrite);
  CHECK(decide(500ms, OutputBatcher::kIdleConfirm + 1ms, false).action == OutputBatcher::IdleWrite::kWrite);
  auto waiting = decide(10ms, 20ms, false);
  REQUIRE(waiting.action == OutputBatcher::IdleWrite::kWait);
  CHECK(waiting.wait == OutputBatcher::kIdleConfirm - 20ms);
  // Long after the last write too: a moment between two launches is not the stage's end.
  auto late = decide(900ms, 0ms, false);
  REQUIRE(late.action == OutputBatcher::IdleWrite::kWait);
  CHECK(late.wait == OutputBatcher::kIdleConfirm);
  // The linger runs out first.
  auto lingerFirst = decide(kLinger - 5ms, 0ms, false);
  REQUIRE(lingerFirst.action == OutputBatcher::IdleWrite::kWait);
  CHECK(lingerFirst.wait == 5ms);
}

TEST_CASE("output batches: a stage launched again here waits for its next finish, at most the linger",
          "[unit][batch]") {
  // Idle only between two launches (one container here, or tasks finishing together): more of
  // the stage comes to share the write.
  CHECK(decide(10ms, 0ms, true).action == OutputBatcher::IdleWrite::kNextFinish);
  CHECK(decide(500ms, OutputBatcher::kIdleConfirm * 2, true).action == OutputBatcher::IdleWrite::kNextFinish);
  // The linger bounds how long any output waits.
  CHECK(decide(kLinger, 0ms, true).action == OutputBatcher::IdleWrite::kWrite);
  CHECK(decide(kLinger + 1ms, 0ms, false).action == OutputBatcher::IdleWrite::kWrite);
  CHECK(decide(20ms, 0ms, true, 20ms).action == OutputBatcher::IdleWrite::kWrite);
}
