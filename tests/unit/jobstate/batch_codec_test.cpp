// The compact encodings of finished work (jobstate/batch_codec.h): an output batch and a
// compacted job's summary round-trip, stay within their size budget, and anything else —
// truncated, garbage, inflating without bound, indices out of range — is an error value.
#include "jobstate/batch_codec.h"

#include <fmt/format.h>
#include <zlib.h>

#include <limits>

#include <catch2/catch.hpp>

#include "config/config.h"
#include "jobstate/job_store.h"
#include "stored.pb.h"

using namespace tellus;
using namespace tellus::jobstate;

namespace {

pb::PartitionLocation at(const std::string& worker, uint32_t stage, uint32_t task, uint64_t seq) {
  pb::PartitionLocation loc;
  loc.set_site("s1");
  loc.set_worker_id(worker);
  loc.set_worker_address("127.0.0.1:" + std::to_string(7000 + worker.size()));
  loc.add_bucket_bytes(task * 10);
  loc.add_bucket_bytes(0);
  loc.set_attempt(1);
  loc.set_elapsed_s(0.25);
  loc.set_finish_unix_ms(1'700'000'000'000 + task);
  loc.set_attempt_id(attemptIdOf(stage, task, seq));
  return loc;
}

// A batch of `n` executions of stage 0 spread over two workers, as a worker writes them.
std::vector<BatchItem> batchOf(uint32_t n) {
  std::vector<BatchItem> items;
  for (uint32_t t = 0; t < n; ++t) items.push_back({t, at(t % 2 ? "s1-w1" : "s1-w22", 0, t, 1000 + t), false});
  return items;
}

// `raw` compressed behind `magic`, as the codec frames a node.
std::string framed(const std::string& magic, const std::string& raw) {
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string out(size, '\0');
  REQUIRE(compress2(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
                    static_cast<uLong>(raw.size()), 9) == Z_OK);
  out.resize(size);
  return magic + out;
}

}  // namespace

TEST_CASE("attempt ids: made and parsed for their own task only", "[jobstate][batch]") {
  CHECK(attemptIdOf(2, 17, 42) == "2-17-0000000042");
  CHECK(attemptSeqOf("2-17-0000000042", 2, 17) == 42u);
  CHECK_FALSE(attemptSeqOf("2-17-0000000042", 2, 1));
  CHECK_FALSE(attemptSeqOf("2-17-0000000042", 1, 17));
  CHECK_FALSE(attemptSeqOf("2-17-42", 2, 17));
  CHECK_FALSE(attemptSeqOf("2-17-00000000x2", 2, 17));
  CHECK_FALSE(attemptSeqOf("", 0, 0));
}

TEST_CASE("an output batch round-trips, audit-only entries included", "[jobstate][batch]") {
  auto items = batchOf(5);
  items.push_back({3, at("s1-w3", 0, 3, 77), true});  // a second execution of task 3
  auto node = encodeBatch(0, items);
  REQUIRE(node.isOk());
  auto back = decodeBatch(0, *node, "/p");
  REQUIRE(back.isOk());
  REQUIRE(back->size() == items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& want = items[i];
    const auto& got = (*back)[i];
    CHECK(got.task == want.task);
    CHECK(got.auditOnly == want.auditOnly);
    CHECK(got.location.worker_id() == want.location.worker_id());
    CHECK(got.location.worker_address() == want.location.worker_address());
    CHECK(got.location.site() == want.location.site());
    CHECK(got.location.attempt_id() == want.location.attempt_id());
    CHECK(got.location.attempt() == want.location.attempt());
    if (want.auditOnly) continue;  // an audit entry keeps who ran it, not its buckets
    CHECK(got.location.finish_unix_ms() == want.location.finish_unix_ms());
    CHECK(got.location.elapsed_s() == Approx(0.25));
    CHECK(got.location.bucket_bytes_size() == 2);
    CHECK(got.location.bucket_bytes(0) == want.location.bucket_bytes(0));
  }
}

