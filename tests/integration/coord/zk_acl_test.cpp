// ZooKeeper ACLs against a real server: a coordinator built from a daemon's config with a
// credentials file creates nodes that only its identity can touch; the plain ZooKeeper C
// client, unauthenticated or with the wrong password, can read or write nothing under the
// chroot; the identity survives a new session.
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <zookeeper/zookeeper.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>

#include "coord/credentials.h"
#include "daemon/zookeeper.h"
#include "harness/temp_dir.h"
#include "harness/zk_credentials.h"
#include "harness/zk_server.h"
#include "harness/zk_session.h"
#include "zk_test_util.h"

using namespace tellus;
using namespace tellus::coord;
using namespace tellus::coord::testing;
using harness::eventually;
using harness::IoThread;

namespace {

constexpr const char* kChroot = "/tellus-acl";

// ZooKeeper's digest id of a credential: user:base64(sha1(user:password)).
std::string digestId(const DigestCredentials& c) {
  const std::string auth = c.authString();
  unsigned char sha[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(auth.data()), auth.size(), sha);
  unsigned char base64[4 * ((SHA_DIGEST_LENGTH + 2) / 3) + 1];
  const int n = EVP_EncodeBlock(base64, sha, SHA_DIGEST_LENGTH);
  return c.user + ":" + std::string(reinterpret_cast<char*>(base64), static_cast<size_t>(n));
}

void quiet(const char*) {}

// The plain ZooKeeper C client (synchronous API), as anyone who reaches the server could use
// it: no chroot, and credentials only if given.
class RawClient {
 public:
  explicit RawClient(const std::string& connectString, const std::string& auth = "") {
    zh_ = zookeeper_init2(connectString.c_str(), nullptr, 10000, nullptr, nullptr, 0, quiet);
    REQUIRE(zh_ != nullptr);
    if (!auth.empty()) {
      REQUIRE(zoo_add_auth(zh_, "digest", auth.data(), static_cast<int>(auth.size()), nullptr, nullptr) == ZOK);
    }
    REQUIRE(eventually([&] { return zoo_state(zh_) == ZOO_CONNECTED_STATE; }, std::chrono::seconds(10)));
  }
  ~RawClient() { zookeeper_close(zh_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  int get(const std::string& path) {
    char buffer[256];
    int length = sizeof buffer;
    return zoo_get(zh_, path.c_str(), 0, buffer, &length, nullptr);
  }
  int children(const std::string& path) {
    String_vector kids{};
    int rc = zoo_get_children(zh_, path.c_str(), 0, &kids);
    if (rc == ZOK) deallocate_String_vector(&kids);
    return rc;
  }
  int create(const std::string& path) {
    return zoo_create(zh_, path.c_str(), "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, nullptr, 0);
  }
  int set(const std::string& path) { return zoo_set(zh_, path.c_str(), "forged", 6, -1); }
  int remove(const std::string& path) { return zoo_delete(zh_, path.c_str(), -1); }
  int setAcl(const std::string& path) { return zoo_set_acl(zh_, path.c_str(), -1, &ZOO_OPEN_ACL_UNSAFE); }
  // Every (scheme, id, perms) of the node's ACL.
  std::vector<std::tuple<std::string, std::string, int32_t>> acl(const std::string& path) {
    ACL_vector acl{};
    Stat stat{};
    REQUIRE(zoo_get_acl(zh_, path.c_str(), &acl, &stat) == ZOK);
    std::vector<std::tuple<std::string, std::string, int32_t>> out;
    for (int32_t i = 0; i < acl.count; ++i) {
      out.emplace_back(acl.data[i].id.scheme, acl.data[i].id.id, acl.data[i].perms);
    }
    deallocate_ACL_vector(&acl);
    return out;
  }

 private:
  zhandle_t* zh_ = nullptr;
};

// A coordinator built the way every daemon builds its own: from a config section.
struct DaemonCoordinator {
  DaemonCoordinator(IoThread& io, const std::string& connectString, const std::filesystem::path& credentialsFile)
      : io_(io) {
    config::ZooKeeperConfig cfg;
    cfg.connect = connectString;
    cfg.chroot = kChroot;
    cfg.session_timeout_ms = 2000;
    cfg.credentials_file = credentialsFile.string();
    auto created = io_.call([&] { return daemon::connectZooKeeper(io_.executor(), cfg); });
    INFO((created.isOk() ? std::string() : created.message()));
    REQUIRE(created.isOk());
    zk = *created;
    subscription = io_.call([&] { return zk->onSessionEvent([this](SessionEvent e) { log.add(e); }); });
  }
  ~DaemonCoordinator() {
    io_.call([&] {
      subscription.cancel();
      zk->close();
      zk.reset();
    });
  }
  template <class T>
  T run(boost::asio::awaitable<T> task) {
    return io_.run(std::move(task));
  }

  IoThread& io_;
  std::shared_ptr<Coordinator> zk;
  Subscription subscription;
  EventLog log;
};

}  // namespace

TEST_CASE("nodes of an authenticated coordinator are for its identity only", "[integration][coord][acl]") {
  IoThread io;
  auto server = harness::ZkServer::start();
  REQUIRE(server.isOk());
  const std::string connect = (*server)->connectString();
  harness::TempDir dir("tellus-zk-acl");
  auto credentials = harness::writeZkCredentials(dir.path() / "zk-credentials");
  REQUIRE(credentials.isOk());
  CHECK((std::filesystem::status(dir.path() / "zk-credentials").permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));

  DaemonCoordinator daemon(io, connect, dir.path() / "zk-credentials");
  REQUIRE(daemon.run(daemon.zk->waitConnected(10s)).isOk());
  REQUIRE(daemon.run(daemon.zk->create("/jobs", "", CreateMode::kPersistent)).isOk());
  REQUIRE(daemon.run(daemon.zk->create("/jobs/job-1", "spec", CreateMode::kPersistent)).isOk());
  REQUIRE(daemon.run(daemon.zk->create("/jobs/job-1/jm", "primary", CreateMode::kEphemeral)).isOk());
  REQUIRE(daemon.run(daemon.zk->ensurePath("/sites/us-east")).isOk());
  auto multi =
      daemon.run(daemon.zk->multi({ZkOp::create("/jobs/job-2", "spec"), ZkOp::create("/jobs/job-2/done", "")}));
  REQUIRE(multi.isOk());
  CHECK(daemon.run(daemon.zk->get("/jobs/job-1"))->data == "spec");

  // Every node created (the chroot, plain, ephemeral, ensurePath's and multi's) has one ACL
  // entry: this identity, all permissions.
  const auto expected = std::make_tuple(std::string("digest"), digestId(*credentials), int32_t{ZOO_PERM_ALL});
  RawClient admin(connect, credentials->authString());
  for (const char* node : {"", "/jobs", "/jobs/job-1", "/jobs/job-1/jm", "/sites", "/sites/us-east", "/jobs/job-2",
                           "/jobs/job-2/done"}) {
    const std::string path = std::string(kChroot) + node;
    INFO(path);
    auto acl = admin.acl(path);
    REQUIRE(acl.size() == 1);
    CHECK(acl.front() == expected);
    CHECK(admin.get(path) == ZOK);
  }

  SECTION("an unauthenticated client can read or write nothing under the chroot") {
    RawClient anyone(connect);
    for (const char* node : {"", "/jobs", "/jobs/job-1", "/sites/us-east", "/jobs/job-2/done"}) {
      const std::string path = std::string(kChroot) + node;
      INFO(path);
      CHECK(anyone.get(path) == ZNOAUTH);
      CHECK(anyone.children(path) == ZNOAUTH);
      CHECK(anyone.set(path) == ZNOAUTH);
      CHECK(anyone.create(path + "/forged") == ZNOAUTH);
      CHECK(anyone.setAcl(path) == ZNOAUTH);
    }
    const std::string ephemeral = std::string(kChroot) + "/jobs/job-1/jm";
    CHECK(anyone.get(ephemeral) == ZNOAUTH);
    CHECK(anyone.set(ephemeral) == ZNOAUTH);
    CHECK(anyone.remove(ephemeral) == ZNOAUTH);
    CHECK(anyone.remove(std::string(kChroot) + "/jobs/job-2/done") == ZNOAUTH);
    // Nothing changed.
    CHECK(daemon.run(daemon.zk->get("/jobs/job-1"))->data == "spec");
    CHECK(daemon.run(daemon.zk->children("/jobs/job-1")).value() == std::vector<std::string>{"jm"});
  }

  SECTION("a client with the wrong password is refused the same way") {
    RawClient impostor(connect, credentials->user + ":not-" + credentials->password);
    const std::string path = std::string(kChroot) + "/jobs/job-1";
    CHECK(impostor.get(path) == ZNOAUTH);
    CHECK(impostor.children(path) == ZNOAUTH);
    CHECK(impostor.set(path) == ZNOAUTH);
    CHECK(impostor.create(path + "/forged") == ZNOAUTH);
    CHECK(impostor.remove(path + "/jm") == ZNOAUTH);

    // Through ZkClient (digest authentication accepts any password: it only names an
    // identity), the refusal is a permission error naming the path.
    SessionOptions wrongOptions = options(connect, kChroot);
    wrongOptions.credentials = DigestCredentials{credentials->user, "not-" + credentials->password};
    TestClient wrong(io, wrongOptions);
    REQUIRE(wrong.run(wrong->waitConnected(10s)).isOk());
    auto read = wrong.run(wrong->get("/jobs/job-1"));
    REQUIRE_FALSE(read.isOk());
    CHECK(read.error().code == ErrorCode::kPermissionDenied);
    CHECK_THAT(read.message(), Catch::Contains("/jobs/job-1") && Catch::Contains("ZNOAUTH"));
  }

  SECTION("another process with the same credentials file shares the nodes") {
    DaemonCoordinator other(io, connect, dir.path() / "zk-credentials");
    REQUIRE(other.run(other.zk->waitConnected(10s)).isOk());
    CHECK(other.run(other.zk->get("/jobs/job-1"))->data == "spec");
    REQUIRE(other.run(other.zk->set("/jobs/job-1", "spec2", -1)).isOk());
    REQUIRE(other.run(other.zk->remove("/jobs/job-2/done")).isOk());
    CHECK(daemon.run(daemon.zk->get("/jobs/job-1"))->data == "spec2");
  }

  SECTION("a new session after an expiry authenticates again") {
    auto client = std::dynamic_pointer_cast<ZkClient>(daemon.zk);
    REQUIRE(client);
    auto session = io.call([&] { return client->sessionCredentials(); });
    REQUIRE(harness::expireSession(connect, session.id, session.password).isOk());
    REQUIRE(eventually([&] { return daemon.log.count(SessionEvent::kNewSession) == 1; }, 15s));
    REQUIRE(daemon.run(daemon.zk->create("/jobs/job-3", "after", CreateMode::kPersistent)).isOk());
    CHECK(daemon.run(daemon.zk->get("/jobs/job-1"))->data == "spec");
    auto acl = admin.acl(std::string(kChroot) + "/jobs/job-3");
    REQUIRE(acl.size() == 1);
    CHECK(acl.front() == expected);
  }
}

TEST_CASE("a daemon's credentials file must exist and parse", "[integration][coord][acl]") {
  IoThread io;
  harness::TempDir dir("tellus-zk-acl");
  config::ZooKeeperConfig cfg;
  cfg.connect = "127.0.0.1:1";  // never reached: the file is read first
  cfg.credentials_file = (dir.path() / "missing").string();
  auto missing = io.call([&] { return daemon::connectZooKeeper(io.executor(), cfg); });
  REQUIRE_FALSE(missing.isOk());
  CHECK(missing.error().code == ErrorCode::kNotFound);
  CHECK_THAT(missing.message(), Catch::Contains(cfg.credentials_file));

  cfg.credentials_file = (dir.path() / "two-lines").string();
  std::ofstream(cfg.credentials_file) << "tellus:secret\nsecond line\n";
  auto twoLines = io.call([&] { return daemon::connectZooKeeper(io.executor(), cfg); });
  REQUIRE_FALSE(twoLines.isOk());
  CHECK(twoLines.message() == "ZooKeeper credentials file '" + cfg.credentials_file +
                                  "': expected one line user:password: the password holds a control character (a "
                                  "NUL, a second line, ...) or a non-ASCII byte");

  cfg.credentials_file = dir.path().string();  // a directory
  auto directory = io.call([&] { return daemon::connectZooKeeper(io.executor(), cfg); });
  REQUIRE_FALSE(directory.isOk());
  CHECK_THAT(directory.message(), Catch::Contains("not a regular file"));
}
