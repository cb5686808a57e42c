#pragma once
// Helpers of the cluster integration tests (tests/integration/cluster): a synchronous
// ZooKeeper reader for asserting the job-state layout, a `tellus` runner that controls the
// environment and measures time, a TCP listener that never answers, an independent word
// counter and a deterministic corpus generator.

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

#include "coord/zk_client.h"
#include "harness/io_thread.h"
#include "harness/mini_cluster.h"
#include "harness/temp_dir.h"
#include "tellus.pb.h"
#include "util/result.h"

namespace tellus::itest {

// A ZooKeeper session of the test itself, used only to read the cluster's state. Blocking
// calls: each runs one coroutine on a private io thread and waits for it.
class ZkInspector {
 public:
  // Connects (chroot applied by the client) and waits up to `timeout` for the session.
  static Result<std::unique_ptr<ZkInspector>> connect(const std::string& connectString, const std::string& chroot,
                                                       std::chrono::milliseconds timeout);
  ~ZkInspector();
  ZkInspector(const ZkInspector&) = delete;
  ZkInspector& operator=(const ZkInspector&) = delete;

  Result<coord::NodeData> get(const std::string& path);
  // kNotFound when the node is missing.
  Result<std::vector<std::string>> children(const std::string& path);
  Result<bool> exists(const std::string& path);
  Result<coord::NodeStat> stat(const std::string& path);

  // get() and parse; kInternal (naming the path) when the bytes are not a `Message`.
  template <class Message>
  Result<Message> getProto(const std::string& path) {
    auto node = get(path);
    if (!node) return node.error();
    Message m;
    if (!m.ParseFromString(node->data)) {
      return makeError(ErrorCode::kInternal, path + " does not parse as " + m.GetTypeName());
    }
    return m;
  }

 private:
  ZkInspector() = default;
  harness::IoThread io_;  // declared first: outlives the client bound to it
  std::shared_ptr<coord::ZkClient> client_;
};

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

// Word counts of `text`, computed here independently of the daemons: a word is a maximal run
// of ASCII letters and digits, lowercased; every other byte separates words.
std::map<std::string, uint64_t> countWords(std::string_view text);

// Parses a word count result ("word\tcount" per line). Errors name the offending line,
// including a word that appears twice (every word must come from exactly one reduce task).
Result<std::map<std::string, uint64_t>> parseWordCounts(std::string_view text);

// A deterministic text of about `lines` lines for `seed`: words drawn (skewed) from a fixed
// vocabulary, in mixed case, with digits, punctuation, tabs, CRLF line ends, empty lines and
// non-ASCII UTF-8 letters that split words. Ends without a trailing newline if
// `trailingNewline` is false.
std::string generateCorpus(uint32_t seed, size_t lines, bool trailingNewline);

// "a=1 b=2 ..." of the first `limit` differences between two counts (for failure messages).
std::string describeDifferences(const std::map<std::string, uint64_t>& expected,
                                const std::map<std::string, uint64_t>& actual, size_t limit = 10);

// Parses the JSON printed by `tellus --json ...` into `message`.
Status parseJson(const std::string& json, google::protobuf::Message& message);

// True while a process with this pid exists and is not a zombie.
bool processAlive(pid_t pid);

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
ZkInspector& sharedZk();

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
