#include <catch2/catch.hpp>

#include <fstream>

#include "data/checksum.h"
#include "data/partition_store.h"
#include "temp_dir.h"

using namespace tellus;
using namespace tellus::data;
using tellus::data::testing::TempDir;
namespace fs = std::filesystem;

namespace {

PartitionStore openStore(const TempDir& dir) {
  auto store = PartitionStore::open(dir.path() / "store");
  REQUIRE(store.isOk());
  return *store;
}

std::string patternBytes(std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>('a' + (i * 7 + i / 13) % 26);
  return bytes;
}

// Names of everything in a job directory, temporaries included.
std::vector<std::string> entriesOf(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("a written partition reads back in chunks with its size and checksum", "[integration][data]") {
  TempDir dir;
  const PartitionStore store = openStore(dir);
  const PartitionKey key{"job-1", 2, 3, 4};
  const std::string bytes = patternBytes(100'000);

  auto info = store.write(key, bytes);
  REQUIRE(info.isOk());
  CHECK(info->key == key);
  CHECK(info->sizeBytes == bytes.size());
  CHECK(info->crc32 == crc32Of(bytes));
  CHECK(store.exists(key));
  CHECK_FALSE(store.exists(PartitionKey{"job-1", 2, 3, 5}));

  std::string assembled;
  Crc32 crc;
  std::uint64_t offset = 0;
  int chunks = 0;
  for (;;) {
    auto chunk = store.read(key, offset, 30'000);
    REQUIRE(chunk.isOk());
    CHECK(chunk->offset == offset);
    CHECK(chunk->totalSize == bytes.size());
    CHECK(chunk->crc32 == info->crc32);
    assembled += chunk->data;
    crc.update(chunk->data);
    offset += chunk->data.size();
    ++chunks;
    if (chunk->isLast()) break;
    CHECK(chunk->data.size() == 30'000);
  }
  CHECK(chunks == 4);
  CHECK(assembled == bytes);
  CHECK(crc.value() == info->crc32);

  auto atEnd = store.read(key, bytes.size(), 10);
  REQUIRE(atEnd.isOk());
  CHECK(atEnd->data.empty());
  CHECK(atEnd->isLast());
  auto pastEnd = store.read(key, bytes.size() + 1, 10);
  REQUIRE_FALSE(pastEnd.isOk());
  CHECK(pastEnd.error().code == ErrorCode::kInvalidArgument);
  CHECK(pastEnd.message() == "partition job-1/s2-t3-b4: offset 100001 is past its end (100000 bytes)");

  CHECK(store.verify(key).isOk());
  auto all = store.readAll(key);
  REQUIRE(all.isOk());
  CHECK(*all == bytes);
  auto path = store.dataPath(key);
  REQUIRE(path.isOk());
  CHECK(testing::readFile(*path) == bytes);

  auto missing = store.read(PartitionKey{"job-1", 9, 9, 9}, 0, 10);
  REQUIRE_FALSE(missing.isOk());
  CHECK(missing.error().code == ErrorCode::kNotFound);
  CHECK(missing.message() == "partition job-1/s9-t9-b9 is not in the store");
}

TEST_CASE("empty partitions are valid", "[integration][data]") {
  TempDir dir;
  const PartitionStore store = openStore(dir);
  const PartitionKey key{"job-1", 0, 0, 0};
  auto info = store.write(key, "");
  REQUIRE(info.isOk());
  CHECK(info->sizeBytes == 0);
  auto chunk = store.read(key, 0, 100);
  REQUIRE(chunk.isOk());
  CHECK(chunk->data.empty());
  CHECK(chunk->isLast());
  CHECK(store.verify(key).isOk());
}

TEST_CASE("a partition is invisible until committed and discarded if never committed", "[integration][data]") {
  TempDir dir;
  const PartitionStore store = openStore(dir);
  const PartitionKey key{"job-2", 0, 1, 0};
  {
    auto writer = store.create(key);
    REQUIRE(writer.isOk());
    (*writer)->stream() << "partial output\n";
    REQUIRE((*writer)->append(patternBytes(200'000)).isOk());
    CHECK_FALSE(store.exists(key));
    auto listed = store.list("job-2");
    REQUIRE(listed.isOk());
    CHECK(listed->empty());
    CHECK(store.read(key, 0, 10).error().code == ErrorCode::kNotFound);
    // Destroyed without commit: an aborted task.
  }
  CHECK_FALSE(store.exists(key));
  CHECK(entriesOf(store.root() / "job-2").empty());

  auto writer = store.create(key);
  REQUIRE(writer.isOk());
  (*writer)->stream() << "line one\n" << 42 << "\n";
  auto info = (*writer)->commit();
  REQUIRE(info.isOk());
  CHECK(info->sizeBytes == 12);
  CHECK(entriesOf(store.root() / "job-2") == std::vector<std::string>{"s0-t1-b0"});
  CHECK((*writer)->commit().error().code == ErrorCode::kInvalidArgument);
  CHECK(*store.readAll(key) == "line one\n42\n");
}

TEST_CASE("committing an existing key keeps the first copy", "[integration][data]") {
  TempDir dir;
  const PartitionStore store = openStore(dir);
  const PartitionKey key{"job-3", 1, 0, 0};
  REQUIRE(store.write(key, "same bytes\n").isOk());
  // A re-run of a deterministic task produces the same bytes: accepted.
  auto again = store.write(key, "same bytes\n");
  REQUIRE(again.isOk());
  CHECK(again->crc32 == crc32Of("same bytes\n"));
  // Different bytes under the same key: refused, the original stays.
  auto different = store.write(key, "other bytes\n");
  REQUIRE_FALSE(different.isOk());
  CHECK(different.error().code == ErrorCode::kAlreadyExists);
  CHECK(*store.readAll(key) == "same bytes\n");
  CHECK(entriesOf(store.root() / "job-3") == std::vector<std::string>{"s1-t0-b0"});
}

TEST_CASE("corruption on disk is detected by verify, readAll and stat", "[integration][data]") {
  TempDir dir;
  const PartitionStore store = openStore(dir);
  const PartitionKey key{"job-4", 0, 0, 1};
  const std::string bytes = patternBytes(50'000);
  REQUIRE(store.write(key, bytes).isOk());
  const fs::path dataFile = *store.dataPath(key);

  SECTION("a flipped byte") {
    {
      std::fstream file(dataFile, std::ios::in | std::ios::out | std::ios::binary);
      file.seekp(12'345);
      file.put('#');
    }
    const Status verified = store.verify(key);
    REQUIRE_FALSE(verified.isOk());
    CHECK_THAT(verified.message(), Catch::StartsWith("partition job-4/s0-t0-b1 is corrupted: checksum mismatch"));
    auto all = store.readAll(key);
    REQUIRE_FALSE(all.isOk());
    CHECK_THAT(all.message(), Catch::Contains("checksum mismatch"));
    // A remote reader assembling chunks sees it too: the data no longer matches Chunk::crc32.
    auto chunk = store.read(key, 0, PartitionStore::kMaxChunkBytes);
    REQUIRE(chunk.isOk());
    CHECK(crc32Of(chunk->data) != chunk->crc32);
  }
  SECTION("a truncated file") {
    fs::resize_file(dataFile, 1000);
    auto info = store.stat(key);
    REQUIRE_FALSE(info.isOk());
    CHECK(info.message() == "partition job-4/s0-t0-b1 is corrupted: data file has 1000 bytes, meta records 50000");
    // Not held: a reader goes to another copy, or tells its JM the input is lost.
    CHECK(info.error().code == ErrorCode::kNotFound);
    auto read = store.read(key, 0, 10);
    REQUIRE_FALSE(read.isOk());
    CHECK(read.error().code == ErrorCode::kNotFound);
  }
  SECTION("a damaged meta file") {
    testing::writeFile(dataFile.parent_path() / "meta", "garbage");
    auto info = store.stat(key);
    REQUIRE_FALSE(info.isOk());
    CHECK_THAT(info.message(), Catch::StartsWith("partition job-4/s0-t0-b1: malformed meta file"));
    CHECK(info.error().code == ErrorCode::kNotFound);
  }
  SECTION("a data file gone") {
    fs::remove(dataFile);
    auto read = store.read(key, 0, 10);
    REQUIRE_FALSE(read.isOk());
    CHECK(read.error().code == ErrorCode::kNotFound);
    CHECK_THAT(read.message(), Catch::Contains("is damaged: its data file"));
  }
  // A corrupted partition can be dropped and rewritten.
  REQUIRE(store.remove(key).isOk());
  CHECK_FALSE(store.exists(key));
  REQUIRE(store.write(key, bytes).isOk());
  CHECK(store.verify(key).isOk());
}

TEST_CASE("list, jobs and remove manage a job's partitions", "[integration][data]") {
  TempDir dir;
  const PartitionStore store = openStore(dir);
  REQUIRE(store.write({"job-b", 1, 0, 2}, "x").isOk());
  REQUIRE(store.write({"job-b", 0, 10, 0}, "yy").isOk());
  REQUIRE(store.write({"job-b", 0, 2, 1}, "zzz").isOk());
  REQUIRE(store.write({"job-a", 0, 0, 0}, "a").isOk());
  auto uncommitted = store.create({"job-b", 5, 5, 5});  // in progress: not listed
  REQUIRE(uncommitted.isOk());

  auto listed = store.list("job-b");
  REQUIRE(listed.isOk());
  REQUIRE(listed->size() == 3);
  CHECK((*listed)[0].key == PartitionKey{"job-b", 0, 2, 1});
  CHECK((*listed)[0].sizeBytes == 3);
  CHECK((*listed)[1].key == PartitionKey{"job-b", 0, 10, 0});
  CHECK((*listed)[2].key == PartitionKey{"job-b", 1, 0, 2});
  CHECK(*store.jobs() == std::vector<std::string>{"job-a", "job-b"});
  CHECK(store.list("job-none")->empty());

  REQUIRE(store.remove("job-b").isOk());
  CHECK(store.list("job-b")->empty());
  CHECK_FALSE(store.exists({"job-b", 1, 0, 2}));
  CHECK(store.exists({"job-a", 0, 0, 0}));
  CHECK(*store.jobs() == std::vector<std::string>{"job-a"});
  CHECK(store.remove("job-b").isOk());  // idempotent
  CHECK(store.remove(PartitionKey{"job-zz", 0, 0, 0}).isOk());
}

TEST_CASE("bad job ids and roots are rejected", "[integration][data]") {
  TempDir dir;
  const PartitionStore store = openStore(dir);
  for (const std::string bad : {"", "..", "../etc", "a/b", ".hidden", "sp ace"}) {
    INFO("job id '" << bad << "'");
    auto written = store.write(PartitionKey{bad, 0, 0, 0}, "x");
    REQUIRE_FALSE(written.isOk());
    CHECK(written.error().code == ErrorCode::kInvalidArgument);
    CHECK_FALSE(store.remove(bad).isOk());
  }
  CHECK(store.write(PartitionKey{"a/b", 0, 0, 0}, "x").message() ==
        "job id 'a/b' may contain only letters, digits, '.', '_' and '-'");

  testing::writeFile(dir.path() / "a-file", "x");
  auto notDir = PartitionStore::open(dir.path() / "a-file");
  REQUIRE_FALSE(notDir.isOk());
  CHECK_FALSE(PartitionStore::open("").isOk());
}

TEST_CASE("commitVerified publishes a fetched copy only if it matches the source", "[integration][data]") {
  TempDir dir;
  const PartitionStore source = openStore(dir);
  auto fetchedStore = PartitionStore::open(dir.path() / "other-worker");
  REQUIRE(fetchedStore.isOk());
  const PartitionKey key{"job-5", 0, 1, 2};
  const std::string bytes = patternBytes(70'000);
  REQUIRE(source.write(key, bytes).isOk());

  // The fetch loop a worker runs against a remote store, chunk by chunk.
  auto copy = [&](bool damage) {
    auto writer = fetchedStore->create(key);
    REQUIRE(writer.isOk());
    std::uint64_t offset = 0;
    Chunk chunk;
    do {
      auto next = source.read(key, offset, 16'384);
      REQUIRE(next.isOk());
      chunk = std::move(next).value();
      if (damage && offset == 0) chunk.data[100] ^= 0x20;
      REQUIRE((*writer)->append(chunk.data).isOk());
      offset += chunk.data.size();
    } while (!chunk.isLast());
    return (*writer)->commitVerified(chunk.totalSize, chunk.crc32);
  };

  auto damaged = copy(true);
  REQUIRE_FALSE(damaged.isOk());
  CHECK_THAT(damaged.message(), Catch::Contains("checksum mismatch"));
  CHECK_FALSE(fetchedStore->exists(key));
  auto good = copy(false);
  REQUIRE(good.isOk());
  CHECK(*fetchedStore->readAll(key) == bytes);
}
