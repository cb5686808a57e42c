#pragma once
// What the failover-family tests (failover, partition, corruption, batch, executor kill) check
// the same way: messages for Catch's INFO, and the end of a scenario. Header-only because it
// uses Catch's macros, which belong in test code, not in the harness library.
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "failover/scenario.h"
#include "harness/eventually.h"

namespace tellus::failover {

template <class R>
std::string whyNot(const R& r) {
  return r.isOk() ? std::string() : r.message();
}

// Why `r` failed with the cluster's logs for `jobId`; nothing when it did not. Catch2 keeps an
// INFO for the rest of its scope, so a passing step must not bury a later failure's message
// under pages of logs.
template <class R>
std::string failureReport(const R& r, Scenario& sc, const std::string& jobId) {
  return r.isOk() ? std::string() : r.message() + sc.diagnostics(jobId);
}

inline std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "\n  " + l;
  return out;
}

struct EndChecks {
  std::chrono::milliseconds jobDeadline;
  std::chrono::milliseconds recoveryDeadline;
  // The epoch did not move after the job ended: the primary that finished it leaving the
  // election is no failure to recover from. (Off where a healed site's JMs rejoin late.)
  bool epochUnchangedAfterEnd = true;
};

// Workers a scenario killed, and the job's snapshot read right after: besides the tasks a
// test allows, each execution the audit shows started on them and not finished by `after` may
// run again (Scenario::unfinishedOn).
struct KilledWorkers {
  std::set<std::string> workers;
  const JobSnapshot* after = nullptr;
};

// Adds to `mayRunTwice` what `killed` never finished (read from the audit now; nothing when
// no worker was killed).
inline void allowUnfinished(Scenario& sc, const std::string& jobId, const KilledWorkers& killed,
                            std::set<TaskId>& mayRunTwice) {
  if (!killed.after) return;
  auto unfinished = sc.unfinishedOn(jobId, *killed.after, killed.workers);
  INFO("reading the audit: " << whyNot(unfinished));
  REQUIRE(unfinished.isOk());
  mayRunTwice.insert(unfinished->begin(), unfinished->end());
}

// The end of every scenario: the job succeeded with the exact word count (read through
// `resultSite`), the execution audit allows re-runs only of `mayRunTwice` (and of what
// `killed` never finished), its JMs left, and no invariant was violated along the way.
// Returns the job's final snapshot.
inline JobSnapshot requireCorrectEnd(Scenario& sc, const std::string& jobId, std::set<TaskId> mayRunTwice,
                                     const std::string& resultSite, const EndChecks& checks,
                                     const KilledWorkers& killed = {}) {
  using namespace std::chrono_literals;
  auto end = sc.waitForEnd(jobId, checks.jobDeadline);
  INFO("waiting for the end: " << failureReport(end, sc, jobId));
  REQUIRE(end.isOk());
  const bool succeeded = end->status.state() == pb::JOB_SUCCEEDED;
  INFO("final state: " << end->describe() << "\nerror: " << end->status.error()
                       << (succeeded ? std::string() : sc.diagnostics(jobId)));
  REQUIRE(succeeded);
  Status result = sc.checkResult(jobId, resultSite);
  INFO("result: " << whyNot(result));
  CHECK(result.isOk());
  allowUnfinished(sc, jobId, killed, mayRunTwice);
  auto problems = checkExecutions(*end, mayRunTwice);
  INFO("execution audit:" << joined(problems) << (problems.empty() ? std::string() : sc.diagnostics(jobId)));
  CHECK(problems.empty());
  // (waitFor stops at a terminal job: the JMs are read directly.)
  std::optional<JobSnapshot> last;
  std::string lastError;
  bool left = harness::eventually(
      [&] {
        auto now = sc.snapshot(jobId);
        if (!now) {
          lastError = now.message();
          return false;
        }
        sc.invariants().observe(*now);
        last = std::move(now).value();
        return last->jms.empty();
      },
      checks.recoveryDeadline, 50ms);
  INFO("JMs leaving the finished job: " << (last ? last->describe() : lastError));
  REQUIRE(left);
  if (checks.epochUnchangedAfterEnd) CHECK(last->epochAtEnd == end->epochAtEnd);
  INFO("invariants:" << joined(sc.invariants().violations()));
  CHECK(sc.invariants().violations().empty());
  return *end;
}

}  // namespace tellus::failover
