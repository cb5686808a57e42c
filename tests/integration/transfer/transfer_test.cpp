// Pipelined fetches (transfer/fetch.h, the worker's fetch path) from real workers of a mini
// cluster, over mutual TLS and plaintext: multi-chunk and byte-exact, a corrupted partition
// caught by its checksum (by a fetch, and by worker.Replicate, which keeps nothing of it), and
// a source killed mid-stream replaced by its copy on another worker; `tellus put` and `tellus result` (pipelined too) move a multi-chunk dataset exactly.
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/partition_store.h"
#include "harness/certs.h"
#include "harness/files.h"
#include "harness/io_thread.h"
#include "harness/mini_cluster.h"
#include "net/methods.h"
#include "net/rpc_client.h"
#include "net/tls.h"
#include "transfer/fetch.h"

using namespace tellus;

namespace {

constexpr std::uint64_t kMiB = 1 << 20;

// Bytes no two chunks of which are alike, ending mid-chunk.
std::string pattern(std::uint64_t bytes, std::uint64_t seed) {
  std::string s(bytes, '\0');
  std::uint64_t x = seed | 1;
  for (auto& c : s) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x);
  }
  return s;
}

// Text lines (tellus put splits at line boundaries).
std::string lines(std::uint64_t bytes) {
  std::string s;
  s.reserve(bytes + 64);
  for (std::uint64_t i = 0; s.size() < bytes; ++i) s += fmt::format("line {:08d} of the transfer test\n", i);
  return s;
}

struct Fetcher {
  explicit Fetcher(harness::MiniCluster& cluster, bool tls) {
    net::ClientOptions options;
    if (tls) {
      const std::string identity = "worker/eu-west/eu-west-test";
      REQUIRE(harness::makeCerts(cluster.certsDir(), {identity}));
      auto f = harness::certFiles(cluster.certsDir(), identity);
      auto context = net::TlsContext::load({f.ca.string(), f.cert.string(), f.key.string()});
      REQUIRE(context);
      options.tls = *context;
    }
    pool = std::make_unique<net::ClientPool>(io.executor(), options);
  }
  ~Fetcher() { pool->closeAll(); }

  Result<transfer::FetchedFile> fetch(std::vector<transfer::FetchSource> sources, const std::filesystem::path& to,
                                      transfer::ProgressFn progress = nullptr) {
    transfer::TransferOptions options;
    // Smaller than the objects, so the window slides many times.
    options.window = {.chunkBytes = kMiB, .windowBytes = 4 * kMiB, .maxTotalBytes = 1ULL << 30};
    options.chunkTimeout = std::chrono::milliseconds(20000);
    return io.run(transfer::fetchToFile([this](const net::Endpoint& ep) { return pool->get(ep); }, std::move(sources),
                                        to, options, std::move(progress)));
  }

  harness::IoThread io;
  std::unique_ptr<net::ClientPool> pool;
};

transfer::FetchSource partitionSource(harness::MiniCluster& cluster, const std::string& worker,
                                      const data::PartitionKey& key) {
  transfer::FetchSource s{worker, cluster.workerAddress(worker), {}, true};
  s.request.mutable_partition()->set_job_id(key.jobId);
  s.request.mutable_partition()->set_stage(key.stage);
  s.request.mutable_partition()->set_task(key.task);
  s.request.mutable_partition()->set_bucket(key.bucket);
  s.request.set_from_site("eu-west");
  return s;
}

// The file of the put's only partition on `worker`, or "" when it holds none.
std::filesystem::path putFile(harness::MiniCluster& cluster, const std::string& worker, const std::string& dataset) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(cluster.dir() / "us-east" / worker / "datasets" / dataset, ec)) {
    return e.path();
  }
  return {};
}

}  // namespace

