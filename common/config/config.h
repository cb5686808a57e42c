#pragma once
// Typed configuration of the daemons, parsed once from YAML. Nothing outside common/config
// touches YAML for these files. Units are in the field names. Every bad field is reported as
// "FILE:LINE: FIELD: what was expected"; unknown fields are errors (a typo must not silently
// become a default).

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace tellus::config {

struct ZooKeeperConfig {
  std::string connect;                // "host:port[,host:port...]" (required)
  std::string chroot = "/tellus";     // must start with '/'
  uint32_t session_timeout_ms = 6000;
};

// Mutual TLS of every RPC (docs/security.md): `tls: {ca_file, cert_file, key_file}`, or
// `insecure: true` for plaintext (logged as a warning at start). One of the two is required.
struct TlsConfig {
  bool insecure = false;
  std::string ca_file;    // the cluster CA (PEM)
  std::string cert_file;  // this daemon's certificate (PEM), with its tellus: identity
  std::string key_file;   // its private key (PEM)
};

// A dataset held by this site: every regular file in `dir` (sorted by name) is one partition,
// stored on worker `worker`.
struct DatasetConfig {
  std::string name;
  std::string dir;
  std::string worker;
  bool residency_local = false;  // YAML: `residency: local|any` (default any)
};

// WAN emulation, applied by the sender of a partition (token bucket + delay per site pair).
struct WanLink {
  std::string to_site;
  double bandwidth_mbps = 0;  // 0 = unlimited
  uint32_t latency_ms = 0;
};

struct MasterConfig {
  std::string site;                    // [a-z0-9-]+ (required)
  std::string listen;                  // host:port of the RPC server (required)
  std::string http_listen;             // host:port of /status and /metrics ("" = off)
  ZooKeeperConfig zookeeper;
  TlsConfig tls;                       // or insecure: true
  std::vector<DatasetConfig> datasets;
  std::string data_dir;                // where `tellus put` partitions are kept (required)
  uint32_t schedule_period_ms = 1000;  // L: fair-share period
  uint32_t worker_timeout_ms = 3000;   // missed heartbeats before a worker is considered dead
  uint32_t max_jm_crashes = 5;         // a job whose JM here exits non-zero more often fails
  std::string log_level = "info";
};

struct WorkerConfig {
  std::string id;                      // unique in the site (required)
  std::string site;                    // (required)
  std::string listen;                  // host:port (required)
  std::string master;                  // host:port of the site's master (required)
  ZooKeeperConfig zookeeper;
  TlsConfig tls;                       // or insecure: true
  uint32_t containers = 4;             // containers this host offers (>= 1)
  std::string data_dir;                // partition store and container dirs (required)
  std::string bin_dir;                 // where tellus-jm / tellus-executor live ("" = next to self)
  uint32_t heartbeat_ms = 500;
  std::vector<WanLink> wan;            // outgoing links to other sites
  std::string log_level = "info";
};

struct JmConfig {
  std::string job_id;
  std::string site;
  bool primary = false;                // YAML: `role: primary|secondary`
  std::string listen = "127.0.0.1:0";
  std::string master;                  // host:port of the site's master
  std::string worker_id;               // worker the JM runs on
  ZooKeeperConfig zookeeper;
  TlsConfig tls;                       // or insecure: true
  uint32_t period_ms = 1000;           // L: Af period
  uint32_t tick_ms = 100;              // in-memory decision tick (Parades' delays); no I/O
  uint32_t steal_interval_ms = 300;    // at most one steal attempt per interval
  uint32_t jm_grace_ms = 2000;         // a site's missing JM is requested after this long
  uint32_t jm_request_interval_ms = 5000;  // and again at most this often
  uint32_t safety_reread_ms = 10000;   // running markers are re-read in full this often
  std::string log_level = "info";
};

// Parse from text (`file` is only used in messages) or load from a path.
Result<MasterConfig> parseMasterConfig(const std::string& yaml, const std::string& file);
Result<WorkerConfig> parseWorkerConfig(const std::string& yaml, const std::string& file);
Result<JmConfig> parseJmConfig(const std::string& yaml, const std::string& file);
Result<MasterConfig> loadMasterConfig(const std::string& path);
Result<WorkerConfig> loadWorkerConfig(const std::string& path);
Result<JmConfig> loadJmConfig(const std::string& path);

// Writes a JmConfig as YAML that parseJmConfig accepts (a worker writes it for the JM it starts).
std::string toYaml(const JmConfig& c);

}  // namespace tellus::config
