#include <catch2/catch.hpp>

#include <vector>

#include "transfer/window.h"

using tellus::transfer::ChunkWindow;
using tellus::transfer::Span;
using tellus::transfer::WindowOptions;

namespace {

constexpr std::uint64_t kMiB = 1 << 20;

std::vector<Span> drain(ChunkWindow& w) {
  std::vector<Span> out;
  while (auto s = w.next()) out.push_back(*s);
  return out;
}

}  // namespace

TEST_CASE("window: a read asks for one chunk until it knows the size, then fills the window", "[unit][transfer]") {
  ChunkWindow w(WindowOptions{.chunkBytes = kMiB, .windowBytes = 4 * kMiB}, std::nullopt);
  auto first = drain(w);
  REQUIRE(first == std::vector<Span>{{0, kMiB}});
  CHECK(w.outstanding() == 1);
  REQUIRE(w.complete(first[0], 10 * kMiB, kMiB));
  CHECK(w.contiguous() == kMiB);
  // 4 MiB in flight: chunks 1..4.
  auto more = drain(w);
  REQUIRE(more.size() == 4);
  CHECK(more.front() == Span{kMiB, kMiB});
  CHECK(more.back() == Span{4 * kMiB, kMiB});
  // An early reply does not open the window: chunk 1 is still missing.
  REQUIRE(w.complete(more[2], 10 * kMiB, kMiB));
  CHECK(w.contiguous() == kMiB);
  CHECK(drain(w).empty());
  // Chunk 1 arrives: complete in order up to chunk 2, which is still outstanding; one more
  // chunk fits.
  REQUIRE(w.complete(more[0], 10 * kMiB, kMiB));
  CHECK(w.contiguous() == 2 * kMiB);
  CHECK(drain(w) == std::vector<Span>{{5 * kMiB, kMiB}});
  REQUIRE(w.complete(more[1], 10 * kMiB, kMiB));
  CHECK(w.contiguous() == 4 * kMiB);
  CHECK(drain(w) == std::vector<Span>{{6 * kMiB, kMiB}, {7 * kMiB, kMiB}});
  CHECK_FALSE(w.finished());
}

TEST_CASE("window: the last chunk is short and the transfer finishes once all completed in order", "[unit][transfer]") {
  ChunkWindow w(WindowOptions{.chunkBytes = 100, .windowBytes = 1000}, std::nullopt);
  auto first = drain(w);
  REQUIRE(w.complete(first[0], 250, 100));
  auto rest = drain(w);
  REQUIRE(rest == std::vector<Span>{{100, 100}, {200, 50}});
  REQUIRE(w.complete(rest[1], 250, 50));
  CHECK_FALSE(w.finished());
  REQUIRE(w.complete(rest[0], 250, 100));
  CHECK(w.finished());
  CHECK(w.contiguous() == 250);
  CHECK(drain(w).empty());
}

TEST_CASE("window: objects smaller than a chunk, and empty ones, take one chunk", "[unit][transfer]") {
  ChunkWindow small(WindowOptions{.chunkBytes = kMiB}, std::nullopt);
  auto s = drain(small);
  REQUIRE(s.size() == 1);
  REQUIRE(small.complete(s[0], 10, 10));
  CHECK(small.finished());
  CHECK(drain(small).empty());

  ChunkWindow empty(WindowOptions{.chunkBytes = kMiB}, std::nullopt);
  auto e = drain(empty);
  REQUIRE(e.size() == 1);
  REQUIRE(empty.complete(e[0], 0, 0));
  CHECK(empty.finished());

  // A write of nothing still sends one empty chunk (the put's last_chunk).
  ChunkWindow write(WindowOptions{.chunkBytes = kMiB}, 0);
  CHECK_FALSE(write.finished());
  auto w = drain(write);
  REQUIRE(w == std::vector<Span>{{0, 0}});
  REQUIRE(write.acknowledge(w[0]));
  CHECK(write.finished());
}

TEST_CASE("window: a write knows its size and keeps at most the window unacknowledged", "[unit][transfer]") {
  ChunkWindow w(WindowOptions{.chunkBytes = 4, .windowBytes = 8}, 10);
  auto first = drain(w);
  REQUIRE(first == std::vector<Span>{{0, 4}, {4, 4}});
  REQUIRE(w.acknowledge(first[0]));
  auto second = drain(w);
  REQUIRE(second == std::vector<Span>{{8, 2}});
  REQUIRE(w.acknowledge(second[0]));
  REQUIRE(w.acknowledge(first[1]));
  CHECK(w.finished());
}

TEST_CASE("window: a hostile or confused peer is refused", "[unit][transfer]") {
  WindowOptions opts{.chunkBytes = 100, .windowBytes = 400, .maxTotalBytes = 1000};
  SECTION("a size over the limit") {
    ChunkWindow w(opts, std::nullopt);
    auto s = drain(w);
    CHECK_FALSE(w.complete(s[0], 1001, 100));
  }
  SECTION("a size that changes") {
    ChunkWindow w(opts, std::nullopt);
    auto s = drain(w);
    REQUIRE(w.complete(s[0], 500, 100));
    auto more = drain(w);
    auto st = w.complete(more[0], 600, 100);
    REQUIRE_FALSE(st);
    CHECK(st.message().find("changed") != std::string::npos);
  }
  SECTION("a short chunk before the end, or a long one") {
    ChunkWindow w(opts, std::nullopt);
    auto s = drain(w);
    REQUIRE(w.complete(s[0], 500, 100));
    auto more = drain(w);
    CHECK_FALSE(w.complete(more[0], 500, 99));
    CHECK_FALSE(w.complete(more[1], 500, 101));
  }
  SECTION("a reply twice, or to nothing asked") {
    ChunkWindow w(opts, std::nullopt);
    auto s = drain(w);
    REQUIRE(w.complete(s[0], 500, 100));
    CHECK_FALSE(w.complete(s[0], 500, 100));
    CHECK_FALSE(w.complete(Span{300, 100}, 500, 100));  // next() has not handed it out
  }
  SECTION("an object that shrank below a chunk already asked for") {
    ChunkWindow w(opts, std::nullopt);
    auto s = drain(w);
    REQUIRE(w.complete(s[0], 500, 100));
    auto more = drain(w);
    REQUIRE(more.size() == 4);
    CHECK_FALSE(w.complete(more[3], 450, 50));  // total changed
  }
}
