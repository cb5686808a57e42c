#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "util/names.h"

using tellus::checkName;
using tellus::isName;
using tellus::kMaxNameBytes;

TEST_CASE("names: ids, dataset and stage names as ZooKeeper and the workers make them", "[unit][names]") {
  for (const char* good : {"job-0000000001", "corpus", "Word_count.v2-x", "a", "a..b", "1.2.3"}) {
    INFO(good);
    CHECK(isName(good));
    CHECK(checkName("dataset", good).isOk());
  }
  CHECK(isName(std::string(kMaxNameBytes, 'n')));
}

TEST_CASE("names: traversal, separators, absolute paths and oversized names are refused in one line",
          "[unit][names]") {
  // The names of issue 11: each would have created or written a file outside data_dir.
  for (const std::string& bad : std::vector<std::string>{"../../../../tmp/x", "/tmp/x", "..", ".", ".hidden", "a/b", "a\\b", "a b", "",
                                "x\ny", std::string("nul\0x", 5), "caf\xc3\xa9"}) {
    INFO(bad);
    CHECK_FALSE(isName(bad));
    auto st = checkName("job id", bad);
    REQUIRE_FALSE(st.isOk());
    CHECK(st.code() == tellus::ErrorCode::kInvalidArgument);
    CHECK(st.message().rfind("job id '", 0) == 0);
    CHECK(st.message().find('\n') == std::string::npos);
  }
  const std::string huge(1 << 20, 'a');
  CHECK_FALSE(isName(huge));
  auto st = checkName("dataset", huge);
  REQUIRE_FALSE(st.isOk());
  CHECK(st.message().find("longer than 128 bytes") != std::string::npos);
  // The echo of a hostile name is bounded.
  CHECK(st.message().size() < 2 * kMaxNameBytes + 64);
}
