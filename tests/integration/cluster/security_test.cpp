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

  SECTION("another site's master cannot start JMs, stop tasks or store data on a worker") {
    const auto worker = endpointOf(cluster.workerAddress(worker1));
    const auto foreign = as(cluster, "master/" + sites[1]);
    auto refused = [&](const auto& r) {
      REQUIRE_FALSE(r.isOk());
      CHECK(r.error().code == ErrorCode::kPermissionDenied);
      CHECK_THAT(r.message(), Catch::Contains("master/" + sites[1]) && Catch::Contains("'" + sites[0] + "'"));
    };
    pb::KillJobTasksRequest kill;
    kill.set_job_id("job-9999999999");  // never a job of the shared cluster: the worker remembers it as killed
    refused(net::callBlocking<rpc::Worker::KillJobTasks>(worker, kill, 5s, foreign));
    pb::LaunchJmRequest launch;
    launch.set_job_id("job-9999999999");
    launch.set_worker_id(worker1);
    launch.set_site(sites[0]);
    refused(net::callBlocking<rpc::Worker::LaunchJm>(worker, launch, 5s, foreign));
    pb::WriteDatasetRequest write;
    write.set_dataset("planted");
    write.set_upload_id("u1");
    write.set_worker_id(worker1);
    write.set_site(sites[0]);
    refused(net::callBlocking<rpc::Worker::WriteDataset>(worker, write, 5s, foreign));
    // Its own site's master may: a job id nothing runs for stops nothing, and says so.
    auto own = net::callBlocking<rpc::Worker::KillJobTasks>(worker, kill, 5s, as(cluster, "master/" + sites[0]));
    INFO(whyNot(own));
    REQUIRE(own.isOk());
    CHECK(own->jms_killed() == 0);
    CHECK(own->executors_killed() == 0);
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

// A one-task exec job: `cmd` is what it runs.
pb::SubmitRequest execJob(const std::string& name, const std::string& cmd) {
  pb::SubmitRequest req;
  req.mutable_spec()->set_name(name);
  req.mutable_spec()->set_placement("proportional");
  auto* stage = req.mutable_spec()->add_stages();
  stage->set_name("only");
  stage->set_op("exec");
  stage->set_tasks(1);
  (*stage->mutable_params())["cmd"] = cmd;
  return req;
}

pb::JobRequest jobRequest(const std::string& jobId, bool tasks = false) {
  pb::JobRequest req;
  req.set_job_id(jobId);
  req.set_tasks(tasks);
  return req;
}

void checkNotOwner(const Status& refused, const std::string& caller, const std::string& action, const std::string& jobId) {
  REQUIRE_FALSE(refused.isOk());
  CHECK(refused.code() == ErrorCode::kPermissionDenied);
  CHECK_THAT(refused.message(), Catch::Contains(caller + " may not " + action + " job " + jobId +
                                                ": it is not the job's owner (client/alice) nor an admin"));
  CHECK(refused.message().find('\n') == std::string::npos);
}

TEST_CASE("a job is its owner's: others may list it and see its progress, but not kill it, read its result, "
          "tasks or logs; an admin may",
          "[integration][cluster][tls][owners]") {
  auto& cluster = sharedCluster();
  const auto& sites = cluster.sites();
  const auto home = endpointOf(cluster.masterAddress(sites[0]));
  const auto away = endpointOf(cluster.masterAddress(sites[1]));  // the checks use the stored owner
  const auto alice = as(cluster, "client/alice");
  const auto bob = as(cluster, "client/bob");
  const auto ops = as(cluster, "client/ops");  // an admin (sharedCluster's masters: admins: [ops])

  // Runs until killed (its command ends when its executor does).
  const auto longJob = execJob("alice-long", "while kill -0 $PPID 2>/dev/null; do sleep 0.1; done");
  const auto quickJob = execJob("alice-quick", "echo alice-secret");
  auto longId = net::callBlocking<rpc::Master::Submit>(home, longJob, 10s, alice);
  auto quickId = net::callBlocking<rpc::Master::Submit>(home, quickJob, 10s, alice);
  INFO(whyNot(longId) << whyNot(quickId));
  REQUIRE(longId.isOk());
  REQUIRE(quickId.isOk());
  const std::string running = longId->job_id();
  const std::string quick = quickId->job_id();

  pb::JobStatusResponse last;
  const bool succeeded = harness::eventually(
      [&] {
        auto st = net::callBlocking<rpc::Master::Status>(home, jobRequest(quick), 5s, alice);
        if (st) last = *st;
        return st && st->status().state() == pb::JOB_SUCCEEDED;
      },
      60s, 100ms);
  INFO("quick job: " << last.ShortDebugString());
  REQUIRE(succeeded);
  CHECK(last.status().owner() == "client/alice");
  CHECK(last.status().name() == "alice-quick");

  SECTION("someone else is refused, through any master, with a one-line reason") {
    for (const auto& master : {home, away}) {
      pb::ResultRequest result;
      result.set_job_id(quick);
      checkNotOwner(net::callBlocking<rpc::Master::Result>(master, result, 5s, bob).status(), "client/bob",
                    "read the result of", quick);
      checkNotOwner(net::callBlocking<rpc::Master::Status>(master, jobRequest(quick, true), 5s, bob).status(),
                    "client/bob", "see the tasks of", quick);
      pb::LogsRequest logs;
      logs.set_job_id(quick);
      logs.set_stage("only");
      checkNotOwner(net::callBlocking<rpc::Master::Logs>(master, logs, 5s, bob).status(), "client/bob",
                    "read the logs of", quick);
      checkNotOwner(net::callBlocking<rpc::Master::Kill>(master, jobRequest(running), 5s, bob).status(), "client/bob",
                    "kill", running);
      // Nor by asking for the one-site part of a kill that masters fan out.
      auto oneSite = jobRequest(running);
      oneSite.set_this_site_only(true);
      checkNotOwner(net::callBlocking<rpc::Master::Kill>(master, oneSite, 5s, bob).status(), "client/bob", "kill",
                    running);
    }
    auto still = net::callBlocking<rpc::Master::Status>(away, jobRequest(running), 5s, alice);
    REQUIRE(still.isOk());
    CHECK(still->status().state() == pb::JOB_RUNNING);

    // Its progress, without what comes from its spec or its tasks' output.
    auto summary = net::callBlocking<rpc::Master::Status>(away, jobRequest(quick), 5s, bob);
    INFO(whyNot(summary));
    REQUIRE(summary.isOk());
    CHECK(summary->status().state() == pb::JOB_SUCCEEDED);
    CHECK(summary->status().owner() == "client/alice");
    CHECK(summary->status().name().empty());
    REQUIRE(summary->stages_size() == 1);
    CHECK(summary->stages(0).name().empty());
    CHECK(summary->stages(0).done() == 1);
    CHECK(summary->stages(0).task_placements_size() == 0);

    // Listed, the same way; the owner's own list has the names.
    for (const auto& [who, named] : {std::pair{bob, false}, std::pair{alice, true}}) {
      auto listed = net::callBlocking<rpc::Master::List>(away, pb::ListJobsRequest(), 5s, who);
      REQUIRE(listed.isOk());
      int seen = 0;
      for (const auto& job : listed->jobs()) {
        if (job.job_id() != running && job.job_id() != quick) continue;
        ++seen;
        CHECK(job.owner() == "client/alice");
        CHECK(job.name().empty() != named);
      }
      CHECK(seen == 2);
    }
    // The CLI (client/harness, no admin) shows the owner and no name.
    auto cli = cluster.tellus({"list"}, sites[2]);
    INFO(cli.out << cli.err);
    REQUIRE(cli.exitCode == 0);
    CHECK_THAT(cli.out, Catch::Contains(quick + "  succeeded  -  sites: " + sites[0] + "  by client/alice\n"));

    // An admin may do all of it: kill the job through another master than its own.
    pb::ResultRequest result;
    result.set_job_id(quick);
    auto read = net::callBlocking<rpc::Master::Result>(away, result, 5s, ops);
    INFO(whyNot(read));
    REQUIRE(read.isOk());
    CHECK(read->data() == "alice-secret\n");
    auto tasks = net::callBlocking<rpc::Master::Status>(away, jobRequest(quick, true), 5s, ops);
    REQUIRE(tasks.isOk());
    CHECK(tasks->stages(0).task_placements_size() == 1);
    auto killed = net::callBlocking<rpc::Master::Kill>(away, jobRequest(running), 10s, ops);
    INFO(whyNot(killed));
    REQUIRE(killed.isOk());
    CHECK(killed->unreachable_size() == 0);  // the fan-out to the other masters goes through
    auto after = net::callBlocking<rpc::Master::Status>(home, jobRequest(running), 5s, alice);
    REQUIRE(after.isOk());
    CHECK(after->status().state() == pb::JOB_KILLED);
  }

  SECTION("its owner may do all of it") {
    pb::ResultRequest result;
    result.set_job_id(quick);
    auto read = net::callBlocking<rpc::Master::Result>(away, result, 5s, alice);
    INFO(whyNot(read));
    REQUIRE(read.isOk());
    CHECK(read->data() == "alice-secret\n");
    auto tasks = net::callBlocking<rpc::Master::Status>(away, jobRequest(quick, true), 5s, alice);
    REQUIRE(tasks.isOk());
    CHECK(tasks->stages(0).task_placements_size() == 1);
    pb::LogsRequest logs;
    logs.set_job_id(quick);
    logs.set_stage("only");
    auto log = net::callBlocking<rpc::Master::Logs>(away, logs, 5s, alice);
    INFO(whyNot(log));
    CHECK(log.isOk());
    auto killed = net::callBlocking<rpc::Master::Kill>(away, jobRequest(running), 10s, alice);
    INFO(whyNot(killed));
    REQUIRE(killed.isOk());
    CHECK(killed->unreachable_size() == 0);
    auto after = net::callBlocking<rpc::Master::Status>(home, jobRequest(running), 5s, alice);
    REQUIRE(after.isOk());
    CHECK(after->status().state() == pb::JOB_KILLED);
  }
}

TEST_CASE("a job's containers at a site answer only to its JM there: another worker of the site is refused",
          "[integration][cluster][tls]") {
  auto& cluster = sharedCluster();
  const auto& sites = cluster.sites();
  const auto home = endpointOf(cluster.masterAddress(sites[0]));
  const auto ops = as(cluster, "client/ops");
  auto submitted = net::callBlocking<rpc::Master::Submit>(
      home, execJob("jm-binding", "while kill -0 $PPID 2>/dev/null; do sleep 0.1; done"), 10s, ops);
  INFO(whyNot(submitted));
  REQUIRE(submitted.isOk());
  const std::string job = submitted->job_id();

  // Each worker of the site speaks as the job's JM. What it asks (0 containers) the real JM
  // asks again on its next update.
  pb::JmUpdateRequest update;
  update.set_job_id(job);
  update.set_jm_address("127.0.0.1:1");
  std::string jmWorker;
  std::vector<std::string> others;
  std::string lastRefusal;
  const bool oneIsTheJm = harness::eventually(
      [&] {
        jmWorker.clear();
        others.clear();
        for (const auto& worker : cluster.workers(sites[0])) {
          auto r = net::callBlocking<rpc::Master::JmUpdate>(home, update, 5s,
                                                            as(cluster, "worker/" + sites[0] + "/" + worker));
          if (r) {
            jmWorker = worker;
          } else {
            lastRefusal = r.message();
            others.push_back(worker);
          }
        }
        return !jmWorker.empty();
      },
      30s, 100ms);
  INFO("last refusal: " << lastRefusal);
  REQUIRE(oneIsTheJm);
  REQUIRE_FALSE(others.empty());  // the shared cluster has two workers per site

  // The others may not say the job is done (which would free every container it holds), nor
  // anything else for it.
  for (const auto& worker : others) {
    pb::JmUpdateRequest done = update;
    done.set_finished(true);
    auto r = net::callBlocking<rpc::Master::JmUpdate>(home, done, 5s, as(cluster, "worker/" + sites[0] + "/" + worker));
    REQUIRE_FALSE(r.isOk());
    CHECK(r.error().code == ErrorCode::kPermissionDenied);
    CHECK_THAT(r.message(), Catch::Contains("worker/" + sites[0] + "/" + jmWorker) &&
                                Catch::Contains("worker/" + sites[0] + "/" + worker));
  }
  auto status = net::callBlocking<rpc::Master::Status>(home, jobRequest(job), 5s, ops);
  REQUIRE(status.isOk());
  for (const auto ended : {pb::JOB_SUCCEEDED, pb::JOB_FAILED, pb::JOB_KILLED}) CHECK(status->status().state() != ended);
  auto killed = net::callBlocking<rpc::Master::Kill>(home, jobRequest(job), 10s, ops);
  INFO(whyNot(killed));
  CHECK(killed.isOk());
}

}  // namespace
}  // namespace tellus::itest
