// Pure parts of common/coord: path rules, chroot mapping, error mapping, retry
// classification, backoff, election order and the credentials file. No ZooKeeper server is
// involved.
#include <zookeeper/zookeeper.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "coord/connection_limit.h"
#include "coord/credentials.h"
#include "coord/election.h"
#include "coord/errors.h"
#include "coord/paths.h"

using namespace tellus::coord;
using std::chrono::milliseconds;
using tellus::ErrorCode;

TEST_CASE("valid and invalid ZooKeeper paths", "[unit][coord]") {
  for (const char* good : {"/", "/a", "/a/b", "/jobs/job-0000000001/election/n_0000000003", "/a.b/c-d_e"}) {
    INFO(good);
    CHECK(validatePath(good).isOk());
  }
  struct Bad {
    const char* path;
    const char* why;
  };
  for (auto [path, why] : {Bad{"", "empty"}, Bad{"a/b", "must start with '/'"}, Bad{"/a/", "must not end with '/'"},
                           Bad{"/a//b", "empty component"}, Bad{"/a/./b", "relative component"},
                           Bad{"/a/..", "relative component"}, Bad{"/a\tb", "control"}}) {
    INFO(path);
    auto st = validatePath(path);
    REQUIRE_FALSE(st.isOk());
    CHECK(st.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains(why));
    CHECK_THAT(st.message(), Catch::Contains(fmt::format("'{}'", path)));
  }
  CHECK_FALSE(validatePath(std::string("/a\0b", 4)).isOk());
}

TEST_CASE("chroot normalization and mapping", "[unit][coord]") {
  CHECK(*normalizeChroot("") == "");
  CHECK(*normalizeChroot("/") == "");
  CHECK(*normalizeChroot("/tellus") == "/tellus");
  CHECK(*normalizeChroot("/a/b") == "/a/b");
  auto bad = normalizeChroot("tellus");
  REQUIRE_FALSE(bad.isOk());
  CHECK_THAT(bad.message(), Catch::StartsWith("chroot: "));
  CHECK_FALSE(normalizeChroot("/tellus/").isOk());

  CHECK(applyChroot("/tellus", "/jobs/1") == "/tellus/jobs/1");
  CHECK(applyChroot("/tellus", "/") == "/tellus");
  CHECK(applyChroot("", "/jobs") == "/jobs");

  CHECK(stripChroot("/tellus", "/tellus/jobs/1") == std::optional<std::string>("/jobs/1"));
  CHECK(stripChroot("/tellus", "/tellus") == std::optional<std::string>("/"));
  CHECK(stripChroot("/tellus", "/tellusx/jobs") == std::nullopt);
  CHECK(stripChroot("/tellus", "/other") == std::nullopt);
  CHECK(stripChroot("", "/a") == std::optional<std::string>("/a"));
  for (const char* p : {"/", "/a", "/a/b/c"}) CHECK(stripChroot("/x/y", applyChroot("/x/y", p)) == std::string(p));
}

TEST_CASE("path helpers", "[unit][coord]") {
  CHECK(joinPath("/a/b", "c") == "/a/b/c");
  CHECK(joinPath("/", "c") == "/c");
  CHECK(parentPath("/a/b") == "/a");
  CHECK(parentPath("/a") == "/");
  CHECK(parentPath("/") == "/");
  CHECK(baseName("/a/b") == "b");
  CHECK(baseName("/") == "");
  CHECK(sequenceNumber("n_0000000042") == 42);
  CHECK(sequenceNumber("n_abc_0000000000") == 0);
  CHECK(sequenceNumber("job-2147483647x") == std::nullopt);
  CHECK(sequenceNumber("n_00042") == std::nullopt);
  CHECK(sequenceNumber("") == std::nullopt);
}

