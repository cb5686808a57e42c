// Mutual TLS on the real daemons (issue 11, docs/security.md): a certificate's role limits the
// methods it may call, and a request's claims about its sender are checked against the
// certificate. The shared cluster runs with TLS on (harness default); these tests call its
// daemons directly with certificates of the cluster's CA.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <optional>

#include "cluster_test_util.h"
#include "harness/certs.h"
#include "harness/eventually.h"
#include "net/methods.h"
#include "net/rpc_client.h"
#include "tellus.pb.h"

namespace tellus::itest {
namespace {

using namespace std::chrono_literals;

// Client options that present `identity` (issued on demand by scripts/make-certs).
net::ClientOptions as(harness::MiniCluster& cluster, const std::string& identity) {
  REQUIRE(harness::makeCerts(cluster.certsDir(), {identity}).isOk());
  const auto files = harness::certFiles(cluster.certsDir(), identity);
  auto tls = net::TlsContext::load({files.ca.string(), files.cert.string(), files.key.string()});
  INFO(whyNot(tls));
  REQUIRE(tls.isOk());
  net::ClientOptions options;
  options.tls = *tls;
  return options;
}

net::Endpoint endpointOf(const std::string& address) {
  auto endpoint = net::Endpoint::parse(address);
  REQUIRE(endpoint.isOk());
  return *endpoint;
}

TEST_CASE("a certificate's role limits what it may call on the daemons", "[integration][cluster][tls]") {
  auto& cluster = sharedCluster();
  const auto& sites = cluster.sites();
  const auto master = endpointOf(cluster.masterAddress(sites[0]));
  const std::string worker1 = cluster.workers(sites[0])[0];

  SECTION("a worker cannot submit jobs") {
    auto r = net::callBlocking<rpc::Master::Submit>(master, pb::SubmitRequest(), 5s,
                                                    as(cluster, "worker/" + sites[0] + "/" + worker1));
    REQUIRE_FALSE(r.isOk());
    CHECK(r.error().code == ErrorCode::kPermissionDenied);
    CHECK_THAT(r.message(), Catch::Contains("'master.Submit' may be called by client only"));
  }

  SECTION("a client cannot run tasks on a worker") {
    // The worker's address, from the config the mini cluster wrote for it.
    std::ifstream config(cluster.dir() / sites[0] / (worker1 + ".yaml"));
    std::string line, listen;
    while (std::getline(config, line)) {
      if (line.rfind("listen: ", 0) == 0) listen = line.substr(8);
    }
    REQUIRE_FALSE(listen.empty());
    auto r = net::callBlocking<rpc::Worker::RunTask>(endpointOf(listen), pb::RunTaskRequest(), 5s,
                                                     as(cluster, "client/harness"));
    REQUIRE_FALSE(r.isOk());
    CHECK(r.error().code == ErrorCode::kPermissionDenied);
    CHECK_THAT(r.message(), Catch::Contains("client/harness"));
  }

  SECTION("a worker cannot register as another worker (no hijack by claim)") {
    const std::string worker2 = cluster.workers(sites[0])[1];
    pb::RegisterWorkerRequest forged;
    forged.set_worker_id(worker2);
    forged.set_address("127.0.0.1:1");  // where an attacker would have the master send work
    forged.set_containers(1);
    auto r = net::callBlocking<rpc::Master::RegisterWorker>(master, forged, 5s,
                                                            as(cluster, "worker/" + sites[0] + "/" + worker1));
    REQUIRE_FALSE(r.isOk());
    CHECK(r.error().code == ErrorCode::kPermissionDenied);
    CHECK_THAT(r.message(), Catch::Contains("worker/" + sites[0] + "/" + worker2));
    // Nor as a worker of this site with another site's certificate.
    auto other = net::callBlocking<rpc::Master::RegisterWorker>(
        master, forged, 5s, as(cluster, "worker/" + sites[1] + "/" + worker2));
    REQUIRE_FALSE(other.isOk());
    CHECK(other.error().code == ErrorCode::kPermissionDenied);
  }
}

TEST_CASE("a raw partition of a residency: local dataset is refused to any other site", "[integration][cluster][tls]") {
  auto& cluster = sharedCluster();
  const auto& sites = cluster.sites();
  CliRunner files;
  const auto input = files.writeFile("pinned.txt", "secret words stay here\n");
  auto put = cluster.tellus({"put", input.string(), "--dataset", "pinned-tls", "--site", sites[0], "--residency-local"});
  INFO(put.out << put.err);
  REQUIRE(put.exitCode == 0);

  // Where the partition lives, as the site publishes it.
  const auto master = endpointOf(cluster.masterAddress(sites[0]));
  const auto client = as(cluster, "client/harness");
  std::optional<pb::DatasetPartition> partition;
  const bool published = harness::eventually(
      [&] {
        auto listed = net::callBlocking<rpc::Master::Sites>(master, pb::ListSitesRequest(), 5s, client);
        if (!listed) return false;
        for (const auto& site : listed->sites()) {
          for (const auto& dataset : site.datasets()) {
            if (dataset.name() != "pinned-tls" || dataset.partitions_size() == 0) continue;
            if (dataset.partitions(0).worker_address().empty()) continue;
            partition = dataset.partitions(0);
          }
        }
        return partition.has_value();
      },
      30s, 100ms);
  REQUIRE(published);

  pb::FetchRequest fetch;
  fetch.set_dataset_file(partition->file());
  fetch.set_from_site(sites[0]);  // a lie: the certificate says otherwise
  const auto holder = endpointOf(partition->worker_address());
  const std::string foreignWorker = cluster.workers(sites[1])[0];
  auto refused = net::callBlocking<rpc::Worker::Fetch>(holder, fetch, 5s,
                                                       as(cluster, "worker/" + sites[1] + "/" + foreignWorker));
  REQUIRE_FALSE(refused.isOk());
  CHECK(refused.error().code == ErrorCode::kPermissionDenied);
  CHECK_THAT(refused.message(), Catch::Contains("residency: local"));

  // The same site may read it.
  const std::string localWorker = cluster.workers(sites[0])[1];
  auto allowed = net::callBlocking<rpc::Worker::Fetch>(holder, fetch, 5s,
                                                       as(cluster, "worker/" + sites[0] + "/" + localWorker));
  INFO(whyNot(allowed));
  REQUIRE(allowed.isOk());
  CHECK(allowed->data() == "secret words stay here\n");
}

}  // namespace
}  // namespace tellus::itest
