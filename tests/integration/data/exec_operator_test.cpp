// exec starts real processes, and synthetic burns real CPU: both live here, not in unit tests.

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <time.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
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

// exec enabled, as the test's own user (the default for the tests that are not about
// confinement: they must pass unprivileged too).
OperatorEnv execAsSelf() {
  OperatorEnv env;
  env.exec.enabled = true;
  env.exec.run_as_user.clear();
  return env;
}

Outcome runOperator(const std::string& name, const OperatorParams& params, const std::vector<std::string>& inputs,
                    std::uint32_t bucketCount = 1, const OperatorEnv& env = execAsSelf()) {
  auto op = makeOperator(name, params, env);
  INFO(op.status().message());
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

TEST_CASE("exec copies the whole stderr of its command to the task's log", "[integration][data]") {
  std::ostringstream log;
  OperatorEnv env = execAsSelf();
  env.log = &log;
  const auto out = runOperator("exec", {{"cmd", "i=0; while [ $i -lt 4000 ]; do echo \"warning line $i of many\" >&2; "
                                                "i=$((i+1)); done; echo done; exit 1"}},
                               {}, 1, env);
  REQUIRE_FALSE(out.status.isOk());
  std::string expected;
  for (int i = 0; i < 4000; ++i) expected += fmt::format("warning line {} of many\n", i);
  CHECK(log.str() == expected);  // every line, in order; stdout is the output, not the log
  // A successful command's stderr is kept too.
  std::ostringstream quiet;
  env.log = &quiet;
  CHECK(runOperator("exec", {{"cmd", "echo note >&2; cat"}}, {"x\n"}, 1, env).status.isOk());
  CHECK(quiet.str() == "note\n");
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

// ---- confinement (docs/jobs.md, "exec"): the tests run as root here, so switching users is
// real; unprivileged they only check what an unprivileged worker can.

namespace {

bool runningAsRoot() { return ::geteuid() == 0; }

OperatorEnv confinedAsNobody() {
  OperatorEnv env;
  env.exec.enabled = true;
  env.exec.run_as_user = "nobody";
  return env;
}

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

TEST_CASE("exec is refused unless the site enables and allows it", "[integration][data][exec]") {
  auto disabled = makeOperator("exec", {{"cmd", "cat"}});
  REQUIRE_FALSE(disabled.isOk());
  CHECK(disabled.status().message() == "exec is disabled at this site (exec.enabled: false in its config)");

  OperatorEnv allowList = execAsSelf();
  allowList.exec.allowed_commands = {"cat", "tr a-z A-Z"};
  CHECK(runOperator("exec", {{"cmd", "tr a-z A-Z"}}, {"x\n"}, 1, allowList).buckets[0] == "X\n");
  // The whole command line is matched: a prefix that is allowed does not carry a suffix along.
  auto smuggled = makeOperator("exec", {{"cmd", "cat; id"}}, allowList);
  REQUIRE_FALSE(smuggled.isOk());
  CHECK(smuggled.status().message() == "command 'cat; id' is not in this site's exec.allowed_commands");
}

TEST_CASE("exec runs in a private directory with a clean environment, removed after", "[integration][data][exec]") {
  // A variable of the worker's (a token, say) must not reach the command.
  ::setenv("TELLUS_TEST_SECRET", "token", 1);
  const auto out =
      runOperator("exec", {{"cmd", "pwd; stat -c %a .; echo \"$HOME $TMPDIR\"; echo \"${TELLUS_TEST_SECRET:-absent}\""}}, {});
  ::unsetenv("TELLUS_TEST_SECRET");
  REQUIRE(out.status.isOk());
  std::istringstream lines(out.buckets[0]);
  std::string dir, mode, homeTmp, env;
  std::getline(lines, dir);
  std::getline(lines, mode);
  std::getline(lines, homeTmp);
  std::getline(lines, env);
  CHECK_THAT(dir, Catch::StartsWith("/tmp/tellus-exec-"));
  CHECK(mode == "700");
  CHECK(homeTmp == dir + " " + dir);
  CHECK(env == "absent");
  CHECK_FALSE(std::filesystem::exists(dir));
}

TEST_CASE("exec as an unprivileged user cannot touch the worker's files", "[integration][data][exec]") {
  if (!runningAsRoot()) {
    WARN("not root: switching to nobody cannot be tested");
    return;
  }
  testing::TempDir dataDir;  // stands for the worker's data dir: root's, mode 0755
  std::filesystem::permissions(dataDir.path(), std::filesystem::perms(0755));
  std::ofstream(dataDir.path() / "secret") << "partition bytes\n";
  std::filesystem::permissions(dataDir.path() / "secret", std::filesystem::perms(0600));

  const auto who = runOperator("exec", {{"cmd", "id -u; id -g; id -G; stat -c %U ."}}, {}, 1, confinedAsNobody());
  REQUIRE(who.status.isOk());
  CHECK(who.buckets[0] == "65534\n65534\n65534\nnobody\n");

  const auto write = runOperator("exec", {{"cmd", "touch " + (dataDir.path() / "planted").string()}}, {}, 1,
                                 confinedAsNobody());
  REQUIRE_FALSE(write.status.isOk());
  CHECK_THAT(write.status.message(), Catch::Contains("Permission denied"));
  CHECK_FALSE(std::filesystem::exists(dataDir.path() / "planted"));

  const auto read = runOperator("exec", {{"cmd", "cat " + (dataDir.path() / "secret").string()}}, {}, 1,
                                confinedAsNobody());
  REQUIRE_FALSE(read.status.isOk());
  CHECK_THAT(read.status.message(), Catch::Contains("Permission denied"));

  // No way back up: sudo/su and other setuid programs are neutered (no_new_privs), and the
  // command's input still arrives through stdin although it cannot open the file itself.
  const auto piped = runOperator("exec", {{"cmd", "cat"}}, {"partition bytes\n"}, 1, confinedAsNobody());
  CHECK(piped.buckets[0] == "partition bytes\n");
}

TEST_CASE("exec's rlimits stop hogs", "[integration][data][exec]") {
  OperatorEnv env = runningAsRoot() ? confinedAsNobody() : execAsSelf();

  SECTION("memory") {
    env.exec.rlimits.memory_mb = 64;
    // Doubles a string up to 512 MiB: stopped long before by the 64 MiB address space.
    const auto out = runOperator("exec", {{"cmd", "awk 'BEGIN { s = \"x\"; while (length(s) < 536870912) s = s s; "
                                                  "print length(s) }'"}},
                                 {}, 1, env);
    INFO(out.status.message());
    CHECK_FALSE(out.status.isOk());
  }
  SECTION("CPU time") {
    env.exec.rlimits.cpu_s = 1;
    const auto out = runOperator("exec", {{"cmd", "while :; do :; done"}, {"timeout_ms", "60000"}}, {}, 1, env);
    REQUIRE_FALSE(out.status.isOk());
    CHECK_THAT(firstLine(out.status.message()), Catch::Contains("was killed by signal 24 (CPU time limit exceeded)"));
  }
  SECTION("open files") {
    env.exec.rlimits.open_files = 8;
    // The shell reports the limit it runs under; a program opening more files gets EMFILE.
    const auto out = runOperator("exec", {{"cmd", "ulimit -n"}}, {}, 1, env);
    REQUIRE(out.status.isOk());
    CHECK(out.buckets[0] == "8\n");
  }
  SECTION("processes") {
    if (!runningAsRoot()) return;  // RLIMIT_NPROC counts the user's processes: only testable as nobody
    env.exec.rlimits.processes = 4;
    const auto out = runOperator("exec", {{"cmd", "for i in 1 2 3 4 5 6 7 8; do sleep 30 >/dev/null 2>&1 & done; "
                                                  "echo started"}},
                                 {}, 1, env);
    REQUIRE_FALSE(out.status.isOk());
    CHECK_THAT(out.status.message(), Catch::Contains("fork"));
  }
}

TEST_CASE("exec refuses a user it cannot or must not switch to", "[integration][data][exec]") {
  config::ExecConfig exec;
  exec.enabled = true;
  exec.run_as_user = "root";
  CHECK(checkExecConfinement(exec).message() == "exec.run_as_user 'root' is root; name an unprivileged user");
  exec.run_as_user = "no-such-user-tellus";
  CHECK(checkExecConfinement(exec).message() == "exec.run_as_user 'no-such-user-tellus' is not a user on this host");
  exec.run_as_user = "";
  CHECK(checkExecConfinement(exec).isOk());
  exec.run_as_user = "nobody";
  if (runningAsRoot()) {
    CHECK(checkExecConfinement(exec).isOk());
  } else {
    CHECK_THAT(checkExecConfinement(exec).message(), Catch::StartsWith("cannot run commands as 'nobody': the worker is not root"));
  }
}
