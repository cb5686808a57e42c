#pragma once
// Typed configuration of the daemons, parsed once from YAML. Nothing outside common/config
// touches YAML for these files. Units are in the field names. Every bad field is reported as
// "FILE:LINE: FIELD: what was expected"; unknown fields are errors (a typo must not silently
// become a default).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cost/cost.h"
#include "sched/policies.h"
#include "util/result.h"

namespace tellus::config {

// ZooKeeper access (YAML section `zookeeper`). Authentication is an explicit choice, as TLS
// is: `credentials_file` (a digest `user:password` file: every node Tellus creates is then
// for that identity only, docs/security.md) or `insecure: true` (open ACLs, logged as a
// warning at start). One of the two is required.
struct ZooKeeperConfig {
  std::string connect;                // "host:port[,host:port...]" (required)
  std::string chroot = "/tellus";     // must start with '/'
  uint32_t session_timeout_ms = 6000;
  std::string credentials_file;       // path of the user:password file; never the secret itself
  bool insecure = false;              // no authentication, nodes open to anyone
};

// Transport limits of a daemon's RPC server (YAML section `rpc`, every field optional; 0
// disables a limit). See net::ServerOptions for what each one bounds and docs/config.md.
struct RpcLimitsConfig {
  uint64_t max_frame_bytes = 64 * 1024 * 1024;  // in [4096, 1 GiB]
  uint32_t max_connections = 4096;               // open connections in total
  uint32_t max_connections_per_peer = 256;       // per peer IP (a host's executors and JMs share one)
  uint32_t idle_timeout_ms = 300000;             // no call running, nothing sent or received
  uint32_t frame_deadline_ms = 30000;            // a frame's bytes must arrive within this ...
  uint32_t frame_min_bytes_per_s = 65536;        // ... plus its size at this rate
  uint32_t max_calls_per_s = 10000;              // per connection, token bucket rate ...
  uint32_t call_burst = 20000;                   // ... and depth
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

// Sizes accepted at the door: the master's Submit, Put and RegisterWorker and the worker's
// RunTask, WriteDataset and LaunchJm refuse anything larger with a one-line error before they
// write anything (ZooKeeper or disk). YAML: a `limits:` map in the master's and the worker's
// config (docs/config.md says which daemon enforces which). The defaults keep every ZooKeeper
// node of a job, and the site record, well below ZooKeeper's 1 MiB node limit.
// The most max_tasks_per_stage may be: a stage's taskMap node (jobstate::encodeTaskMap, one
// byte per task behind a table of at most 256 sites) stays below ZooKeeper's 1 MiB node limit
// with room for the request around it; batch_codec.cpp checks the worst case at compile time.
inline constexpr uint32_t kMaxTasksPerStage = 900000;

struct LimitsConfig {
  uint32_t max_stages_per_job = 64;
  uint32_t max_tasks_per_stage = 10000;   // also the bucket count a task may write; <= kMaxTasksPerStage
  uint32_t max_tasks_per_job = 20000;     // dataset stages count one task per partition
  uint32_t max_spec_bytes = 65536;        // the encoded JobSpec
  uint32_t max_partitions_per_put = 1000;
  uint32_t max_partitions_per_dataset = 1000;  // over every put of the dataset at a site
  uint64_t max_partition_bytes = uint64_t{1} << 30;  // one partition of a put
  uint32_t max_site_record_bytes = 524288;  // the site's published record (its datasets)
  uint32_t max_containers_per_worker = 256;
  uint64_t max_output_bytes = uint64_t{16} << 30;  // `synthetic` output_bytes of one task
};

// Resource limits of one `exec` command, applied with setrlimit in the child before it starts
// (0 = keep the worker's own limit). `processes` is RLIMIT_NPROC: it counts every process of
// run_as_user on the host, so commands of concurrent tasks share it.
struct ExecLimitsConfig {
  uint64_t cpu_s = 600;         // RLIMIT_CPU (the command is killed by SIGKILL past it)
  uint64_t memory_mb = 4096;    // RLIMIT_AS, address space
  uint64_t open_files = 256;    // RLIMIT_NOFILE
  uint64_t processes = 256;     // RLIMIT_NPROC
};

// The `exec` operator runs a job's shell command: code from whoever can submit. Off unless a
// site enables it (docs/config.md). The master checks jobs at submission against its site's
// section (and the published sections of the job's other sites); each worker checks again.
struct ExecConfig {
  bool enabled = false;
  // Commands run as this unprivileged user, never as the worker's; "" = the worker's own user
  // (the only choice when the worker is not root, which cannot switch users).
  std::string run_as_user = "nobody";
  // Empty: any command. Otherwise the exact command strings allowed (a shell command line is
  // too expressive to filter by its first word).
  std::vector<std::string> allowed_commands;
  ExecLimitsConfig rlimits;
  // Each command runs in a fresh private directory (0700, owned by run_as_user) created here
  // and removed after.
  std::string work_dir = "/tmp";
};

// What a master does with a lease overdue past its grace (MasterConfig::lease_expiry).
enum class LeaseExpiry { kExtend, kKill };

struct MasterConfig {
  std::string site;                    // [a-z0-9-]+ (required)
  std::string listen;                  // host:port of the RPC server (required)
  std::string http_listen;             // host:port of the web page, /status and /metrics ("" = off)
  // The HTTP port (plaintext, no identity) also shows jobs: names, per-stage progress, task
  // maps, JMs and failure reasons, which over RPC only clients may read (docs/security.md).
  bool http_jobs = false;
  ZooKeeperConfig zookeeper;
  TlsConfig tls;                       // or insecure: true
  std::vector<DatasetConfig> datasets;
  std::string data_dir;                // where `tellus put` partitions are kept (required)
  uint32_t schedule_period_ms = 1000;  // L: fair-share period
  // Which sub-job the site's free containers go to first: `fair` (HOUTU §4.4, the smallest
  // share; the default), or one order for the whole federation ranked from every site's
  // published queue (paper 001: fcfs, global-srpt, independent-srpt, global-srpt-reordering,
  // independent-srpt-reordering, swag). docs/config.md, "Job order".
  sched::JobOrder job_order = sched::JobOrder::kFair;
  uint32_t queue_publish_ms = 1000;  // the site's queue (/sites/<site>/queue) is rewritten this often
  uint32_t queue_stale_ms = 3000;    // another site's queue older than this counts as empty
  // Awan leases (paper 004 §III-C, docs/config.md "Leases"): every container granted is leased
  // until its JM's estimate (lease_default_ms until the JM states one; no lease is longer than
  // lease_max_ms). A lease overdue by more than lease_grace_ms is extended by the grace
  // (`extend`, counted) or taken back with its task killed and run again (`kill`).
  uint32_t lease_default_ms = 30000;
  uint32_t lease_max_ms = 3600000;
  uint32_t lease_grace_ms = 10000;
  LeaseExpiry lease_expiry = LeaseExpiry::kExtend;
  // A job submitted here is compacted (its ZooKeeper state folded into a summary) this long
  // after it ended.
  uint32_t job_state_retention_ms = 600000;
  uint32_t worker_timeout_ms = 3000;   // missed heartbeats before a worker is considered dead
  uint32_t max_jm_crashes = 5;         // a job whose JM here exits non-zero more often fails
  uint32_t put_idle_timeout_ms = 60000;  // an unfinished put with no chunk this long is dropped
  LimitsConfig limits;
  RpcLimitsConfig rpc;
  ExecConfig exec;                     // checked at submission, published in the site record
  std::string log_format = "text";     // text | json (JSON lines, docs/operations.md)
  // Operators besides the built-in aggregations whose output may leave the site of the pinned
  // data they read (docs/jobs.md, "Residency").
  std::vector<std::string> derived_operators;
  // Client names (`ops` for the certificate client/ops) that may kill, read the result, task
  // list and logs of any job, not only their own (docs/security.md, "Job owners").
  std::vector<std::string> admins;
  // What this site charges (YAML `prices: {container_hour, market, egress_gb: {<site>: p,
  // default: p}}`, all optional, zero by default): published in the site record, applied by
  // any master pricing a job's usage (`tellus cost`, docs/operations.md).
  cost::Prices prices;
  std::string log_level = "info";
};

// What a victim of a steal weighs before it gives a task (JmTuning::steal_information): the
// three mechanisms paper 004 §IV compares. kLeases: the thief's measured link rates and the
// leases of other jobs' containers at its site (the design); kSharedState: the rates, no lease
// times; kOffers: neither, Parades alone gives what waited long enough (resource offers).
enum class StealInformation { kLeases, kSharedState, kOffers };
const char* stealInformationName(StealInformation information);  // leases | shared-state | offers

// A JM's timings: in its own config, and set for the JMs a worker starts by the worker's
// `jm:` section (so that an operator can tune failover windows per site).
struct JmTuning {
  uint32_t period_ms = 1000;           // L: Af period
  uint32_t tick_ms = 100;              // in-memory decision tick (Parades' delays); no I/O
  uint32_t steal_interval_ms = 300;    // at most one steal attempt per interval
  uint32_t jm_grace_ms = 2000;         // a site's missing JM is requested after this long
  uint32_t jm_request_interval_ms = 5000;  // and again at most this often
  uint32_t safety_reread_ms = 30000;   // running markers and the election re-read this often (under watches)
  uint32_t publish_interval_ms = 1000; // a changed desire/grant count is published at most this often
  uint32_t markers_coalesce_ms = 500;  // running markers are re-listed at most this often
  uint32_t outputs_coalesce_ms = 100;  // a stage's output records are re-listed at most this often
  // The primary heartbeats the job's other JMs this often; a secondary that heard it and then
  // misses heartbeat_misses in a row takes over (window = interval × misses).
  uint32_t heartbeat_interval_ms = 200;
  uint32_t heartbeat_misses = 3;
  // A site of the job with no registered JM and no live worker for this long is lost: the
  // primary gives its movable waiting tasks to the live sites. 0: zookeeper.session_timeout_ms.
  uint32_t site_lost_after_ms = 0;
  // The JM's decisions (placements, steals given, re-runs; jobcore/decision.h) as JSON lines
  // in its decision_log_file, at most this many bytes per file (later ones are dropped, and
  // that is logged once). 0: none are written. For the differential test against tellus-sim.
  uint32_t decision_log_max_bytes = 0;
  // Awan's lease estimate (paper 004 eq. 1): the newest lease_history compute times of a
  // stage's tasks per worker, plus lease_slack_ms (δ); lease_default_ms for a stage none of
  // whose tasks has finished yet.
  uint32_t lease_history = 10;
  uint32_t lease_slack_ms = 100;
  uint32_t lease_default_ms = 30000;
  // A stage below its job's min_locality is held back at most this long (paper 004 §IV).
  uint32_t locality_wait_ms = 10000;
  // Not for tuning: the other two exist to measure what leases are worth (tools/bench/leases).
  StealInformation steal_information = StealInformation::kLeases;
};

struct WorkerConfig {
  std::string id;                      // unique in the site (required)
  std::string site;                    // (required)
  std::string listen;                  // host:port (required)
  std::string http_listen;             // host:port of /metrics ("" = off)
  std::string master;                  // host:port of the site's master (required)
  ZooKeeperConfig zookeeper;
  TlsConfig tls;                       // or insecure: true
  uint32_t containers = 4;             // containers this host offers (>= 1)
  // JMs this worker runs at once (each holds a ZooKeeper session; the start-up check asks
  // ZooKeeper's maxClientCnxns for 1 + max_jms)
  uint32_t max_jms = 128;
  std::string data_dir;                // partition store and container dirs (required)
  std::string bin_dir;                 // where tellus-jm / tellus-executor live ("" = next to self)
  uint32_t heartbeat_ms = 500;
  // Task and JM logs (data_dir/logs/<job>, data_dir/jms/<job>) untouched this long, of jobs
  // with nothing running here, are deleted (`tellus logs` reads them until then). 0 = kept.
  uint32_t log_retention_ms = 7u * 24 * 3600 * 1000;
  // Finished tasks' outputs are recorded in ZooKeeper in batches (one node per job, stage and
  // write): a stage's outputs are written at most once per output_batch_linger_ms (at once
  // after a quiet period), and at once when a batch holds output_batch_max_tasks executions
  // or nothing else of its stage runs here (worker/output_batcher.h).
  uint32_t output_batch_max_tasks = 200;  // 1 to jobstate::kMaxBatchTasks
  uint32_t output_batch_linger_ms = 1000;
  // Where each JM this worker starts serves /metrics: a host with port 0 (each JM binds a
  // free port and publishes it in its JmInfo, `http_address`). "" = off.
  std::string jm_http_listen;
  std::vector<WanLink> wan;            // outgoing links to other sites
  LimitsConfig limits;
  RpcLimitsConfig rpc;                 // also given to the JMs this worker starts
  ExecConfig exec;                     // must match the master's `exec` section
  JmTuning jm;                         // `jm:` timings of the JMs this worker starts
  std::string log_level = "info";
  std::string log_format = "text";     // text | json; also given to the JMs this worker starts
};

struct JmConfig : JmTuning {
  std::string job_id;
  std::string site;
  bool primary = false;                // YAML: `role: primary|secondary`
  std::string listen = "127.0.0.1:0";
  std::string http_listen;             // host:port of /metrics ("" = off; the worker's jm_http_listen)
  std::string master;                  // host:port of the site's master
  std::string worker_id;               // worker the JM runs on
  ZooKeeperConfig zookeeper;
  TlsConfig tls;                       // or insecure: true
  // Where the JM writes, in one line, why it exits non-zero (its worker reports it to the
  // master, which shows it in `tellus status` when the job fails of it). Empty: nowhere.
  std::string exit_reason_file;
  // Where the decision log goes when decision_log_max_bytes > 0 (appended to; its worker sets
  // it to <data_dir>/jms/<job>/decisions.jsonl, beside jm.log). Empty: nowhere.
  std::string decision_log_file;
  RpcLimitsConfig rpc;
  std::string log_level = "info";
  std::string log_format = "text";     // text | json
};

// Parse from text (`file` is only used in messages) or load from a path.
Result<MasterConfig> parseMasterConfig(const std::string& yaml, const std::string& file);
Result<WorkerConfig> parseWorkerConfig(const std::string& yaml, const std::string& file);
Result<JmConfig> parseJmConfig(const std::string& yaml, const std::string& file);
Result<MasterConfig> loadMasterConfig(const std::string& path);
Result<WorkerConfig> loadWorkerConfig(const std::string& path);
Result<JmConfig> loadJmConfig(const std::string& path);

// Prices by site, each entry written as a master's `prices` section (the same reader, so the
// same fields, bounds and messages), for tellus-sim --prices (docs/sim.md):
//   site0: {container_hour: 0.03, market: spot, egress_gb: {site1: 0.01, default: 0.09}}
//   site1: {container_hour: 0.1}
// Keys are site ids; whether they exist is the caller's to check.
Result<std::map<std::string, cost::Prices>> parseSitePrices(const std::string& yaml, const std::string& file);
Result<std::map<std::string, cost::Prices>> loadSitePrices(const std::string& path);

// Writes a JmConfig as YAML that parseJmConfig accepts (a worker writes it for the JM it starts).
std::string toYaml(const JmConfig& c);

}  // namespace tellus::config
