#include "jobstate/batch_codec.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "config/config.h"
#include "config/values.h"
#include "jobstate/job_store.h"
#include "stored.pb.h"

namespace tellus::jobstate {
namespace {

constexpr std::string_view kBatchMagic{"TOB1", 4};
constexpr std::string_view kSummaryMagic{"TJS1", 4};
constexpr std::string_view kRecordedMagic{"TRT1", 4};
constexpr std::string_view kTaskMapMagic{"TTM2", 4};

// What a taskMap node may hold at worst: magic, zlib's worst case (compressBound) over the
// epoch, the site table, the count and a byte per task. It must leave room in ZooKeeper's
// request for the path and a fenced multi's other ops, as createJob does (kMaxCreateJobBytes).
// A StoredTaskMap's bytes at most: the epoch's tag and varint, each site's tag, one-byte length
// (a site id is short) and bytes, the owners' tag, length and bytes.
constexpr size_t kMaxTaskMapRawBytes = 11 + kMaxTaskMapSites * (2 + kMaxSiteBytes) + 6 + config::kMaxTasksPerStage;
static_assert(kTaskMapMagic.size() + kMaxTaskMapRawBytes + (kMaxTaskMapRawBytes >> 12) + (kMaxTaskMapRawBytes >> 14) +
                      (kMaxTaskMapRawBytes >> 25) + 13 <=
                  kMaxCreateJobBytes,
              "config::kMaxTasksPerStage tasks must fit a taskMap node");
static_assert(kMaxTaskMapSites <= 256, "an owner index is one byte");

Result<std::string> compressNode(std::string_view magic, const std::string& raw) {
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string out(magic.size() + size, '\0');
  const int rc = compress2(reinterpret_cast<Bytef*>(out.data() + magic.size()), &size,
                           reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()), 9);
  if (rc != Z_OK) return makeError(ErrorCode::kInternal, fmt::format("zlib compress2: {}", rc));
  out.resize(magic.size() + size);
  std::copy(magic.begin(), magic.end(), out.begin());
  return out;
}

// The message behind `magic`, inflated to at most kMaxInflatedBytes.
Result<std::string> inflateNode(std::string_view magic, const std::string& bytes, const std::string& path) {
  if (bytes.size() > kMaxNodeBytes) {
    return makeError(ErrorCode::kInternal, fmt::format("{} holds {} bytes, more than a node may", path, bytes.size()));
  }
  if (bytes.size() < magic.size() || std::string_view(bytes).substr(0, magic.size()) != magic) {
    return makeError(ErrorCode::kInternal, path + " is not a " + std::string(magic) + " node");
  }
  z_stream zs{};
  if (inflateInit(&zs) != Z_OK) return makeError(ErrorCode::kInternal, "zlib inflateInit");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + magic.size()));
  zs.avail_in = static_cast<uInt>(bytes.size() - magic.size());
  std::string out;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (out.size() >= kMaxInflatedBytes) break;
    const size_t have = out.size();
    out.resize(std::min(kMaxInflatedBytes, std::max<size_t>(4096, have * 2)));
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + have);
    zs.avail_out = static_cast<uInt>(out.size() - have);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(out.size() - zs.avail_out);
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;  // truncated input
  }
  const bool complete = rc == Z_STREAM_END && zs.avail_in == 0;
  inflateEnd(&zs);
  if (!complete) {
    return makeError(ErrorCode::kInternal,
                     out.size() >= kMaxInflatedBytes ? path + " inflates beyond " + std::to_string(kMaxInflatedBytes) + " bytes"
                                                     : path + " is not a complete zlib stream");
  }
  return out;
}

// Workers by index, as a node stores them.
struct WorkerTable {
  std::vector<std::string> ids, addresses, sites;
  std::map<std::string, uint32_t> index;
  uint32_t of(const pb::PartitionLocation& loc) {
    auto [it, added] = index.try_emplace(loc.worker_id(), static_cast<uint32_t>(ids.size()));
    if (added) {
      ids.push_back(loc.worker_id());
      addresses.push_back(loc.worker_address());
      sites.push_back(loc.site());
    } else if (addresses[it->second].empty()) {  // first seen by id alone (an execution)
      addresses[it->second] = loc.worker_address();
      sites[it->second] = loc.site();
    }
    return it->second;
  }
  uint32_t ofId(const std::string& worker) {
    pb::PartitionLocation loc;
    loc.set_worker_id(worker);
    return of(loc);
  }
};

