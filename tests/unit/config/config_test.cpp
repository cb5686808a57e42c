// Master, worker and JM configs: every field, every kind of bad input, exact messages.

#include <catch2/catch.hpp>

#include "config/config.h"
#include "config/values.h"

namespace tellus::config {
namespace {

const std::string kMaster =
    "site: eu-west\n"                        // 1
    "listen: 0.0.0.0:7100\n"                 // 2
    "http_listen: 127.0.0.1:0\n"             // 3
    "zookeeper:\n"                           // 4
    "  connect: zk1:2181,zk2:2181\n"         // 5
    "  chroot: /tellus/test\n"               // 6
    "  session_timeout_ms: 4000\n"           // 7
    "  credentials_file: /etc/tellus/zk\n"   // 8
    "data_dir: /var/lib/tellus\n"            // 9
    "datasets:\n"                            // 10
    "  - name: corpus\n"                     // 11
    "    dir: /data/corpus\n"                // 12
    "    worker: w1\n"                       // 13
    "  - name: logs.2024\n"                  // 14
    "    dir: /data/logs\n"                  // 15
    "    worker: w2\n"                       // 16
    "    residency: local\n"                 // 17
    "schedule_period_ms: 500\n"              // 18
    "worker_timeout_ms: 2000\n"              // 19
    "log_level: debug\n"                     // 20
    "insecure: true\n";                      // 21

const std::string kMinimalMaster =
    "site: a\n"
    "listen: 127.0.0.1:7100\n"
    "zookeeper: {connect: 'localhost:2181', insecure: true}\n"
    "data_dir: /tmp/a\n"
    "insecure: true\n";

const std::string kWorker =
    "id: w1\n"
    "site: eu-west\n"
    "listen: '[::1]:0'\n"
    "master: 10.0.0.1:7100\n"
    "zookeeper:\n"
    "  connect: zk1:2181\n"
    "  insecure: true\n"
    "containers: 8\n"
    "data_dir: /var/lib/tellus-worker\n"
    "bin_dir: /opt/tellus/bin\n"
    "heartbeat_ms: 250\n"
    "wan:\n"
    "  - to_site: us-east\n"
    "    bandwidth_mbps: 100.5\n"
    "    latency_ms: 80\n"
    "  - {to_site: ap-south}\n"
    "log_level: warn\n"
    "insecure: true\n";

std::string masterError(const std::string& yaml) {
  auto r = parseMasterConfig(yaml, "master.yaml");
  REQUIRE_FALSE(r.isOk());
  CHECK(r.error().code == ErrorCode::kInvalidArgument);
  return r.message();
}

std::string workerError(const std::string& yaml) {
  auto r = parseWorkerConfig(yaml, "worker.yaml");
  REQUIRE_FALSE(r.isOk());
  return r.message();
}

// A JM config with what a worker always fills in (insecure, for brevity).
JmConfig minimalJm(const std::string& site) {
  JmConfig jm;
  jm.job_id = "job-1";
  jm.site = site;
  jm.master = "127.0.0.1:7100";
  jm.worker_id = "w1";
  jm.zookeeper.connect = "zk:2181";
  jm.zookeeper.insecure = true;
  jm.tls.insecure = true;
  return jm;
}

std::string jmError(const std::string& yaml) {
  auto r = parseJmConfig(yaml, "jm.yaml");
  REQUIRE_FALSE(r.isOk());
  return r.message();
}

// kMaster with line `lineNo` (1-based) replaced by `replacement` (which may span lines or be "").
std::string masterWithLine(int lineNo, const std::string& replacement) {
  std::string out;
  int n = 0;
  std::size_t start = 0;
  while (start < kMaster.size()) {
    const std::size_t end = kMaster.find('\n', start);
    ++n;
    out += n == lineNo ? replacement : kMaster.substr(start, end - start + 1);
    start = end + 1;
  }
  return out;
}

TEST_CASE("a full master config is parsed", "[unit][config]") {
  auto r = parseMasterConfig(kMaster, "master.yaml");
  REQUIRE(r.isOk());
  const MasterConfig& c = *r;
  CHECK(c.site == "eu-west");
  CHECK(c.listen == "0.0.0.0:7100");
  CHECK(c.http_listen == "127.0.0.1:0");
  CHECK(c.zookeeper.connect == "zk1:2181,zk2:2181");
  CHECK(c.zookeeper.chroot == "/tellus/test");
  CHECK(c.zookeeper.session_timeout_ms == 4000u);
  CHECK(c.data_dir == "/var/lib/tellus");
  REQUIRE(c.datasets.size() == 2);
  CHECK(c.datasets[0].name == "corpus");
  CHECK(c.datasets[0].dir == "/data/corpus");
  CHECK(c.datasets[0].worker == "w1");
  CHECK_FALSE(c.datasets[0].residency_local);
  CHECK(c.datasets[1].name == "logs.2024");
  CHECK(c.datasets[1].residency_local);
  CHECK(c.schedule_period_ms == 500u);
  CHECK(c.worker_timeout_ms == 2000u);
  CHECK(c.log_level == "debug");
}

TEST_CASE("a minimal master config gets the documented defaults", "[unit][config]") {
  auto r = parseMasterConfig(kMinimalMaster, "master.yaml");
  REQUIRE(r.isOk());
  CHECK(r->http_listen.empty());
  CHECK(r->zookeeper.chroot == "/tellus");
  CHECK(r->zookeeper.session_timeout_ms == 6000u);
  CHECK(r->datasets.empty());
  CHECK(r->schedule_period_ms == 1000u);
  CHECK(r->worker_timeout_ms == 3000u);
  CHECK(r->log_level == "info");
}

TEST_CASE("job_order: fair by default, any order a master can rank from queues, checked", "[unit][config]") {
  auto defaults = parseMasterConfig(kMinimalMaster, "master.yaml");
  REQUIRE(defaults.isOk());
  CHECK(defaults->job_order == sched::JobOrder::kFair);
  CHECK(defaults->queue_publish_ms == 1000u);
  CHECK(defaults->queue_stale_ms == 3000u);

  auto swag = parseMasterConfig(kMinimalMaster + "job_order: swag\nqueue_publish_ms: 200\n", "master.yaml");
  REQUIRE(swag.isOk());
  CHECK(swag->job_order == sched::JobOrder::kSwag);
  CHECK(swag->queue_publish_ms == 200u);
  CHECK(swag->queue_stale_ms == 600u);  // 3 x queue_publish_ms unless set
  for (const char* name : {"fcfs", "global-srpt", "independent-srpt", "global-srpt-reordering",
                           "independent-srpt-reordering", "fair"}) {
    auto parsed = parseMasterConfig(kMinimalMaster + "job_order: " + name + "\n", "master.yaml");
    INFO(name);
    REQUIRE(parsed.isOk());
    CHECK(sched::name(parsed->job_order) == name);
  }
  auto stale = parseMasterConfig(kMinimalMaster + "queue_stale_ms: 10000\n", "master.yaml");
  REQUIRE(stale.isOk());
  CHECK(stale->queue_stale_ms == 10000u);

  const std::string expected =
      "expected one of fair|fcfs|global-srpt|independent-srpt|global-srpt-reordering|independent-srpt-reordering|swag";
  CHECK(masterError(kMinimalMaster + "job_order: srtf\n") == "master.yaml:6: job_order: " + expected + ", got 'srtf'");
  // Tetrium's order needs LP estimates no master has.
  CHECK(masterError(kMinimalMaster + "job_order: tetrium\n") == "master.yaml:6: job_order: " + expected + ", got 'tetrium'");
  CHECK(masterError(kMinimalMaster + "queue_publish_ms: 50\n").find("queue_publish_ms: expected an integer in [100, 600000]") !=
        std::string::npos);
  CHECK(masterError(kMinimalMaster + "queue_publish_ms: 1000\nqueue_stale_ms: 1000\n") ==
        "master.yaml:7: queue_stale_ms: expected more than queue_publish_ms (1000), got 1000");
}

TEST_CASE("leases: defaults, the expiry policy and the bounds, checked", "[unit][config]") {
  auto defaults = parseMasterConfig(kMinimalMaster, "master.yaml");
  REQUIRE(defaults.isOk());
  CHECK(defaults->lease_default_ms == 30000u);
  CHECK(defaults->lease_max_ms == 3600000u);
  CHECK(defaults->lease_grace_ms == 10000u);
  CHECK(defaults->lease_expiry == LeaseExpiry::kExtend);
  auto kill = parseMasterConfig(kMinimalMaster + "lease_expiry: kill\nlease_grace_ms: 0\n", "master.yaml");
  REQUIRE(kill.isOk());
  CHECK(kill->lease_expiry == LeaseExpiry::kKill);
  CHECK(kill->lease_grace_ms == 0u);
  CHECK(masterError(kMinimalMaster + "lease_expiry: revoke\n") ==
        "master.yaml:6: lease_expiry: expected one of extend, kill, got 'revoke'");
  CHECK(masterError(kMinimalMaster + "lease_max_ms: 1000\n") ==
        "master.yaml:6: lease_max_ms: expected at least lease_default_ms (30000), got 1000");
  CHECK(masterError(kMinimalMaster + "lease_max_ms: 0\n").find("lease_max_ms: expected an integer in [1, 86400000]") !=
        std::string::npos);
}

TEST_CASE("the rpc limits section is optional, with the documented defaults", "[unit][config]") {
  auto r = parseMasterConfig(kMinimalMaster, "master.yaml");
  REQUIRE(r.isOk());
  CHECK(r->rpc.max_frame_bytes == 64u * 1024 * 1024);
  CHECK(r->rpc.max_connections == 4096u);
  CHECK(r->rpc.max_connections_per_peer == 256u);
  CHECK(r->rpc.idle_timeout_ms == 300000u);
  CHECK(r->rpc.frame_deadline_ms == 30000u);
  CHECK(r->rpc.frame_min_bytes_per_s == 65536u);
  CHECK(r->rpc.max_calls_per_s == 10000u);
  CHECK(r->rpc.call_burst == 20000u);

  auto set = parseMasterConfig(kMinimalMaster +
                                   "rpc:\n"
                                   "  max_frame_bytes: 1048576\n"
                                   "  max_connections: 100\n"
                                   "  max_connections_per_peer: 0\n"
                                   "  idle_timeout_ms: 1000\n"
                                   "  frame_deadline_ms: 2000\n"
                                   "  frame_min_bytes_per_s: 0\n"
                                   "  max_calls_per_s: 50\n"
                                   "  call_burst: 60\n",
                               "master.yaml");
  REQUIRE(set.isOk());
  CHECK(set->rpc.max_frame_bytes == 1048576u);
  CHECK(set->rpc.max_connections == 100u);
  CHECK(set->rpc.max_connections_per_peer == 0u);
  CHECK(set->rpc.idle_timeout_ms == 1000u);
  CHECK(set->rpc.frame_deadline_ms == 2000u);
  CHECK(set->rpc.frame_min_bytes_per_s == 0u);
  CHECK(set->rpc.max_calls_per_s == 50u);
  CHECK(set->rpc.call_burst == 60u);
}

TEST_CASE("rpc limits errors", "[unit][config]") {
  CHECK(masterError(kMinimalMaster + "rpc: {max_frame_bytes: 100}\n").find("rpc.max_frame_bytes") !=
        std::string::npos);
  CHECK(masterError(kMinimalMaster + "rpc: {max_connections: 10, max_connections_per_peer: 11}\n")
            .find("rpc.max_connections_per_peer: expected at most max_connections (10), got 11") != std::string::npos);
  CHECK(masterError(kMinimalMaster + "rpc: {call_burst: 0}\n").find("rpc.call_burst") != std::string::npos);
  CHECK(masterError(kMinimalMaster + "rpc: {idle_timeout: 5}\n").find("rpc.idle_timeout") != std::string::npos);
  CHECK(masterError(kMinimalMaster + "rpc: {max_calls_per_s: -1}\n").find("rpc.max_calls_per_s") !=
        std::string::npos);
}

TEST_CASE("a worker config is parsed", "[unit][config]") {
  auto r = parseWorkerConfig(kWorker, "worker.yaml");
  REQUIRE(r.isOk());
  const WorkerConfig& c = *r;
  CHECK(c.id == "w1");
  CHECK(c.site == "eu-west");
  CHECK(c.listen == "[::1]:0");
  CHECK(c.master == "10.0.0.1:7100");
  CHECK(c.zookeeper.connect == "zk1:2181");
  CHECK(c.zookeeper.chroot == "/tellus");
  CHECK(c.containers == 8u);
  CHECK(c.data_dir == "/var/lib/tellus-worker");
  CHECK(c.bin_dir == "/opt/tellus/bin");
  CHECK(c.heartbeat_ms == 250u);
  REQUIRE(c.wan.size() == 2);
  CHECK(c.wan[0].to_site == "us-east");
  CHECK(c.wan[0].bandwidth_mbps == 100.5);
  CHECK(c.wan[0].latency_ms == 80u);
  CHECK(c.wan[1].to_site == "ap-south");
  CHECK(c.wan[1].bandwidth_mbps == 0.0);
  CHECK(c.wan[1].latency_ms == 0u);
  CHECK(c.log_level == "warn");
  CHECK(c.http_listen.empty());  // no /metrics unless asked for
}

TEST_CASE("a worker's http_listen serves /metrics and is checked like the master's", "[unit][config]") {
  auto r = parseWorkerConfig(kWorker + "http_listen: 127.0.0.1:0\n", "worker.yaml");
  REQUIRE(r.isOk());
  CHECK(r->http_listen == "127.0.0.1:0");
  CHECK_THAT(workerError(kWorker + "http_listen: ':80'\n"),
             Catch::Contains("http_listen: expected host:port with a port in [0, 65535], got ':80'"));
}

TEST_CASE("master config errors read FILE:LINE: FIELD: expectation", "[unit][config]") {
  SECTION("malformed YAML") {
    CHECK(masterError(masterWithLine(12, "    dir: [/data/corpus\n"))
              .starts_with("master.yaml:13: malformed YAML: "));
  }
  SECTION("unknown field") {
    CHECK(masterError(masterWithLine(18, "schedule_periode_ms: 500\n")) ==
          "master.yaml:18: schedule_periode_ms: unknown field (did you mean 'schedule_period_ms'?)");
  }
  SECTION("unknown field in a dataset") {
    CHECK(masterError(masterWithLine(17, "    residence: local\n")) ==
          "master.yaml:17: datasets[1].residence: unknown field (did you mean 'residency'?)");
  }
  SECTION("missing required field") {
    CHECK(masterError(masterWithLine(1, "")) == "master.yaml:1: site: required field is missing");
    CHECK(masterError(masterWithLine(5, "")) == "master.yaml:4: zookeeper.connect: required field is missing");
    CHECK(masterError(masterWithLine(13, "")) == "master.yaml:11: datasets[0].worker: required field is missing");
  }
  SECTION("wrong type") {
    CHECK(masterError(masterWithLine(5, "  connect: [zk1:2181]\n")) ==
          "master.yaml:5: zookeeper.connect: expected a string, got a sequence");
    CHECK(masterError(kMinimalMaster + "datasets: {name: x}\n") ==
          "master.yaml:6: datasets: expected a sequence, got a map");
  }
  SECTION("non-numeric, negative and zero periods") {
    CHECK(masterError(masterWithLine(18, "schedule_period_ms: fast\n")) ==
          "master.yaml:18: schedule_period_ms: expected a positive integer, got 'fast'");
    CHECK(masterError(masterWithLine(19, "worker_timeout_ms: -1\n")) ==
          "master.yaml:19: worker_timeout_ms: expected a positive integer, got '-1'");
    CHECK(masterError(masterWithLine(7, "  session_timeout_ms: 0\n")) ==
          "master.yaml:7: zookeeper.session_timeout_ms: expected a positive integer, got '0'");
  }
  SECTION("bad site id") {
    CHECK(masterError(masterWithLine(1, "site: EU_west\n")) ==
          "master.yaml:1: site: expected a site id ([a-z0-9][a-z0-9-]*), got 'EU_west'");
    CHECK(masterError(masterWithLine(1, "site: -eu\n")) ==
          "master.yaml:1: site: expected a site id ([a-z0-9][a-z0-9-]*), got '-eu'");
  }
  SECTION("bad endpoints") {
    CHECK(masterError(masterWithLine(2, "listen: 0.0.0.0:70000\n")) ==
          "master.yaml:2: listen: expected host:port with a port in [0, 65535], got '0.0.0.0:70000'");
    CHECK(masterError(masterWithLine(2, "listen: localhost\n")) ==
          "master.yaml:2: listen: expected host:port with a port in [0, 65535], got 'localhost'");
    CHECK(masterError(masterWithLine(3, "http_listen: ':80'\n")) ==
          "master.yaml:3: http_listen: expected host:port with a port in [0, 65535], got ':80'");
    CHECK(masterError(masterWithLine(5, "  connect: zk1:2181,zk2\n")) ==
          "master.yaml:5: zookeeper.connect: expected host:port[,host:port...] with ports in [1, 65535] (the "
          "chroot is a separate field), got 'zk1:2181,zk2'");
    CHECK(masterError(masterWithLine(5, "  connect: zk1:2181/tellus\n")).starts_with("master.yaml:5: zookeeper.connect: "));
    CHECK(masterError(masterWithLine(5, "  connect: zk1:0\n")).starts_with("master.yaml:5: zookeeper.connect: "));
  }
  SECTION("bad chroot") {
    const std::string expected = "master.yaml:6: zookeeper.chroot: expected an absolute ZooKeeper path ('/' or "
                                 "'/a/b', no trailing '/'), got ";
    CHECK(masterError(masterWithLine(6, "  chroot: tellus\n")) == expected + "'tellus'");
    CHECK(masterError(masterWithLine(6, "  chroot: /tellus/\n")) == expected + "'/tellus/'");
    CHECK(masterError(masterWithLine(6, "  chroot: /a//b\n")) == expected + "'/a//b'");
    CHECK(masterError(masterWithLine(6, "  chroot: ''\n")) == expected + "''");
    auto root = parseMasterConfig(masterWithLine(6, "  chroot: /\n"), "master.yaml");
    REQUIRE(root.isOk());
    CHECK(root->zookeeper.chroot == "/");
  }
  SECTION("duplicate dataset") {
    CHECK(masterError(masterWithLine(14, "  - name: corpus\n")) ==
          "master.yaml:14: datasets[1].name: duplicate dataset name 'corpus' (first at line 11)");
  }
  SECTION("bad dataset values") {
    CHECK(masterError(masterWithLine(17, "    residency: global\n")) ==
          "master.yaml:17: datasets[1].residency: expected local or any, got 'global'");
    CHECK(masterError(masterWithLine(14, "  - name: my corpus\n")) ==
          "master.yaml:14: datasets[1].name: expected a dataset name (1-128 of [A-Za-z0-9_.-], not starting with '.'), got 'my corpus'");
    CHECK(masterError(masterWithLine(12, "    dir: ''\n")) ==
          "master.yaml:12: datasets[0].dir: expected a directory, got an empty string");
  }
  SECTION("bad log level") {
    CHECK(masterError(masterWithLine(20, "log_level: verbose\n")) ==
          "master.yaml:20: log_level: expected one of trace|debug|info|warn|error, got 'verbose'");
  }
}

TEST_CASE("worker config errors", "[unit][config]") {
  auto replace = [](const std::string& from, const std::string& to) {
    std::string yaml = kWorker;
    const std::size_t at = yaml.find(from);
    REQUIRE(at != std::string::npos);
    return yaml.replace(at, from.size(), to);
  };
  CHECK(workerError(replace("containers: 8", "containers: 0")) ==
        "worker.yaml:8: containers: expected a positive integer, got '0'");
  CHECK(workerError(replace("containers: 8", "containers: many")) ==
        "worker.yaml:8: containers: expected a positive integer, got 'many'");
  CHECK(workerError(replace("master: 10.0.0.1:7100", "master: 10.0.0.1:0")) ==
        "worker.yaml:4: master: expected host:port with a port in [1, 65535], got '10.0.0.1:0'");
  CHECK(workerError(replace("id: w1", "id: W1")) ==
        "worker.yaml:1: id: expected a worker id ([a-z0-9][a-z0-9-]*), got 'W1'");
  CHECK(workerError(replace("    bandwidth_mbps: 100.5", "    bandwidth_mbps: -3")) ==
        "worker.yaml:14: wan[0].bandwidth_mbps: expected a non-negative number, got '-3'");
  CHECK(workerError(replace("    latency_ms: 80", "    latency_ms: 1.5")) ==
        "worker.yaml:15: wan[0].latency_ms: expected a non-negative integer, got '1.5'");
  CHECK(workerError(replace("  - {to_site: ap-south}", "  - {to_site: us-east}")) ==
        "worker.yaml:16: wan[1].to_site: duplicate link to site 'us-east' (first at line 13)");
  CHECK(workerError(replace("  - {to_site: ap-south}", "  - {to_site: eu-west}")) ==
        "worker.yaml:16: wan[1].to_site: expected another site than this worker's own site 'eu-west'");
  CHECK(workerError(replace("  - {to_site: ap-south}", "  - {bandwidth_mbps: 5}")) ==
        "worker.yaml:16: wan[1].to_site: required field is missing");
  CHECK(workerError(replace("  - {to_site: ap-south}", "  - ap-south")) ==
        "worker.yaml:16: wan[1]: expected a map, got 'ap-south'");
  CHECK(workerError(replace("data_dir: /var/lib/tellus-worker\n", "")) ==
        "worker.yaml:1: data_dir: required field is missing");
}

TEST_CASE("a JM config round-trips through toYaml", "[unit][config]") {
  JmConfig c;
  c.job_id = "job-0000000042";
  c.site = "us-east";
  c.primary = true;
  c.listen = "127.0.0.1:0";
  c.master = "127.0.0.1:7100";
  c.worker_id = "w3";
  c.zookeeper.connect = "zk1:2181,zk2:2182";
  c.zookeeper.chroot = "/tellus/t1";
  c.zookeeper.session_timeout_ms = 12345;
  c.zookeeper.credentials_file = "/etc/tellus/zk-credentials";
  c.tls.insecure = true;
  c.period_ms = 250;
  c.heartbeat_interval_ms = 150;
  c.heartbeat_misses = 4;
  c.site_lost_after_ms = 9000;
  c.lease_history = 3;
  c.lease_slack_ms = 250;
  c.lease_default_ms = 7000;
  c.locality_wait_ms = 2000;
  c.decision_log_max_bytes = 4096;
  c.decision_log_file = "/var/tellus/jms/job-1/decisions.jsonl";
  c.log_level = "trace";

  auto back = parseJmConfig(toYaml(c), "jm.yaml");
  REQUIRE(back.isOk());
  CHECK(back->job_id == c.job_id);
  CHECK(back->site == c.site);
  CHECK(back->primary);
  CHECK(back->listen == c.listen);
  CHECK(back->master == c.master);
  CHECK(back->worker_id == c.worker_id);
  CHECK(back->zookeeper.connect == c.zookeeper.connect);
  CHECK(back->zookeeper.chroot == c.zookeeper.chroot);
  CHECK(back->zookeeper.session_timeout_ms == c.zookeeper.session_timeout_ms);
  // The path, never the secret: the JM reads the file itself.
  CHECK(back->zookeeper.credentials_file == c.zookeeper.credentials_file);
  CHECK_FALSE(back->zookeeper.insecure);
  CHECK(back->period_ms == c.period_ms);
  CHECK(back->heartbeat_interval_ms == 150u);
  CHECK(back->heartbeat_misses == 4u);
  CHECK(back->site_lost_after_ms == 9000u);
  CHECK(back->lease_history == 3u);
  CHECK(back->lease_slack_ms == 250u);
  CHECK(back->lease_default_ms == 7000u);
  CHECK(back->locality_wait_ms == 2000u);
  CHECK(back->decision_log_max_bytes == 4096u);
  CHECK(back->decision_log_file == c.decision_log_file);
  CHECK(back->log_level == c.log_level);

  c.rpc.max_connections = 10;
  c.rpc.max_connections_per_peer = 3;
  c.rpc.idle_timeout_ms = 0;
  c.rpc.max_calls_per_s = 7;
  auto limits = parseJmConfig(toYaml(c), "jm.yaml");
  REQUIRE(limits.isOk());
  CHECK(limits->rpc.max_connections == 10u);
  CHECK(limits->rpc.max_connections_per_peer == 3u);
  CHECK(limits->rpc.idle_timeout_ms == 0u);
  CHECK(limits->rpc.max_calls_per_s == 7u);
  CHECK(limits->rpc.max_frame_bytes == c.rpc.max_frame_bytes);

  c.primary = false;
  c.job_id = "007";  // must stay a string, not become a number or lose its zeros
  auto secondary = parseJmConfig(toYaml(c), "jm.yaml");
  REQUIRE(secondary.isOk());
  CHECK_FALSE(secondary->primary);
  CHECK(secondary->job_id == "007");
}

TEST_CASE("JM config errors", "[unit][config]") {
  const std::string good =
      "job_id: job-1\n"
      "site: a\n"
      "role: primary\n"
      "master: 127.0.0.1:7100\n"
      "worker_id: w1\n"
      "zookeeper: {connect: 'h:2181', insecure: true}\n"
      "insecure: true\n";
  auto r = parseJmConfig(good, "jm.yaml");
  REQUIRE(r.isOk());
  CHECK(r->listen == "127.0.0.1:0");
  CHECK(r->period_ms == 1000u);
  CHECK(r->heartbeat_interval_ms == 200u);
  CHECK(r->heartbeat_misses == 3u);
  CHECK(r->site_lost_after_ms == 0u);  // the session timeout
  CHECK(r->decision_log_max_bytes == 0u);  // no decision log
  CHECK(r->decision_log_file.empty());
  CHECK_FALSE(jmError(good + "decision_log_max_bytes: 2000000000\n").empty());
  CHECK_FALSE(jmError(good + "heartbeat_interval_ms: 5\n").empty());
  CHECK_FALSE(jmError(good + "heartbeat_misses: 1\n").empty());
  CHECK(parseJmConfig(good + "heartbeat_interval_ms: 10\nheartbeat_misses: 2\n", "jm.yaml").isOk());
  CHECK(jmError(good + "role: primary\n") == "jm.yaml:8: role: duplicate field (first given at line 3)");
  CHECK(jmError("job_id: job-1\nsite: a\nrole: leader\nmaster: h:1\nworker_id: w1\nzookeeper: {connect: 'h:2181', insecure: true}\ninsecure: true\n") ==
        "jm.yaml:3: role: expected primary or secondary, got 'leader'");
  CHECK(jmError(good + "period_ms: 0\n") == "jm.yaml:8: period_ms: expected a positive integer, got '0'");
  CHECK(jmError("site: a\nrole: primary\nmaster: h:1\nworker_id: w1\nzookeeper: {connect: 'h:2181', insecure: true}\ninsecure: true\n") ==
        "jm.yaml:1: job_id: required field is missing");
}

TEST_CASE("every daemon config names ZooKeeper credentials or says zookeeper.insecure: true", "[unit][config]") {
  const auto master = [](const std::string& zookeeper) {
    return "site: a\nlisten: 127.0.0.1:7100\nzookeeper:\n  connect: zk:2181\n" + zookeeper +
           "data_dir: /tmp/a\ninsecure: true\n";
  };
  auto withFile = parseMasterConfig(master("  credentials_file: /etc/tellus/zk-credentials\n"), "master.yaml");
  REQUIRE(withFile.isOk());
  CHECK(withFile->zookeeper.credentials_file == "/etc/tellus/zk-credentials");
  CHECK_FALSE(withFile->zookeeper.insecure);
  auto open = parseMasterConfig(master("  insecure: true\n"), "master.yaml");
  REQUIRE(open.isOk());
  CHECK(open->zookeeper.insecure);
  CHECK(open->zookeeper.credentials_file.empty());

  CHECK(masterError(master("")) ==
        "master.yaml:3: zookeeper: expected credentials_file (a user:password file for ZooKeeper digest "
        "authentication and ACLs), or insecure: true for nodes open to anyone");
  // The top-level insecure (plaintext RPC) says nothing about ZooKeeper.
  CHECK(masterError(master("  insecure: false\n")).starts_with("master.yaml:3: zookeeper: expected credentials_file"));
  CHECK(masterError(master("  credentials_file: ''\n")) ==
        "master.yaml:5: zookeeper.credentials_file: expected a file holding user:password, got an empty string");
  CHECK(masterError(master("  insecure: true\n  credentials_file: /etc/z\n")) ==
        "master.yaml:6: zookeeper.credentials_file: expected either credentials_file or insecure: true, not both");
  CHECK(workerError("id: w1\nsite: a\nlisten: 127.0.0.1:0\nmaster: h:1\nzookeeper: {connect: 'zk:2181'}\n"
                    "data_dir: /tmp/w\ninsecure: true\n")
            .starts_with("worker.yaml:5: zookeeper: expected credentials_file"));
}

TEST_CASE("loading a file that cannot be read names it", "[unit][config]") {
  // Opening a path that cannot exist fails before any I/O happens.
  auto r = loadMasterConfig("/nonexistent-dir-for-tellus-test/master.yaml");
  REQUIRE_FALSE(r.isOk());
  CHECK(r.message() == "cannot read /nonexistent-dir-for-tellus-test/master.yaml: No such file or directory");
  CHECK(r.error().code == ErrorCode::kNotFound);
}

TEST_CASE("value rules", "[unit][config]") {
  CHECK(isSiteId("a"));
  CHECK(isSiteId("eu-west-1"));
  CHECK(isSiteId("0a"));
  CHECK_FALSE(isSiteId(""));
  CHECK_FALSE(isSiteId("-a"));
  CHECK_FALSE(isSiteId("a_b"));
  CHECK_FALSE(isSiteId("A"));
  CHECK(isName("Word_count.v2-x"));
  CHECK_FALSE(isName(""));
  CHECK_FALSE(isName("a b"));
  CHECK_FALSE(isName("a/b"));
  auto hp = parseHostPort("example.com:65535");
  REQUIRE(hp);
  CHECK(hp->host == "example.com");
  CHECK(hp->port == 65535);
  auto v6 = parseHostPort("[::1]:0");
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  CHECK(v6->port == 0);
  CHECK_FALSE(parseHostPort("::1:80"));
  CHECK_FALSE(parseHostPort("host:65536"));
  CHECK_FALSE(parseHostPort("host:-1"));
  CHECK_FALSE(parseHostPort("host:"));
  CHECK_FALSE(parseHostPort(":80"));
  CHECK_FALSE(parseHostPort("host:80x"));
  CHECK_FALSE(parseHostPort("[]:80"));
  CHECK(isZkChroot("/"));
  CHECK(isZkChroot("/a/b"));
  CHECK_FALSE(isZkChroot("a"));
  CHECK_FALSE(isZkChroot("/a/"));
  CHECK_FALSE(isZkChroot("//"));
}

TEST_CASE("the example configs shipped in examples/config parse", "[unit][config]") {
  auto master = loadMasterConfig(std::string(TELLUS_EXAMPLES_DIR) + "/master.yaml");
  INFO((master ? std::string() : master.message()));
  CHECK(master.isOk());
  auto worker = loadWorkerConfig(std::string(TELLUS_EXAMPLES_DIR) + "/worker.yaml");
  INFO((worker ? std::string() : worker.message()));
  REQUIRE(worker.isOk());
  CHECK(worker->jm.heartbeat_misses == 3u);
}

TEST_CASE("a worker's jm section sets the timings of the JMs it starts, checked as in a JM's own config",
          "[unit][config]") {
  auto plain = parseWorkerConfig(kWorker, "worker.yaml");
  REQUIRE(plain.isOk());
  CHECK(plain->jm.heartbeat_interval_ms == JmTuning{}.heartbeat_interval_ms);
  CHECK(plain->jm.site_lost_after_ms == 0u);

  auto tuned = parseWorkerConfig(
      kWorker + "jm:\n  heartbeat_interval_ms: 500\n  heartbeat_misses: 4\n  site_lost_after_ms: 20000\n  tick_ms: 50\n"
                "  decision_log_max_bytes: 100000\n  steal_information: offers\n",
      "worker.yaml");
  REQUIRE(tuned.isOk());
  CHECK(plain->jm.steal_information == StealInformation::kLeases);
  CHECK(tuned->jm.steal_information == StealInformation::kOffers);
  CHECK(tuned->jm.heartbeat_interval_ms == 500u);
  CHECK(tuned->jm.heartbeat_misses == 4u);
  CHECK(tuned->jm.site_lost_after_ms == 20000u);
  CHECK(tuned->jm.tick_ms == 50u);
  CHECK(tuned->jm.period_ms == JmTuning{}.period_ms);

  // What the worker writes for its JMs carries them, and a JM reads them back.
  JmConfig jm = minimalJm("eu-west");
  static_cast<JmTuning&>(jm) = tuned->jm;
  auto back = parseJmConfig(toYaml(jm), "jm.yaml");
  INFO(toYaml(jm));
  REQUIRE(back.isOk());
  CHECK(back->heartbeat_interval_ms == 500u);
  CHECK(back->heartbeat_misses == 4u);
  CHECK(back->site_lost_after_ms == 20000u);
  CHECK(back->decision_log_max_bytes == 100000u);
  CHECK(back->steal_information == StealInformation::kOffers);

  CHECK(workerError(kWorker + "jm:\n  steal_information: gossip\n") ==
        "worker.yaml:20: jm.steal_information: expected one of leases, shared-state, offers, got 'gossip'");
  CHECK(workerError(kWorker + "jm:\n  heartbeat_misses: 1\n") ==
        "worker.yaml:20: jm.heartbeat_misses: expected an integer in [2, 100], got '1'");
  CHECK_THAT(workerError(kWorker + "jm:\n  job_id: job-1\n"), Catch::Contains("jm.job_id: unknown field"));
  // 0: no heartbeats (takeovers wait for the primary's session to expire); 1..9 is noise.
  auto off = parseWorkerConfig(kWorker + "jm:\n  heartbeat_interval_ms: 0\n", "worker.yaml");
  REQUIRE(off.isOk());
  CHECK(off->jm.heartbeat_interval_ms == 0u);
  CHECK(workerError(kWorker + "jm:\n  heartbeat_interval_ms: 5\n") ==
        "worker.yaml:20: jm.heartbeat_interval_ms: expected 0 (off) or 10 to 60000, got 5");
}

TEST_CASE("the exec section: off by default, typed, checked", "[unit][config]") {
  auto plain = parseWorkerConfig(kWorker, "worker.yaml");
  REQUIRE(plain.isOk());
  CHECK_FALSE(plain->exec.enabled);
  CHECK(plain->exec.run_as_user == "nobody");
  CHECK(plain->exec.allowed_commands.empty());
  CHECK(plain->exec.work_dir == "/tmp");

  auto full = parseWorkerConfig(kWorker + "exec:\n  enabled: true\n  run_as_user: tellus-exec\n  allowed_commands: "
                                          "[\"sort -u\", cat]\n  rlimits: {cpu_s: 30, memory_mb: 512, open_files: 64, "
                                          "processes: 16}\n  work_dir: /srv/scratch\n",
                                "worker.yaml");
  REQUIRE(full.isOk());
  CHECK(full->exec.enabled);
  CHECK(full->exec.run_as_user == "tellus-exec");
  CHECK(full->exec.allowed_commands == std::vector<std::string>{"sort -u", "cat"});
  CHECK(full->exec.rlimits.cpu_s == 30);
  CHECK(full->exec.rlimits.memory_mb == 512);
  CHECK(full->exec.rlimits.open_files == 64);
  CHECK(full->exec.rlimits.processes == 16);
  CHECK(full->exec.work_dir == "/srv/scratch");

  CHECK(workerError(kWorker + "exec:\n  enabled: yes please\n") ==
        "worker.yaml:20: exec.enabled: expected true or false, got 'yes please'");
  CHECK(workerError(kWorker + "exec:\n  work_dir: scratch\n") ==
        "worker.yaml:20: exec.work_dir: expected an absolute directory, got 'scratch'");
  CHECK(workerError(kWorker + "exec:\n  rlimits: {cpu_sec: 3}\n") ==
        "worker.yaml:20: exec.rlimits.cpu_sec: unknown field (did you mean 'cpu_s'?)");
}

}  // namespace
}  // namespace tellus::config

