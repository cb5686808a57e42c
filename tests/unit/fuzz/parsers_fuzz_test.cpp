// Random and mutated input for every parser that reads bytes from outside the process: each
// must return a value or an error, never crash, throw or hang. Seeded and time-bounded (see
// harness/fuzz.h); the seed is printed, and a failure names the round and the input size.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "config/config.h"
#include "coord/credentials.h"
#include "harness/fuzz.h"
#include "job/spec.h"
#include "net/frame.h"

#include <fmt/format.h>

namespace tellus {
namespace {

using Clock = std::chrono::steady_clock;
using harness::Mutator;

constexpr double kDefaultSecondsPerTarget = 1.0;

// The input of the round running now, for the failure message (escaped, cut to 2000 bytes).
std::string lastInput;

std::string printable(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 2000)) {
    const auto u = static_cast<unsigned char>(c);
    if (u == '\n') {
      out += "\\n\n";
    } else if (u < 0x20 || u >= 0x7f || u == '\\') {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

// Writes the input of a failed round to fuzz-failure-<name>.bin in the working directory, to
// replay it exactly.
void keepFailingInput(const std::string& name) {
  std::string file = "fuzz-failure-" + name + ".bin";
  std::replace_if(file.begin(), file.end(), [](char c) { return c == ' ' || c == '(' || c == ')'; }, '-');
  std::ofstream(file, std::ios::binary) << lastInput;
  std::cerr << "fuzz " << name << ": failing input written to " << file << "\n";
}

// Runs `round(mutator, i)` until the time is up (at least 50 rounds); an escaping exception
// fails the test with the seed, the round and its input (rounds record it in lastInput).
void fuzzFor(const std::string& name, const std::function<void(Mutator&, std::size_t)>& round) {
  const auto settings = harness::fuzzSettings(name, kDefaultSecondsPerTarget);
  // Each target draws its own sequence from the printed seed.
  Mutator mutator(settings.seed ^ std::hash<std::string>()(name));
  const auto end = Clock::now() + settings.duration;
  std::size_t rounds = 0;
  for (; rounds < 50 || Clock::now() < end; ++rounds) {
    lastInput.clear();
    try {
      round(mutator, rounds);
    } catch (const std::exception& e) {
      keepFailingInput(name);
      FAIL(name << ": round " << rounds << " (seed " << settings.seed << ") threw: " << e.what() << "\ninput:\n"
                << printable(lastInput));
    } catch (...) {
      keepFailingInput(name);
      FAIL(name << ": round " << rounds << " (seed " << settings.seed << ") threw a non-standard exception\ninput:\n"
                << printable(lastInput));
    }
  }
  SUCCEED(name << ": " << rounds << " rounds");
}

// Picks a seed input and mutates it, or makes random bytes, or splices two seeds.
std::string input(Mutator& m, const std::vector<std::string>& seeds) {
  switch (m.below(6)) {
    case 0: return m.randomBytes(512);
    case 1: return seeds[m.below(seeds.size())];
    case 2: return m.mutate(seeds[m.below(seeds.size())] + seeds[m.below(seeds.size())]);
    default: return m.mutate(seeds[m.below(seeds.size())]);
  }
}

// --- frames ---------------------------------------------------------------------------------

std::string validFrame(Mutator& m) {
  pb::RpcMeta meta;
  meta.set_call_id(m.interestingNumber());
  meta.set_method(m.chance(0.5) ? "master.Status" : m.hostileString().substr(0, 100));
  meta.set_timeout_ms(static_cast<std::uint32_t>(m.interestingNumber()));
  meta.set_is_response(m.chance(0.3));
  meta.set_status(static_cast<pb::RpcStatus>(m.below(9)));
  auto frame = net::encodeFrame(meta, m.randomBytes(300));
  REQUIRE(frame.isOk());
  return *frame;
}

TEST_CASE("fuzz: the frame decoder returns frames or an error for any byte stream", "[unit][fuzz]") {
  constexpr std::size_t kMaxFrame = 64 * 1024;
  fuzzFor("frame decoder", [&](Mutator& m, std::size_t) {
    std::string stream;
    const std::size_t frames = 1 + m.below(4);
    for (std::size_t i = 0; i < frames; ++i) stream += validFrame(m);
    if (m.chance(0.7)) stream = m.mutate(std::move(stream));
    if (m.chance(0.1)) stream = m.randomBytes(2048);

    net::FrameDecoder decoder(kMaxFrame);
    std::size_t at = 0;
    bool failed = false;
    while (at < stream.size() && !failed) {
      const std::size_t chunk = 1 + m.below(std::min<std::size_t>(stream.size() - at, 700));
      decoder.feed(std::string_view(stream).substr(at, chunk));
      at += chunk;
      // Never more than one frame plus one chunk is buffered.
      REQUIRE(decoder.bufferedBytes() <= kMaxFrame + chunk);
      for (int guard = 0; guard < 10000; ++guard) {
        auto next = decoder.next();
        if (!next) {
          CHECK(next.error().code == ErrorCode::kInvalidArgument);
          failed = true;
          break;
        }
        if (!*next) break;
        REQUIRE(guard < 9999);  // a decoder that keeps yielding frames from finite input hangs
      }
    }
    if (failed) {
      // Errors are final.
      decoder.feed(validFrame(m));
      CHECK_FALSE(decoder.next().isOk());
    }
  });
}

// --- job specs ------------------------------------------------------------------------------

const std::vector<std::string> kSpecs = {
    "name: wordcount\nplacement: proportional\nmax_task_attempts: 4\nstages:\n"
    "  - name: map\n    op: wordcount.map\n    input: {dataset: corpus}\n"
    "  - name: reduce\n    op: wordcount.reduce\n    tasks: 4\n    input: {stage: map}\n",
    "name: grep-sort\nplacement: tetrium\nstages:\n"
    "  - name: grep\n    op: grep\n    input: {dataset: logs}\n    params: {pattern: timeout, regex: false}\n"
    "  - name: sort\n    op: sort\n    tasks: 4\n    input: {stage: grep}\n"
    "  - name: count\n    op: exec\n    tasks: 4\n    input: {stage: sort, edge: forward}\n"
    "    params: {cmd: \"uniq -c\"}\n",
    "name: join.v2\nplacement: in-place\nmax_task_attempts: 2\nstages:\n"
    "  - name: scan\n    op: grep\n    inputs: [{dataset: left}, {dataset: right}]\n"
    "    params: {pattern: 'a b', regex: true}\n"
    "  - name: part\n    op: synthetic\n    params: {cpu_ms: 10, output_ratio: 0.50}\n    tasks: 3\n"
    "    inputs:\n      - stage: scan\n        edge: shuffle\n"
    "  - name: sorted\n    op: sort\n    tasks: 3\n    input: {stage: part, edge: forward}\n"
    "  - name: total\n    op: sum\n    tasks: 3\n    inputs: [{stage: sorted, edge: forward}, {stage: scan}]\n",
};

const std::vector<std::string> kSpecWords = {"map",   "reduce",  "corpus",   "wordcount.map", "wordcount.reduce",
                                             "exec",  "grep",    "identity", "sort",          "synthetic",
                                             "shuffle", "forward", "tetrium", "proportional", "in-place", "sum", "scan", "cpu_ms", "pattern", "cmd"};

TEST_CASE("fuzz: the job spec parser and validator return errors and never crash", "[unit][fuzz]") {
  std::vector<pb::JobSpec> valid;
  for (const auto& yaml : kSpecs) {
    auto spec = job::parseJobSpec(yaml, "job.yaml");
    INFO((spec.isOk() ? "" : spec.message()));
    REQUIRE(spec.isOk());
    valid.push_back(*spec);
  }
  fuzzFor("job spec (YAML)", [&](Mutator& m, std::size_t) {
    lastInput = input(m, kSpecs);
    auto spec = job::parseJobSpec(lastInput, "job.yaml");
    // Whatever parses must also pass validation (parseJobSpec validates).
    if (spec.isOk()) CHECK(job::validateJobSpec(*spec).isOk());
  });
  fuzzFor("job spec (proto)", [&](Mutator& m, std::size_t) {
    pb::JobSpec spec = valid[m.below(valid.size())];
    if (m.chance(0.2)) {
      m.randomize(spec, kSpecWords);
    } else {
      m.mutateFields(spec, kSpecWords);
    }
    lastInput = spec.ShortDebugString();
    const Status st = job::validateJobSpec(spec);
    if (st.isOk()) {
      // A spec that validates is safe for the helpers the JM and master call on it.
      for (std::uint32_t s = 0; s < static_cast<std::uint32_t>(spec.stages_size()); ++s) {
        (void)job::downstreamStages(spec, s);
        (void)job::outputBuckets(spec, s);
      }
    } else {
      CHECK(st.code() == ErrorCode::kInvalidArgument);
    }
    // The bytes of a mutated spec, as they arrive over RPC.
    pb::JobSpec fromWire;
    if (fromWire.ParseFromString(m.mutate(spec.SerializeAsString()))) (void)job::validateJobSpec(fromWire);
  });
}

// --- daemon configs -------------------------------------------------------------------------

// Every daemon config also names its RPC and ZooKeeper security: both forms are seeds to mutate.
const std::string kZk = "zookeeper:\n  connect: zk1:2181,zk2:2181\n  chroot: /tellus/test\n  session_timeout_ms: 4000\n"
                        "  credentials_file: /etc/tellus/zk-credentials\ninsecure: true\n";
const std::string kTls = "tls: {ca_file: /etc/tellus/ca.pem, cert_file: /etc/tellus/d.pem, key_file: /etc/tellus/d.key}\n";
const std::string kRpc =
    "rpc:\n  max_frame_bytes: 1048576\n  max_connections: 100\n  max_connections_per_peer: 10\n"
    "  idle_timeout_ms: 1000\n  frame_deadline_ms: 2000\n  max_calls_per_s: 50\n  call_burst: 60\n";

const std::vector<std::string> kMasters = {
    "site: eu-west\nlisten: 0.0.0.0:7100\nhttp_listen: 127.0.0.1:0\n" + kZk +
        "data_dir: /var/lib/tellus\ndatasets:\n  - name: corpus\n    dir: /data/corpus\n    worker: w1\n"
        "  - name: logs.2024\n    dir: /data/logs\n    worker: w2\n    residency: local\n"
        "schedule_period_ms: 500\nworker_timeout_ms: 2000\nmax_jm_crashes: 3\n" + kRpc + "log_level: debug\n",
    "site: us-east\nlisten: 0.0.0.0:7100\nzookeeper: {connect: 'zk:2181', insecure: true}\ndata_dir: /var/lib/tellus\n" + kTls,
    "site: a\nlisten: 127.0.0.1:7100\nzookeeper: {connect: 'localhost:2181', insecure: true}\ndata_dir: /tmp/a\ninsecure: true\n",
};
const std::vector<std::string> kWorkers = {
    "id: w1\nsite: eu-west\nlisten: '[::1]:0'\nmaster: 10.0.0.1:7100\n" + kZk +
        "containers: 8\ndata_dir: /var/lib/tellus-worker\nbin_dir: /opt/tellus/bin\nheartbeat_ms: 250\n"
        "wan:\n  - to_site: us-east\n    bandwidth_mbps: 100.5\n    latency_ms: 80\n  - {to_site: ap-south}\n" + kRpc +
        "log_level: warn\n",
};
const std::vector<std::string> kJms = {
    "job_id: job-1\nsite: a\nrole: primary\nlisten: 127.0.0.1:0\nmaster: 127.0.0.1:7100\nworker_id: w1\n" + kZk +
        "period_ms: 250\ntick_ms: 50\nsteal_interval_ms: 100\njm_grace_ms: 500\njm_request_interval_ms: 900\n"
        "safety_reread_ms: 1000\npublish_interval_ms: 500\nmarkers_coalesce_ms: 100\n" + kRpc + "log_level: trace\n",
};

TEST_CASE("fuzz: every config parser returns errors and never crashes", "[unit][fuzz]") {
  // The seeds are valid configs (a mutation of garbage would test little).
  for (const auto& yaml : kMasters) {
    auto parsed = config::parseMasterConfig(yaml, "master.yaml");
    INFO(yaml << (parsed.isOk() ? std::string() : parsed.message()));
    REQUIRE(parsed.isOk());
  }
  for (const auto& yaml : kWorkers) {
    auto parsed = config::parseWorkerConfig(yaml, "worker.yaml");
    INFO(yaml << (parsed.isOk() ? std::string() : parsed.message()));
    REQUIRE(parsed.isOk());
  }
  for (const auto& yaml : kJms) {
    auto parsed = config::parseJmConfig(yaml, "jm.yaml");
    INFO(yaml << (parsed.isOk() ? std::string() : parsed.message()));
    REQUIRE(parsed.isOk());
  }

  fuzzFor("master config", [&](Mutator& m, std::size_t) {
    lastInput = input(m, kMasters);
    auto c = config::parseMasterConfig(lastInput, "master.yaml");
    if (!c) CHECK(c.error().code == ErrorCode::kInvalidArgument);
  });
  fuzzFor("worker config", [&](Mutator& m, std::size_t) {
    lastInput = input(m, kWorkers);
    auto c = config::parseWorkerConfig(lastInput, "worker.yaml");
    if (!c) CHECK(c.error().code == ErrorCode::kInvalidArgument);
  });
  fuzzFor("jm config", [&](Mutator& m, std::size_t) {
    lastInput = input(m, kJms);
    auto c = config::parseJmConfig(lastInput, "jm.yaml");
    if (!c) {
      CHECK(c.error().code == ErrorCode::kInvalidArgument);
      return;
    }
    // What a worker writes for its JM reads back to the same config.
    auto back = config::parseJmConfig(config::toYaml(*c), "jm.yaml");
    INFO((back.isOk() ? "" : back.message()));
    CHECK(back.isOk());
  });
  // The ZooKeeper credentials file a config names.
  const std::vector<std::string> credentials = {"tellus:0123456789abcdef0123456789abcdef\n", "a.b_c-d:p:a:s:s"};
  fuzzFor("zookeeper credentials file", [&](Mutator& m, std::size_t) {
    lastInput = input(m, credentials);
    auto c = coord::parseDigestCredentials(lastInput, "zk-credentials");
    if (!c) {
      CHECK(c.error().code == ErrorCode::kInvalidArgument);
      return;
    }
    // What parses is one line a daemon can send as is, and reads back the same.
    CHECK(c->authString().find_first_of(std::string("\0\r\n", 3)) == std::string::npos);
    auto again = coord::parseDigestCredentials(c->authString(), "zk-credentials");
    REQUIRE(again.isOk());
    CHECK(again->user == c->user);
    CHECK(again->password == c->password);
  });
}

}  // namespace
}  // namespace tellus