template <class Message>
void storeWorkers(const WorkerTable& table, Message& m) {
  for (size_t i = 0; i < table.ids.size(); ++i) {
    m.add_worker_ids(table.ids[i]);
    m.add_worker_addresses(table.addresses[i]);
    m.add_worker_sites(table.sites[i]);
  }
}

template <class Message>
bool workersConsistent(const Message& m) {
  return m.worker_addresses_size() == m.worker_ids_size() && m.worker_sites_size() == m.worker_ids_size();
}

template <class Message>
void fillWorker(const Message& m, uint32_t w, pb::PartitionLocation& loc) {
  const int i = static_cast<int>(w);
  loc.set_worker_id(m.worker_ids(i));
  loc.set_worker_address(m.worker_addresses(i));
  loc.set_site(m.worker_sites(i));
}

constexpr uint64_t kMaxSeq = 9999999999ULL;

// A copy's worker as a table entry: of the output's site (replicas stay in their site).
uint32_t replicaIndex(WorkerTable& workers, const pb::PartitionLocation& output, const pb::DatasetReplica& replica) {
  pb::PartitionLocation loc;
  loc.set_worker_id(replica.worker_id());
  loc.set_worker_address(replica.worker_address());
  loc.set_site(output.site());
  return workers.of(loc);
}

// The copy named by table index `w` of an output whose own worker is index `primary`: kInternal
// unless `w` is in the table, is not the output's own worker, and is of its site.
template <class Message>
Result<pb::DatasetReplica> replicaAt(const Message& m, uint32_t w, uint32_t primary, const std::string& where) {
  if (w >= static_cast<uint32_t>(m.worker_ids_size()) || w == primary ||
      m.worker_sites(static_cast<int>(w)) != m.worker_sites(static_cast<int>(primary))) {
    return makeError(ErrorCode::kInternal, where + ": a copy names no other worker of its site");
  }
  pb::DatasetReplica replica;
  replica.set_worker_id(m.worker_ids(static_cast<int>(w)));
  replica.set_worker_address(m.worker_addresses(static_cast<int>(w)));
  return replica;
}

}  // namespace

bool isUsageSite(std::string_view site) { return site.size() <= kMaxSiteBytes && config::isSiteId(site); }

void addUsage(cost::Usage& usage, const pb::PartitionLocation& execution) {
  if (!isUsageSite(execution.site())) return;
  const double ms = std::isfinite(execution.elapsed_s()) ? std::clamp(execution.elapsed_s() * 1000.0, 0.0, 4e9) : 0.0;
  usage.addContainerMs(execution.site(), static_cast<uint64_t>(std::llround(ms)));
  const int n = std::min(execution.fetched_size(), static_cast<int>(kMaxFetchedSites));
  for (int i = 0; i < n; ++i) {
    const auto& f = execution.fetched(i);
    if (f.bytes() == 0 || f.site() == execution.site() || !isUsageSite(f.site())) continue;
    usage.addBytes(f.site(), execution.site(), f.bytes());
  }
}

std::string attemptIdOf(uint32_t stage, uint32_t task, uint64_t seq) { return fmt::format("{}-{}-{:010}", stage, task, seq); }

std::optional<uint64_t> attemptSeqOf(std::string_view attemptId, uint32_t stage, uint32_t task) {
  const std::string prefix = fmt::format("{}-{}-", stage, task);
  if (attemptId.size() != prefix.size() + 10 || attemptId.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view digits = attemptId.substr(prefix.size());
  uint64_t seq = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seq);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return seq;
}

