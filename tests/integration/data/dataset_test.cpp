#include <catch2/catch.hpp>

#include "data/dataset.h"
#include "temp_dir.h"

using namespace tellus;
using namespace tellus::data;
using tellus::data::testing::readFile;
using tellus::data::testing::TempDir;
using tellus::data::testing::writeFile;
namespace fs = std::filesystem;

namespace {

std::string sampleText() {
  std::string text;
  for (int i = 0; i < 5000; ++i) {
    text += "line " + std::to_string(i) + std::string(static_cast<std::size_t>(i % 17), '.') + "\n";
  }
  text += std::string(3000, 'L') + "\n";  // one long line
  text += "last line without newline";
  return text;
}

}  // namespace

TEST_CASE("the file split points equal the in-memory ones", "[integration][data]") {
  TempDir dir;
  const std::string text = sampleText();
  writeFile(dir.path() / "input.txt", text);
  for (std::uint32_t k : {1U, 2U, 3U, 7U, 64U, 1000U}) {
    INFO("K = " << k);
    auto fromFile = lineAlignedSplitPointsOfFile(dir.path() / "input.txt", k);
    REQUIRE(fromFile.isOk());
    CHECK(*fromFile == lineAlignedSplitPoints(text, k));
  }
  // A newline that falls exactly on a 64 KB read boundary of the scan.
  std::string aligned = std::string(70'000, 'a');
  aligned[65'536] = '\n';
  writeFile(dir.path() / "aligned.txt", aligned);
  CHECK(*lineAlignedSplitPointsOfFile(dir.path() / "aligned.txt", 2) == lineAlignedSplitPoints(aligned, 2));
}

TEST_CASE("splitFile writes K partitions whose concatenation is the input", "[integration][data]") {
  TempDir dir;
  const std::string text = sampleText();
  writeFile(dir.path() / "input.txt", text);
  auto parts = splitFile(dir.path() / "input.txt", 5, dir.path() / "out");
  REQUIRE(parts.isOk());
  REQUIRE(parts->size() == 5);
  std::string joined;
  for (std::uint32_t i = 0; i < 5; ++i) {
    const auto& part = (*parts)[i];
    CHECK(part.index == i);
    CHECK(part.path == dir.path() / "out" / splitPartitionName(i));
    const std::string content = readFile(part.path);
    CHECK(content.size() == part.sizeBytes);
    if (i + 1 < 5) CHECK(content.back() == '\n');
    joined += content;
  }
  CHECK(joined == text);
  CHECK(splitPartitionName(42) == "part-00042");

  auto again = splitFile(dir.path() / "input.txt", 5, dir.path() / "out");
  REQUIRE_FALSE(again.isOk());
  CHECK(again.error().code == ErrorCode::kAlreadyExists);
  auto zero = splitFile(dir.path() / "input.txt", 0, dir.path() / "out0");
  REQUIRE_FALSE(zero.isOk());
  CHECK_THAT(zero.message(), Catch::EndsWith("partition count must be between 1 and 100000, got 0"));
  auto missing = splitFile(dir.path() / "nope.txt", 2, dir.path() / "out2");
  REQUIRE_FALSE(missing.isOk());
  CHECK_THAT(missing.message(), Catch::Contains("nope.txt' is not a regular file"));
}

TEST_CASE("DatasetDir imports, lists and resolves partitions in name order", "[integration][data]") {
  TempDir dir;
  const DatasetDir datasets(dir.path() / "datasets");
  CHECK(datasets.datasets()->empty());
  writeFile(dir.path() / "input.txt", sampleText());

  auto imported = datasets.importFile(dir.path() / "input.txt", "logs", 3);
  REQUIRE(imported.isOk());
  REQUIRE(imported->size() == 3);
  CHECK((*imported)[2].path == dir.path() / "datasets" / "logs" / "part-00002");
  CHECK(*datasets.datasets() == std::vector<std::string>{"logs"});

  auto listed = datasets.partitions("logs");
  REQUIRE(listed.isOk());
  REQUIRE(listed->size() == 3);
  for (std::uint32_t i = 0; i < 3; ++i) {
    CHECK((*listed)[i].index == i);
    CHECK((*listed)[i].path == (*imported)[i].path);
    CHECK((*listed)[i].sizeBytes == (*imported)[i].sizeBytes);
  }

  auto existing = datasets.importFile(dir.path() / "input.txt", "logs", 2);
  REQUIRE_FALSE(existing.isOk());
  CHECK(existing.error().code == ErrorCode::kAlreadyExists);
  auto badName = datasets.importFile(dir.path() / "input.txt", "../escape", 2);
  REQUIRE_FALSE(badName.isOk());
  CHECK(badName.error().code == ErrorCode::kInvalidArgument);
  // A failed import leaves nothing behind.
  auto failed = datasets.importFile(dir.path() / "missing.txt", "broken", 2);
  REQUIRE_FALSE(failed.isOk());
  CHECK(*datasets.datasets() == std::vector<std::string>{"logs"});
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path() / "datasets")) ++entries;
  CHECK(entries == 1);

  // Hand-made datasets: any files, sorted by name, hidden files skipped.
  fs::create_directories(dir.path() / "datasets" / "manual");
  writeFile(dir.path() / "datasets" / "manual" / "b.txt", "bb\n");
  writeFile(dir.path() / "datasets" / "manual" / "a.txt", "a\n");
  writeFile(dir.path() / "datasets" / "manual" / ".hidden", "h\n");
  fs::create_directories(dir.path() / "datasets" / "manual" / "subdir");
  auto manual = datasets.partitions("manual");
  REQUIRE(manual.isOk());
  REQUIRE(manual->size() == 2);
  CHECK((*manual)[0].path.filename() == "a.txt");
  CHECK((*manual)[1].path.filename() == "b.txt");
  CHECK((*manual)[1].sizeBytes == 3);
  auto second = datasets.partition("manual", 1);
  REQUIRE(second.isOk());
  CHECK(second->path.filename() == "b.txt");
  auto outOfRange = datasets.partition("manual", 2);
  REQUIRE_FALSE(outOfRange.isOk());
  CHECK(outOfRange.message() == "dataset 'manual' has 2 partitions, no partition 2");
  auto unknown = datasets.partitions("unknown");
  REQUIRE_FALSE(unknown.isOk());
  CHECK(unknown.error().code == ErrorCode::kNotFound);
}