TEST_CASE("a batch costs a few bytes per execution and is bounded", "[jobstate][batch]") {
  // The goal: under 20 bytes per finished task while the job runs (issue 16).
  auto node = encodeBatch(0, batchOf(200));
  REQUIRE(node.isOk());
  CHECK(node->size() < 200 * 20);
  // Bounded: a batch holds at most kMaxBatchTasks executions and records a task once.
  CHECK(encodeBatch(0, batchOf(kMaxBatchTasks + 1)).error().code == ErrorCode::kInvalidArgument);
  auto twice = batchOf(2);
  twice.push_back(twice.front());
  CHECK(encodeBatch(0, twice).error().code == ErrorCode::kInvalidArgument);
  // An execution of another task (or stage) is not this item's.
  auto wrong = batchOf(1);
  wrong[0].location.set_attempt_id(attemptIdOf(0, 5, 1));
  CHECK(encodeBatch(0, wrong).error().code == ErrorCode::kInvalidArgument);
  CHECK(encodeBatch(1, batchOf(1)).error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("a node that is not a batch is an error naming it", "[jobstate][batch]") {
  auto node = encodeBatch(0, batchOf(3));
  REQUIRE(node.isOk());
  auto error = [](const Result<std::vector<BatchItem>>& r) { return r.isOk() ? std::string() : r.message(); };
  CHECK_THAT(error(decodeBatch(0, "", "/p/b-1")), Catch::Contains("/p/b-1"));
  CHECK_THAT(error(decodeBatch(0, "garbage!", "/p/b-1")), Catch::Contains("/p/b-1"));
  CHECK_FALSE(decodeBatch(0, node->substr(0, node->size() - 3), "/p").isOk());  // truncated
  CHECK_FALSE(decodeBatch(0, *node + "x", "/p").isOk());                      // trailing bytes
  std::string flipped = *node;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x55);
  CHECK_FALSE(decodeBatch(0, flipped, "/p").isOk());  // zlib's checksum
  // Another stage's batch names executions of that stage's tasks (its attempt ids differ).
  auto other = decodeBatch(3, *node, "/p");
  REQUIRE(other.isOk());
  CHECK(other->front().location.attempt_id().rfind("3-", 0) == 0);
  // A worker index out of range, a task recorded twice, an impossible sequence number.
  pb::OutputBatch bad;
  bad.add_worker_ids("w");
  bad.add_worker_addresses("a");
  bad.add_worker_sites("s");
  bad.add_entries()->set_worker(1);
  CHECK_FALSE(decodeBatch(0, framed("TOB1", bad.SerializeAsString()), "/p").isOk());
  bad.mutable_entries(0)->set_worker(0);
  CHECK(decodeBatch(0, framed("TOB1", bad.SerializeAsString()), "/p").isOk());
  *bad.add_entries() = bad.entries(0);
  CHECK_FALSE(decodeBatch(0, framed("TOB1", bad.SerializeAsString()), "/p").isOk());
  bad.mutable_entries(1)->set_audit_only(true);
  CHECK(decodeBatch(0, framed("TOB1", bad.SerializeAsString()), "/p").isOk());
  bad.mutable_entries(1)->set_attempt_seq(10'000'000'000ULL);
  CHECK_FALSE(decodeBatch(0, framed("TOB1", bad.SerializeAsString()), "/p").isOk());
  // A summary is not a batch, nor is a protobuf that does not parse.
  CHECK_FALSE(decodeBatch(0, framed("TJS1", bad.SerializeAsString()), "/p").isOk());
  CHECK_FALSE(decodeBatch(0, framed("TOB1", "\xff\xff\xff"), "/p").isOk());
  // A zlib bomb stops at the bound.
  auto bomb = decodeBatch(0, framed("TOB1", std::string(kMaxInflatedBytes + 1, '\0')), "/p");
  REQUIRE_FALSE(bomb.isOk());
  CHECK_THAT(bomb.message(), Catch::Contains("inflates beyond"));
}

TEST_CASE("a job summary round-trips and fits 2 KB for 1,000 no-op tasks", "[jobstate][batch]") {
  JobFinal job;
  job.stages.resize(2);
  pb::TaskMap map;
  for (uint32_t t = 0; t < 1000; ++t) map.add_owner_site(t % 3 ? "s1" : "s2");
  job.stages[0].taskmap = map;
  for (uint32_t t = 0; t < 1000; ++t) {
    pb::PartitionLocation loc;
    loc.set_site("s1");
    loc.set_worker_id((t * 7919) % 5 < 2 ? "s1-w1" : "s1-w2");  // workers interleaved as Parades picks them
    loc.set_worker_address(loc.worker_id() == "s1-w1" ? "127.0.0.1:1" : "127.0.0.1:2");
    loc.add_bucket_bytes(0);
    loc.set_attempt(1);
    job.stages[0].outputs[t] = loc;
    job.stages[0].executions.emplace_back(t, loc.worker_id());
  }
  job.stages[0].executions.emplace_back(17, "s1-w9");  // a re-run, on a worker with no output
  auto node = encodeSummary(job);
  REQUIRE(node.isOk());
  CHECK(node->size() < 2000);
  auto back = decodeSummary(*node, "/summary");
  REQUIRE(back.isOk());
  REQUIRE(back->stages.size() == 2);
  CHECK_FALSE(back->stages[1].taskmap);
  const auto& s0 = back->stages[0];
  REQUIRE(s0.taskmap);
  CHECK(s0.taskmap->SerializeAsString() == map.SerializeAsString());
  REQUIRE(s0.outputs.size() == 1000);
  for (const auto& [t, loc] : s0.outputs) {
    const auto& want = job.stages[0].outputs.at(t);
    CHECK(loc.worker_id() == want.worker_id());
    CHECK(loc.worker_address() == want.worker_address());
    CHECK(loc.site() == "s1");
    CHECK(loc.bucket_bytes_size() == 1);
    CHECK(loc.attempt() == 1u);
  }
  CHECK(s0.executions.size() == 1001);
  size_t ofTask17 = 0;
  for (const auto& [t, worker] : s0.executions) ofTask17 += t == 17 ? 1 : 0;
  CHECK(ofTask17 == 2);
}

TEST_CASE("a summary that is not one is an error naming it", "[jobstate][batch]") {
  CHECK_FALSE(decodeSummary("", "/s").isOk());
  CHECK_FALSE(decodeSummary(framed("TOB1", ""), "/s").isOk());
  pb::JobSummary bad;
  auto* stage = bad.add_stages();
  stage->set_released(true);
  stage->add_owner(0);  // no owner sites
  stage->add_output_worker(0);
  stage->add_attempt(0);
  stage->add_bucket_count(0);
  stage->add_executions(0);
  CHECK_FALSE(decodeSummary(framed("TJS1", bad.SerializeAsString()), "/s").isOk());
  bad.add_owner_sites("s1");
  CHECK(decodeSummary(framed("TJS1", bad.SerializeAsString()), "/s").isOk());
  stage->set_executions(0, 3);  // executions without workers
  CHECK_FALSE(decodeSummary(framed("TJS1", bad.SerializeAsString()), "/s").isOk());
  stage->set_executions(0, 0);
  stage->set_bucket_count(0, 2);  // buckets without sizes
  CHECK_FALSE(decodeSummary(framed("TJS1", bad.SerializeAsString()), "/s").isOk());
  stage->set_bucket_count(0, 0);
  stage->set_output_worker(0, 1);  // a worker beyond the table
  CHECK_FALSE(decodeSummary(framed("TJS1", bad.SerializeAsString()), "/s").isOk());
  stage->add_owner(0);  // columns of different lengths
  CHECK_FALSE(decodeSummary(framed("TJS1", bad.SerializeAsString()), "/s").isOk());
  // An output beyond its stage's tasks is not encoded.
  JobFinal job;
  job.stages.resize(1);
  pb::PartitionLocation loc;
  job.stages[0].outputs[0] = loc;
  CHECK(encodeSummary(job).error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("a batch keeps every execution's usage: time at its site, bytes fetched per site", "[jobstate][batch][cost]") {
  auto items = batchOf(2);                               // 250 ms each at s1
  items[0].location.set_elapsed_s(0.0004);               // sub-millisecond: billed as 1 ms
  auto* f = items[1].location.add_fetched();
  f->set_site("s2");
  f->set_bytes(5000);
  auto dup = at("s1-w3", 0, 1, 99);                      // task 1 again: audit-only, still paid for
  dup.set_elapsed_s(2);
  auto* g = dup.add_fetched();
  g->set_site("s3");
  g->set_bytes(7);
  items.push_back({1, dup, true});
  auto node = encodeBatch(0, items);
  REQUIRE(node.isOk());
  auto back = decodeBatch(0, *node, "/p");
  REQUIRE(back.isOk());
  cost::Usage usage;
  for (const auto& item : *back) addUsage(usage, item.location);
  CHECK(usage.containerMs == std::map<std::string, uint64_t>{{"s1", 1 + 250 + 2000}});
  CHECK(usage.bytes.size() == 2);
  CHECK(usage.bytes.at({"s2", "s1"}) == 5000);
  CHECK(usage.bytes.at({"s3", "s1"}) == 7);
}

TEST_CASE("usage from a hostile location is bounded and ignores what is not a site", "[jobstate][batch][cost]") {
  cost::Usage usage;
  pb::PartitionLocation loc;
  loc.set_site("s1");
  loc.set_elapsed_s(std::numeric_limits<double>::infinity());
  auto* self = loc.add_fetched();  // from its own site: not a site pair
  self->set_site("s1");
  self->set_bytes(10);
  auto* bad = loc.add_fetched();
  bad->set_site("../etc");
  bad->set_bytes(10);
  auto* huge = loc.add_fetched();
  huge->set_site("s2");
  huge->set_bytes(std::numeric_limits<uint64_t>::max());
  addUsage(usage, loc);
  addUsage(usage, loc);
  CHECK(usage.containerMs.at("s1") == 0);
  CHECK(usage.bytes.size() == 1);
  CHECK(usage.bytes.at({"s2", "s1"}) == std::numeric_limits<uint64_t>::max());  // saturated
  loc.set_site("S1!");  // a site that is not a site id: nothing counted
  cost::Usage none;
  addUsage(none, loc);
  CHECK(none.containerMs.empty());
  CHECK(none.bytes.empty());

  // A batch entry claiming fetches from more sites than any cluster has is refused.
  pb::OutputBatch batch;
  batch.add_worker_ids("w");
  batch.add_worker_addresses("a");
  batch.add_worker_sites("s1");
  auto* e = batch.add_entries();
  e->set_attempt_seq(1);
  for (size_t i = 0; i <= kMaxFetchedSites; ++i) {
    auto* x = e->add_fetched();
    x->set_site(fmt::format("s{}", i));
    x->set_bytes(1);
  }
  CHECK_FALSE(decodeBatch(0, framed("TOB1", batch.SerializeAsString()), "/p").isOk());
}

TEST_CASE("a summary keeps each stage's usage; malformed usage is an error", "[jobstate][batch][cost]") {
  JobFinal job;
  job.stages.resize(1);
  pb::TaskMap map;
  map.add_owner_site("s1");
  job.stages[0].taskmap = map;
  job.stages[0].usage.addContainerMs("s1", 1234);
  job.stages[0].usage.addContainerMs("s2", 5);
  job.stages[0].usage.addBytes("s2", "s1", 99);
  job.stages[0].usage.addBytes("s1", "s3", 7);  // s3 only fetched
  auto node = encodeSummary(job);
  REQUIRE(node.isOk());
  auto back = decodeSummary(*node, "/summary");
  REQUIRE(back.isOk());
  REQUIRE(back->stages.size() == 1);
  CHECK(back->stages[0].usage == job.stages[0].usage);

  pb::JobSummary bad;
  auto* stage = bad.add_stages();
  auto* u = stage->add_usage();
  u->set_site("s1");
  u->set_container_ms(1);
  CHECK(decodeSummary(framed("TJS1", bad.SerializeAsString()), "/s").isOk());
  u->set_site("");
  CHECK_FALSE(decodeSummary(framed("TJS1", bad.SerializeAsString()), "/s").isOk());
  u->set_site("s1");
  auto* self = u->add_fetched();
  self->set_site("s1");  // from itself
  CHECK_FALSE(decodeSummary(framed("TJS1", bad.SerializeAsString()), "/s").isOk());
}

TEST_CASE("a stage's recorded tasks round-trip, small, bounded; anything else is an error", "[jobstate][batch]") {
  RecordedTaskSet tasks;
  CHECK_FALSE(tasks.contains(0));
  for (uint32_t t : {0u, 7u, 8u, 999u}) CHECK(tasks.insert(t));
  CHECK_FALSE(tasks.insert(kMaxRecordedTasks));  // past the bound: not kept
  CHECK_FALSE(tasks.contains(kMaxRecordedTasks));
  auto node = encodeRecordedTasks(2, tasks);
  REQUIRE(node.isOk());
  auto back = decodeRecordedTasks(2, *node, "/p");
  REQUIRE(back.isOk());
  for (uint32_t t = 0; t < 1100; ++t) CHECK(back->contains(t) == (t == 0 || t == 7 || t == 8 || t == 999));
  // 1,000 tasks all recorded: a few dozen bytes in the node.
  RecordedTaskSet all;
  for (uint32_t t = 0; t < 1000; ++t) all.insert(t);
  auto full = encodeRecordedTasks(0, all);
  REQUIRE(full.isOk());
  CHECK(full->size() < 64);

  auto error = [](const Result<RecordedTaskSet>& r) { return r.isOk() ? std::string() : r.message(); };
  CHECK_THAT(error(decodeRecordedTasks(3, *node, "/p/parts")), Catch::Contains("stage 2"));  // another stage's
  CHECK_THAT(error(decodeRecordedTasks(2, "garbage!", "/p/parts")), Catch::Contains("/p/parts"));
  CHECK_FALSE(decodeRecordedTasks(2, node->substr(0, node->size() - 2), "/p").isOk());  // truncated
  std::string flipped = *node;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x55);
  CHECK_FALSE(decodeRecordedTasks(2, flipped, "/p").isOk());
  CHECK_FALSE(decodeRecordedTasks(2, framed("TOB1", "x"), "/p").isOk());  // a batch's magic
  pb::RecordedTasks huge;
  huge.set_stage(2);
  huge.set_bitmap(std::string(kMaxRecordedTasks / 8 + 1, '\xff'));
  CHECK_FALSE(decodeRecordedTasks(2, framed("TRT1", huge.SerializeAsString()), "/p").isOk());
}

namespace {

// A taskMap of `tasks` tasks whose owners are `sites` in turn (the worst case for zlib: no runs).
pb::TaskMap taskMapOf(uint32_t tasks, const std::vector<std::string>& sites, uint64_t epoch = 7) {
  pb::TaskMap map;
  map.set_epoch(epoch);
  for (uint32_t t = 0; t < tasks; ++t) map.add_owner_site(sites[t % sites.size()]);
  return map;
}

// The raw body of a taskMap node: epoch 1, the site table and `owners` as given.
std::string taskMapBody(const std::vector<std::string>& sites, const std::string& owners) {
  pb::StoredTaskMap stored;
  stored.set_epoch(1);
  for (const auto& site : sites) stored.add_sites(site);
  stored.set_owners(owners);
  return stored.SerializeAsString();
}

}  // namespace

TEST_CASE("a taskMap round-trips, epoch and every owner in order", "[jobstate][taskmap]") {
  for (const auto& map : {taskMapOf(0, {"us-east-1"}, 0), taskMapOf(1, {"eu-west-1"}),
                          taskMapOf(1000, {"us-east-1", "eu-west-1", "ap-south-1"}, 42)}) {
    auto node = encodeTaskMap(map);
    REQUIRE(node.isOk());
    auto back = decodeTaskMap(*node, "/jobs/j/stages/0/taskmap");
    REQUIRE(back.isOk());
    CHECK(back->SerializeAsString() == map.SerializeAsString());
  }
  // 256 distinct sites (every index a byte can hold), each 64 characters long.
  std::vector<std::string> many;
  for (int i = 0; i < 256; ++i) many.push_back(fmt::format("{:0>64}", i));
  const pb::TaskMap wide = taskMapOf(5000, many, UINT64_MAX);
  auto node = encodeTaskMap(wide);
  REQUIRE(node.isOk());
  auto back = decodeTaskMap(*node, "/p");
  REQUIRE(back.isOk());
  CHECK(back->SerializeAsString() == wide.SerializeAsString());
}

TEST_CASE("a 100,000-task taskMap fits a node with room to spare; the largest allowed stage fits too", "[jobstate][taskmap]") {
  const std::vector<std::string> sites{"us-east-1", "eu-west-1", "ap-south-1", "sa-east-1"};
  const pb::TaskMap plain = taskMapOf(100000, sites);
  CHECK(plain.ByteSizeLong() > kMaxNodeBytes);  // what the node held before: over the limit
  auto node = encodeTaskMap(plain);
  REQUIRE(node.isOk());
  CHECK(node->size() < 20 * 1024);  // the owners repeat: zlib folds them
  auto back = decodeTaskMap(*node, "/p");
  REQUIRE(back.isOk());
  CHECK(back->owner_site_size() == 100000);
  CHECK(back->owner_site(99999) == "sa-east-1");

  // The worst case: 256 sites of 64 characters, owners in an order zlib cannot fold.
  std::vector<std::string> many;
  for (int i = 0; i < 256; ++i) many.push_back(fmt::format("{:0>64}", i));
  pb::TaskMap worst;
  uint32_t x = 12345;
  for (uint32_t t = 0; t < config::kMaxTasksPerStage; ++t) {
    x = x * 1103515245u + 12345u;
    worst.add_owner_site(many[(x >> 16) % many.size()]);
  }
  auto largest = encodeTaskMap(worst);
  REQUIRE(largest.isOk());
  CHECK(largest->size() <= kMaxCreateJobBytes);
  auto decoded = decodeTaskMap(*largest, "/p");
  REQUIRE(decoded.isOk());
  CHECK(decoded->owner_site_size() == worst.owner_site_size());
}

TEST_CASE("a taskMap that cannot be encoded is refused", "[jobstate][taskmap]") {
  CHECK(encodeTaskMap(taskMapOf(config::kMaxTasksPerStage + 1, {"s1"})).error().code == ErrorCode::kInvalidArgument);
  std::vector<std::string> many;
  for (int i = 0; i < 257; ++i) many.push_back(fmt::format("s{}", i));
  CHECK(encodeTaskMap(taskMapOf(257, many)).error().code == ErrorCode::kInvalidArgument);
  CHECK(encodeTaskMap(taskMapOf(2, {"s1", "Not/A-Site"})).error().code == ErrorCode::kInvalidArgument);
  CHECK(encodeTaskMap(taskMapOf(1, {std::string(65, 'a')})).error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("a node that is not a taskMap encodeTaskMap wrote is an error naming it", "[jobstate][taskmap]") {
  const std::string path = "/jobs/j/stages/0/taskmap";
  auto error = [&](const std::string& bytes) {
    auto r = decodeTaskMap(bytes, path);
    return r.isOk() ? std::string() : r.message();
  };
  auto node = encodeTaskMap(taskMapOf(1000, {"us-east-1", "eu-west-1"}));
  REQUIRE(node.isOk());
  // Every message names the node and what it is, as the corruption test expects.
  CHECK_THAT(error(""), Catch::Contains("malformed TaskMap in " + path));
  CHECK_THAT(error("garbage!"), Catch::Contains("malformed TaskMap in " + path));
  // The plain TaskMap message of before is not read.
  CHECK_FALSE(error(taskMapOf(3, {"s1"}).SerializeAsString()).empty());
  CHECK_FALSE(error(node->substr(0, node->size() - 3)).empty());  // truncated zlib stream
  CHECK_FALSE(error(*node + "x").empty());                       // trailing bytes
  std::string flipped = *node;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x55);
  CHECK_FALSE(error(flipped).empty());
  CHECK_FALSE(error(framed("TOB1", taskMapBody({"s1"}, std::string(1, '\0')))).empty());  // a batch's magic
  CHECK_FALSE(error(framed("TTM1", taskMapBody({"s1"}, std::string(1, '\0')))).empty());  // the format before

  // The body itself. A well-formed one first, so each case below fails for its own reason.
  const std::vector<std::string> two{"s1", "s2"};
  CHECK(error(framed("TTM2", taskMapBody(two, std::string("\0\1\0", 3)))).empty());
  CHECK_THAT(error(framed("TTM2", taskMapBody(two, std::string("\0\2\0", 3)))), Catch::Contains("out of range"));
  CHECK_THAT(error(framed("TTM2", taskMapBody({}, std::string(1, '\0')))), Catch::Contains("out of range"));
  CHECK_THAT(error(framed("TTM2", taskMapBody(two, std::string(config::kMaxTasksPerStage + 1, '\0')))),
             Catch::Contains("more than"));
  CHECK_THAT(error(framed("TTM2", taskMapBody({"s1", "s1"}, std::string(1, '\0')))), Catch::Contains("twice"));
  CHECK_THAT(error(framed("TTM2", taskMapBody({"s1", "x/y"}, std::string(1, '\0')))), Catch::Contains("not a site id"));
  CHECK_THAT(error(framed("TTM2", taskMapBody({""}, std::string(1, '\0')))), Catch::Contains("not a site id"));
  std::vector<std::string> tooMany;
  for (size_t i = 0; i <= kMaxTaskMapSites; ++i) tooMany.push_back(fmt::format("s{}", i));
  CHECK_THAT(error(framed("TTM2", taskMapBody(tooMany, ""))), Catch::Contains("sites, more than"));
  // Cut anywhere: a message cut inside a field does not parse.
  const std::string body = taskMapBody(two, std::string("\0\1\0", 3));
  for (size_t cut = 1; cut < body.size(); ++cut) {
    const std::string cutBody = body.substr(0, cut);
    pb::StoredTaskMap partial;
    if (partial.ParseFromString(cutBody)) continue;  // cut between fields: a shorter valid message
    CHECK_THAT(error(framed("TTM2", cutBody)), Catch::Contains("not a StoredTaskMap"));
  }
  CHECK_THAT(error(framed("TTM2", std::string(11, '\xff'))), Catch::Contains("not a StoredTaskMap"));
  // Oversize: a node over the limit, and a body inflating without bound.
  CHECK_THAT(error("TTM2" + std::string(kMaxNodeBytes, 'x')), Catch::Contains("more than a node may"));
  CHECK_THAT(error(framed("TTM2", std::string(kMaxInflatedBytes + 1, '\0'))), Catch::Contains("inflates beyond"));
}

namespace {

pb::DatasetReplica copyOn(const std::string& worker) {
  pb::DatasetReplica r;
  r.set_worker_id(worker);
  r.set_worker_address("127.0.0.1:9" + std::to_string(worker.size()));
  return r;
}

}  // namespace

TEST_CASE("an output's copies round-trip in a batch and in a summary", "[jobstate][batch][replication]") {
  auto items = batchOf(4);
  *items[0].location.add_replicas() = copyOn("s1-w7");
  *items[3].location.add_replicas() = copyOn("s1-w22");  // a worker the table holds already (task 2's)
  auto node = encodeBatch(0, items);
  REQUIRE(node.isOk());
  auto back = decodeBatch(0, *node, "/p");
  REQUIRE(back.isOk());
  REQUIRE(back->size() == 4);
  REQUIRE((*back)[0].location.replicas_size() == 1);
  CHECK((*back)[0].location.replicas(0).worker_id() == "s1-w7");
  CHECK((*back)[0].location.replicas(0).worker_address() == copyOn("s1-w7").worker_address());
  CHECK((*back)[0].location.replicas(0).file().empty());
  CHECK((*back)[1].location.replicas_size() == 0);
  REQUIRE((*back)[3].location.replicas_size() == 1);
  CHECK((*back)[3].location.replicas(0).worker_id() == "s1-w22");
  CHECK((*back)[3].location.replicas(0).worker_address() == items[2].location.worker_address());
  // One varint per copy: the batch budget (issue 16) holds with a copy of every output.
  auto all = batchOf(200);
  for (auto& item : all) *item.location.add_replicas() = copyOn(item.location.worker_id() == "s1-w1" ? "s1-w22" : "s1-w1");
  auto big = encodeBatch(0, all);
  REQUIRE(big.isOk());
  CHECK(big->size() < 200 * 20);

  JobFinal job;
  job.stages.resize(1);
  pb::TaskMap map;
  map.add_owner_site("s1");
  map.add_owner_site("s1");
  job.stages[0].taskmap = map;
  job.stages[0].outputs[0] = (*back)[0].location;
  job.stages[0].outputs[1] = (*back)[1].location;
  auto summary = encodeSummary(job);
  REQUIRE(summary.isOk());
  auto final = decodeSummary(*summary, "/summary");
  REQUIRE(final.isOk());
  REQUIRE(final->stages[0].outputs.at(0).replicas_size() == 1);
  CHECK(final->stages[0].outputs.at(0).replicas(0).worker_id() == "s1-w7");
  CHECK(final->stages[0].outputs.at(1).replicas_size() == 0);
}

TEST_CASE("copies are bounded and must name another worker of the output's site", "[jobstate][batch][replication]") {
  auto items = batchOf(1);
  for (size_t i = 0; i <= kMaxOutputCopies; ++i) *items[0].location.add_replicas() = copyOn("s1-w" + std::to_string(100 + i));
  CHECK(encodeBatch(0, items).error().code == ErrorCode::kInvalidArgument);
  items = batchOf(1);
  *items[0].location.add_replicas() = copyOn(items[0].location.worker_id());  // itself
  CHECK(encodeBatch(0, items).error().code == ErrorCode::kInvalidArgument);

  // Decoding a node someone else wrote: an index out of the table, the output's own worker, a
  // worker of another site, too many copies, a copy of an audit-only execution.
  pb::OutputBatch bad;
  for (const char* w : {"w0", "w1", "w2"}) {
    bad.add_worker_ids(w);
    bad.add_worker_addresses("a");
  }
  bad.add_worker_sites("s1");
  bad.add_worker_sites("s1");
  bad.add_worker_sites("s2");
  auto* e = bad.add_entries();
  e->set_worker(0);
  e->add_replicas(1);
  auto decoded = decodeBatch(0, framed("TOB1", bad.SerializeAsString()), "/p");
  REQUIRE(decoded.isOk());
  REQUIRE(decoded->front().location.replicas_size() == 1);
  CHECK(decoded->front().location.replicas(0).worker_id() == "w1");
  for (uint32_t w : {3u, 0u, 2u}) {
    e->set_replicas(0, w);
    auto r = decodeBatch(0, framed("TOB1", bad.SerializeAsString()), "/p/b-9");
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.message(), Catch::Contains("/p/b-9"));
  }
  e->set_replicas(0, 1);
  for (size_t i = 0; i < kMaxOutputCopies; ++i) e->add_replicas(1);
  CHECK_FALSE(decodeBatch(0, framed("TOB1", bad.SerializeAsString()), "/p").isOk());
  e->clear_replicas();
  e->add_replicas(1);
  e->set_audit_only(true);
  CHECK_FALSE(decodeBatch(0, framed("TOB1", bad.SerializeAsString()), "/p").isOk());
}

TEST_CASE("batches and summaries from before copies decode with one copy per output", "[jobstate][batch][replication]") {
  // A batch as the previous version wrote it: no replicas field at all.
  pb::OutputBatch old;
  old.add_worker_ids("s1-w1");
  old.add_worker_addresses("127.0.0.1:1");
  old.add_worker_sites("s1");
  auto* e = old.add_entries();
  e->set_task(2);
  e->set_worker(0);
  e->add_bucket_bytes(5);
  auto decoded = decodeBatch(0, framed("TOB1", old.SerializeAsString()), "/p");
  REQUIRE(decoded.isOk());
  CHECK(decoded->front().location.worker_id() == "s1-w1");
  CHECK(decoded->front().location.replicas_size() == 0);
  // A summary without the output_replica column; with one of the wrong length it is an error.
  pb::JobSummary summary;
  summary.add_worker_ids("s1-w1");
  summary.add_worker_addresses("127.0.0.1:1");
  summary.add_worker_sites("s1");
  summary.add_owner_sites("s1");
  auto* stage = summary.add_stages();
  stage->set_released(true);
  stage->add_owner(0);
  stage->add_output_worker(1);
  stage->add_attempt(1);
  stage->add_bucket_count(0);
  stage->add_executions(0);
  auto job = decodeSummary(framed("TJS1", summary.SerializeAsString()), "/s");
  REQUIRE(job.isOk());
  CHECK(job->stages[0].outputs.at(0).replicas_size() == 0);
  stage->add_output_replica(0);
  stage->add_output_replica(0);
  CHECK_FALSE(decodeSummary(framed("TJS1", summary.SerializeAsString()), "/s").isOk());
  stage->clear_output_replica();
  stage->add_output_replica(1);  // the output's own worker
  CHECK_FALSE(decodeSummary(framed("TJS1", summary.SerializeAsString()), "/s").isOk());
}