Result<std::string> encodeBatch(uint32_t stage, const std::vector<BatchItem>& items) {
  if (items.size() > kMaxBatchTasks) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("a batch of {} executions; at most {}", items.size(), kMaxBatchTasks));
  }
  pb::OutputBatch batch;
  WorkerTable workers;
  int64_t base = INT64_MAX;
  for (const auto& item : items) base = std::min(base, item.location.finish_unix_ms());
  if (items.empty()) base = 0;
  batch.set_base_unix_ms(base);
  std::set<uint32_t> recorded;
  for (const auto& item : items) {
    const auto& loc = item.location;
    auto seq = attemptSeqOf(loc.attempt_id(), stage, item.task);
    if (!seq) {
      return makeError(ErrorCode::kInvalidArgument, fmt::format("task {}/{}: '{}' is not one of its executions", stage,
                                                                item.task, loc.attempt_id().substr(0, 64)));
    }
    if (!item.auditOnly && !recorded.insert(item.task).second) {
      return makeError(ErrorCode::kInvalidArgument, fmt::format("task {}/{} recorded twice in one batch", stage, item.task));
    }
    auto* e = batch.add_entries();
    e->set_task(item.task);
    e->set_worker(workers.of(loc));
    e->set_attempt_seq(*seq);
    e->set_audit_only(item.auditOnly);
    e->set_attempt(loc.attempt());
    // Every execution's time and fetches are kept, recorded or not: both are what it cost.
    // Rounded up, as billed: a sub-millisecond task still held its container.
    const double ms = std::isfinite(loc.elapsed_s()) ? std::clamp(std::ceil(loc.elapsed_s() * 1000.0), 0.0, 4e9) : 0.0;
    e->set_elapsed_ms(static_cast<uint32_t>(ms));
    for (int f = 0; f < std::min(loc.fetched_size(), static_cast<int>(kMaxFetchedSites)); ++f) {
      if (loc.fetched(f).bytes() > 0) *e->add_fetched() = loc.fetched(f);
    }
    if (!item.auditOnly) {
      *e->mutable_bucket_bytes() = loc.bucket_bytes();
      e->set_finish_offset_ms(static_cast<uint32_t>(std::clamp<int64_t>(loc.finish_unix_ms() - base, 0, UINT32_MAX)));
      if (static_cast<size_t>(loc.replicas_size()) > kMaxOutputCopies) {
        return makeError(ErrorCode::kInvalidArgument,
                         fmt::format("task {}/{}: {} copies of its output; at most {}", stage, item.task, loc.replicas_size(), kMaxOutputCopies));
      }
      for (const auto& replica : loc.replicas()) {
        if (replica.worker_id() == loc.worker_id()) {
          return makeError(ErrorCode::kInvalidArgument, fmt::format("task {}/{}: a copy on its own worker", stage, item.task));
        }
        e->add_replicas(replicaIndex(workers, loc, replica));
      }
    }
  }
  storeWorkers(workers, batch);
  auto node = compressNode(kBatchMagic, batch.SerializeAsString());
  if (!node) return node.error();
  if (node->size() > kMaxBatchBytes) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("a batch of {} bytes; at most {}", node->size(), kMaxBatchBytes));
  }
  return node;
}

Result<std::vector<BatchItem>> decodeBatch(uint32_t stage, const std::string& bytes, const std::string& path) {
  auto raw = inflateNode(kBatchMagic, bytes, path);
  if (!raw) return raw.error();
  pb::OutputBatch batch;
  if (!batch.ParseFromString(*raw)) return makeError(ErrorCode::kInternal, "malformed OutputBatch in " + path);
  if (!workersConsistent(batch)) return makeError(ErrorCode::kInternal, "inconsistent worker table in " + path);
  std::vector<BatchItem> items;
  items.reserve(static_cast<size_t>(batch.entries_size()));
  std::set<uint32_t> recorded;
  for (const auto& e : batch.entries()) {
    if (e.worker() >= static_cast<uint32_t>(batch.worker_ids_size()) || e.attempt_seq() > kMaxSeq) {
      return makeError(ErrorCode::kInternal, fmt::format("{}: entry of task {} names no worker or execution", path, e.task()));
    }
    if (!e.audit_only() && !recorded.insert(e.task()).second) {
      return makeError(ErrorCode::kInternal, fmt::format("{}: task {} recorded twice", path, e.task()));
    }
    BatchItem item;
    item.task = e.task();
    item.auditOnly = e.audit_only();
    auto& loc = item.location;
    fillWorker(batch, e.worker(), loc);
    loc.set_attempt(e.attempt());
    loc.set_attempt_id(attemptIdOf(stage, e.task(), e.attempt_seq()));
    *loc.mutable_bucket_bytes() = e.bucket_bytes();
    loc.set_elapsed_s(e.elapsed_ms() / 1000.0);
    loc.set_finish_unix_ms(batch.base_unix_ms() + e.finish_offset_ms());
    if (static_cast<size_t>(e.fetched_size()) > kMaxFetchedSites) {
      return makeError(ErrorCode::kInternal, fmt::format("{}: entry of task {} fetched from {} sites", path, e.task(), e.fetched_size()));
    }
    *loc.mutable_fetched() = e.fetched();
    // Batches written before copies existed have none: their outputs have one copy.
    if (static_cast<size_t>(e.replicas_size()) > kMaxOutputCopies || (e.audit_only() && e.replicas_size() > 0)) {
      return makeError(ErrorCode::kInternal, fmt::format("{}: entry of task {} names {} copies", path, e.task(), e.replicas_size()));
    }
    for (uint32_t w : e.replicas()) {
      auto replica = replicaAt(batch, w, e.worker(), fmt::format("{}: entry of task {}", path, e.task()));
      if (!replica) return replica.error();
      *loc.add_replicas() = std::move(*replica);
    }
    items.push_back(std::move(item));
  }
  return items;
}

