#include <catch2/catch.hpp>

#include "data/dataset.h"

using namespace tellus::data;
using Points = std::vector<std::uint64_t>;

namespace {

// Every piece starts at a line start, pieces are contiguous and cover the content.
void checkWellFormed(std::string_view content, const Points& points, std::uint32_t partitions) {
  REQUIRE(points.size() == partitions + 1);
  CHECK(points.front() == 0);
  CHECK(points.back() == content.size());
  for (std::size_t i = 1; i < points.size(); ++i) {
    CHECK(points[i - 1] <= points[i]);
    const std::uint64_t p = points[i];
    if (p > 0 && p < content.size()) CHECK(content[p - 1] == '\n');
  }
}

}  // namespace

TEST_CASE("split points fall on the first line start at or after each equal share", "[unit][data]") {
  // 4 lines of 10 bytes: shares of 20 bytes land exactly on line starts.
  const std::string content = "aaaaaaaaa\nbbbbbbbbb\nccccccccc\nddddddddd\n";
  CHECK(lineAlignedSplitPoints(content, 2) == Points{0, 20, 40});
  CHECK(lineAlignedSplitPoints(content, 4) == Points{0, 10, 20, 30, 40});
  // Targets 13 and 26 move forward to the next line starts, 20 and 30.
  CHECK(lineAlignedSplitPoints(content, 3) == Points{0, 20, 30, 40});
  CHECK(lineAlignedSplitPoints(content, 1) == Points{0, 40});
  checkWellFormed(content, lineAlignedSplitPoints(content, 3), 3);
}

TEST_CASE("split points never cut a line, leaving empty pieces when needed", "[unit][data]") {
  // One long line: everything goes to the first piece.
  const std::string oneLine = std::string(100, 'x') + "\n";
  CHECK(lineAlignedSplitPoints(oneLine, 3) == Points{0, 101, 101, 101});
  // More pieces than lines.
  CHECK(lineAlignedSplitPoints("a\nb\n", 5) == Points{0, 0, 2, 2, 4, 4});
  checkWellFormed("a\nb\n", lineAlignedSplitPoints("a\nb\n", 5), 5);
  // A long line in the middle swallows the shares it spans.
  const std::string mixed = "a\n" + std::string(50, 'y') + "\nb\nc\n";
  const auto points = lineAlignedSplitPoints(mixed, 4);
  checkWellFormed(mixed, points, 4);
  CHECK(points == Points{0, 53, 53, 53, 57});
}

TEST_CASE("split points handle empty input and a missing final newline", "[unit][data]") {
  CHECK(lineAlignedSplitPoints("", 3) == Points{0, 0, 0, 0});
  const std::string noFinalNewline = "one\ntwo\nthree";
  const auto points = lineAlignedSplitPoints(noFinalNewline, 2);
  CHECK(points == Points{0, 8, 13});
  checkWellFormed(noFinalNewline, points, 2);
  CHECK(lineAlignedSplitPoints("abc", 0) == Points{0, 3});  // 0 partitions counts as 1
}

TEST_CASE("split pieces have nearly equal sizes for many short lines", "[unit][data]") {
  std::string content;
  for (int i = 0; i < 10000; ++i) content += "line " + std::to_string(i) + "\n";
  constexpr std::uint32_t kPieces = 7;
  const auto points = lineAlignedSplitPoints(content, kPieces);
  checkWellFormed(content, points, kPieces);
  const double share = static_cast<double>(content.size()) / kPieces;
  for (std::uint32_t i = 0; i < kPieces; ++i) {
    // Each cut moves forward by less than one line (at most 11 bytes here).
    CHECK(static_cast<double>(points[i + 1] - points[i]) == Approx(share).margin(12));
  }
}