namespace tellus::config {
namespace {

TEST_CASE("limits: documented defaults, every field settable, bad values named", "[unit][config]") {
  auto r = parseMasterConfig(kMinimalMaster, "master.yaml");
  REQUIRE(r.isOk());
  const LimitsConfig& d = r->limits;
  CHECK(d.max_stages_per_job == 64u);
  CHECK(d.max_tasks_per_stage == 10000u);
  CHECK(d.max_tasks_per_job == 20000u);
  CHECK(d.max_spec_bytes == 65536u);
  CHECK(d.max_partitions_per_put == 1000u);
  CHECK(d.max_partitions_per_dataset == 1000u);
  CHECK(d.max_partition_bytes == (uint64_t{1} << 30));
  CHECK(d.max_site_record_bytes == 524288u);
  CHECK(d.max_containers_per_worker == 256u);
  CHECK(d.max_output_bytes == (uint64_t{16} << 30));
  CHECK(r->put_idle_timeout_ms == 60000u);

  auto set = parseMasterConfig(kMinimalMaster +
                                   "put_idle_timeout_ms: 500\n"
                                   "limits:\n  max_stages_per_job: 2\n  max_tasks_per_stage: 3\n  max_tasks_per_job: 4\n"
                                   "  max_spec_bytes: 5\n  max_partitions_per_put: 6\n  max_partitions_per_dataset: 7\n"
                                   "  max_partition_bytes: 8\n  max_site_record_bytes: 9000\n"
                                   "  max_containers_per_worker: 10\n  max_output_bytes: 11\n",
                               "master.yaml");
  REQUIRE(set.isOk());
  const LimitsConfig& l = set->limits;
  CHECK(set->put_idle_timeout_ms == 500u);
  CHECK(l.max_stages_per_job == 2u);
  CHECK(l.max_tasks_per_stage == 3u);
  CHECK(l.max_tasks_per_job == 4u);
  CHECK(l.max_spec_bytes == 5u);
  CHECK(l.max_partitions_per_put == 6u);
  CHECK(l.max_partitions_per_dataset == 7u);
  CHECK(l.max_partition_bytes == 8u);
  CHECK(l.max_site_record_bytes == 9000u);
  CHECK(l.max_containers_per_worker == 10u);
  CHECK(l.max_output_bytes == 11u);

  CHECK_THAT(masterError(kMinimalMaster + "limits:\n  max_tasks_per_stage: 0\n"),
             Catch::Contains("max_tasks_per_stage"));
  // Over ZooKeeper's node limit: the record could never be written.
  CHECK_THAT(masterError(kMinimalMaster + "limits:\n  max_site_record_bytes: 2000000\n"),
             Catch::Contains("max_site_record_bytes"));
  CHECK_THAT(masterError(kMinimalMaster + "limits:\n  max_taks_per_stage: 5\n"), Catch::Contains("max_taks_per_stage"));
  // A stage whose taskMap could not fit one node: refused in one line naming the maximum.
  const std::string tooMany = masterError(kMinimalMaster + "limits:\n  max_tasks_per_stage: 900001\n");
  CHECK_THAT(tooMany, Catch::Contains("limits.max_tasks_per_stage: 900001 is over 900000"));
  CHECK(tooMany.find('\n') == std::string::npos);
  auto largest = parseMasterConfig(kMinimalMaster + "limits:\n  max_tasks_per_stage: 900000\n", "master.yaml");
  REQUIRE(largest.isOk());
  CHECK(largest->limits.max_tasks_per_stage == config::kMaxTasksPerStage);
}

TEST_CASE("limits: a worker may not offer more containers than its limit", "[unit][config]") {
  auto ok = parseWorkerConfig(kWorker + "limits: {max_containers_per_worker: 8}\n", "worker.yaml");
  REQUIRE(ok.isOk());
  CHECK(ok->limits.max_containers_per_worker == 8u);
  CHECK_THAT(workerError(kWorker + "limits: {max_containers_per_worker: 7}\n"),
             Catch::Contains("containers") && Catch::Contains("max_containers_per_worker (7)"));
}

TEST_CASE("every daemon config has a tls section or an explicit insecure: true", "[unit][config]") {
  const std::string base =
      "site: a\n"
      "listen: 127.0.0.1:7100\n"
      "zookeeper: {connect: 'localhost:2181', insecure: true}\n"
      "data_dir: /tmp/a\n";
  CHECK(masterError(base) ==
        "master.yaml:1: expected a tls section {ca_file, cert_file, key_file}, or insecure: true for plaintext RPC");
  auto tls = parseMasterConfig(base + "tls: {ca_file: /c/ca.pem, cert_file: /c/m.pem, key_file: /c/m.key}\n", "m.yaml");
  REQUIRE(tls.isOk());
  CHECK_FALSE(tls->tls.insecure);
  CHECK(tls->tls.ca_file == "/c/ca.pem");
  CHECK(tls->tls.cert_file == "/c/m.pem");
  CHECK(tls->tls.key_file == "/c/m.key");
  CHECK(masterError(base + "tls: {ca_file: /c/ca.pem, cert_file: /c/m.pem}\n") ==
        "master.yaml:5: tls.key_file: required field is missing");
  CHECK(masterError(base + "insecure: true\ntls: {ca_file: a, cert_file: b, key_file: c}\n").find(
            "either tls or insecure: true") != std::string::npos);
  auto insecure = parseMasterConfig(base + "insecure: true\n", "m.yaml");
  REQUIRE(insecure.isOk());
  CHECK(insecure->tls.insecure);

  // A worker hands its files to the JMs it starts: the JM config carries them through.
  JmConfig jm = minimalJm("a");
  jm.tls = tls->tls;
  auto back = parseJmConfig(toYaml(jm), "jm.yaml");
  INFO((back.isOk() ? std::string() : back.message()));
  REQUIRE(back.isOk());
  CHECK(back->tls.cert_file == "/c/m.pem");
  jm.tls = TlsConfig{.insecure = true};
  auto plain = parseJmConfig(toYaml(jm), "jm.yaml");
  REQUIRE(plain.isOk());
  CHECK(plain->tls.insecure);
}

}  // namespace
TEST_CASE("HTTP listeners, http_jobs and log_format", "[unit][config]") {
  auto master = parseMasterConfig(std::string(kMinimalMaster) + "http_jobs: true\nlog_format: json\n", "master.yaml");
  REQUIRE(master.isOk());
  CHECK(master->http_jobs);
  CHECK(master->log_format == "json");
  auto plain = parseMasterConfig(kMinimalMaster, "master.yaml");
  REQUIRE(plain.isOk());
  CHECK_FALSE(plain->http_jobs);
  CHECK(plain->log_format == "text");
  CHECK(masterError(std::string(kMinimalMaster) + "log_format: xml\n").ends_with("log_format: expected text or json, got 'xml'"));

  auto worker = parseWorkerConfig(std::string(kWorker) + "http_listen: 127.0.0.1:9100\njm_http_listen: 127.0.0.1:0\n",
                                  "worker.yaml");
  REQUIRE(worker.isOk());
  CHECK(worker->http_listen == "127.0.0.1:9100");
  CHECK(worker->jm_http_listen == "127.0.0.1:0");
  auto quiet = parseWorkerConfig(kWorker, "worker.yaml");
  REQUIRE(quiet.isOk());
  CHECK(quiet->http_listen.empty());
  CHECK(quiet->jm_http_listen.empty());
  CHECK(workerError(std::string(kWorker) + "jm_http_listen: 127.0.0.1:9200\n")
            .ends_with("jm_http_listen: expected host:0 (each JM binds a free port)"));

  JmConfig jm = minimalJm("us-east");
  jm.http_listen = "127.0.0.1:0";
  jm.log_format = "json";
  auto back = parseJmConfig(toYaml(jm), "jm.yaml");
  REQUIRE(back.isOk());
  CHECK(back->http_listen == "127.0.0.1:0");
  CHECK(back->log_format == "json");
}

TEST_CASE("admins: client names, none by default, checked", "[unit][config]") {
  auto plain = parseMasterConfig(kMinimalMaster, "master.yaml");
  REQUIRE(plain.isOk());
  CHECK(plain->admins.empty());
  auto master = parseMasterConfig(std::string(kMinimalMaster) + "admins: [ops, on-call-2]\n", "master.yaml");
  REQUIRE(master.isOk());
  CHECK(master->admins == std::vector<std::string>{"ops", "on-call-2"});
  // The name, not the certificate identity; nothing a certificate could not carry.
  for (const char* bad : {"client/ops", "Ops", "\"\"", "a b", "../x",
                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
    INFO(bad);
    const std::string error = masterError(std::string(kMinimalMaster) + "admins: [" + bad + "]\n");
    CHECK_THAT(error, Catch::Contains("expected a client name ([a-z0-9-]+, at most 64 characters"));
  }
}

TEST_CASE("prices: zero by default, typed, checked", "[unit][config]") {
  auto none = parseMasterConfig(kMinimalMaster, "master.yaml");
  REQUIRE(none.isOk());
  CHECK(none->prices.container_hour == 0);
  CHECK(none->prices.market == "on-demand");
  CHECK(none->prices.egress_gb.empty());
  CHECK(none->prices.egress_default_gb == 0);

  auto full = parseMasterConfig(kMinimalMaster +
                                    "prices:\n"
                                    "  container_hour: 0.0464\n"
                                    "  market: spot\n"
                                    "  egress_gb: {b: 0.02, us-east-1: 0.01, default: 0.09}\n",
                                "master.yaml");
  REQUIRE(full.isOk());
  CHECK(full->prices.container_hour == 0.0464);
  CHECK(full->prices.market == "spot");
  CHECK(full->prices.egress_gb == std::map<std::string, double>{{"b", 0.02}, {"us-east-1", 0.01}});
  CHECK(full->prices.egress_default_gb == 0.09);
  CHECK(full->prices.egressTo("zz") == 0.09);

  auto error = [](const std::string& prices) { return masterError(kMinimalMaster + "prices:\n" + prices); };
  CHECK_THAT(error("  container_hour: -1\n"), Catch::StartsWith("master.yaml:7: prices.container_hour: expected a number in [0, ") &&
                                                  Catch::EndsWith("got '-1'"));
  CHECK_THAT(error("  container_hour: .inf\n"), Catch::Contains("master.yaml:7: prices.container_hour"));
  CHECK_THAT(error("  container_hour: .nan\n"), Catch::Contains("master.yaml:7: prices.container_hour"));
  CHECK(error("  market: reserved\n") == "master.yaml:7: prices.market: expected on-demand|spot, got 'reserved'");
  CHECK_THAT(error("  egress_gb: {b: -0.5}\n"), Catch::Contains("master.yaml:7: prices.egress_gb.b"));
  CHECK(error("  egress_gb: {B_x: 1}\n") ==
        "master.yaml:7: prices.egress_gb.B_x: expected a site id ([a-z0-9][a-z0-9-]*) or default, got 'B_x'");
  CHECK(error("  egress_gb: {a: 1}\n") ==
        "master.yaml:7: prices.egress_gb.a: expected another site than this master's own site 'a' (bytes within a "
        "site are not charged)");
  CHECK_THAT(error("  egress_gb: {b: cheap}\n"), Catch::Contains("master.yaml:7: prices.egress_gb.b"));
  CHECK_THAT(error("  container_hours: 1\n"), Catch::Contains("prices.container_hours: unknown field"));
}

TEST_CASE("prices by site: each entry read as a master's prices section", "[unit][config]") {
  auto prices = parseSitePrices(
      "site0: {container_hour: 0.03, market: spot, egress_gb: {site1: 0.01, default: 0.09}}\n"
      "site1: {container_hour: 0.1}\n",
      "prices.yaml");
  REQUIRE(prices.isOk());
  REQUIRE(prices->size() == 2);
  const auto& a = prices->at("site0");
  CHECK(a.container_hour == 0.03);
  CHECK(a.market == "spot");
  CHECK(a.egressTo("site1") == 0.01);
  CHECK(a.egressTo("site2") == 0.09);
  const auto& b = prices->at("site1");
  CHECK(b.container_hour == 0.1);
  CHECK(b.market == "on-demand");
  CHECK(b.egressTo("site0") == 0);

  const auto error = [](const std::string& yaml) {
    auto parsed = parseSitePrices(yaml, "prices.yaml");
    REQUIRE_FALSE(parsed.isOk());
    return parsed.message();
  };
  CHECK(error("Site_0: {container_hour: 1}\n") == "prices.yaml:1: Site_0: expected a site id ([a-z0-9][a-z0-9-]*), got 'Site_0'");
  CHECK(error("site0: {egress_gb: {site0: 1}}\n") ==
        "prices.yaml:1: site0.egress_gb.site0: expected another site than this master's own site 'site0' (bytes "
        "within a site are not charged)");
  CHECK_THAT(error("site0: {container_hour: -1}\n"), Catch::StartsWith("prices.yaml:1: site0.container_hour: expected a number in [0, "));
  CHECK_THAT(error("site0: {market: reserved}\n"), Catch::Contains("site0.market: expected on-demand|spot"));
  CHECK_THAT(error("site0: {container_hours: 1}\n"), Catch::Contains("site0.container_hours: unknown field"));
  CHECK_THAT(error("site0: 3\n"), Catch::Contains("prices.yaml:1: site0"));
}

}  // namespace tellus::config