TEST_CASE("pipelined fetches from real workers: byte-exact, checksummed, a dead source replaced by its copy",
          "[integration][transfer]") {
  const bool tls = GENERATE(true, false);
  CAPTURE(tls);
  harness::MiniClusterOptions co;
  co.sites = 1;
  co.workersPerSite = 2;
  co.tls = tls;
  // Chunks to eu-west (the test's site) leave the workers at 80 Mbit/s: a transfer of 12 MiB
  // takes over a second, so a source killed after its first chunk dies mid-stream.
  co.workerExtraYaml["us-east"] = "wan:\n  - {to_site: eu-west, bandwidth_mbps: 80, latency_ms: 5}\n";
  auto started = harness::MiniCluster::start(co);
  REQUIRE(started);
  auto& cluster = **started;
  Fetcher fetcher(cluster, tls);
  const auto out = cluster.dir() / "fetched";

  // A partition of 9 chunks and a bit, committed to w1's store (the store keeps no state in
  // memory: the worker serves what is on disk).
  auto store = data::PartitionStore::open(cluster.dir() / "us-east" / "us-east-w1" / "partitions");
  REQUIRE(store);
  const data::PartitionKey key{"job-0000000042", 1, 3, 0};
  const std::string content = pattern(9 * kMiB + 12345, 7);
  REQUIRE(store->write(key, content));

  {
    INFO("multi-chunk fetch, byte-exact, checksum verified");
    auto fetched = fetcher.fetch({partitionSource(cluster, "us-east-w1", key)}, out);
    REQUIRE(fetched);
    CHECK(fetched->bytes == content.size());
    CHECK(harness::readFile(out) == content);
  }
  {
    INFO("one byte flipped on the source's disk: the checksum catches it");
    auto dataFile = store->dataPath(key);
    REQUIRE(dataFile);
    {
      std::fstream f(*dataFile, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(5 * kMiB + 17));
      f.put(static_cast<char>(content[5 * kMiB + 17] ^ 0x40));
    }
    auto fetched = fetcher.fetch({partitionSource(cluster, "us-east-w1", key)}, out);
    REQUIRE_FALSE(fetched);
    CHECK_THAT(fetched.message(), Catch::Contains("checksum mismatch"));
  }
  // `tellus put` (pipelined chunks, relayed by the master in order) stores both copies exactly.
  const std::string text = lines(12 * kMiB);
  REQUIRE(cluster.putDataset("us-east", "logs", text, 1));
  auto f1 = putFile(cluster, "us-east-w1", "logs");
  auto f2 = putFile(cluster, "us-east-w2", "logs");
  REQUIRE_FALSE(f1.empty());
  REQUIRE_FALSE(f2.empty());
  REQUIRE(harness::readFile(f1) == text);
  REQUIRE(harness::readFile(f2) == text);
  {
    INFO("tellus result of a multi-chunk output: pipelined through the master, checksum checked");
    const auto spec = cluster.dir() / "copy.yaml";
    {
      std::ofstream f(spec);
      f << "name: copy\nstages:\n  - name: all\n    op: identity\n    input: {dataset: logs}\n";
    }
    auto submitted = cluster.tellus({"submit", spec.string()});
    INFO(submitted.err);
    REQUIRE(submitted.exitCode == 0);
    std::string jobId = submitted.out.substr(0, submitted.out.find('\n'));
    auto watched = cluster.tellus({"status", jobId, "--watch"}, "", std::chrono::milliseconds(120000));
    INFO(watched.out << watched.err);
    REQUIRE(watched.exitCode == 0);
    const auto resultFile = cluster.dir() / "result.txt";
    auto result = cluster.tellus({"result", jobId, "-o", resultFile.string()});
    INFO(result.err);
    REQUIRE(result.exitCode == 0);
    CHECK(harness::readFile(resultFile) == text);
  }
  {
    INFO("worker.Replicate streams a partition into the replica's store, published only if its checksum holds");
    // As the source worker asks it (its certificate): the replica serves no one else.
    net::ClientOptions options;
    if (tls) {
      auto f = harness::certFiles(cluster.certsDir(), "worker/us-east/us-east-w1");
      auto context = net::TlsContext::load({f.ca.string(), f.cert.string(), f.key.string()});
      REQUIRE(context);
      options.tls = *context;
    }
    harness::IoThread io;
    net::ClientPool pool(io.executor(), options);
    auto replica = net::Endpoint::parse(cluster.workerAddress("us-east-w2"));
    REQUIRE(replica);
    auto client = pool.get(*replica);
    auto replicaStore = data::PartitionStore::open(cluster.dir() / "us-east" / "us-east-w2" / "partitions");
    REQUIRE(replicaStore);
    auto replicate = [&](const data::PartitionKey& k) {
      pb::ReplicateRequest req;
      req.set_job_id(k.jobId);
      req.set_stage(k.stage);
      req.set_task(k.task);
      req.set_buckets(1);
      req.set_source_worker_id("us-east-w1");
      req.set_source_address(cluster.workerAddress("us-east-w1"));
      req.set_site("us-east");
      req.set_worker_id("us-east-w2");
      return io.run(client->call<rpc::Worker::Replicate>(req, std::chrono::milliseconds(30000)));
    };
    // `key` has the byte flipped above: nothing is kept.
    auto corrupt = replicate(key);
    REQUIRE_FALSE(corrupt);
    CHECK_THAT(corrupt.message(), Catch::Contains("checksum mismatch"));
    CHECK_FALSE(replicaStore->exists(key));
    const data::PartitionKey good{"job-0000000042", 1, 4, 0};
    REQUIRE(store->write(good, content));
    auto copied = replicate(good);
    INFO((copied ? std::string() : copied.message()));
    REQUIRE(copied);
    CHECK(copied->bytes() == content.size());
    auto copyFile = replicaStore->dataPath(good);
    REQUIRE(copyFile);
    CHECK(harness::readFile(*copyFile) == content);
    pool.closeAll();
  }
  {
    INFO("a source killed mid-stream: the fetch fails over to the copy on the other worker");
    std::vector<transfer::FetchSource> sources;
    for (const auto& [worker, file] : {std::pair{std::string("us-east-w1"), f1}, std::pair{std::string("us-east-w2"), f2}}) {
      transfer::FetchSource s{worker, cluster.workerAddress(worker), {}, false};
      s.request.set_dataset_file(file.string());
      s.request.set_from_site("eu-west");
      sources.push_back(s);
    }
    bool killed = false;
    Status killStatus;
    std::uint64_t receivedBeforeKill = 0;
    auto fetched = fetcher.fetch(sources, out, [&](std::uint64_t bytes) {
      if (killed) return;
      // On the io thread, while the test's thread waits in fetch(): no assertion here.
      killed = true;
      receivedBeforeKill = bytes;
      killStatus = cluster.killWorker("us-east-w1");
    });
    REQUIRE(killed);
    REQUIRE(killStatus);
    CHECK(receivedBeforeKill < text.size());
    REQUIRE(fetched);
    CHECK(fetched->workerId == "us-east-w2");
    CHECK(harness::readFile(out) == text);
  }
}
