#include <catch2/catch.hpp>

#include "data/checksum.h"
#include "data/record.h"

using namespace tellus::data;

TEST_CASE("fnv1a64 matches the published FNV-1a 64 test vectors", "[unit][data]") {
  // Vectors from the reference implementation's test suite (isthe.com/chongo/tech/comp/fnv).
  CHECK(fnv1a64("") == 0xcbf29ce484222325ULL);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(fnv1a64("foobar") == 0x85944171f73967e8ULL);
  // Bytes >= 0x80 are hashed as unsigned: the result must not depend on char signedness.
  CHECK(fnv1a64("\xff") == ((kFnv1a64OffsetBasis ^ 0xffULL) * kFnv1a64Prime));
  static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cULL, "usable at compile time");
}

TEST_CASE("bucketForKey is the FNV hash modulo the bucket count", "[unit][data]") {
  CHECK(bucketForKey("a", 1) == 0);
  CHECK(bucketForKey("a", 7) == 0xaf63dc4c8601ec8cULL % 7);
  CHECK(bucketForKey("foobar", 1000) == 0x85944171f73967e8ULL % 1000);
  // Pinned values: if these change, shuffles between old and new binaries would disagree.
  // (computed independently with a few lines of Python).
  CHECK(fnv1a64("hello") == 0xa430d84680aabd0bULL);
  CHECK(bucketForKey("hello", 4) == 3);
  CHECK(bucketForKey("tellus", 4) == 2);
  CHECK(bucketForKey("the", 7) == 5);
  CHECK(bucketForKey("world", 7) == 6);
}

TEST_CASE("recordKey and recordValue split at the first tab", "[unit][data]") {
  CHECK(recordKey("word\t12") == "word");
  CHECK(recordValue("word\t12") == "12");
  CHECK(recordKey("a\tb\tc") == "a");
  CHECK(recordValue("a\tb\tc") == "b\tc");
  CHECK(recordKey("no tab here") == "no tab here");
  CHECK(recordValue("no tab here").empty());
  CHECK(recordKey("\tvalue").empty());
  CHECK(recordValue("key\t").empty());
  CHECK(recordKey("").empty());
}

TEST_CASE("tokenizeWords splits on every byte that is not an ASCII letter or digit", "[unit][data]") {
  using Words = std::vector<std::string>;
  CHECK(tokenizeWords("Hello, World!") == Words{"hello", "world"});
  CHECK(tokenizeWords("Don't stop_me") == Words{"don", "t", "stop", "me"});
  CHECK(tokenizeWords("abc123 42x") == Words{"abc123", "42x"});
  CHECK(tokenizeWords("").empty());
  CHECK(tokenizeWords("  \t--!!  ").empty());
  CHECK(tokenizeWords("MiXeD CASE") == Words{"mixed", "case"});
  // UTF-8 multibyte characters are separators: "Ünïcode" is 'Ü' 'n' 'ï' "code".
  CHECK(tokenizeWords("\xC3\x9cn\xC3\xAf" "code") == Words{"n", "code"});
  CHECK(tokenizeWords("trailing") == Words{"trailing"});
  CHECK(tokenizeWords("a\r\nb") == Words{"a", "b"});
}

TEST_CASE("crc32 is the standard CRC-32 and is incremental", "[unit][data]") {
  CHECK(crc32Of("123456789") == 0xcbf43926U);
  CHECK(crc32Of("") == 0U);
  Crc32 pieces;
  pieces.update("1234");
  pieces.update("");
  pieces.update("56789");
  CHECK(pieces.value() == 0xcbf43926U);
  CHECK(formatCrc32(0xcbf43926U) == "cbf43926");
  CHECK(formatCrc32(0x1U) == "00000001");
}