TEST_CASE("ZooKeeper codes map to error codes with clear messages", "[unit][coord]") {
  struct Case {
    int rc;
    ErrorCode code;
    const char* name;
  };
  for (auto [rc, code, name] :
       {Case{ZNONODE, ErrorCode::kNotFound, "ZNONODE"}, Case{ZNODEEXISTS, ErrorCode::kAlreadyExists, "ZNODEEXISTS"},
        Case{ZBADVERSION, ErrorCode::kConflict, "ZBADVERSION"}, Case{ZNOTEMPTY, ErrorCode::kConflict, "ZNOTEMPTY"},
        Case{ZCONNECTIONLOSS, ErrorCode::kUnavailable, "ZCONNECTIONLOSS"},
        Case{ZOPERATIONTIMEOUT, ErrorCode::kUnavailable, "ZOPERATIONTIMEOUT"},
        Case{ZSESSIONEXPIRED, ErrorCode::kUnavailable, "ZSESSIONEXPIRED"},
        Case{ZBADARGUMENTS, ErrorCode::kInvalidArgument, "ZBADARGUMENTS"},
        Case{ZNOCHILDRENFOREPHEMERALS, ErrorCode::kInvalidArgument, "ZNOCHILDRENFOREPHEMERALS"},
        Case{ZNOAUTH, ErrorCode::kPermissionDenied, "ZNOAUTH"}}) {
    auto e = zkError(rc, "get", "/jobs/7");
    INFO(e.message);
    CHECK(e.code == code);
    CHECK_THAT(e.message, Catch::StartsWith("get /jobs/7: "));
    CHECK_THAT(e.message, Catch::EndsWith(std::string("(") + name + ")"));
  }
  CHECK(zkError(ZNONODE, "get", "/x").message == "get /x: no node (ZNONODE)");
  CHECK(zkCodeName(-999) == "ZUNKNOWN(-999)");
  CHECK(zkError(-999, "get", "/x").code == ErrorCode::kInternal);

  // Only connection-level failures of non-idempotent writes leave the outcome unknown.
  CHECK_THAT(zkError(ZCONNECTIONLOSS, "create", "/x", true).message, Catch::Contains("may or may not"));
  CHECK_THAT(zkError(ZNODEEXISTS, "create", "/x", true).message, !Catch::Contains("may or may not"));
  CHECK_THAT(zkError(ZCONNECTIONLOSS, "get", "/x").message, !Catch::Contains("may or may not"));
}

TEST_CASE("retry classification", "[unit][coord]") {
  for (int rc : {ZCONNECTIONLOSS, ZOPERATIONTIMEOUT, ZTHROTTLEDOP, ZSESSIONEXPIRED, ZINVALIDSTATE}) {
    INFO(zkCodeName(rc));
    CHECK(isRetryableForIdempotent(rc));
  }
  for (int rc : {ZOK, ZNONODE, ZNODEEXISTS, ZBADVERSION, ZNOTEMPTY, ZBADARGUMENTS, ZNOAUTH}) {
    INFO(zkCodeName(rc));
    CHECK_FALSE(isRetryableForIdempotent(rc));
    CHECK_FALSE(isConnectionError(rc));
  }
  CHECK(isConnectionError(ZCONNECTIONLOSS));
  CHECK_FALSE(isConnectionError(ZTHROTTLEDOP));  // the server refused it: nothing was applied
}

TEST_CASE("backoff doubles up to its cap and resets", "[unit][coord]") {
  Backoff backoff(milliseconds(20), milliseconds(100));
  CHECK(backoff.next() == milliseconds(20));
  CHECK(backoff.next() == milliseconds(40));
  CHECK(backoff.next() == milliseconds(80));
  CHECK(backoff.next() == milliseconds(100));
  CHECK(backoff.next() == milliseconds(100));
  backoff.reset();
  CHECK(backoff.next() == milliseconds(20));
}

TEST_CASE("election order follows sequence numbers, not names", "[unit][coord]") {
  std::vector<std::string> kids = {"n_ffff_0000000003", "n_0000_0000000010", "n_aaaa_0000000001", "junk",
                                   "n_bbbb_0000000002"};
  CHECK(electionOrder(kids) ==
        std::vector<std::string>{"n_aaaa_0000000001", "n_bbbb_0000000002", "n_ffff_0000000003", "n_0000_0000000010"});
  CHECK(electionOrder({}).empty());
}

