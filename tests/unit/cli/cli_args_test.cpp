// Usage errors of the `tellus` CLI (tools/tellus/cli.h), run in process. Every case fails
// while parsing or validating arguments, before any file is read or any master contacted, so
// these tests do no I/O; the errors that need a cluster or the network are covered by
// tests/integration/cluster.

#include <algorithm>
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

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
  checkUsageError({"--master", m, "result"}, "JOB");
  checkUsageError({"--master", m, "kill"}, "JOB");
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
  for (const char* command : {"submit", "status", "list", "sites", "result", "kill", "put", "plan"}) {
    INFO(command);
    CHECK(r.out.find(command) != std::string::npos);
  }
}

}  // namespace
}  // namespace tellus::cli
