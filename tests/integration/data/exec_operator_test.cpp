// exec starts real processes, and synthetic burns real CPU: both live here, not in unit tests.

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <time.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <thread>

#include "temp_dir.h"

#include "data/operator.h"
#include "data/record.h"

using namespace tellus;
using namespace tellus::data;

namespace {

struct Outcome {
  Status status;
  std::vector<std::string> buckets;
};

Outcome runOperator(const std::string& name, const OperatorParams& params, const std::vector<std::string>& inputs,
                    std::uint32_t bucketCount = 1) {
  auto op = makeOperator(name, params);
  REQUIRE(op.isOk());
  std::vector<std::unique_ptr<std::istringstream>> inputStreams;
  std::vector<std::unique_ptr<std::ostringstream>> bucketStreams;
  TaskIo io;
  for (const auto& input : inputs) {
    inputStreams.push_back(std::make_unique<std::istringstream>(input));
    io.inputs.push_back(inputStreams.back().get());
  }
  for (std::uint32_t b = 0; b < bucketCount; ++b) {
    bucketStreams.push_back(std::make_unique<std::ostringstream>());
    io.buckets.push_back(bucketStreams.back().get());
  }
  Outcome outcome{(*op)->run(io), {}};
  for (const auto& out : bucketStreams) outcome.buckets.push_back(out->str());
  return outcome;
}

// Megabytes of distinct lines "k<i>\t<payload>".
std::string bigInput(std::size_t lines) {
  std::string text;
  text.reserve(lines * 64);
  for (std::size_t i = 0; i < lines; ++i) {
    fmt::format_to(std::back_inserter(text), "k{}\tline {} of a large input for exec\n", i % 1000, i);
  }
  return text;
}

// True once the process is gone or a zombie (killed, not yet reaped by its new parent).
bool processEnded(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pidField, name, state;
  if (!(stat >> pidField >> name >> state)) return true;
  return state == "Z" || state == "X";
}

double threadCpuMs() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

}  // namespace

TEST_CASE("exec streams the inputs through the command", "[integration][data]") {
  const auto out = runOperator("exec", {{"cmd", "tr a-z A-Z"}}, {"hello world\n", "second input\n"});
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0] == "HELLO WORLD\nSECOND INPUT\n");
}

TEST_CASE("exec adds the final newline a command leaves out, and keeps empty output empty", "[integration][data]") {
  auto out = runOperator("exec", {{"cmd", "printf 'a\\tb\\nno newline'"}}, {});
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0] == "a\tb\nno newline\n");
  out = runOperator("exec", {{"cmd", "cat > /dev/null"}}, {"input\n"});
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0].empty());
}

TEST_CASE("exec moves megabytes both ways without deadlock", "[integration][data]") {
  // 8+ MB is far beyond the 64 KB pipe buffers: a parent that wrote all of stdin before
  // reading stdout would block forever on cat.
  const std::string input = bigInput(220'000);
  REQUIRE(input.size() > 8'000'000);
  const auto started = std::chrono::steady_clock::now();
  const auto out = runOperator("exec", {{"cmd", "cat"}}, {input.substr(0, 3'000'000), input.substr(3'000'000)});
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0].size() == input.size());
  CHECK(out.buckets[0] == input);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  WARN("exec cat of " << input.size() / 1e6 << " MB took " << seconds << " s");
}

