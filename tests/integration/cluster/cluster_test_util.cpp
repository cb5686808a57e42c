#include "cluster_test_util.h"

#include <arpa/inet.h>
#include <google/protobuf/util/json_util.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "harness/eventually.h"
#include "proc/subprocess.h"

namespace tellus::itest {

using std::chrono::milliseconds;

namespace {

std::string readAll(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// CliRunner

CliRunner::CliRunner() : dir_("cluster-itest-cli") {}

std::filesystem::path CliRunner::binDir() const {
  const char* build = std::getenv("TELLUS_BUILD_DIR");
  return std::filesystem::path(build ? build : "build") / "bin";
}

std::filesystem::path CliRunner::writeFile(const std::string& name, const std::string& content) {
  auto path = dir_.path() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  return path;
}

CliRun CliRunner::run(const std::vector<std::string>& args, const std::vector<std::pair<std::string, std::string>>& env,
                      milliseconds deadline) {
  ++runs_;
  auto outFile = dir_.path() / ("run-" + std::to_string(runs_) + ".out");
  auto errFile = dir_.path() / ("run-" + std::to_string(runs_) + ".err");
  proc::SpawnOptions opts;
  opts.argv = {(binDir() / "tellus").string()};
  opts.argv.insert(opts.argv.end(), args.begin(), args.end());
  opts.extraEnv = env;
  opts.stdoutFile = outFile;
  opts.stderrFile = errFile;
  CliRun r;
  auto start = std::chrono::steady_clock::now();
  auto p = proc::Subprocess::spawn(opts);
  if (!p) {
    r.err = "cannot start tellus: " + p.message();
    return r;
  }
  auto status = p->waitFor(deadline);
  r.elapsed = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  if (status) {
    r.finished = true;
    r.exitCode = status->exited ? status->code : 128 + status->signal;
  }
  // (An unfinished child is killed and reaped when `p` goes away.)
  r.out = readAll(outFile);
  r.err = readAll(errFile);
  return r;
}

// ---------------------------------------------------------------------------------------------
// SilentServer

Result<std::unique_ptr<SilentServer>> SilentServer::start() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return makeError(ErrorCode::kInternal, std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return makeError(ErrorCode::kInternal, "silent listener: " + why);
  }
  return std::unique_ptr<SilentServer>(new SilentServer(fd, ntohs(addr.sin_port)));
}

SilentServer::~SilentServer() { ::close(fd_); }

// ---------------------------------------------------------------------------------------------
// Word counts and corpora

std::string generateCorpus(uint32_t seed, size_t lines, bool trailingNewline) {
  // A fixed vocabulary of 1..3 syllables: the same for every seed, so sites share words
  // (their counts must add up across sites) but draw them with different frequencies.
  static const char* const kSyllables[] = {"ka", "lo", "mi", "ter", "on", "zu", "pra", "ex", "ul", "vin", "do", "re"};
  constexpr size_t kSyllableCount = sizeof(kSyllables) / sizeof(kSyllables[0]);
  std::vector<std::string> vocabulary;
  for (size_t a = 0; a < kSyllableCount; ++a) {
    vocabulary.push_back(kSyllables[a]);
    for (size_t b = 0; b < kSyllableCount; b += 2) {
      vocabulary.push_back(std::string(kSyllables[a]) + kSyllables[b]);
      if ((a + b) % 5 == 0) vocabulary.push_back(std::string(kSyllables[b]) + kSyllables[a] + kSyllables[(a + b) % kSyllableCount]);
    }
  }
  // Separators between words; the UTF-8 ones (é, ü, —) are non-ASCII bytes, so they split.
  static const char* const kSeparators[] = {" ", " ", " ", "  ", ", ", ". ", "\t", " -- ", "/", "'", " (", ") ",
                                            "\xc3\xa9", " \xc3\xbc ", "\xe2\x80\x94", "_", ";"};
  std::mt19937 rng(seed);
  // Skewed (roughly Zipf) choice: a few words are frequent, many are rare.
  std::vector<double> weights;
  for (size_t i = 0; i < vocabulary.size(); ++i) weights.push_back(1.0 / static_cast<double>(1 + (i * 7 + seed) % vocabulary.size()));
  std::discrete_distribution<size_t> pickWord(weights.begin(), weights.end());
  std::uniform_int_distribution<size_t> pickSeparator(0, sizeof(kSeparators) / sizeof(kSeparators[0]) - 1);
  std::uniform_int_distribution<int> percent(0, 99);
  std::uniform_int_distribution<int> wordsPerLine(1, 14);

  std::string text;
  for (size_t line = 0; line < lines; ++line) {
    int kind = percent(rng);
    if (kind < 3) {
      // An empty line (or one of only separators).
      text += kind == 0 ? "" : " ,. ";
    } else {
      int n = wordsPerLine(rng);
      for (int w = 0; w < n; ++w) {
        if (w > 0) text += kSeparators[pickSeparator(rng)];
        std::string word = vocabulary[pickWord(rng)];
        int shape = percent(rng);
        if (shape < 15) {
          word[0] = static_cast<char>(word[0] - 'a' + 'A');  // Capitalized
        } else if (shape < 20) {
          for (char& c : word) c = static_cast<char>(c - 'a' + 'A');  // UPPER
        } else if (shape < 25) {
          word += std::to_string(percent(rng));  // letters then digits: one word ("ka42")
        } else if (shape < 28) {
          word = std::to_string(1990 + percent(rng) % 40);  // a number alone
        }
        text += word;
      }
    }
    bool last = line + 1 == lines;
    if (!last || trailingNewline) text += percent(rng) < 10 ? "\r\n" : "\n";
  }
  return text;
}

Status parseJson(const std::string& json, google::protobuf::Message& message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(json, &message, options);
  if (!st.ok()) {
    return makeError(ErrorCode::kInvalidArgument,
                     "not a " + message.GetTypeName() + " in JSON: " + std::string(st.message()) + ": " + json);
  }
  return {};
}

std::vector<pid_t> processesWithArgument(const std::string& fragment) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = readAll(entry.path() / "cmdline");  // arguments separated by NULs
    size_t start = 0;
    while (start < cmdline.size()) {
      size_t end = cmdline.find('\0', start);
      if (end == std::string::npos) end = cmdline.size();
      if (std::string_view(cmdline).substr(start, end - start).find(fragment) != std::string_view::npos) {
        auto pid = static_cast<pid_t>(std::stol(name));
        if (processAlive(pid)) out.push_back(pid);
        break;
      }
      start = end + 1;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The shared cluster

harness::MiniCluster& sharedCluster() {
  // Started once; a failed start is remembered, so every test reports it without retrying.
  static Result<std::unique_ptr<harness::MiniCluster>> cluster = [] {
    harness::MiniClusterOptions options;
    options.sites = 3;
    options.workersPerSite = 2;
    options.containersPerWorker = 3;
    options.execYaml = harness::kExecEnabledYaml;  // its jobs use exec
    // Prices, so that `tellus cost` has something to multiply (every site alike: egress_gb
    // may not name a master's own site). 0.01 per container-second, 0.002 per byte.
    options.masterExtraYaml = "prices:\n  container_hour: 36\n  market: spot\n  egress_gb: {default: 2000000}\n"
                              // client/ops may act on any job (security_test.cpp); client/harness,
                              // which runs the CLI, only on its own.
                              "admins: [ops]\n";
    return harness::MiniCluster::start(options);
  }();
  INFO("starting the mini cluster: " << whyNot(cluster));
  REQUIRE(cluster.isOk());
  return **cluster;
}

ZkReader& sharedZk() {
  static Result<std::unique_ptr<ZkReader>> zk =
      sharedCluster().connectZkReader(milliseconds(20000));
  INFO("connecting to the cluster's ZooKeeper: " << whyNot(zk));
  REQUIRE(zk.isOk());
  return **zk;
}

// ---------------------------------------------------------------------------------------------
// CLI wrappers

namespace {

Error cliError(const std::string& what, const harness::CliResult& r) {
  return makeError(ErrorCode::kInternal,
                   what + " exited " + std::to_string(r.exitCode) + ": " + trimmed(r.err) + " " + trimmed(r.out));
}

bool terminalState(pb::JobState s) { return s == pb::JOB_SUCCEEDED || s == pb::JOB_FAILED || s == pb::JOB_KILLED; }

}  // namespace

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t start = s.find_first_not_of(" \n");
  return start == std::string::npos ? "" : s.substr(start);
}

Result<std::string> submitJob(harness::MiniCluster& cluster, const std::filesystem::path& spec,
                              const std::string& site) {
  auto r = cluster.tellus({"submit", spec.string()}, site);
  if (r.exitCode != 0) return cliError("tellus submit " + spec.filename().string(), r);
  std::string id = trimmed(r.out);
  if (id.rfind("job-", 0) != 0 || id.find('\n') != std::string::npos) {
    return makeError(ErrorCode::kInternal, "tellus submit printed '" + r.out + "', not a job id");
  }
  return id;
}

Result<pb::JobStatusResponse> jobStatus(harness::MiniCluster& cluster, const std::string& jobId,
                                        const std::string& site) {
  auto r = cluster.tellus({"--json", "status", jobId}, site);
  if (r.exitCode != 0) return cliError("tellus status " + jobId, r);
  pb::JobStatusResponse status;
  TELLUS_RETURN_IF_ERROR(parseJson(r.out, status));
  return status;
}

Result<std::set<std::string>> jobIds(harness::MiniCluster& cluster, const std::string& site) {
  auto r = cluster.tellus({"--json", "list"}, site);
  if (r.exitCode != 0) return cliError("tellus list", r);
  pb::ListJobsResponse list;
  TELLUS_RETURN_IF_ERROR(parseJson(r.out, list));
  std::set<std::string> ids;
  for (const auto& j : list.jobs()) ids.insert(j.job_id());
  return ids;
}

bool waitForJobState(harness::MiniCluster& cluster, const std::string& jobId, pb::JobState state,
                     const std::string& site, milliseconds deadline, pb::JobStatusResponse* last) {
  bool reached = false;
  bool hopeless = false;
  harness::eventually(
      [&] {
        auto st = jobStatus(cluster, jobId, site);
        if (!st) return false;
        if (last) *last = *st;
        reached = st->status().state() == state;
        hopeless = !reached && terminalState(st->status().state());
        return reached || hopeless;
      },
      deadline, milliseconds(100));
  return reached;
}

}  // namespace tellus::itest
