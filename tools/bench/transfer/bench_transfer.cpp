// One cross-site fetch of a large partition over an emulated WAN link (issue 16, item 3):
// a 2-site mini cluster (real ZooKeeper, masters and workers) whose us-east worker emulates
// the link to eu-west as scripts/cluster's --wan-mbps/--wan-latency-ms do (the worker's
// `wan:` shaper: the link's rate, plus its latency per chunk). A partition of --mib MiB is
// committed to us-east-w1's partition store, then fetched --repeats times by a client with
// an eu-west worker certificate through transfer::fetchToFile, the worker's own fetch path,
// once per window in --windows (MiB of chunk calls in flight; 1 = one 1 MiB chunk per round
// trip, what worker fetches did before pipelining). JSON on stdout, progress on stderr.
//
//   build/bin/bench-transfer [--mib 256] [--wan-mbps 1000] [--wan-latency-ms 50]
//                            [--windows 1,32] [--repeats 3] [--plaintext]
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "data/partition_store.h"
#include "harness/certs.h"
#include "harness/io_thread.h"
#include "harness/mini_cluster.h"
#include "net/rpc_client.h"
#include "net/tls.h"
#include "transfer/fetch.h"

using namespace tellus;

namespace {

struct Options {
  std::uint64_t mib = 256;
  double wanMbps = 1000;
  std::uint32_t latencyMs = 50;
  std::vector<std::uint64_t> windowsMib{1, 32};
  int repeats = 3;
  bool tls = true;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "bench-transfer: " << why
            << "\nusage: bench-transfer [--mib N] [--wan-mbps N] [--wan-latency-ms N] [--windows 1,32] "
               "[--repeats N] [--plaintext]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--mib") o.mib = std::stoull(value());
      else if (a == "--wan-mbps") o.wanMbps = std::stod(value());
      else if (a == "--wan-latency-ms") o.latencyMs = static_cast<std::uint32_t>(std::stoul(value()));
      else if (a == "--repeats") o.repeats = std::stoi(value());
      else if (a == "--plaintext") o.tls = false;
      else if (a == "--windows") {
        o.windowsMib.clear();
        std::stringstream list(value());
        for (std::string w; std::getline(list, w, ',');) o.windowsMib.push_back(std::stoull(w));
      } else {
        usage("unknown option " + a);
      }
    } catch (const std::exception&) {
      usage("bad value for " + a);
    }
  }
  if (o.mib == 0 || o.mib > 4096 || o.repeats < 1 || o.windowsMib.empty() || o.wanMbps < 0) usage("out of range");
  for (auto w : o.windowsMib) {
    if (w == 0 || w > 256) usage("a window is 1 to 256 MiB");
  }
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opts = parse(argc, argv);
  spdlog::set_level(spdlog::level::warn);
  harness::MiniClusterOptions co;
  co.sites = 2;
  co.workersPerSite = 1;
  co.tls = opts.tls;
  // As scripts/cluster writes it for --wan-mbps/--wan-latency-ms (the sender shapes).
  co.workerExtraYaml["us-east"] = "wan:\n  - {to_site: eu-west, bandwidth_mbps: " + std::to_string(opts.wanMbps) +
                                  ", latency_ms: " + std::to_string(opts.latencyMs) + "}\n";
  std::cerr << "starting a 2-site cluster (" << (opts.tls ? "TLS" : "plaintext") << ")\n";
  auto cluster = harness::MiniCluster::start(co);
  if (!cluster) {
    std::cerr << "cluster: " << cluster.message() << "\n";
    return 1;
  }
  const std::string source = "us-east-w1";
  auto store = data::PartitionStore::open((*cluster)->dir() / "us-east" / source / "partitions");
  if (!store) {
    std::cerr << "store: " << store.message() << "\n";
    return 1;
  }
  data::PartitionKey key{"job-0000009999", 0, 0, 0};
  {
    std::cerr << "writing a " << opts.mib << " MiB partition on " << source << "\n";
    auto writer = store->create(key);
    if (!writer) {
      std::cerr << writer.message() << "\n";
      return 1;
    }
    std::string block(1 << 20, '\0');
    std::uint64_t x = 0x9e3779b97f4a7c15ull;
    for (std::uint64_t m = 0; m < opts.mib; ++m) {
      for (auto& c : block) {  // xorshift: bytes no link could compress
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c = static_cast<char>(x);
      }
      if (auto st = (*writer)->append(block); !st) {
        std::cerr << st.message() << "\n";
        return 1;
      }
    }
    if (auto info = (*writer)->commit(); !info) {
      std::cerr << info.message() << "\n";
      return 1;
    }
  }

  net::ClientOptions clientOptions;
  if (opts.tls) {
    const std::string identity = "worker/eu-west/eu-west-bench";
    if (auto made = harness::makeCerts((*cluster)->certsDir(), {identity}); !made) {
      std::cerr << made.message() << "\n";
      return 1;
    }
    auto f = harness::certFiles((*cluster)->certsDir(), identity);
    auto tls = net::TlsContext::load({f.ca.string(), f.cert.string(), f.key.string()});
    if (!tls) {
      std::cerr << tls.message() << "\n";
      return 1;
    }
    clientOptions.tls = *tls;
  }
  harness::IoThread io;
  net::ClientPool pool(io.executor(), clientOptions);

  transfer::FetchSource from{source, (*cluster)->workerAddress(source), {}, true};
  from.request.mutable_partition()->set_job_id(key.jobId);
  from.request.set_from_site("eu-west");  // plaintext: the claim; TLS: the certificate says it
  const auto target = (*cluster)->dir() / "fetched";
  const double bytes = static_cast<double>(opts.mib) * (1 << 20);
  const double linkMBps = opts.wanMbps / 8;

  nlohmann::json out;
  out["bytes"] = opts.mib << 20;
  out["wan_mbps"] = opts.wanMbps;
  out["wan_latency_ms"] = opts.latencyMs;
  out["tls"] = opts.tls;
  out["chunk_bytes"] = 1 << 20;
  out["runs"] = nlohmann::json::array();
  int failures = 0;
  for (auto windowMib : opts.windowsMib) {
    transfer::TransferOptions t;
    t.window = {.chunkBytes = 1 << 20, .windowBytes = windowMib << 20, .maxTotalBytes = opts.mib << 20};
    std::vector<double> rates;
    nlohmann::json seconds = nlohmann::json::array();
    for (int r = 0; r < opts.repeats; ++r) {
      // A new file each time, the last one removed before: truncating the last run's 256 MiB
      // (pages still being written back) in the timed open cost 0.1-0.3 s of every run but the
      // first. Worker fetches write new files too.
      std::error_code ec;
      std::filesystem::remove(target, ec);
      auto fetched = io.run(transfer::fetchToFile([&](const net::Endpoint& ep) { return pool.get(ep); }, {from},
                                                  target, t));
      if (!fetched) {
        std::cerr << "fetch failed: " << fetched.message() << "\n";
        ++failures;
        continue;
      }
      rates.push_back(bytes / 1e6 / fetched->seconds);
      seconds.push_back(fetched->seconds);
      std::cerr << "window " << windowMib << " MiB: " << fetched->seconds << " s, " << rates.back() << " MB/s ("
                << (linkMBps > 0 ? 100 * rates.back() / linkMBps : 0) << "% of the link)\n";
    }
    nlohmann::json run;
    run["window_mib"] = windowMib;
    run["seconds"] = seconds;
    if (!rates.empty()) {
      run["median_mb_per_s"] = median(rates);
      run["best_mb_per_s"] = *std::max_element(rates.begin(), rates.end());
      if (linkMBps > 0) {
        run["median_percent_of_link"] = 100 * median(rates) / linkMBps;
        run["best_percent_of_link"] = 100 * *std::max_element(rates.begin(), rates.end()) / linkMBps;
      }
    }
    out["runs"].push_back(run);
  }
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) == 3) out["load_average_1m"] = load[0];
  pool.closeAll();
  std::cout << out.dump(2) << "\n";
  return failures == 0 ? 0 : 1;
}
