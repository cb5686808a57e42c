// Pure parts of common/proc: option validation and exit-status decoding (no process is spawned).
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <csignal>

#include "proc/subprocess.h"

using tellus::ErrorCode;
using tellus::proc::ExitStatus;
using tellus::proc::SpawnOptions;
using tellus::proc::validateSpawnOptions;

TEST_CASE("spawn options are validated before anything runs", "[unit][proc]") {
  SpawnOptions empty;
  auto st = validateSpawnOptions(empty);
  REQUIRE_FALSE(st.isOk());
  CHECK(st.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains("argv is empty"));

  SpawnOptions emptyProgram{.argv = {""}};
  CHECK_FALSE(validateSpawnOptions(emptyProgram).isOk());

  SpawnOptions badEnv{.argv = {"/bin/true"}, .extraEnv = {{"A=B", "x"}}};
  auto envSt = validateSpawnOptions(badEnv);
  REQUIRE_FALSE(envSt.isOk());
  CHECK_THAT(envSt.message(), Catch::Contains("'A=B'"));

  SpawnOptions emptyKey{.argv = {"/bin/true"}, .extraEnv = {{"", "x"}}};
  CHECK_FALSE(validateSpawnOptions(emptyKey).isOk());

  SpawnOptions nulArg{.argv = {"/bin/echo", std::string("a\0b", 3)}};
  CHECK_FALSE(validateSpawnOptions(nulArg).isOk());

  SpawnOptions good{.argv = {"sh", "-c", "true"}, .extraEnv = {{"TELLUS_X", "1=2"}}};
  CHECK(validateSpawnOptions(good).isOk());
}

TEST_CASE("exit statuses decode wait() results", "[unit][proc]") {
  // Build wait statuses the way the kernel encodes them (W_EXITCODE / signal in low bits).
  ExitStatus exited = ExitStatus::fromWaitStatus(W_EXITCODE(3, 0));
  CHECK(exited.exited);
  CHECK(exited.code == 3);
  CHECK_FALSE(exited.success());
  CHECK(exited.toString() == "exit code 3");

  CHECK(ExitStatus::fromWaitStatus(W_EXITCODE(0, 0)).success());

  ExitStatus killed = ExitStatus::fromWaitStatus(SIGKILL);
  CHECK_FALSE(killed.exited);
  CHECK(killed.signal == SIGKILL);
  CHECK_FALSE(killed.success());
  CHECK_THAT(killed.toString(), Catch::StartsWith("killed by signal 9"));
}
