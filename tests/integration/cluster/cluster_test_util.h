#pragma once
// Helpers of the cluster integration tests (tests/integration/cluster): a `tellus` runner
// that controls the environment and measures time, a TCP listener that never answers and a
// deterministic corpus generator. ZooKeeper reads and word counts come from the harness
// (harness/zk_reader.h, harness/wordcount.h).

#include <google/protobuf/message.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/files.h"
#include "harness/mini_cluster.h"
#include "harness/temp_dir.h"
#include "harness/wordcount.h"
#include "harness/zk_reader.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::itest {

// The tests read the cluster's state with the harness's ZooKeeper reader, and check word
// counts with the harness's independent counter.
using harness::ZkReader;
using harness::countWords;
using harness::parseWordCounts;
using harness::describeDifferences;

// One run of the `tellus` CLI.
struct CliRun {
  bool finished = false;  // false: still running at the deadline (then killed)
  int exitCode = -1;      // 128 + signal when killed by a signal
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};
};

// Runs build/bin/tellus with exactly the given arguments (no implicit --master) and extra
// environment variables; output is captured through files in a private temp dir.
class CliRunner {
 public:
  CliRunner();
  CliRun run(const std::vector<std::string>& args, const std::vector<std::pair<std::string, std::string>>& env = {},
             std::chrono::milliseconds deadline = std::chrono::milliseconds(30000));
  // Writes `content` to a fresh file in the runner's temp dir (job specs, inputs).
  std::filesystem::path writeFile(const std::string& name, const std::string& content);
  std::filesystem::path binDir() const;
  const std::filesystem::path& dir() const { return dir_.path(); }

 private:
  harness::TempDir dir_;
  uint32_t runs_ = 0;
};

// A TCP listener on 127.0.0.1 that completes connections (the kernel accepts them into the
// backlog) and never reads or answers: a server that hangs. Closed on destruction.
class SilentServer {
 public:
  static Result<std::unique_ptr<SilentServer>> start();
  ~SilentServer();
  SilentServer(const SilentServer&) = delete;
  SilentServer& operator=(const SilentServer&) = delete;
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  SilentServer(int fd, uint16_t port) : fd_(fd), port_(port) {}
  int fd_;
  uint16_t port_;
};

// A deterministic text of about `lines` lines for `seed`: words drawn (skewed) from a fixed
// vocabulary, in mixed case, with digits, punctuation, tabs, CRLF line ends, empty lines and
// non-ASCII UTF-8 letters that split words. Ends without a trailing newline if
// `trailingNewline` is false.
std::string generateCorpus(uint32_t seed, size_t lines, bool trailingNewline);

// Parses the JSON printed by `tellus --json ...` into `message`.
Status parseJson(const std::string& json, google::protobuf::Message& message);

using harness::processAlive;

// Live (non-zombie) processes of this user whose command line has an argument containing
// `fragment`, e.g. the executors of one job (their task file lies under
// <worker data>/containers/<job id>/).
std::vector<pid_t> processesWithArgument(const std::string& fragment);

// The cluster shared by every test case of this binary (3 sites x 2 workers x 3 containers),
// started on first use and torn down at exit: starting one costs seconds, and the tests use
// their own datasets and jobs, so they do not disturb each other. Fails the calling test if
// the cluster could not start.
harness::MiniCluster& sharedCluster();

// A ZooKeeper session on the shared cluster's ZooKeeper, chroot /tellus (the daemons' root).
ZkReader& sharedZk();

// Thin wrappers of `tellus` commands on the cluster, through the master of `site`. Errors
// carry the command's exit code and stderr.
Result<std::string> submitJob(harness::MiniCluster& cluster, const std::filesystem::path& spec, const std::string& site);
Result<pb::JobStatusResponse> jobStatus(harness::MiniCluster& cluster, const std::string& jobId,
                                        const std::string& site);
Result<std::set<std::string>> jobIds(harness::MiniCluster& cluster, const std::string& site);

// Polls `tellus status` at `site` until the job is in `state` (true) or the deadline passes,
// or the job reaches a different terminal state (false); `last` gets the last status seen.
bool waitForJobState(harness::MiniCluster& cluster, const std::string& jobId, pb::JobState state,
                     const std::string& site, std::chrono::milliseconds deadline, pb::JobStatusResponse* last = nullptr);

std::string trimmed(std::string s);

// The error message of a failed Status/Result, "" when it succeeded (for INFO()).
template <class StatusOrResult>
std::string whyNot(const StatusOrResult& r) {
  return r.isOk() ? std::string() : r.message();
}

}  // namespace tellus::itest
