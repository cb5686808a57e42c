#include "config/config.h"

#include <map>
#include <string_view>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/values.h"
#include "config/yaml_reader.h"

namespace tellus::config {

const char* stealInformationName(StealInformation information) {
  switch (information) {
    case StealInformation::kLeases: return "leases";
    case StealInformation::kSharedState: return "shared-state";
    case StealInformation::kOffers: return "offers";
  }
  return "leases";
}

namespace {

constexpr Bounds<uint32_t> kPositive = atLeast<uint32_t>(1);

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// A required [a-z0-9][a-z0-9-]* id (site or worker).
std::string readSiteId(YamlMap& m, const std::string& key, const char* what) {
  std::string value = m.required<std::string>(key);
  if (m.ok() && !isSiteId(value)) {
    m.fail(key, std::string("expected ") + what + " (" + kSiteIdForm + "), got " + quoted(value));
  }
  return value;
}

// A required non-empty string (directories, paths).
std::string readNonEmpty(YamlMap& m, const std::string& key, const char* what) {
  std::string value = m.required<std::string>(key);
  if (m.ok() && value.empty()) m.fail(key, std::string("expected ") + what + ", got an empty string");
  return value;
}

enum class PortRule { kListen, kConnect };

// Checks a host:port value already read from `key`; listen addresses may use port 0 (any free).
void checkEndpoint(YamlMap& m, const std::string& key, const std::string& value, PortRule rule) {
  if (!m.ok()) return;
  const auto hostPort = parseHostPort(value);
  const bool valid = hostPort && (rule == PortRule::kListen || hostPort->port != 0);
  if (!valid) {
    m.fail(key, std::string("expected host:port with a port in [") + (rule == PortRule::kListen ? "0" : "1") +
                    ", 65535], got " + quoted(value));
  }
}

std::string readEndpoint(YamlMap& m, const std::string& key, PortRule rule) {
  std::string value = m.required<std::string>(key);
  checkEndpoint(m, key, value, rule);
  return value;
}

// A master ranks jobs by the registry's orders that need only the sites' queues (and `fair`);
// `tetrium` needs LP estimates no master has.
sched::JobOrder readMasterJobOrder(YamlMap& m) {
  const std::string value = m.optional<std::string>("job_order", std::string(sched::name(sched::JobOrder::kFair)));
  std::vector<std::string> allowed;
  for (const auto& n : sched::jobOrderNames()) {
    if (n != sched::name(sched::JobOrder::kTetrium)) allowed.push_back(n);
  }
  const auto order = sched::parseJobOrder(value);
  if (m.ok() && (!order || *order == sched::JobOrder::kTetrium)) {
    m.fail("job_order", "expected one of " + sched::joinNames(allowed) + ", got " + quoted(value));
    return sched::JobOrder::kFair;
  }
  return order.value_or(sched::JobOrder::kFair);
}

std::string readLogFormat(YamlMap& m) {
  std::string value = m.optional<std::string>("log_format", "text");
  if (m.ok() && value != "text" && value != "json") m.fail("log_format", std::string("expected text or json, got ") + quoted(value));
  return value;
}

std::string readLogLevel(YamlMap& m) {
  std::string value = m.optional<std::string>("log_level", "info");
  if (m.ok() && !isLogLevel(value)) m.fail("log_level", std::string("expected one of ") + kLogLevelForm + ", got " + quoted(value));
  return value;
}

ZooKeeperConfig readZooKeeper(YamlMap& root) {
  ZooKeeperConfig zk;
  YamlMap m = root.map("zookeeper");
  zk.connect = m.required<std::string>("connect");
  if (m.ok()) {
    // The C client takes "host:port,host:port[/chroot]"; the chroot has its own field so that it
    // is validated (and defaulted) in one place.
    bool valid = !zk.connect.empty();
    std::string_view rest = zk.connect;
    while (valid) {
      const std::size_t comma = rest.find(',');
      const auto hostPort = parseHostPort(rest.substr(0, comma));
      valid = hostPort && hostPort->port != 0;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (!valid) {
      m.fail("connect", "expected host:port[,host:port...] with ports in [1, 65535] (the chroot is a separate "
                        "field), got " + quoted(zk.connect));
    }
  }
  zk.chroot = m.optional<std::string>("chroot", zk.chroot);
  if (m.ok() && !isZkChroot(zk.chroot)) {
    m.fail("chroot", "expected an absolute ZooKeeper path ('/' or '/a/b', no trailing '/'), got " + quoted(zk.chroot));
  }
  zk.session_timeout_ms = m.optional<uint32_t>("session_timeout_ms", zk.session_timeout_ms, kPositive);
  zk.insecure = m.optional<bool>("insecure", false);
  if (m.has("credentials_file")) {
    zk.credentials_file = readNonEmpty(m, "credentials_file", "a file holding user:password");
    if (m.ok() && zk.insecure) m.fail("credentials_file", "expected either credentials_file or insecure: true, not both");
  } else if (!zk.insecure && m.ok()) {
    m.failHere("expected credentials_file (a user:password file for ZooKeeper digest authentication and ACLs), or "
               "insecure: true for nodes open to anyone");
  }
  return zk;
}

TlsConfig readTls(YamlMap& root) {
  TlsConfig tls;
  tls.insecure = root.optional<bool>("insecure", false);
  if (auto m = root.optionalMap("tls")) {
    if (tls.insecure) m->failHere("expected either tls or insecure: true, not both");
    tls.ca_file = readNonEmpty(*m, "ca_file", "a PEM file");
    tls.cert_file = readNonEmpty(*m, "cert_file", "a PEM file");
    tls.key_file = readNonEmpty(*m, "key_file", "a PEM file");
  } else if (!tls.insecure && root.ok()) {
    root.failHere("expected a tls section {ca_file, cert_file, key_file}, or insecure: true for plaintext RPC");
  }
  return tls;
}

std::vector<DatasetConfig> readDatasets(YamlMap& root) {
  std::vector<DatasetConfig> datasets;
  YamlSeq seq = root.optionalSequence("datasets");
  std::map<std::string, int> lineOfName;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    YamlMap m = seq.map(i);
    DatasetConfig d;
    d.name = m.required<std::string>("name");
    if (m.ok() && !isName(d.name)) {
      m.fail("name", std::string("expected a dataset name (") + kNameForm + "), got " + quoted(d.name));
    }
    if (m.ok()) {
      if (auto [it, inserted] = lineOfName.emplace(d.name, m.line("name")); !inserted) {
        m.fail("name", "duplicate dataset name " + quoted(d.name) + " (first at line " + std::to_string(it->second) + ")");
      }
    }
    d.dir = readNonEmpty(m, "dir", "a directory");
    d.worker = readSiteId(m, "worker", "a worker id");
    const std::string residency = m.optional<std::string>("residency", "any");
    if (m.ok() && residency != "local" && residency != "any") {
      m.fail("residency", "expected local or any, got " + quoted(residency));
    }
    d.residency_local = residency == "local";
    datasets.push_back(std::move(d));
  }
  return datasets;
}

std::vector<WanLink> readWan(YamlMap& root, const std::string& ownSite) {
  std::vector<WanLink> links;
  YamlSeq seq = root.optionalSequence("wan");
  std::map<std::string, int> lineOfSite;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    YamlMap m = seq.map(i);
    WanLink link;
    link.to_site = readSiteId(m, "to_site", "a site id");
    if (m.ok() && link.to_site == ownSite) {
      m.fail("to_site", "expected another site than this worker's own site " + quoted(ownSite));
    }
    if (m.ok()) {
      if (auto [it, inserted] = lineOfSite.emplace(link.to_site, m.line("to_site")); !inserted) {
        m.fail("to_site", "duplicate link to site " + quoted(link.to_site) + " (first at line " +
                              std::to_string(it->second) + ")");
      }
    }
    link.bandwidth_mbps = m.optional<double>("bandwidth_mbps", 0.0, atLeast(0.0));
    link.latency_ms = m.optional<uint32_t>("latency_ms", 0);
    links.push_back(std::move(link));
  }
  return links;
}

LimitsConfig readLimits(YamlMap& root) {
  LimitsConfig l;
  auto m = root.optionalMap("limits");
  if (!m) return l;
  l.max_stages_per_job = m->optional<uint32_t>("max_stages_per_job", l.max_stages_per_job, kPositive);
  l.max_tasks_per_stage = m->optional<uint32_t>("max_tasks_per_stage", l.max_tasks_per_stage, kPositive);
  if (l.max_tasks_per_stage > kMaxTasksPerStage) {
    m->fail("max_tasks_per_stage",
            fmt::format("{} is over {}, the most tasks a stage's taskMap holds in one ZooKeeper node (1 MiB)",
                        l.max_tasks_per_stage, kMaxTasksPerStage));
  }
  l.max_tasks_per_job = m->optional<uint32_t>("max_tasks_per_job", l.max_tasks_per_job, kPositive);
  l.max_spec_bytes = m->optional<uint32_t>("max_spec_bytes", l.max_spec_bytes, between<uint32_t>(1, 1u << 20));
  l.max_partitions_per_put = m->optional<uint32_t>("max_partitions_per_put", l.max_partitions_per_put, kPositive);
  l.max_partitions_per_dataset =
      m->optional<uint32_t>("max_partitions_per_dataset", l.max_partitions_per_dataset, kPositive);
  l.max_partition_bytes = m->optional<uint64_t>("max_partition_bytes", l.max_partition_bytes, atLeast<uint64_t>(1));
  // ZooKeeper refuses a node over 1 MiB (jute.maxbuffer): the record must stay below it.
  l.max_site_record_bytes =
      m->optional<uint32_t>("max_site_record_bytes", l.max_site_record_bytes, between<uint32_t>(4096, 1u << 20));
  l.max_containers_per_worker =
      m->optional<uint32_t>("max_containers_per_worker", l.max_containers_per_worker, kPositive);
  l.max_output_bytes = m->optional<uint64_t>("max_output_bytes", l.max_output_bytes);
  return l;
}

RpcLimitsConfig readRpcLimits(YamlMap& root) {
  RpcLimitsConfig r;
  auto section = root.optionalMap("rpc");
  if (!section) return r;
  YamlMap& m = *section;
  // A frame must hold the largest request (a 64 MiB put partition by default) and the meta.
  r.max_frame_bytes = m.optional<uint64_t>("max_frame_bytes", r.max_frame_bytes,
                                           between<uint64_t>(4096, uint64_t{1} << 30));
  r.max_connections = m.optional<uint32_t>("max_connections", r.max_connections);
  r.max_connections_per_peer = m.optional<uint32_t>("max_connections_per_peer", r.max_connections_per_peer);
  if (m.ok() && r.max_connections != 0 && r.max_connections_per_peer > r.max_connections) {
    m.fail("max_connections_per_peer", "expected at most max_connections (" + std::to_string(r.max_connections) +
                                           "), got " + std::to_string(r.max_connections_per_peer));
  }
  r.idle_timeout_ms = m.optional<uint32_t>("idle_timeout_ms", r.idle_timeout_ms);
  r.frame_deadline_ms = m.optional<uint32_t>("frame_deadline_ms", r.frame_deadline_ms);
  r.frame_min_bytes_per_s = m.optional<uint32_t>("frame_min_bytes_per_s", r.frame_min_bytes_per_s);
  r.max_calls_per_s = m.optional<uint32_t>("max_calls_per_s", r.max_calls_per_s);
  r.call_burst = m.optional<uint32_t>("call_burst", r.call_burst);
  if (m.ok() && r.max_calls_per_s != 0 && r.call_burst == 0) {
    m.fail("call_burst", "expected at least 1 when max_calls_per_s is set, got 0");
  }
  return r;
}

void writeRpcLimits(YAML::Emitter& out, const RpcLimitsConfig& r) {
  out << YAML::Key << "rpc" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "max_frame_bytes" << YAML::Value << r.max_frame_bytes;
  out << YAML::Key << "max_connections" << YAML::Value << r.max_connections;
  out << YAML::Key << "max_connections_per_peer" << YAML::Value << r.max_connections_per_peer;
  out << YAML::Key << "idle_timeout_ms" << YAML::Value << r.idle_timeout_ms;
  out << YAML::Key << "frame_deadline_ms" << YAML::Value << r.frame_deadline_ms;
  out << YAML::Key << "frame_min_bytes_per_s" << YAML::Value << r.frame_min_bytes_per_s;
  out << YAML::Key << "max_calls_per_s" << YAML::Value << r.max_calls_per_s;
  out << YAML::Key << "call_burst" << YAML::Value << r.call_burst;
  out << YAML::EndMap;
}

// The JM's timings, from a JM config or from the `jm:` section of a worker's.
void readJmTuning(YamlMap& m, JmTuning& c) {
  c.period_ms = m.optional<uint32_t>("period_ms", c.period_ms, kPositive);
  c.tick_ms = m.optional<uint32_t>("tick_ms", c.tick_ms, kPositive);
  c.steal_interval_ms = m.optional<uint32_t>("steal_interval_ms", c.steal_interval_ms, kPositive);
  c.jm_grace_ms = m.optional<uint32_t>("jm_grace_ms", c.jm_grace_ms, kPositive);
  c.jm_request_interval_ms = m.optional<uint32_t>("jm_request_interval_ms", c.jm_request_interval_ms, kPositive);
  c.safety_reread_ms = m.optional<uint32_t>("safety_reread_ms", c.safety_reread_ms, kPositive);
  c.publish_interval_ms = m.optional<uint32_t>("publish_interval_ms", c.publish_interval_ms, kPositive);
  c.markers_coalesce_ms = m.optional<uint32_t>("markers_coalesce_ms", c.markers_coalesce_ms);
  c.outputs_coalesce_ms = m.optional<uint32_t>("outputs_coalesce_ms", c.outputs_coalesce_ms);
  // Below 10 ms a heartbeat is mostly scheduling noise; above a minute the session timeout
  // is the faster path anyway. 0: none sent, takeovers wait for the primary's session to
  // expire (as when every heartbeat is lost). Fewer than 2 misses takes over on one lost message.
  c.heartbeat_interval_ms =
      m.optional<uint32_t>("heartbeat_interval_ms", c.heartbeat_interval_ms, between<uint32_t>(0, 60'000));
  if (m.ok() && c.heartbeat_interval_ms > 0 && c.heartbeat_interval_ms < 10) {
    m.fail("heartbeat_interval_ms", fmt::format("expected 0 (off) or 10 to 60000, got {}", c.heartbeat_interval_ms));
  }
  c.heartbeat_misses = m.optional<uint32_t>("heartbeat_misses", c.heartbeat_misses, between<uint32_t>(2, 100));
  c.site_lost_after_ms = m.optional<uint32_t>("site_lost_after_ms", c.site_lost_after_ms);
  c.decision_log_max_bytes =
      m.optional<uint32_t>("decision_log_max_bytes", c.decision_log_max_bytes, between<uint32_t>(0, 1u << 30));
  c.lease_history = m.optional<uint32_t>("lease_history", c.lease_history, between<uint32_t>(1, 1000));
  c.lease_slack_ms = m.optional<uint32_t>("lease_slack_ms", c.lease_slack_ms, between<uint32_t>(0, 3'600'000));
  c.lease_default_ms = m.optional<uint32_t>("lease_default_ms", c.lease_default_ms, between<uint32_t>(1, 86'400'000));
  c.locality_wait_ms = m.optional<uint32_t>("locality_wait_ms", c.locality_wait_ms, between<uint32_t>(0, 3'600'000));
  const auto information = m.optional<std::string>("steal_information", std::string(stealInformationName(c.steal_information)));
  if (information == "leases") {
    c.steal_information = StealInformation::kLeases;
  } else if (information == "shared-state") {
    c.steal_information = StealInformation::kSharedState;
  } else if (information == "offers") {
    c.steal_information = StealInformation::kOffers;
  } else if (m.ok()) {
    m.fail("steal_information", "expected one of leases, shared-state, offers, got " + quoted(information));
  }
}

ExecConfig readExec(YamlMap& root) {
  ExecConfig e;
  auto m = root.optionalMap("exec");
  if (!m) return e;
  e.enabled = m->optional<bool>("enabled", e.enabled);
  e.run_as_user = m->optional<std::string>("run_as_user", e.run_as_user);
  if (m->ok() && !e.run_as_user.empty() && !isName(e.run_as_user)) {
    m->fail("run_as_user", std::string("expected a user name (") + kNameForm + ") or \"\", got " + quoted(e.run_as_user));
  }
  YamlSeq allowed = m->optionalSequence("allowed_commands");
  for (std::size_t i = 0; i < allowed.size(); ++i) {
    std::string command = allowed.scalar<std::string>(i);
    if (m->ok() && command.empty()) allowed.fail(i, "expected a command, got an empty string");
    e.allowed_commands.push_back(std::move(command));
  }
  if (auto limits = m->optionalMap("rlimits")) {
    e.rlimits.cpu_s = limits->optional<uint64_t>("cpu_s", e.rlimits.cpu_s);
    e.rlimits.memory_mb = limits->optional<uint64_t>("memory_mb", e.rlimits.memory_mb, between<uint64_t>(0, 1ULL << 30));
    e.rlimits.open_files = limits->optional<uint64_t>("open_files", e.rlimits.open_files);
    e.rlimits.processes = limits->optional<uint64_t>("processes", e.rlimits.processes);
  }
  e.work_dir = m->optional<std::string>("work_dir", e.work_dir);
  if (m->ok() && (e.work_dir.empty() || e.work_dir.front() != '/')) {
    m->fail("work_dir", "expected an absolute directory, got " + quoted(e.work_dir));
  }
  return e;
}

std::vector<std::string> readOperatorNames(YamlMap& root, const std::string& key) {
  std::vector<std::string> names;
  YamlSeq seq = root.optionalSequence(key);
  for (std::size_t i = 0; i < seq.size(); ++i) {
    std::string name = seq.scalar<std::string>(i);
    if (root.ok() && name.empty()) seq.fail(i, "expected an operator name, got an empty string");
    names.push_back(std::move(name));
  }
  return names;
}

// The <name> of client/<name> certificates (net/identity.h: [a-z0-9-]+, at most 64).
std::vector<std::string> readClientNames(YamlMap& root, const std::string& key) {
  std::vector<std::string> names;
  YamlSeq seq = root.optionalSequence(key);
  for (std::size_t i = 0; i < seq.size(); ++i) {
    std::string name = seq.scalar<std::string>(i);
    if (root.ok() && !isIdentityPart(name)) {
      seq.fail(i, fmt::format("expected a client name ([a-z0-9-]+, at most {} characters: `ops` for the certificate "
                              "client/ops), got {}",
                              kMaxIdentityPartBytes, quoted(name)));
    }
    names.push_back(std::move(name));
  }
  return names;
}

// Prices are in currency units, non-negative and finite (the reader refuses inf and nan).
constexpr Bounds<double> kPrice = between(0.0, cost::kMaxPrice);

// One site's prices: a master's `prices` section, or an entry of a prices-by-site file.
cost::Prices readPricesMap(YamlMap& m, const std::string& ownSite) {
  cost::Prices p;
  p.container_hour = m.optional<double>("container_hour", p.container_hour, kPrice);
  p.market = m.optional<std::string>("market", p.market);
  if (m.ok() && !cost::isMarket(p.market)) {
    m.fail("market", fmt::format("expected {}, got {}", cost::kMarketForm, quoted(p.market)));
  }
  if (auto egress = m.optionalMap("egress_gb")) {
    // Keys are sites (any site: one that does not exist yet may join later) or `default`.
    const auto sites = egress->keys();
    if (egress->ok() && sites.size() > cost::kMaxEgressPrices) {
      egress->failHere(fmt::format("expected at most {} prices, got {}", cost::kMaxEgressPrices, sites.size()));
    }
    for (const auto& site : sites) {
      const double price = egress->required<double>(site, kPrice);
      if (site == "default") {
        p.egress_default_gb = price;
      } else if (egress->ok() && !isSiteId(site)) {
        egress->fail(site, fmt::format("expected a site id ({}) or default, got {}", kSiteIdForm, quoted(site)));
      } else if (egress->ok() && site == ownSite) {
        egress->fail(site, fmt::format("expected another site than this master's own site {} (bytes within a site "
                                       "are not charged)", quoted(ownSite)));
      } else {
        p.egress_gb[site] = price;
      }
    }
  }
  return p;
}

cost::Prices readPrices(YamlMap& root, const std::string& ownSite) {
  auto section = root.optionalMap("prices");
  return section ? readPricesMap(*section, ownSite) : cost::Prices{};
}

template <class Config, class ReadFields>
Result<Config> parseWith(const std::string& yaml, const std::string& file, ReadFields readFields) {
  auto root = parseYamlDocument(yaml, file);
  if (!root.isOk()) return root.error();
  Config config = readFields(*root);
  TELLUS_RETURN_IF_ERROR(root->finish());
  return config;
}

template <class Config>
Result<Config> loadWith(const std::string& path, Result<Config> (*parse)(const std::string&, const std::string&)) {
  auto text = readTextFile(path);
  if (!text.isOk()) return text.error();
  return parse(*text, path);
}

}  // namespace

Result<MasterConfig> parseMasterConfig(const std::string& yaml, const std::string& file) {
  return parseWith<MasterConfig>(yaml, file, [](YamlMap& m) {
    MasterConfig c;
    c.site = readSiteId(m, "site", "a site id");
    c.listen = readEndpoint(m, "listen", PortRule::kListen);
    c.http_listen = m.optional<std::string>("http_listen", "");
    if (!c.http_listen.empty()) checkEndpoint(m, "http_listen", c.http_listen, PortRule::kListen);
    c.http_jobs = m.optional<bool>("http_jobs", false);
    c.zookeeper = readZooKeeper(m);
    c.tls = readTls(m);
    c.datasets = readDatasets(m);
    c.data_dir = readNonEmpty(m, "data_dir", "a directory");
    c.schedule_period_ms = m.optional<uint32_t>("schedule_period_ms", c.schedule_period_ms, kPositive);
    c.job_order = readMasterJobOrder(m);
    c.queue_publish_ms = m.optional<uint32_t>("queue_publish_ms", c.queue_publish_ms, between<uint32_t>(100, 600000));
    c.queue_stale_ms = m.optional<uint32_t>("queue_stale_ms", 3 * c.queue_publish_ms, kPositive);
    if (m.ok() && c.queue_stale_ms <= c.queue_publish_ms) {
      m.fail("queue_stale_ms", "expected more than queue_publish_ms (" + std::to_string(c.queue_publish_ms) + "), got " +
                                   std::to_string(c.queue_stale_ms));
    }
    c.lease_default_ms = m.optional<uint32_t>("lease_default_ms", c.lease_default_ms, between<uint32_t>(1, 86'400'000));
    c.lease_max_ms = m.optional<uint32_t>("lease_max_ms", c.lease_max_ms, between<uint32_t>(1, 86'400'000));
    if (m.ok() && c.lease_default_ms > c.lease_max_ms) {
      m.fail("lease_max_ms", fmt::format("expected at least lease_default_ms ({}), got {}", c.lease_default_ms, c.lease_max_ms));
    }
    c.lease_grace_ms = m.optional<uint32_t>("lease_grace_ms", c.lease_grace_ms, between<uint32_t>(0, 86'400'000));
    {
      const auto expiry = m.optional<std::string>("lease_expiry", std::string("extend"));
      if (expiry == "kill") {
        c.lease_expiry = LeaseExpiry::kKill;
      } else if (expiry != "extend" && m.ok()) {
        m.fail("lease_expiry", "expected one of extend, kill, got " + quoted(expiry));
      }
    }
    c.job_state_retention_ms = m.optional<uint32_t>("job_state_retention_ms", c.job_state_retention_ms);
    c.worker_timeout_ms = m.optional<uint32_t>("worker_timeout_ms", c.worker_timeout_ms, kPositive);
    c.max_jm_crashes = m.optional<uint32_t>("max_jm_crashes", c.max_jm_crashes, kPositive);
    c.put_idle_timeout_ms = m.optional<uint32_t>("put_idle_timeout_ms", c.put_idle_timeout_ms, kPositive);
    c.limits = readLimits(m);
    c.rpc = readRpcLimits(m);
    c.exec = readExec(m);
    c.derived_operators = readOperatorNames(m, "derived_operators");
    c.admins = readClientNames(m, "admins");
    c.prices = readPrices(m, c.site);
    c.log_level = readLogLevel(m);
    c.log_format = readLogFormat(m);
    return c;
  });
}

Result<std::map<std::string, cost::Prices>> parseSitePrices(const std::string& yaml, const std::string& file) {
  return parseWith<std::map<std::string, cost::Prices>>(yaml, file, [](YamlMap& m) {
    std::map<std::string, cost::Prices> prices;
    for (const auto& site : m.keys()) {
      if (m.ok() && !isSiteId(site)) {
        m.fail(site, fmt::format("expected a site id ({}), got {}", kSiteIdForm, quoted(site)));
      }
      YamlMap entry = m.map(site);
      prices[site] = readPricesMap(entry, site);
    }
    return prices;
  });
}

Result<std::map<std::string, cost::Prices>> loadSitePrices(const std::string& path) {
  return loadWith(path, &parseSitePrices);
}

Result<WorkerConfig> parseWorkerConfig(const std::string& yaml, const std::string& file) {
  return parseWith<WorkerConfig>(yaml, file, [](YamlMap& m) {
    WorkerConfig c;
    c.id = readSiteId(m, "id", "a worker id");
    c.site = readSiteId(m, "site", "a site id");
    c.listen = readEndpoint(m, "listen", PortRule::kListen);
    c.http_listen = m.optional<std::string>("http_listen", "");
    if (!c.http_listen.empty()) checkEndpoint(m, "http_listen", c.http_listen, PortRule::kListen);
    c.jm_http_listen = m.optional<std::string>("jm_http_listen", "");
    if (!c.jm_http_listen.empty()) {
      checkEndpoint(m, "jm_http_listen", c.jm_http_listen, PortRule::kListen);
      // Several JMs run on one worker: each binds its own free port.
      const auto hostPort = parseHostPort(c.jm_http_listen);
      if (m.ok() && hostPort && hostPort->port != 0) m.fail("jm_http_listen", "expected host:0 (each JM binds a free port)");
    }
    c.master = readEndpoint(m, "master", PortRule::kConnect);
    c.zookeeper = readZooKeeper(m);
    c.tls = readTls(m);
    c.containers = m.optional<uint32_t>("containers", c.containers, kPositive);
    // ZooKeeper's own per-address limit is an int; 10,000 JMs on one host is already absurd.
    c.max_jms = m.optional<uint32_t>("max_jms", c.max_jms, between<uint32_t>(1, 10000));
    c.data_dir = readNonEmpty(m, "data_dir", "a directory");
    c.bin_dir = m.optional<std::string>("bin_dir", "");
    c.heartbeat_ms = m.optional<uint32_t>("heartbeat_ms", c.heartbeat_ms, kPositive);
    c.log_retention_ms = m.optional<uint32_t>("log_retention_ms", c.log_retention_ms);
    // A batch's transaction deletes an audit node per execution: bounded under ZooKeeper's
    // 1 MiB request (jobstate::kMaxBatchTasks).
    c.output_batch_max_tasks =
        m.optional<uint32_t>("output_batch_max_tasks", c.output_batch_max_tasks, between<uint32_t>(1, 1000));
    c.output_batch_linger_ms =
        m.optional<uint32_t>("output_batch_linger_ms", c.output_batch_linger_ms, between<uint32_t>(0, 60000));
    c.wan = readWan(m, c.site);
    c.limits = readLimits(m);
    if (m.ok() && c.containers > c.limits.max_containers_per_worker) {
      m.fail("containers", "expected at most limits.max_containers_per_worker (" +
                               std::to_string(c.limits.max_containers_per_worker) + "), got " +
                               std::to_string(c.containers));
    }
    c.rpc = readRpcLimits(m);
    c.exec = readExec(m);
    if (auto jm = m.optionalMap("jm")) readJmTuning(*jm, c.jm);
    c.log_level = readLogLevel(m);
    c.log_format = readLogFormat(m);
    return c;
  });
}

Result<JmConfig> parseJmConfig(const std::string& yaml, const std::string& file) {
  return parseWith<JmConfig>(yaml, file, [](YamlMap& m) {
    JmConfig c;
    c.job_id = m.required<std::string>("job_id");
    if (m.ok() && !isName(c.job_id)) {
      m.fail("job_id", std::string("expected a job id (") + kNameForm + "), got " + quoted(c.job_id));
    }
    c.site = readSiteId(m, "site", "a site id");
    const std::string role = m.required<std::string>("role");
    if (m.ok() && role != "primary" && role != "secondary") {
      m.fail("role", "expected primary or secondary, got " + quoted(role));
    }
    c.primary = role == "primary";
    c.listen = m.optional<std::string>("listen", c.listen);
    checkEndpoint(m, "listen", c.listen, PortRule::kListen);
    c.http_listen = m.optional<std::string>("http_listen", "");
    if (!c.http_listen.empty()) checkEndpoint(m, "http_listen", c.http_listen, PortRule::kListen);
    c.master = readEndpoint(m, "master", PortRule::kConnect);
    c.worker_id = readSiteId(m, "worker_id", "a worker id");
    c.zookeeper = readZooKeeper(m);
    c.tls = readTls(m);
    readJmTuning(m, c);
    c.exit_reason_file = m.optional<std::string>("exit_reason_file", c.exit_reason_file);
    c.decision_log_file = m.optional<std::string>("decision_log_file", c.decision_log_file);
    c.rpc = readRpcLimits(m);
    c.log_level = readLogLevel(m);
    c.log_format = readLogFormat(m);
    return c;
  });
}

Result<MasterConfig> loadMasterConfig(const std::string& path) { return loadWith(path, &parseMasterConfig); }
Result<WorkerConfig> loadWorkerConfig(const std::string& path) { return loadWith(path, &parseWorkerConfig); }
Result<JmConfig> loadJmConfig(const std::string& path) { return loadWith(path, &parseJmConfig); }

std::string toYaml(const JmConfig& c) {
  YAML::Emitter out;
  // Every string is double-quoted so that values such as "007" or "true" stay strings.
  out << YAML::BeginMap;
  out << YAML::Key << "job_id" << YAML::Value << YAML::DoubleQuoted << c.job_id;
  out << YAML::Key << "site" << YAML::Value << YAML::DoubleQuoted << c.site;
  out << YAML::Key << "role" << YAML::Value << (c.primary ? "primary" : "secondary");
  out << YAML::Key << "listen" << YAML::Value << YAML::DoubleQuoted << c.listen;
  if (!c.http_listen.empty()) out << YAML::Key << "http_listen" << YAML::Value << YAML::DoubleQuoted << c.http_listen;
  out << YAML::Key << "master" << YAML::Value << YAML::DoubleQuoted << c.master;
  out << YAML::Key << "worker_id" << YAML::Value << YAML::DoubleQuoted << c.worker_id;
  out << YAML::Key << "zookeeper" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "connect" << YAML::Value << YAML::DoubleQuoted << c.zookeeper.connect;
  out << YAML::Key << "chroot" << YAML::Value << YAML::DoubleQuoted << c.zookeeper.chroot;
  out << YAML::Key << "session_timeout_ms" << YAML::Value << c.zookeeper.session_timeout_ms;
  // The path only: the JM reads the secret itself, as its worker did.
  if (c.zookeeper.insecure) {
    out << YAML::Key << "insecure" << YAML::Value << true;
  } else {
    out << YAML::Key << "credentials_file" << YAML::Value << YAML::DoubleQuoted << c.zookeeper.credentials_file;
  }
  out << YAML::EndMap;
  if (c.tls.insecure) {
    out << YAML::Key << "insecure" << YAML::Value << true;
  } else {
    out << YAML::Key << "tls" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "ca_file" << YAML::Value << YAML::DoubleQuoted << c.tls.ca_file;
    out << YAML::Key << "cert_file" << YAML::Value << YAML::DoubleQuoted << c.tls.cert_file;
    out << YAML::Key << "key_file" << YAML::Value << YAML::DoubleQuoted << c.tls.key_file;
    out << YAML::EndMap;
  }
  out << YAML::Key << "period_ms" << YAML::Value << c.period_ms;
  out << YAML::Key << "tick_ms" << YAML::Value << c.tick_ms;
  out << YAML::Key << "steal_interval_ms" << YAML::Value << c.steal_interval_ms;
  out << YAML::Key << "jm_grace_ms" << YAML::Value << c.jm_grace_ms;
  out << YAML::Key << "jm_request_interval_ms" << YAML::Value << c.jm_request_interval_ms;
  out << YAML::Key << "safety_reread_ms" << YAML::Value << c.safety_reread_ms;
  out << YAML::Key << "publish_interval_ms" << YAML::Value << c.publish_interval_ms;
  out << YAML::Key << "markers_coalesce_ms" << YAML::Value << c.markers_coalesce_ms;
  out << YAML::Key << "outputs_coalesce_ms" << YAML::Value << c.outputs_coalesce_ms;
  out << YAML::Key << "heartbeat_interval_ms" << YAML::Value << c.heartbeat_interval_ms;
  out << YAML::Key << "heartbeat_misses" << YAML::Value << c.heartbeat_misses;
  out << YAML::Key << "site_lost_after_ms" << YAML::Value << c.site_lost_after_ms;
  out << YAML::Key << "lease_history" << YAML::Value << c.lease_history;
  out << YAML::Key << "lease_slack_ms" << YAML::Value << c.lease_slack_ms;
  out << YAML::Key << "lease_default_ms" << YAML::Value << c.lease_default_ms;
  out << YAML::Key << "locality_wait_ms" << YAML::Value << c.locality_wait_ms;
  out << YAML::Key << "steal_information" << YAML::Value << stealInformationName(c.steal_information);
  if (!c.exit_reason_file.empty()) {
    out << YAML::Key << "exit_reason_file" << YAML::Value << YAML::DoubleQuoted << c.exit_reason_file;
  }
  out << YAML::Key << "decision_log_max_bytes" << YAML::Value << c.decision_log_max_bytes;
  if (!c.decision_log_file.empty()) {
    out << YAML::Key << "decision_log_file" << YAML::Value << YAML::DoubleQuoted << c.decision_log_file;
  }
  writeRpcLimits(out, c.rpc);
  out << YAML::Key << "log_level" << YAML::Value << c.log_level;
  out << YAML::Key << "log_format" << YAML::Value << c.log_format;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace tellus::config