Result<std::string> encodeSummary(const JobFinal& job) {
  pb::JobSummary summary;
  WorkerTable workers;
  std::map<std::string, uint32_t> owners;
  for (size_t s = 0; s < job.stages.size(); ++s) {
    const auto& stage = job.stages[s];
    auto* out = summary.add_stages();
    // Tasks: the taskMap's, or as many as anything names.
    uint32_t tasks = 0;
    if (stage.taskmap) {
      out->set_released(true);
      tasks = static_cast<uint32_t>(stage.taskmap->owner_site_size());
      for (const auto& site : stage.taskmap->owner_site()) {
        auto [it, added] = owners.try_emplace(site, static_cast<uint32_t>(owners.size()));
        if (added) summary.add_owner_sites(site);
        out->add_owner(it->second);
      }
    }
    for (const auto& [t, loc] : stage.outputs) {
      if (t >= tasks) {
        return makeError(ErrorCode::kInvalidArgument, fmt::format("stage {}: an output of task {} beyond its {} tasks", s, t, tasks));
      }
    }
    std::vector<std::vector<uint32_t>> executions(tasks);
    for (const auto& [t, worker] : stage.executions) {
      if (t < tasks) executions[t].push_back(workers.ofId(worker));
    }
    for (uint32_t t = 0; t < tasks; ++t) {
      auto loc = stage.outputs.find(t);
      if (loc == stage.outputs.end()) {
        out->add_output_worker(0);
        out->add_output_replica(0);
        out->add_attempt(0);
        out->add_bucket_count(0);
      } else {
        out->add_output_worker(1 + workers.of(loc->second));
        // The summary keeps the first copy only (kMaxOutputCopies is 1 today).
        out->add_output_replica(loc->second.replicas().empty()
                                    ? 0
                                    : 1 + replicaIndex(workers, loc->second, loc->second.replicas(0)));
        out->add_attempt(loc->second.attempt());
        out->add_bucket_count(static_cast<uint32_t>(loc->second.bucket_bytes_size()));
        for (uint64_t b : loc->second.bucket_bytes()) out->add_bucket_bytes(b);
      }
      out->add_executions(static_cast<uint32_t>(executions[t].size()));
      for (uint32_t w : executions[t]) out->add_execution_worker(w);
    }
    std::map<std::string, pb::SiteUsage> bySite;
    for (const auto& [site, ms] : stage.usage.containerMs) {
      auto& u = bySite[site];
      u.set_site(site);
      u.set_container_ms(ms);
    }
    for (const auto& [pair, n] : stage.usage.bytes) {
      auto& u = bySite[pair.second];
      u.set_site(pair.second);
      auto* f = u.add_fetched();
      f->set_site(pair.first);
      f->set_bytes(n);
    }
    for (auto& [site, u] : bySite) *out->add_usage() = std::move(u);
  }
  // A worker first seen by id alone (an execution) gets its address from an output if any.
  storeWorkers(workers, summary);
  auto node = compressNode(kSummaryMagic, summary.SerializeAsString());
  if (!node) return node.error();
  if (node->size() > kMaxNodeBytes - 1024) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("a job summary of {} bytes does not fit a node", node->size()));
  }
  return node;
}