TEST_CASE("maxClientCnxns is read from ZooKeeper's conf answer, and only from a whole line", "[unit][coord]") {
  const std::string conf =
      "clientPort=2181\nsecureClientPort=-1\ndataDir=/var/lib/zookeeper/version-2\ntickTime=2000\n"
      "maxClientCnxns=60\nminSessionTimeout=4000\nmaxSessionTimeout=40000\nserverId=0\n";
  CHECK(parseMaxClientCnxns(conf) == 60u);
  CHECK(parseMaxClientCnxns("maxClientCnxns=0\n") == 0u);
  CHECK(parseMaxClientCnxns("maxClientCnxns=1000") == 1000u);
  CHECK(parseMaxClientCnxns("maxClientCnxns=1000\r\n") == 1000u);
  CHECK_FALSE(parseMaxClientCnxns("conf is not executed because it is not in the whitelist.\n"));
  CHECK_FALSE(parseMaxClientCnxns(""));
  CHECK_FALSE(parseMaxClientCnxns("xmaxClientCnxns=60\n"));
  CHECK_FALSE(parseMaxClientCnxns("maxClientCnxns=\n"));
  CHECK_FALSE(parseMaxClientCnxns("maxClientCnxns=-1\n"));
  CHECK_FALSE(parseMaxClientCnxns("maxClientCnxns=60x\n"));
  CHECK_FALSE(parseMaxClientCnxns("maxClientCnxns=99999999999999\n"));
}

TEST_CASE("a ZooKeeper credentials file is one line user:password", "[unit][coord]") {
  for (const char* text : {"tellus:s3cret", "tellus:s3cret\n", "tellus:s3cret\r\n", "a.b_c-D9:p:with:colons",
                           "u:pass word with spaces ~!@#$%^&*()"}) {
    INFO(text);
    auto c = parseDigestCredentials(text, "/etc/tellus/zk");
    REQUIRE(c.isOk());
    CHECK(c->authString() == std::string(text).substr(0, std::string(text).find_first_of("\r\n")));
  }
  auto c = parseDigestCredentials("tellus:p:q\n", "f");
  REQUIRE(c.isOk());
  CHECK(c->user == "tellus");
  CHECK(c->password == "p:q");  // only the first ':' separates (as ZooKeeper's digest does)

  struct Bad {
    std::string text;
    const char* why;
  };
  const std::string tooLong(kMaxCredentialsFileBytes - 6, 'x');
  for (const auto& [text, why] :
       {Bad{"", "expected one line user:password"}, Bad{"\n", "expected one line user:password"},
        Bad{"tellus", "expected one line user:password"}, Bad{":secret", "expected a user of 1 to 64 bytes"},
        Bad{std::string(65, 'u') + ":p", "expected a user of 1 to 64 bytes"},
        Bad{"tel lus:p", "expected a user of [A-Za-z0-9._-]"}, Bad{"tellus:", "expected a password after the ':'"},
        Bad{"tellus:\n", "expected a password after the ':'"},
        Bad{"tellus:one\ntwo", "the password holds a control character"},
        Bad{"tellus:one\n\n", "the password holds a control character"},
        Bad{std::string("tellus:a\0b", 10), "the password holds a control character"},
        Bad{"tellus:caf\xc3\xa9", "non-ASCII"}, Bad{"tellus:" + tooLong, "larger than 4096 bytes"}}) {
    INFO(text);
    auto r = parseDigestCredentials(text, "/etc/tellus/zk");
    REQUIRE_FALSE(r.isOk());
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.message(), Catch::StartsWith("ZooKeeper credentials file '/etc/tellus/zk': "));
    CHECK_THAT(r.message(), Catch::Contains(why));
  }
  // The password never appears in an error.
  auto secret = parseDigestCredentials("tellus:hunter2\x01", "f");
  REQUIRE_FALSE(secret.isOk());
  CHECK(secret.message().find("hunter2") == std::string::npos);
}