TEST_CASE("exec with several buckets routes the command's output lines by key", "[integration][data]") {
  const std::string input = bigInput(40'000);
  constexpr std::uint32_t kBuckets = 4;
  const auto out = runOperator("exec", {{"cmd", "cat"}}, {input}, kBuckets);
  REQUIRE(out.status.isOk());
  std::size_t totalBytes = 0;
  for (std::uint32_t b = 0; b < kBuckets; ++b) {
    totalBytes += out.buckets[b].size();
    std::istringstream lines(out.buckets[b]);
    for (std::string line; std::getline(lines, line);) {
      REQUIRE(bucketForKey(recordKey(line), kBuckets) == b);
    }
  }
  CHECK(totalBytes == input.size());
}

TEST_CASE("exec reports a failing command with its exit status and stderr", "[integration][data]") {
  const auto out = runOperator("exec", {{"cmd", "echo first >&2; echo 'bad thing happened' >&2; exit 3"}}, {"x\n"});
  REQUIRE_FALSE(out.status.isOk());
  CHECK(out.status.message() ==
        "exec: command 'echo first >&2; echo 'bad thing happened' >&2; exit 3' exited with status 3; "
        "last lines of stderr:\nfirst\nbad thing happened");

  const auto silent = runOperator("exec", {{"cmd", "exit 3"}}, {bigInput(100'000)});
  REQUIRE_FALSE(silent.status.isOk());
  CHECK(silent.status.message() == "exec: command 'exit 3' exited with status 3; stderr was empty");

  const auto missing = runOperator("exec", {{"cmd", "no-such-command-tellus"}}, {});
  REQUIRE_FALSE(missing.status.isOk());
  CHECK_THAT(missing.status.message(), Catch::Contains("exited with status 127"));
  CHECK_THAT(missing.status.message(), Catch::Contains("not found"));
}

TEST_CASE("exec keeps only the last lines of a long stderr", "[integration][data]") {
  // 200 KB of stderr also checks that a full stderr pipe cannot block the command.
  const auto out = runOperator("exec", {{"cmd", "i=0; while [ $i -lt 4000 ]; do echo \"warning line $i of many\" >&2; "
                                                "i=$((i+1)); done; exit 1"}},
                               {});
  REQUIRE_FALSE(out.status.isOk());
  const std::string& message = out.status.message();
  CHECK_THAT(message, Catch::EndsWith("warning line 3990 of many\nwarning line 3991 of many\nwarning line 3992 of "
                                      "many\nwarning line 3993 of many\nwarning line 3994 of many\nwarning line 3995 "
                                      "of many\nwarning line 3996 of many\nwarning line 3997 of many\nwarning line "
                                      "3998 of many\nwarning line 3999 of many"));
  CHECK_THAT(message, !Catch::Contains("warning line 3989 of"));
}

TEST_CASE("exec reports a command killed by a signal", "[integration][data]") {
  const auto out = runOperator("exec", {{"cmd", "kill -9 $$"}}, {});
  REQUIRE_FALSE(out.status.isOk());
  CHECK_THAT(out.status.message(), Catch::Contains("was killed by signal 9 (Killed)"));
}

TEST_CASE("exec accepts a command that stops reading its input early", "[integration][data]") {
  // head exits after one line; the rest of our writes hit a closed pipe (EPIPE, no SIGPIPE
  // death of the test process) and the exit status 0 makes it a success.
  const auto out = runOperator("exec", {{"cmd", "head -n 1"}}, {bigInput(200'000)});
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0] == "k0\tline 0 of a large input for exec\n");
}

TEST_CASE("synthetic burns the requested CPU time", "[integration][data]") {
  const double cpuBefore = threadCpuMs();
  const auto wallBefore = std::chrono::steady_clock::now();
  const auto out = runOperator("synthetic", {{"cpu_ms", "200"}, {"output_bytes", "100"}}, {"in\n"});
  const double wallMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wallBefore).count();
  const double cpuMs = threadCpuMs() - cpuBefore;
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0].size() == 100);
  CHECK(cpuMs >= 200);
  CHECK(cpuMs < 400);  // stops promptly: the clock is checked every few microseconds
  CHECK(wallMs >= cpuMs - 1);
  WARN("synthetic cpu_ms=200: " << cpuMs << " ms CPU, " << wallMs << " ms wall");
}

TEST_CASE("exec kills a command that exceeds timeout_ms", "[integration][data]") {
  const auto started = std::chrono::steady_clock::now();
  const auto out = runOperator("exec", {{"cmd", "sleep 30"}, {"timeout_ms", "200"}}, {});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  REQUIRE_FALSE(out.status.isOk());
  CHECK(out.status.code() == ErrorCode::kDeadlineExceeded);
  CHECK(out.status.message() == "exec: command 'sleep 30' timed out after 200 ms");
  CHECK(seconds >= 0.2);
  CHECK(seconds < 10);
  // A command that finishes in time is unaffected.
  CHECK(runOperator("exec", {{"cmd", "cat"}, {"timeout_ms", "60000"}}, {"a\n"}).buckets[0] == "a\n");
}

TEST_CASE("exec's timeout also kills what the shell started", "[integration][data]") {
  testing::TempDir dir;
  const auto pidFile = dir.path() / "grandchild.pid";
  const auto out = runOperator(
      "exec", {{"cmd", "sleep 30 & echo $! > " + pidFile.string() + "; wait"}, {"timeout_ms", "300"}}, {});
  REQUIRE(out.status.code() == ErrorCode::kDeadlineExceeded);
  int grandchild = 0;
  std::ifstream(pidFile) >> grandchild;
  REQUIRE(grandchild > 0);
  // SIGKILL delivery is asynchronous: wait for the real condition, with a deadline.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!processEnded(grandchild) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  CHECK(processEnded(grandchild));
}