Result<JobFinal> decodeSummary(const std::string& bytes, const std::string& path) {
  auto raw = inflateNode(kSummaryMagic, bytes, path);
  if (!raw) return raw.error();
  pb::JobSummary summary;
  if (!summary.ParseFromString(*raw)) return makeError(ErrorCode::kInternal, "malformed JobSummary in " + path);
  if (!workersConsistent(summary)) return makeError(ErrorCode::kInternal, "inconsistent worker table in " + path);
  const auto workerCount = static_cast<uint32_t>(summary.worker_ids_size());
  JobFinal job;
  for (int s = 0; s < summary.stages_size(); ++s) {
    const auto& in = summary.stages(s);
    StageFinal stage;
    const auto tasks = static_cast<size_t>(in.owner_size());
    const auto bad = [&](const char* what) {
      return makeError(ErrorCode::kInternal, fmt::format("{}: stage {}: {}", path, s, what));
    };
    if (static_cast<size_t>(in.output_worker_size()) != tasks || static_cast<size_t>(in.attempt_size()) != tasks ||
        static_cast<size_t>(in.bucket_count_size()) != tasks || static_cast<size_t>(in.executions_size()) != tasks) {
      return bad("columns of different lengths");
    }
    if (in.released()) {
      pb::TaskMap map;
      for (uint32_t o : in.owner()) {
        if (o >= static_cast<uint32_t>(summary.owner_sites_size())) return bad("an owner out of range");
        map.add_owner_site(summary.owner_sites(static_cast<int>(o)));
      }
      stage.taskmap = std::move(map);
    } else if (tasks != 0) {
      return bad("tasks of a stage never released");
    }
    // Summaries written before copies existed have no column: no output has a copy.
    const bool copies = in.output_replica_size() > 0;
    if (copies && static_cast<size_t>(in.output_replica_size()) != tasks) return bad("columns of different lengths");
    size_t bucket = 0, execution = 0;
    for (size_t t = 0; t < tasks; ++t) {
      const int i = static_cast<int>(t);
      const uint32_t buckets = in.bucket_count(i);
      if (buckets > static_cast<size_t>(in.bucket_bytes_size()) - bucket) return bad("bucket sizes missing");
      const uint32_t w = in.output_worker(i);
      if (w > workerCount) return bad("an output's worker out of range");
      if (w > 0) {
        pb::PartitionLocation loc;
        fillWorker(summary, w - 1, loc);
        loc.set_attempt(in.attempt(i));
        for (uint32_t b = 0; b < buckets; ++b) loc.add_bucket_bytes(in.bucket_bytes(static_cast<int>(bucket + b)));
        if (const uint32_t r = copies ? in.output_replica(i) : 0; r > 0) {
          auto replica = replicaAt(summary, r - 1, w - 1, fmt::format("{}: stage {}: task {}", path, s, t));
          if (!replica) return replica.error();
          *loc.add_replicas() = std::move(*replica);
        }
        stage.outputs[static_cast<uint32_t>(t)] = std::move(loc);
      } else if (copies && in.output_replica(i) != 0) {
        return bad("a copy of no output");
      }
      bucket += buckets;
      const uint32_t runs = in.executions(i);
      if (runs > static_cast<size_t>(in.execution_worker_size()) - execution) return bad("executions missing");
      for (uint32_t r = 0; r < runs; ++r) {
        const uint32_t ew = in.execution_worker(static_cast<int>(execution + r));
        if (ew >= workerCount) return bad("an execution's worker out of range");
        stage.executions.emplace_back(static_cast<uint32_t>(t), summary.worker_ids(static_cast<int>(ew)));
      }
      execution += runs;
    }
    if (static_cast<size_t>(in.usage_size()) > kMaxFetchedSites) return bad("usage of too many sites");
    for (const auto& u : in.usage()) {
      if (!isUsageSite(u.site()) || static_cast<size_t>(u.fetched_size()) > kMaxFetchedSites) return bad("malformed usage");
      // A site that only fetched was written with 0 ms (encodeSummary): no execution there.
      if (u.container_ms() > 0 || u.fetched_size() == 0) stage.usage.addContainerMs(u.site(), u.container_ms());
      for (const auto& f : u.fetched()) {
        if (!isUsageSite(f.site()) || f.site() == u.site()) return bad("malformed usage");
        stage.usage.addBytes(f.site(), u.site(), f.bytes());
      }
    }
    job.stages.push_back(std::move(stage));
  }
  return job;
}

