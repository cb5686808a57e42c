// common/proc against the real OS: spawning, redirection, signals, process groups, reaping,
// and loopback port helpers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "harness/eventually.h"
#include "harness/files.h"
#include "harness/temp_dir.h"
#include "proc/ports.h"
#include "proc/subprocess.h"

using namespace std::chrono_literals;
using tellus::ErrorCode;
using tellus::harness::eventually;
using tellus::harness::TempDir;
using tellus::proc::SpawnOptions;
using tellus::proc::Subprocess;

namespace {

using tellus::harness::readFile;

// True when `pid` no longer exists or is a zombie (a reparented grandchild may wait for an
// init that does not reap promptly in a container).
bool processGone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

}  // namespace

TEST_CASE("a child's exit code is reported", "[integration][proc]") {
  auto child = Subprocess::spawn({.argv = {"/bin/sh", "-c", "exit 3"}});
  REQUIRE(child.isOk());
  CHECK(child->pid() > 0);
  auto status = child->waitFor(10s);
  REQUIRE(status.isOk());
  CHECK(status->exited);
  CHECK(status->code == 3);
  CHECK_FALSE(child->running());
  REQUIRE(child->exitStatus().has_value());
  CHECK(child->exitStatus()->code == 3);
}

TEST_CASE("environment, working directory and output redirection reach the child", "[integration][proc]") {
  TempDir dir("proc-test");
  auto workDir = dir.path() / "work";
  std::filesystem::create_directories(workDir);
  auto out = dir.path() / "out.txt";
  auto err = dir.path() / "err.txt";
  auto child = Subprocess::spawn({.argv = {"sh", "-c", "echo \"$TELLUS_PROC_TEST $(pwd)\"; echo oops >&2"},
                                  .extraEnv = {{"TELLUS_PROC_TEST", "hello"}},
                                  .workingDir = workDir,
                                  .stdoutFile = out,
                                  .stderrFile = err});
  REQUIRE(child.isOk());
  auto status = child->waitFor(10s);
  REQUIRE(status.isOk());
  CHECK(status->success());
  CHECK(readFile(out) == "hello " + std::filesystem::canonical(workDir).string() + "\n");
  CHECK(readFile(err) == "oops\n");
}

TEST_CASE("spawn failures are clear errors", "[integration][proc]") {
  auto missing = Subprocess::spawn({.argv = {"/nonexistent/tellus-no-such-program"}});
  REQUIRE_FALSE(missing.isOk());
  CHECK(missing.error().code == ErrorCode::kNotFound);
  CHECK_THAT(missing.message(), Catch::Contains("tellus-no-such-program"));

  auto badDir = Subprocess::spawn({.argv = {"/bin/true"}, .workingDir = "/nonexistent/dir"});
  REQUIRE_FALSE(badDir.isOk());
  CHECK_THAT(badDir.message(), Catch::Contains("/nonexistent/dir"));

  auto badOut = Subprocess::spawn({.argv = {"/bin/true"}, .stdoutFile = "/nonexistent/dir/out.log"});
  REQUIRE_FALSE(badOut.isOk());
  CHECK_THAT(badOut.message(), Catch::Contains("/nonexistent/dir/out.log"));
}

TEST_CASE("waitFor times out on a running child, signal ends it", "[integration][proc]") {
  auto child = Subprocess::spawn({.argv = {"sleep", "30"}});
  REQUIRE(child.isOk());
  CHECK_FALSE(child->tryWait().has_value());
  auto start = std::chrono::steady_clock::now();
  auto timedOut = child->waitFor(100ms);
  REQUIRE_FALSE(timedOut.isOk());
  CHECK(timedOut.error().code == ErrorCode::kDeadlineExceeded);
  CHECK(std::chrono::steady_clock::now() - start >= 100ms);
  CHECK(child->running());

  REQUIRE(child->signal(SIGTERM).isOk());
  auto status = child->waitFor(10s);
  REQUIRE(status.isOk());
  CHECK_FALSE(status->exited);
  CHECK(status->signal == SIGTERM);
  CHECK(child->signal(SIGTERM).code() == ErrorCode::kNotFound);
}

TEST_CASE("the destructor kills and reaps a running child", "[integration][proc]") {
  pid_t pid = -1;
  {
    auto child = Subprocess::spawn({.argv = {"sleep", "30"}});
    REQUIRE(child.isOk());
    pid = child->pid();
    REQUIRE(::kill(pid, 0) == 0);
  }
  // Reaped, not a zombie: the pid no longer exists at all.
  CHECK(::kill(pid, 0) != 0);
  CHECK(errno == ESRCH);
}

TEST_CASE("moving a Subprocess transfers ownership", "[integration][proc]") {
  auto child = Subprocess::spawn({.argv = {"sleep", "30"}});
  REQUIRE(child.isOk());
  Subprocess owner = std::move(*child);
  CHECK(owner.running());
  CHECK_FALSE(child->running());
  pid_t pid = owner.pid();
  owner = Subprocess(std::move(owner));  // self-move through a temporary keeps it alive
  CHECK(owner.pid() == pid);
  CHECK(owner.running());
  auto ended = owner.terminate(5s);
  CHECK(ended.signal == SIGTERM);
}

