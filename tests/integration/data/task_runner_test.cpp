// GCC 12 at -O3 reports the strings of braced TaskSpec temporaries (with an OperatorEnv) as
// maybe-uninitialized inside libstdc++'s string copy: a false positive of this test's
// aggregate initializers, not of the code under test.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

#include "data/checksum.h"
#include "data/dataset.h"
#include "data/record.h"
#include "data/task_runner.h"
#include "temp_dir.h"

using namespace tellus;
using namespace tellus::data;
using tellus::data::testing::TempDir;
using tellus::data::testing::writeFile;
namespace fs = std::filesystem;

TEST_CASE("a two-stage wordcount runs through the store like a job would", "[integration][data]") {
  TempDir dir;
  auto store = PartitionStore::open(dir.path() / "store");
  REQUIRE(store.isOk());
  const DatasetDir datasets(dir.path() / "datasets");
  std::string text;
  std::map<std::string, int> expected;
  for (int i = 0; i < 3000; ++i) {
    const std::string line = "Word" + std::to_string(i % 97) + " the end, the start " + std::to_string(i % 5) + "\n";
    text += line;
    for (const auto& word : tokenizeWords(line)) ++expected[word];
  }
  writeFile(dir.path() / "input.txt", text);
  auto partitions = datasets.importFile(dir.path() / "input.txt", "text", 4);
  REQUIRE(partitions.isOk());

  constexpr std::uint32_t kMappers = 4;
  constexpr std::uint32_t kReducers = 3;
  for (std::uint32_t m = 0; m < kMappers; ++m) {
    TaskSpec map{"wordcount.map", {}, {(*partitions)[m].path}, kReducers, PartitionKey{"job-wc", 0, m, 0}};
    auto report = runTask(map, *store);
    REQUIRE(report.isOk());
    REQUIRE(report->buckets.size() == kReducers);
    CHECK(report->inputBytes == (*partitions)[m].sizeBytes);
    std::uint64_t outputBytes = 0;
    for (std::uint32_t b = 0; b < kReducers; ++b) {
      CHECK(report->buckets[b].key == PartitionKey{"job-wc", 0, m, b});
      CHECK(store->verify(report->buckets[b].key).isOk());
      outputBytes += report->buckets[b].sizeBytes;
    }
    CHECK(report->outputBytes == outputBytes);
    CHECK(report->elapsed.count() > 0);
  }
  std::map<std::string, int> counted;
  for (std::uint32_t r = 0; r < kReducers; ++r) {
    TaskSpec reduce{"wordcount.reduce", {}, {}, 1, PartitionKey{"job-wc", 1, r, 0}};
    for (std::uint32_t m = 0; m < kMappers; ++m) reduce.inputs.push_back(*store->dataPath({"job-wc", 0, m, r}));
    auto report = runTask(reduce, *store);
    REQUIRE(report.isOk());
    auto result = store->readAll({"job-wc", 1, r, 0});
    REQUIRE(result.isOk());
    CHECK(crc32Of(*result) == report->buckets[0].crc32);
    std::istringstream lines(*result);
    for (std::string line; std::getline(lines, line);) {
      CHECK(bucketForKey(recordKey(line), kReducers) == r);
      counted[std::string(recordKey(line))] += std::stoi(std::string(recordValue(line)));
    }
  }
  CHECK(counted == expected);
  CHECK(store->list("job-wc")->size() == kMappers * kReducers + kReducers);
}

TEST_CASE("runTask reports bad specs and leaves no partial output", "[integration][data]") {
  TempDir dir;
  auto store = PartitionStore::open(dir.path() / "store");
  REQUIRE(store.isOk());
  writeFile(dir.path() / "in.txt", "a\tb\n");

  auto unknown = runTask(TaskSpec{"nope", {}, {}, 1, {"job-x", 0, 0, 0}}, *store);
  REQUIRE_FALSE(unknown.isOk());
  CHECK_THAT(unknown.message(), Catch::StartsWith("task job-x/s0-t0: unknown operator 'nope'"));

  auto missingInput = runTask(TaskSpec{"identity", {}, {dir.path() / "absent.txt"}, 1, {"job-x", 0, 1, 0}}, *store);
  REQUIRE_FALSE(missingInput.isOk());
  CHECK(missingInput.error().code == ErrorCode::kNotFound);
  CHECK_THAT(missingInput.message(), Catch::Contains("input 0 '"));

  auto zeroBuckets = runTask(TaskSpec{"identity", {}, {}, 0, {"job-x", 0, 2, 0}}, *store);
  REQUIRE_FALSE(zeroBuckets.isOk());
  CHECK(zeroBuckets.message() == "task job-x/s0-t2: bucket count must be between 1 and 100000, got 0");

  OperatorEnv execOn;
  execOn.exec.enabled = true;
  execOn.exec.run_as_user.clear();
  auto failing =
      runTask(TaskSpec{"exec", {{"cmd", "cat; exit 4"}}, {dir.path() / "in.txt"}, 2, {"job-x", 0, 3, 0}, execOn}, *store);
  REQUIRE_FALSE(failing.isOk());
  CHECK_THAT(failing.message(), Catch::StartsWith("task job-x/s0-t3: exec: command 'cat; exit 4' exited with status 4"));
  CHECK_FALSE(store->exists({"job-x", 0, 3, 0}));
  CHECK_FALSE(store->exists({"job-x", 0, 3, 1}));
  // Nothing, not even temporaries, is left in the job directory.
  CHECK(fs::is_empty(store->root() / "job-x"));

  auto ok = runTask(TaskSpec{"exec", {{"cmd", "cat"}}, {dir.path() / "in.txt"}, 1, {"job-x", 0, 4, 0}, execOn}, *store);
  // Without a site policy that enables it, exec is refused before anything runs.
  auto disabled = runTask(TaskSpec{"exec", {{"cmd", "cat"}}, {dir.path() / "in.txt"}, 1, {"job-x", 0, 5, 0}}, *store);
  REQUIRE_FALSE(disabled.isOk());
  CHECK_THAT(disabled.message(), Catch::Contains("exec is disabled at this site"));
  CHECK_FALSE(store->exists({"job-x", 0, 5, 0}));
  REQUIRE(ok.isOk());
  CHECK(*store->readAll({"job-x", 0, 4, 0}) == "a\tb\n");
}