Result<std::string> encodeTaskMap(const pb::TaskMap& map) {
  if (static_cast<size_t>(map.owner_site_size()) > config::kMaxTasksPerStage) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("a taskMap of {} tasks, over the limit of {}",
                                                              map.owner_site_size(), config::kMaxTasksPerStage));
  }
  std::map<std::string_view, uint8_t> index;
  pb::StoredTaskMap stored;
  stored.set_epoch(map.epoch());
  std::string& owners = *stored.mutable_owners();
  owners.reserve(static_cast<size_t>(map.owner_site_size()));
  for (const auto& site : map.owner_site()) {
    auto it = index.find(site);
    if (it == index.end()) {
      if (!isUsageSite(site)) {
        return makeError(ErrorCode::kInvalidArgument, fmt::format("a taskMap owner '{}' is not a site id", site.substr(0, 64)));
      }
      if (index.size() == kMaxTaskMapSites) {
        return makeError(ErrorCode::kInvalidArgument, fmt::format("a taskMap of more than {} sites", kMaxTaskMapSites));
      }
      it = index.emplace(site, static_cast<uint8_t>(index.size())).first;
      stored.add_sites(site);
    }
    owners.push_back(static_cast<char>(it->second));
  }
  return compressNode(kTaskMapMagic, stored.SerializeAsString());
}

Result<pb::TaskMap> decodeTaskMap(const std::string& bytes, const std::string& path) {
  const auto bad = [&](std::string_view what) {
    return makeError(ErrorCode::kInternal, fmt::format("malformed TaskMap in {}: {}", path, what));
  };
  // inflateNode bounds the inflated size (kMaxInflatedBytes) before anything is parsed.
  auto raw = inflateNode(kTaskMapMagic, bytes, path);
  if (!raw) return bad(raw.message());
  pb::StoredTaskMap stored;
  if (!stored.ParseFromString(*raw)) return bad("not a StoredTaskMap");
  if (static_cast<size_t>(stored.sites_size()) > kMaxTaskMapSites) {
    return bad(fmt::format("{} sites, more than {}", stored.sites_size(), kMaxTaskMapSites));
  }
  for (int i = 0; i < stored.sites_size(); ++i) {
    if (!isUsageSite(stored.sites(i))) return bad("an owner that is not a site id");
    if (std::find(stored.sites().begin(), stored.sites().begin() + i, stored.sites(i)) != stored.sites().begin() + i) {
      return bad("a site listed twice");
    }
  }
  const std::string& owners = stored.owners();
  if (owners.size() > config::kMaxTasksPerStage) {
    return bad(fmt::format("{} tasks, more than {}", owners.size(), config::kMaxTasksPerStage));
  }
  pb::TaskMap map;
  map.set_epoch(stored.epoch());
  map.mutable_owner_site()->Reserve(static_cast<int>(owners.size()));
  for (char c : owners) {
    const auto owner = static_cast<uint8_t>(c);
    if (owner >= stored.sites_size()) return bad("an owner index out of range");
    map.add_owner_site(stored.sites(owner));
  }
  return map;
}

bool RecordedTaskSet::insert(uint32_t task) {
  if (task >= kMaxRecordedTasks) return false;
  if (task / 8 >= bits_.size()) bits_.resize(task / 8 + 1, '\0');
  bits_[task / 8] = static_cast<char>(bits_[task / 8] | (1 << (task % 8)));
  return true;
}

Result<std::string> encodeRecordedTasks(uint32_t stage, const RecordedTaskSet& tasks) {
  pb::RecordedTasks message;
  message.set_stage(stage);
  message.set_bitmap(tasks.bitmap());
  return compressNode(kRecordedMagic, message.SerializeAsString());
}

Result<RecordedTaskSet> decodeRecordedTasks(uint32_t stage, const std::string& bytes, const std::string& path) {
  auto raw = inflateNode(kRecordedMagic, bytes, path);
  if (!raw) return raw.error();
  pb::RecordedTasks message;
  if (!message.ParseFromString(*raw)) return makeError(ErrorCode::kInternal, "malformed RecordedTasks in " + path);
  if (message.stage() != stage) {
    return makeError(ErrorCode::kInternal, fmt::format("{} holds the recorded tasks of stage {}", path, message.stage()));
  }
  if (message.bitmap().size() > kMaxRecordedTasks / 8) {
    return makeError(ErrorCode::kInternal, fmt::format("{}: a bitmap of {} bytes", path, message.bitmap().size()));
  }
  RecordedTaskSet tasks;
  tasks.bits_ = std::move(*message.mutable_bitmap());
  return tasks;
}

}  // namespace tellus::jobstate