TEST_CASE("killGroup reaches grandchildren", "[integration][proc]") {
  TempDir dir("proc-group");
  auto pidFile = dir.path() / "grandchild.pid";
  auto child = Subprocess::spawn(
      {.argv = {"sh", "-c", "sleep 30 & echo $! > " + pidFile.string() + "; wait"}, .newProcessGroup = true});
  REQUIRE(child.isOk());
  CHECK(child->hasOwnGroup());
  REQUIRE(eventually([&] { return !readFile(pidFile).empty() && readFile(pidFile).back() == '\n'; }, 10s));
  pid_t grandchild = std::stoi(readFile(pidFile));
  REQUIRE(::getpgid(grandchild) == child->pid());

  REQUIRE(child->killGroup(SIGKILL).isOk());
  auto status = child->waitFor(10s);
  REQUIRE(status.isOk());
  CHECK(status->signal == SIGKILL);
  CHECK(eventually([&] { return processGone(grandchild); }, 10s));

  auto noGroup = Subprocess::spawn({.argv = {"sleep", "30"}});
  REQUIRE(noGroup.isOk());
  CHECK(noGroup->killGroup(SIGKILL).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("free ports are distinct and waitForTcpPort sees a listener", "[integration][proc]") {
  auto ports = tellus::proc::findFreePorts(5);
  REQUIRE(ports.isOk());
  CHECK(std::set<uint16_t>(ports->begin(), ports->end()).size() == 5);

  auto port = tellus::proc::findFreePort();
  REQUIRE(port.isOk());
  auto start = std::chrono::steady_clock::now();
  auto nobody = tellus::proc::waitForTcpPort("127.0.0.1", *port, start + 100ms);
  CHECK(nobody.code() == ErrorCode::kDeadlineExceeded);
  CHECK_THAT(nobody.message(), Catch::Contains(std::to_string(*port)));

  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listener >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(*port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  CHECK(tellus::proc::waitForTcpPort("127.0.0.1", *port, std::chrono::steady_clock::now() + 5s).isOk());
  ::close(listener);

  CHECK(tellus::proc::waitForTcpPort("not-an-ip", 1, start).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("dieWithParent children behave like others and die with their spawning thread", "[integration][proc]") {
  TempDir dir("proc-pdeath");
  auto out = dir.path() / "out.txt";
  auto child = Subprocess::spawn({.argv = {"sh", "-c", "echo \"$TELLUS_PROC_TEST $(pwd)\"; exit 4"},
                                  .extraEnv = {{"TELLUS_PROC_TEST", "forked"}},
                                  .workingDir = dir.path(),
                                  .stdoutFile = out,
                                  .newProcessGroup = true,
                                  .dieWithParent = true});
  REQUIRE(child.isOk());
  CHECK(::getpgid(child->pid()) == child->pid());
  auto status = child->waitFor(10s);
  REQUIRE(status.isOk());
  CHECK(status->code == 4);
  CHECK(readFile(out) == "forked " + std::filesystem::canonical(dir.path()).string() + "\n");

  auto missing = Subprocess::spawn({.argv = {"tellus-no-such-program-anywhere"}, .dieWithParent = true});
  REQUIRE_FALSE(missing.isOk());
  CHECK(missing.error().code == ErrorCode::kNotFound);

  // The spawning thread ends while the child runs: the kernel kills the child.
  std::optional<Subprocess> orphan;
  std::thread spawner([&] {
    auto spawned = Subprocess::spawn({.argv = {"sleep", "30"}, .dieWithParent = true});
    if (spawned) orphan.emplace(std::move(*spawned));
  });
  spawner.join();
  REQUIRE(orphan.has_value());
  auto ended = orphan->waitFor(10s);
  REQUIRE(ended.isOk());
  CHECK(ended->signal == SIGKILL);
}

TEST_CASE("a socket as stdin, and a pidfd that turns readable when the child ends", "[integration][proc]") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  SpawnOptions opts;
  // Answers on the same socket it reads from (its stdin), then exits.
  opts.argv = {"/bin/sh", "-c", "read line; echo \"got $line\" >&0"};
  opts.stdinFd = sv[1];
  auto child = Subprocess::spawn(opts);
  ::close(sv[1]);
  REQUIRE(child.isOk());
  auto pidFd = child->openPidFd();
  REQUIRE(pidFd.isOk());
  REQUIRE(::write(sv[0], "hello\n", 6) == 6);
  std::string answer;
  char buf[64];
  ssize_t n;
  while ((n = ::read(sv[0], buf, sizeof buf)) > 0) answer.append(buf, static_cast<size_t>(n));
  ::close(sv[0]);
  CHECK(answer == "got hello\n");
  pollfd pfd{*pidFd, POLLIN, 0};
  CHECK(::poll(&pfd, 1, 10000) == 1);  // readable once the child has ended (bounded wait)
  ::close(*pidFd);
  auto status = child->tryWait();
  REQUIRE(status.has_value());
  CHECK(status->success());
  auto late = child->openPidFd();
  REQUIRE_FALSE(late.isOk());
  CHECK(late.error().code == ErrorCode::kNotFound);

  SpawnOptions bad;
  bad.argv = {"/bin/true"};
  bad.stdinFd = -1;
  CHECK_FALSE(Subprocess::spawn(bad).isOk());
}
