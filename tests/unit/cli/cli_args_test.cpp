// Usage errors of the `tellus` CLI (tools/tellus/cli.h), run in process. Every case fails
// while parsing or validating arguments, before any file is read or any master contacted, so
// these tests do no I/O; the errors that need a cluster or the network are covered by
// tests/integration/cluster.

#include <algorithm>
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "cli.h"

namespace tellus::cli {
namespace {

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

Outcome runCli(std::vector<std::string> args) {
  args.insert(args.begin(), "tellus");
  std::ostringstream out, err;
  int code = run(args, out, err);
  return Outcome{code, out.str(), err.str()};
}

// Exit 2, nothing on stdout, one "tellus: ..." line on stderr that mentions `mention`.
void checkUsageError(const std::vector<std::string>& args, const std::string& mention) {
  auto r = runCli(args);
  std::string joined;
  for (const auto& a : args) joined += " " + a;
  INFO("tellus" << joined << "\nexit " << r.code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("tellus: ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find(mention) != std::string::npos);
}

TEST_CASE("tellus without a command, or with an unknown one, is a usage error", "[unit][cli]") {
  checkUsageError({}, "subcommand");
  checkUsageError({"--master", "127.0.0.1:1"}, "subcommand");
  checkUsageError({"--master", "127.0.0.1:1", "launch"}, "launch");
}

TEST_CASE("tellus rejects missing or malformed arguments before contacting anyone", "[unit][cli]") {
  const std::string m = "127.0.0.1:1";  // never contacted: every case fails earlier
  checkUsageError({"--master", m, "status"}, "JOB");
  // A page of tasks is asked with --tasks; alone, the offset and limit would be ignored.
  checkUsageError({"--master", m, "status", "job-0000000001", "--task-offset", "5"}, "--tasks");
  checkUsageError({"--master", m, "status", "job-0000000001", "--task-limit", "5"}, "--tasks");
  checkUsageError({"--master", m, "status", "job-0000000001", "--tasks", "--task-limit", "-1"}, "--task-limit");
  checkUsageError({"--master", m, "status", "job-0000000001", "--tasks", "--task-offset", "x"}, "--task-offset");
  checkUsageError({"--master", m, "result"}, "JOB");
  checkUsageError({"--master", m, "kill"}, "JOB");
  checkUsageError({"--master", m, "cost"}, "JOB");
  checkUsageError({"--master", m, "submit"}, "JOB");
  checkUsageError({"--master", m, "put", "file.txt", "--site", "us-east"}, "--dataset");
  checkUsageError({"--master", m, "put", "file.txt", "--dataset", "d"}, "--site");
  // Mutual TLS: no credentials and no --insecure (a ctest run sets no TELLUS_TLS_* variables).
  checkUsageError({"--master", m, "list"}, "no TLS credentials");
  checkUsageError({"--master", m, "--tls-ca", "/nonexistent/ca.pem", "--tls-cert", "c.pem", "--tls-key", "k.pem", "list"},
                  "/nonexistent/ca.pem");
  checkUsageError({"--master", m, "put", "file.txt", "--dataset", "d", "--site", "s", "--partitions", "0"},
                  "partitions");
  checkUsageError({"--master", m, "--timeout-ms", "0", "list"}, "timeout-ms");
  checkUsageError({"--master", m, "--timeout-ms", "soon", "list"}, "timeout-ms");
  checkUsageError({"--master", m, "list", "--no-such-flag"}, "no-such-flag");
  // logs: exactly one of --task and --jm; --attempt only with --task; a task is STAGE:N.
  checkUsageError({"--master", m, "logs"}, "JOB");
  checkUsageError({"--master", m, "logs", "job-1"}, "--task STAGE:N or --jm SITE");
  checkUsageError({"--master", m, "logs", "job-1", "--task", "map:1", "--jm", "us-east"}, "excludes");
  checkUsageError({"--master", m, "logs", "job-1", "--attempt", "2"}, "--task");
  checkUsageError({"--master", m, "logs", "job-1", "--task", "map:1", "--attempt", "0"}, "attempt");
  checkUsageError({"--master", m, "logs", "job-1", "--task", "map"}, "expected STAGE:N");
  checkUsageError({"--master", m, "logs", "job-1", "--task", "map:x"}, "the task must be a number");
  checkUsageError({"--master", m, "logs", "job-1", "--task", "../etc:1"}, "stage");
  checkUsageError({"--master", m, "logs", "job-1", "--task", "map:1", "--bytes", "0"}, "bytes");
  checkUsageError({"--master", m, "logs", "job-1", "--jm", "us-east", "--bytes", "68000000"}, "bytes");
  checkUsageError({"completion"}, "SHELL");
  checkUsageError({"completion", "tcsh"}, "tcsh");
}

TEST_CASE("--task STAGE:N names a stage by name or index and a task number", "[unit][cli]") {
  auto ref = parseTaskRef("map:3");
  REQUIRE(ref.isOk());
  CHECK(ref->stage == "map");
  CHECK(ref->task == 3);
  ref = parseTaskRef("0:4294967295");
  REQUIRE(ref.isOk());
  CHECK(ref->stage == "0");
  CHECK(ref->task == 4294967295u);
  for (const char* bad : {"", "map", ":1", "map:", "map:-1", "map:1x", "map:4294967296", "a/b:1", "..:1", "map: 1"}) {
    INFO(bad);
    auto r = parseTaskRef(bad);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    CHECK(r.message().find("expected STAGE:N") != std::string::npos);
  }
}

TEST_CASE("tellus needs a master address of the form HOST:PORT", "[unit][cli]") {
  // An explicit empty --master overrides TELLUS_MASTER, whatever the environment holds.
  checkUsageError({"--master", "", "list"}, "no master");
  checkUsageError({"--master", "not-an-address", "list"}, "--master");
  checkUsageError({"--master", "127.0.0.1:99999", "sites"}, "--master");
  // Global options may follow the subcommand.
  checkUsageError({"list", "--master", "not-an-address"}, "--master");
}

TEST_CASE("tellus --help prints the commands and succeeds", "[unit][cli]") {
  auto r = runCli({"--help"});
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  for (const char* command : {"submit", "status", "cost", "list", "sites", "result", "kill", "put", "plan"}) {
    INFO(command);
    CHECK(r.out.find(command) != std::string::npos);
  }
}

}  // namespace
}  // namespace tellus::cli

namespace tellus::cli {
namespace {

TEST_CASE("tellus --version prints the version and succeeds", "[unit][cli]") {
  auto r = runCli({"--version"});
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Catch::StartsWith("tellus 0."));
  CHECK(r.out == versionString() + "\n");
}

TEST_CASE("every command's --help is its own, with an example", "[unit][cli]") {
  for (const char* command : {"submit", "status", "cost", "list", "sites", "result", "kill", "put", "logs", "completion"}) {
    INFO(command);
    auto r = runCli({command, "--help"});
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    CHECK_THAT(r.out, Catch::Contains(std::string("tellus ") + command));  // usage line
    CHECK_THAT(r.out, Catch::Contains("Example"));
    CHECK_THAT(r.out, Catch::Contains(std::string("\n  tellus ") + command) ||
                          Catch::Contains(std::string("\n  source <(tellus ") + command));
  }
  auto logs = runCli({"logs", "--help"});
  for (const char* option : {"--task", "--attempt", "--jm", "--bytes", "--follow"}) CHECK_THAT(logs.out, Catch::Contains(option));
}

TEST_CASE("tellus completion bash prints a script naming every command, without a master", "[unit][cli]") {
  auto r = runCli({"--master", "", "completion", "bash"});
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Catch::Contains("complete -o default -F _tellus tellus"));
  for (const char* word : {"submit", "status", "cost", "list", "sites", "result", "kill", "put", "logs", "plan", "--follow",
                           "--watch", "--master", "--tls-ca"}) {
    INFO(word);
    CHECK_THAT(r.out, Catch::Contains(word));
  }
}

}  // namespace
}  // namespace tellus::cli
