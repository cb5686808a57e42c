// jobstate::JobStore over a FaultInjectingCoordinator over a real ZooKeeper: each operation
// either reports a clean error value or, where it retries, lands exactly once; a fenced write
// under a stale epoch is refused; malformed nodes and names are errors or skipped, never
// exceptions.
#include "jobstate/job_store.h"

#include <catch2/catch.hpp>

#include "coord/fault_injection.h"
#include "harness/zk_server.h"
#include "jobstate/paths.h"  // to plant foreign nodes where the store looks
#include "zk_test_util.h"

using namespace tellus;
using namespace tellus::coord;
using namespace tellus::coord::testing;
using jobstate::JobStore;
using jobstate::TaskId;
using jobstate::Versioned;
using Fault = FaultInjectingCoordinator::Fault;
using harness::IoThread;

namespace {

// A two-stage job: a dataset stage of two tasks, then a stage of one task reading it.
pb::JobSpec twoStageSpec() {
  pb::JobSpec spec;
  spec.set_name("store-test");
  auto* map = spec.add_stages();
  map->set_name("map");
  map->add_inputs()->set_dataset("corpus");
  auto* reduce = spec.add_stages();
  reduce->set_name("reduce");
  reduce->set_tasks(1);
  reduce->add_inputs()->set_stage("map");
  return spec;
}

pb::StageInputs twoPartitions() {
  pb::StageInputs inputs;
  for (const char* site : {"s1", "s2"}) {
    auto* ref = inputs.add_partitions();
    ref->set_site(site);
    ref->set_worker_id(std::string(site) + "-w1");
  }
  return inputs;
}

pb::JobStatus runningStatus() {
  pb::JobStatus status;
  status.set_name("store-test");
  status.set_state(pb::JOB_RUNNING);
  status.add_sites("s1");
  status.add_sites("s2");
  return status;
}

pb::TaskMap ownedBy(std::initializer_list<const char*> sites) {
  pb::TaskMap map;
  for (const char* site : sites) map.add_owner_site(site);
  return map;
}

// A ZooKeeper server, a client on an io thread, the fault injector over it and the store over
// the injector: what a daemon runs, with faults on demand.
struct StoreFixture {
  IoThread io;
  std::unique_ptr<harness::ZkServer> server;
  std::unique_ptr<TestClient> zk;
  std::shared_ptr<FaultInjectingCoordinator> faulty;
  std::unique_ptr<JobStore> store;

  StoreFixture() {
    auto started = harness::ZkServer::start();
    REQUIRE(started.isOk());
    server = std::move(started).value();
    zk = std::make_unique<TestClient>(io, options(server->connectString()));
    REQUIRE(zk->run((*zk)->waitConnected(10s)).isOk());
    faulty = std::make_shared<FaultInjectingCoordinator>(zk->shared());
    // Retries wait for the session, which never went away: a short wait keeps tests quick.
    store = std::make_unique<JobStore>(*faulty, jobstate::RetryPolicy{3, 2000ms});
    REQUIRE(run(store->ensureJobsRoot()).isOk());
  }
  ~StoreFixture() {
    io.call([&] { store.reset(); });
    zk->release();
  }

  template <class T>
  T run(boost::asio::awaitable<T> task) {
    return io.run(std::move(task));
  }

  std::string createJob() {
    std::map<uint32_t, pb::StageInputs> inputs{{0, twoPartitions()}};
    auto id = run(store->createJob(twoStageSpec(), runningStatus(), inputs));
    REQUIRE(id.isOk());
    return *id;
  }
};

}  // namespace

TEST_CASE("JobStore: create, load and read a job, with a clean error under each fault",
          "[integration][jobstate][faults]") {
  StoreFixture f;
  // A fault before the id is allocated: nothing is created, the error says what failed.
  f.faulty->injectNext(Fault::kBefore, "create");
  std::map<uint32_t, pb::StageInputs> inputs{{0, twoPartitions()}};
  auto failed = f.run(f.store->createJob(twoStageSpec(), runningStatus(), inputs));
  REQUIRE_FALSE(failed.isOk());
  CHECK(failed.error().code == ErrorCode::kUnavailable);
  CHECK_THAT(failed.message(), Catch::StartsWith("allocating a job id"));
  CHECK(f.run(f.store->listJobs())->empty());

  const std::string jobId = f.createJob();
  CHECK_THAT(jobId, Catch::StartsWith("job-"));
  auto listed = f.run(f.store->listJobs());
  REQUIRE(listed.isOk());
  CHECK(*listed == std::vector<std::string>{jobId});

  auto status = f.run(f.store->status(jobId));
  REQUIRE(status.isOk());
  CHECK(status->value.job_id() == jobId);
  CHECK(status->value.state() == pb::JOB_RUNNING);
  auto loaded = f.run(f.store->load(jobId));
  REQUIRE(loaded.isOk());
  CHECK(loaded->spec.stages_size() == 2);
  REQUIRE(loaded->inputs.size() == 2);
  CHECK(loaded->inputs[0].partitions_size() == 2);
  CHECK(loaded->inputs[1].partitions_size() == 0);  // reads a stage, not a dataset
  auto epoch = f.run(f.store->epoch(jobId));
  REQUIRE(epoch.isOk());
  CHECK(epoch->value == 0);
  CHECK(f.run(f.store->taskMap(jobId, 0)).error().code == ErrorCode::kNotFound);  // not released

  // Every read reports an injected connection loss as an error value.
  f.faulty->injectNext(Fault::kBefore, "get");
  CHECK(f.run(f.store->status(jobId)).error().code == ErrorCode::kUnavailable);
  f.faulty->injectNext(Fault::kBefore, "get");
  CHECK(f.run(f.store->load(jobId)).error().code == ErrorCode::kUnavailable);
  f.faulty->injectNext(Fault::kBefore, "children");
  CHECK(f.run(f.store->outputTasks(jobId, 0)).error().code == ErrorCode::kUnavailable);
  f.faulty->injectNext(Fault::kBefore, "children");
  CHECK(f.run(f.store->runningTasks(jobId)).error().code == ErrorCode::kUnavailable);

  // Bad ids and missing jobs are refused before (or by) ZooKeeper.
  CHECK(f.run(f.store->status("../etc")).error().code == ErrorCode::kInvalidArgument);
  auto missing = f.run(f.store->status("job-9999999999"));
  CHECK(missing.error().code == ErrorCode::kNotFound);
  CHECK(missing.message() == "no job job-9999999999");
}

TEST_CASE("JobStore: fenced writes apply only under the current epoch", "[integration][jobstate][faults]") {
  StoreFixture f;
  const std::string jobId = f.createJob();
  auto status = f.run(f.store->status(jobId));
  REQUIRE(status.isOk());

  // A bump against a status that changed since it was read is refused.
  CHECK(f.run(f.store->bumpEpoch(jobId, status->stat.version + 1, 0)).error().code == ErrorCode::kConflict);
  auto first = f.run(f.store->bumpEpoch(jobId, status->stat.version, 0));
  REQUIRE(first.isOk());
  CHECK(first->value == 1);
  const int32_t staleFence = first->stat.version;
  // (Named arguments: GCC 12 may destroy a temporary coroutine argument twice.)
  const pb::TaskMap mapTasks = ownedBy({"s1", "s2"});
  const pb::TaskMap reduceTasks = ownedBy({"s1"});
  const TaskId mapTask1{0, 1};
  const pb::RunningTask started;
  auto attemptId = f.run(f.store->startAttempt(jobId, mapTask1, started, "s1-w1"));
  REQUIRE(attemptId.isOk());
  pb::PartitionLocation somewhere;
  somewhere.set_attempt_id(*attemptId);
  REQUIRE(f.run(f.store->createTaskMapFenced(jobId, 0, mapTasks, staleFence)).isOk());
  // Releasing twice: the stage is released already.
  CHECK(f.run(f.store->createTaskMapFenced(jobId, 0, reduceTasks, staleFence)).code() == ErrorCode::kAlreadyExists);

  // A second JM takes over: the first one's token no longer opens any write.
  auto second = f.run(f.store->bumpEpoch(jobId, status->stat.version, 1));
  REQUIRE(second.isOk());
  CHECK(second->value == 2);
  // A third JM that also saw epoch 1 go silent loses: only one takeover per epoch lands.
  auto late = f.run(f.store->bumpEpoch(jobId, status->stat.version, 1));
  CHECK(late.error().code == ErrorCode::kConflict);
  CHECK(f.run(f.store->epoch(jobId))->value == 2);
  pb::JobStatus done = status->value;
  done.set_state(pb::JOB_SUCCEEDED);
  CHECK(f.run(f.store->createTaskMapFenced(jobId, 1, reduceTasks, staleFence)).code() == ErrorCode::kConflict);
  CHECK(f.run(f.store->writeStatusFenced(jobId, done, staleFence)).code() == ErrorCode::kConflict);
  // A lost site's tasks given away by the stale primary: refused, the map stays as it was.
  std::function<Status(pb::TaskMap&)> giveS2sTasksToS1 = [](pb::TaskMap& map) {
    for (auto& owner : *map.mutable_owner_site()) {
      if (owner == "s2") owner = "s1";
    }
    return Status::ok();
  };
  const std::optional<int32_t> staleEpochVersion = staleFence;
  auto staleMove = f.run(f.store->casTaskMap(jobId, 0, giveS2sTasksToS1, 3, staleEpochVersion));
  CHECK(staleMove.error().code == ErrorCode::kConflict);
  CHECK(f.run(f.store->taskMap(jobId, 0))->value.owner_site(1) == "s2");
  const std::optional<int32_t> currentEpochVersion = second->stat.version;
  auto move = f.run(f.store->casTaskMap(jobId, 0, giveS2sTasksToS1, 3, currentEpochVersion));
  REQUIRE(move.isOk());
  CHECK(f.run(f.store->taskMap(jobId, 0))->value.owner_site(1) == "s1");
  const std::vector<jobstate::BatchItem> recordTask1{{1, somewhere, false}};
  REQUIRE(f.run(f.store->recordBatch(jobId, 0, recordTask1, 0)).isOk());
  CHECK(f.run(f.store->removeOutputFenced(jobId, mapTask1, staleFence)).code() == ErrorCode::kConflict);
  CHECK(f.run(f.store->taskMap(jobId, 1)).error().code == ErrorCode::kNotFound);
  CHECK(f.run(f.store->status(jobId))->value.state() == pb::JOB_RUNNING);
  CHECK(*f.run(f.store->outputTasks(jobId, 0)) == std::set<uint32_t>{1});

  // The current token does.
  const int32_t fence = second->stat.version;
  REQUIRE(f.run(f.store->removeOutputFenced(jobId, mapTask1, fence)).isOk());
  CHECK(f.run(f.store->removeOutputFenced(jobId, mapTask1, fence)).code() == ErrorCode::kNotFound);
  // Its execution stays in the audit (its batch was rewritten without the output).
  CHECK(f.run(f.store->outputTasks(jobId, 0))->empty());
  CHECK(f.run(f.store->attemptCounts(jobId))->at(mapTask1) == 1);
  // A lost reply: the write happened; the caller learns it may have.
  f.faulty->injectNext(Fault::kAfter, "multi");
  auto lost = f.run(f.store->writeStatusFenced(jobId, done, fence));
  CHECK(lost.code() == ErrorCode::kUnavailable);
  CHECK(f.run(f.store->status(jobId))->value.state() == pb::JOB_SUCCEEDED);
}

TEST_CASE("JobStore: taskMap compare-and-set retries on the fresh map", "[integration][jobstate][faults]") {
  StoreFixture f;
  const std::string jobId = f.createJob();
  auto status = f.run(f.store->status(jobId));
  auto epoch = f.run(f.store->bumpEpoch(jobId, status->stat.version, 0));
  REQUIRE(epoch.isOk());
  const pb::TaskMap allAtS1 = ownedBy({"s1", "s1"});
  REQUIRE(f.run(f.store->createTaskMapFenced(jobId, 0, allAtS1, epoch->stat.version)).isOk());

  // Gives every task of s1 to s2; counts what it moved in its last call.
  int calls = 0;
  int moved = 0;
  std::function<Status(pb::TaskMap&)> stealAll = [&](pb::TaskMap& map) {
    ++calls;
    moved = 0;
    for (auto& owner : *map.mutable_owner_site()) {
      if (owner == "s1") {
        owner = "s2";
        ++moved;
      }
    }
    return Status::ok();
  };

  // The write lands but its reply is lost: the retry sees the map it wrote and moves nothing.
  f.faulty->injectNext(Fault::kAfter, "set");
  auto cas = f.run(f.store->casTaskMap(jobId, 0, stealAll, 3));
  REQUIRE(cas.isOk());
  CHECK(calls == 2);
  CHECK(moved == 0);
  CHECK(cas->value.owner_site(0) == "s2");
  auto now = f.run(f.store->taskMap(jobId, 0));
  REQUIRE(now.isOk());
  CHECK(now->stat.version == cas->stat.version);
  CHECK(now->value.SerializeAsString() == cas->value.SerializeAsString());

  // A read that fails ends the attempt with nothing written.
  calls = 0;
  f.faulty->injectNext(Fault::kBefore, "get");
  auto unread = f.run(f.store->casTaskMap(jobId, 0, stealAll, 3));
  CHECK(unread.error().code == ErrorCode::kUnavailable);
  CHECK(calls == 0);
  // An edit that refuses writes nothing.
  std::function<Status(pb::TaskMap&)> refuse = [](pb::TaskMap&) {
    return Status(makeError(ErrorCode::kInvalidArgument, "nothing to steal"));
  };
  CHECK(f.run(f.store->casTaskMap(jobId, 0, refuse, 3)).error().code == ErrorCode::kInvalidArgument);
  CHECK(f.run(f.store->taskMap(jobId, 0))->stat.version == cas->stat.version);
}

namespace {
// The running marker of a task's first attempt at `site`.
pb::RunningTask firstAttemptAt(const std::string& site) {
  pb::RunningTask marker;
  marker.set_site(site);
  marker.set_attempt(1);
  return marker;
}
}  // namespace

TEST_CASE("JobStore: an attempt that landed under a session gone by the retry counts once and holds its marker",
          "[integration][jobstate][faults]") {
  StoreFixture f;
  const std::string jobId = f.createJob();
  const TaskId task{0, 1};
  const pb::RunningTask marker = firstAttemptAt("s1");

  // The first try lands under the old session (its marker is that session's), the reply is
  // lost; the retry runs under the store's session.
  TestClient old(f.io, options(f.server->connectString()));
  REQUIRE(old.run(old->waitConnected(10s)).isOk());
  f.faulty->injectNextMultiVia(old.shared());
  auto attemptId = f.run(f.store->startAttempt(jobId, task, marker, "s1-w1"));
  REQUIRE(attemptId.isOk());
  CHECK(*attemptId == "0-1-0000000000");
  CHECK(f.run(f.store->attemptCounts(jobId))->at(task) == 1);
  // The marker is now the store's session's: it outlives the old session.
  old.release();
  auto stat = f.run((**f.zk).exists(jobstate::runningTaskPath(jobId, task.first, task.second)));
  REQUIRE(stat.isOk());
  REQUIRE(stat->has_value());
  CHECK((*stat)->ephemeralOwner == (**f.zk).sessionId());
  CHECK(f.run(f.store->attemptCounts(jobId))->at(task) == 1);
}

TEST_CASE("JobStore: starts in one transaction land together, and each goes alone when the transaction does not",
          "[integration][jobstate][faults]") {
  StoreFixture f;
  const std::string jobId = f.createJob();
  const pb::RunningTask marker = firstAttemptAt("s1");
  const auto startsOf = [&](std::vector<uint32_t> tasks) {
    std::vector<JobStore::AttemptStart> starts;
    for (uint32_t t : tasks) starts.push_back({TaskId{0, t}, marker});
    return starts;
  };

  // Landing whole: one attempt id per start, in order.
  auto landed = f.run(f.store->startAttempts(jobId, startsOf({0, 1, 2}), "s1-w1"));
  REQUIRE(landed.isOk());
  REQUIRE(landed->size() == 3);
  CHECK((*landed)[0].value() == "0-0-0000000000");
  CHECK((*landed)[1].value() == "0-1-0000000001");
  CHECK((*landed)[2].value() == "0-2-0000000002");
  CHECK(*f.run(f.store->runningTasks(jobId)) == std::vector<TaskId>{{0, 0}, {0, 1}, {0, 2}});

  // Task 1 already runs: the transaction fails, and the others start alone.
  auto mixed = f.run(f.store->startAttempts(jobId, startsOf({3, 1, 4}), "s1-w1"));
  REQUIRE(mixed.isOk());
  REQUIRE(mixed->size() == 3);
  CHECK((*mixed)[0].isOk());
  CHECK((*mixed)[1].error().code == ErrorCode::kAlreadyExists);
  CHECK((*mixed)[2].isOk());
  auto counts = f.run(f.store->attemptCounts(jobId));
  REQUIRE(counts.isOk());
  CHECK(counts->at({0, 1}) == 1);
  CHECK(counts->at({0, 3}) == 1);
  CHECK(counts->at({0, 4}) == 1);

  // The transaction landed and its reply was lost: each start finds its own, none twice.
  f.faulty->injectNext(Fault::kAfter, "multi");
  auto unheard = f.run(f.store->startAttempts(jobId, startsOf({5, 6}), "s1-w1"));
  REQUIRE(unheard.isOk());
  REQUIRE(unheard->size() == 2);
  CHECK((*unheard)[0].isOk());
  CHECK((*unheard)[1].isOk());
  counts = f.run(f.store->attemptCounts(jobId));
  REQUIRE(counts.isOk());
  CHECK(counts->at({0, 5}) == 1);
  CHECK(counts->at({0, 6}) == 1);
  CHECK(f.run(f.store->runningTasks(jobId))->size() == 7);

  // Bounded: a transaction holds at most kMaxStartsPerMulti starts.
  std::vector<uint32_t> many(JobStore::kMaxStartsPerMulti + 1);
  for (uint32_t i = 0; i < many.size(); ++i) many[i] = 100 + i;
  CHECK(f.run(f.store->startAttempts(jobId, startsOf(many), "s1-w1")).error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("JobStore: a worker's writes land once through lost replies", "[integration][jobstate][faults]") {
  StoreFixture f;
  const std::string jobId = f.createJob();
  const TaskId task{0, 1};
  const pb::RunningTask marker = firstAttemptAt("s1");

  // The marker and the audit node are made, the reply lost: the retry finds our own marker.
  f.faulty->injectNext(Fault::kAfter, "multi");
  auto attemptId = f.run(f.store->startAttempt(jobId, task, marker, "s1-w1"));
  REQUIRE(attemptId.isOk());
  CHECK(*attemptId == "0-1-0000000000");  // found again after the lost reply
  CHECK(*f.run(f.store->runningTasks(jobId)) == std::vector<TaskId>{task});
  auto attempts = f.run(f.store->attempts(jobId));
  REQUIRE(attempts.isOk());
  REQUIRE(attempts->size() == 1);
  CHECK(attempts->front().task == task);
  CHECK(attempts->front().workerId == "s1-w1");
  CHECK(f.run(f.store->runningMarker(jobId, task))->attempt() == 1);

  // Another session cannot start the same task while the marker stands.
  TestClient other(f.io, options(f.server->connectString()));
  REQUIRE(other.run(other->waitConnected(10s)).isOk());
  JobStore otherStore(*other);
  auto twice = f.run(otherStore.startAttempt(jobId, task, marker, "s2-w1"));
  CHECK(twice.error().code == ErrorCode::kAlreadyExists);
  CHECK_THAT(twice.message(), Catch::Contains("already running"));
  CHECK(f.run(f.store->attemptCounts(jobId))->at(task) == 1);
  other.release();

  // The output: recorded in a batch despite a lost reply, once. The batch's transaction folds
  // the execution's audit node and removes the task's running marker.
  pb::PartitionLocation location;
  location.set_site("s1");
  location.set_worker_id("s1-w1");
  location.set_worker_address("127.0.0.1:1");
  location.add_bucket_bytes(7);
  location.set_attempt_id(*attemptId);
  f.faulty->injectNext(Fault::kAfter, "multi");
  const std::vector<jobstate::BatchItem> batch{{1, location, false}};
  auto recorded = f.run(f.store->recordBatch(jobId, 0, batch, (*f.faulty).sessionId()));
  REQUIRE(recorded.isOk());
  CHECK(*recorded == std::set<uint32_t>{1});
  CHECK(*f.run(f.store->outputTasks(jobId, 0)) == std::set<uint32_t>{1});
  auto read = f.run(f.store->output(jobId, 0, 1));
  REQUIRE(read.isOk());
  CHECK(read->worker_id() == "s1-w1");
  CHECK(read->worker_address() == "127.0.0.1:1");
  CHECK(read->attempt_id() == *attemptId);
  CHECK(read->bucket_bytes(0) == 7u);
  CHECK(f.run(f.store->runningTasks(jobId))->empty());
  CHECK(f.run((**f.zk).children(jobstate::attemptsPath(jobId)))->empty());
  CHECK(f.run(f.store->attemptCounts(jobId))->at(task) == 1);  // folded: still counted, once
  // One batch node, confirmed by its stage's finish records.
  auto outputs = f.run(f.store->outputs(jobId, 0));
  REQUIRE(outputs.isOk());
  CHECK(f.run(f.store->finishRecords(jobId, 0))->count(outputs->outputs.at(1).finishKey) == 1);
  CHECK(f.run((**f.zk).children(jobstate::partsPath(jobId, 0)))->size() == 1);

  // A second execution of the task (another worker) finishing later: kept for the audit only;
  // the first record stays.
  pb::RunningTask again = marker;
  auto second = f.run(f.store->startAttempt(jobId, task, again, "s2-w1"));
  REQUIRE(second.isOk());
  pb::PartitionLocation late = location;
  late.set_worker_id("s2-w1");
  late.set_attempt_id(*second);
  const std::vector<jobstate::BatchItem> lateBatch{{1, late, false}};
  auto lateRecorded = f.run(f.store->recordBatch(jobId, 0, lateBatch, (*f.faulty).sessionId()));
  REQUIRE(lateRecorded.isOk());
  CHECK(lateRecorded->empty());
  CHECK(f.run(f.store->output(jobId, 0, 1))->worker_id() == "s1-w1");
  CHECK(f.run(f.store->attemptCounts(jobId))->at(task) == 2);
  // An execution the audit does not have is not recorded.
  pb::PartitionLocation unaudited = location;
  unaudited.set_attempt_id("0-0-0000000099");
  const std::vector<jobstate::BatchItem> forged{{0, unaudited, false}};
  auto refused = f.run(f.store->recordBatch(jobId, 0, forged, 0));
  REQUIRE(refused.isOk());
  CHECK(refused->empty());
  CHECK(f.run(f.store->outputTasks(jobId, 0))->count(0) == 0);
  // One that is not an execution of its task at all is refused outright.
  const std::vector<jobstate::BatchItem> mislabeled{{0, location, false}};
  CHECK(f.run(f.store->recordBatch(jobId, 0, mislabeled, 0)).error().code == ErrorCode::kInvalidArgument);

  // The marker goes through a connection loss before sending.
  f.faulty->injectNext(Fault::kBefore, "remove");
  REQUIRE(f.run(f.store->removeRunningMarker(jobId, task, f.faulty->sessionId())).isOk());
  CHECK(f.run(f.store->runningTasks(jobId))->empty());
  CHECK(f.faulty->injectedFaults() == 3);

  // Out of retries: the error comes back as a value.
  JobStore impatient(*f.faulty, jobstate::RetryPolicy{0, 100ms});
  const TaskId mapTask0{0, 0};
  auto third = f.run(f.store->startAttempt(jobId, mapTask0, marker, "s1-w1"));
  REQUIRE(third.isOk());
  pb::PartitionLocation task0 = location;
  task0.set_attempt_id(*third);
  const std::vector<jobstate::BatchItem> task0Batch{{0, task0, false}};
  f.faulty->injectNext(Fault::kBefore, "get");
  auto gaveUp = f.run(impatient.recordBatch(jobId, 0, task0Batch, (*f.faulty).sessionId()));
  CHECK(gaveUp.error().code == ErrorCode::kUnavailable);
  CHECK(f.run(f.store->outputTasks(jobId, 0))->count(0) == 0);
}

TEST_CASE("JobStore: malformed nodes are error values, foreign names are skipped", "[integration][jobstate]") {
  StoreFixture f;
  const std::string jobId = f.createJob();
  ZkClient& raw = **f.zk;
  // Someone else's nodes among ours, and (below) a corrupt status.
  const auto plant = [&](const std::string& path) {
    REQUIRE(f.run(raw.create(path, "w", CreateMode::kPersistent)).isOk());
  };
  plant(jobstate::runningPath(jobId) + "/not-a-task");
  plant(jobstate::partsPath(jobId, 0) + "/x");
  plant(jobstate::attemptsPath(jobId) + "/0-0-zz");
  plant(jobstate::jobsPath() + "/not a job");
  CHECK(f.run(f.store->runningTasks(jobId))->empty());
  CHECK(f.run(f.store->outputTasks(jobId, 0))->empty());
  CHECK(f.run(f.store->attemptCounts(jobId))->empty());
  CHECK(*f.run(f.store->listJobs()) == std::vector<std::string>{jobId});

  // A watch reports the corrupt status as an error value (the JM fails the job on it).
  std::mutex mutex;
  std::vector<std::string> seen;  // "missing", "error: ...", or the state's name
  auto watch = f.io.call([&] {
    return f.store->watchStatus(jobId, [&](const Result<std::optional<Versioned<pb::JobStatus>>>& status) {
      std::lock_guard lock(mutex);
      if (!status) {
        seen.push_back("error: " + status.message());
      } else if (!*status) {
        seen.push_back("missing");
      } else {
        seen.push_back(pb::JobState_Name((*status)->value.state()));
      }
    });
  });
  REQUIRE(watch.isOk());
  auto last = [&] {
    std::lock_guard lock(mutex);
    return seen.empty() ? std::string() : seen.back();
  };
  REQUIRE(harness::eventually([&] { return last() == "JOB_RUNNING"; }, 10s));

  REQUIRE(f.run(raw.set(jobstate::statusPath(jobId), std::string("\xff\xff\xff", 3), -1)).isOk());
  auto corrupt = f.run(f.store->status(jobId));
  REQUIRE_FALSE(corrupt.isOk());
  CHECK(corrupt.error().code == ErrorCode::kInternal);
  CHECK_THAT(corrupt.message(), Catch::StartsWith("malformed tellus.pb.JobStatus in"));
  REQUIRE(harness::eventually([&] { return last().rfind("error: malformed", 0) == 0; }, 10s));

  // A corrupt status can still be ended (and the watch sees the end).
  REQUIRE(f.run(f.store->endJob(jobId, pb::JOB_KILLED, "test")).isOk());
  REQUIRE(harness::eventually([&] { return last() == "JOB_KILLED"; }, 10s));
  CHECK_THAT(f.run(f.store->endJob(jobId, pb::JOB_FAILED, "again")).message(), Catch::Contains("already killed"));
  // A status write lost to a fault is reported, not retried blindly (endJob's CAS is).
  f.faulty->injectNext(Fault::kBefore, "get");
  CHECK(f.run(f.store->endJob(jobId, pb::JOB_FAILED, "x")).code() == ErrorCode::kUnavailable);
  f.io.call([&] { watch->cancel(); });
}

TEST_CASE("JobStore: a task's executions in the order they started, and who ran each", "[integration][jobstate]") {
  StoreFixture f;
  const std::string jobId = f.createJob();
  pb::RunningTask marker;
  marker.set_site("s1");
  // Three executions of map task 1 on different workers, with executions of other tasks between
  // them (task 10 shares the prefix "0-1" of its name).
  std::vector<std::string> started;
  for (const char* worker : {"s1-w1", "s2-w1", "s1-w2"}) {
    auto id = f.run(f.store->startAttempt(jobId, TaskId{0, 1}, marker, worker));
    REQUIRE(id.isOk());
    started.push_back(*id);
    REQUIRE(f.run(f.store->removeRunningMarker(jobId, TaskId{0, 1}, f.faulty->sessionId())).isOk());
    REQUIRE(f.run(f.store->startAttempt(jobId, TaskId{0, 10}, marker, "s9-w9")).isOk());
    REQUIRE(f.run(f.store->removeRunningMarker(jobId, TaskId{0, 10}, f.faulty->sessionId())).isOk());
  }
  ZkClient& raw = **f.zk;
  // A foreign node under the task's prefix is skipped.
  REQUIRE(f.run(raw.create(jobstate::attemptsPath(jobId) + "/0-1-x", "w", CreateMode::kPersistent)).isOk());
  auto attempts = f.run(f.store->taskAttempts(jobId, TaskId{0, 1}));
  REQUIRE(attempts.isOk());
  REQUIRE(attempts->size() == started.size());
  const std::vector<std::string> workers = {"s1-w1", "s2-w1", "s1-w2"};
  for (size_t i = 0; i < started.size(); ++i) {
    CHECK((*attempts)[i].id == started[i]);
    CHECK((*attempts)[i].workerId == workers[i]);
  }
  CHECK(f.run(f.store->taskAttempts(jobId, TaskId{1, 0}))->empty());
  // An execution whose data could make a path is refused, not handed on.
  REQUIRE(f.run(raw.create(jobstate::attemptsPath(jobId) + "/0-1-0000000099", "../../etc", CreateMode::kPersistent)).isOk());
  CHECK(f.run(f.store->taskAttempts(jobId, TaskId{0, 1})).error().code == ErrorCode::kInvalidArgument);
  CHECK(f.run(f.store->taskAttempts("../x", TaskId{0, 1})).error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("JobStore: a batch learns what is taken from the stage's summary; a wrong or unreadable one costs only reads",
          "[integration][jobstate][faults]") {
  StoreFixture f;
  ZkClient& raw = **f.zk;
  const pb::RunningTask marker = firstAttemptAt("s1");
  const int64_t session = f.faulty->sessionId();  // the markers' owner: each batch removes its tasks' markers
  // Starts task t of stage 0 and returns a batch recording it.
  const auto executionOf = [&](const std::string& jobId, uint32_t t) {
    const TaskId task{0, t};
    auto attemptId = f.run(f.store->startAttempt(jobId, task, marker, "s1-w1"));
    REQUIRE(attemptId.isOk());
    pb::PartitionLocation location;
    location.set_site("s1");
    location.set_worker_id("s1-w1");
    location.set_worker_address("127.0.0.1:1");
    location.add_bucket_bytes(t);
    location.set_attempt_id(*attemptId);
    return std::vector<jobstate::BatchItem>{{t, location, false}};
  };
  const auto summary = [&](const std::string& jobId) {
    auto node = f.run(raw.get(jobstate::partsPath(jobId, 0)));
    REQUIRE(node.isOk());
    auto tasks = jobstate::decodeRecordedTasks(0, node->data, "parts");
    REQUIRE(tasks.isOk());
    std::set<uint32_t> in;
    for (uint32_t t = 0; t < 8; ++t) {
      if (tasks->contains(t)) in.insert(t);
    }
    return in;
  };

  SECTION("a second writer records from the summary alone, without listing the stage's batches") {
    const std::string jobId = f.createJob();
    const auto first = executionOf(jobId, 0);
    CHECK(*f.run(f.store->recordBatch(jobId, 0, first, session)) == std::set<uint32_t>{0});
    CHECK(summary(jobId) == std::set<uint32_t>{0});
    const auto second = executionOf(jobId, 1);
    // A listing would fail once (and be retried): the fault stays pending if none is made.
    f.faulty->injectNext(Fault::kBefore, "children");
    jobstate::StageRecords fresh;  // another writer's: it has read no batch
    CHECK(*f.run(f.store->recordBatch(jobId, 0, second, session, &fresh)) == std::set<uint32_t>{1});
    CHECK(f.faulty->injectedFaults() == 0);
    CHECK(fresh.nodes.empty());
    CHECK(summary(jobId) == std::set<uint32_t>{0, 1});
    CHECK(f.run(f.store->outputTasks(jobId, 0)).error().code == ErrorCode::kUnavailable);  // the pending fault
    CHECK(*f.run(f.store->outputTasks(jobId, 0)) == std::set<uint32_t>{0, 1});
  }

  SECTION("outputs with the batches a caller read before reads only new ones, and drops removed ones") {
    const std::string jobId = f.createJob();
    REQUIRE(f.run(f.store->recordBatch(jobId, 0, executionOf(jobId, 0), session)).isOk());
    jobstate::StageRecords known;
    auto first = f.run(f.store->outputs(jobId, 0, &known));
    REQUIRE(first.isOk());
    CHECK(first->outputs.size() == 1);
    REQUIRE(known.nodes.size() == 1);
    // A read of a batch would fail: the known one is not read again (the fault stays pending).
    f.faulty->injectNext(Fault::kBefore, "get");
    auto again = f.run(f.store->outputs(jobId, 0, &known));
    REQUIRE(again.isOk());
    CHECK(f.faulty->injectedFaults() == 0);
    CHECK(again->outputs.count(0) == 1);
    CHECK(again->executions.size() == 1);
    CHECK(f.run(f.store->outputs(jobId, 0)).error().code == ErrorCode::kUnavailable);  // the pending fault, without `known`
    // A new batch is read and kept; a removed one is dropped with its outputs.
    REQUIRE(f.run(f.store->recordBatch(jobId, 0, executionOf(jobId, 1), session)).isOk());
    auto both = f.run(f.store->outputs(jobId, 0, &known));
    REQUIRE(both.isOk());
    CHECK(both->outputs.size() == 2);
    CHECK(known.nodes.size() == 2);
    auto status = f.run(f.store->status(jobId));
    auto epoch = f.run(f.store->bumpEpoch(jobId, status->stat.version, 0));
    REQUIRE(epoch.isOk());
    REQUIRE(f.run(f.store->removeOutputFenced(jobId, TaskId{0, 0}, epoch->stat.version)).isOk());
    auto after = f.run(f.store->outputs(jobId, 0, &known));
    REQUIRE(after.isOk());
    CHECK(after->outputs.count(0) == 0);
    CHECK(after->outputs.count(1) == 1);
    CHECK(*f.run(f.store->outputTasks(jobId, 0)) == std::set<uint32_t>{1});
  }

  SECTION("an execution whose marker's session expired leaves the marker at its path alone") {
    // A worker resumed after its session expired records an execution of the old session,
    // while the task's re-run (here: this session's marker) runs: the batch records the
    // output but must not remove the re-run's marker, nor may the old execution's cleanup.
    const std::string jobId = f.createJob();
    const auto batch = executionOf(jobId, 0);
    const int64_t expired = session + 1;  // not this client's session: one that is gone
    CHECK(*f.run(f.store->recordBatch(jobId, 0, batch, expired)) == std::set<uint32_t>{0});
    CHECK(*f.run(f.store->runningTasks(jobId)) == std::vector<TaskId>{{0, 0}});
    REQUIRE(f.run(f.store->removeRunningMarker(jobId, TaskId{0, 0}, expired)).isOk());
    CHECK(*f.run(f.store->runningTasks(jobId)) == std::vector<TaskId>{{0, 0}});
    // The session that wrote it removes it.
    REQUIRE(f.run(f.store->removeRunningMarker(jobId, TaskId{0, 0}, session)).isOk());
    CHECK(f.run(f.store->runningTasks(jobId))->empty());
  }

  SECTION("a summary claiming a task no batch records: the batches decide") {
    const std::string jobId = f.createJob();
    jobstate::RecordedTaskSet claimed;
    claimed.insert(0);
    REQUIRE(f.run(raw.set(jobstate::partsPath(jobId, 0), *jobstate::encodeRecordedTasks(0, claimed), -1)).isOk());
    const auto batch = executionOf(jobId, 0);
    CHECK(*f.run(f.store->recordBatch(jobId, 0, batch, session)) == std::set<uint32_t>{0});
    CHECK(*f.run(f.store->outputTasks(jobId, 0)) == std::set<uint32_t>{0});
  }

  SECTION("an unreadable summary is rebuilt from the batches") {
    const std::string jobId = f.createJob();
    const auto first = executionOf(jobId, 0);
    REQUIRE(f.run(f.store->recordBatch(jobId, 0, first, session)).isOk());
    REQUIRE(f.run(raw.set(jobstate::partsPath(jobId, 0), "garbage", -1)).isOk());
    const auto second = executionOf(jobId, 1);
    CHECK(*f.run(f.store->recordBatch(jobId, 0, second, session)) == std::set<uint32_t>{1});
    CHECK(summary(jobId) == std::set<uint32_t>{0, 1});
    // A removed record leaves the summary unknown; the next writer rebuilds it.
    auto status = f.run(f.store->status(jobId));
    auto epoch = f.run(f.store->bumpEpoch(jobId, status->stat.version, 0));
    REQUIRE(epoch.isOk());
    const TaskId task0{0, 0};
    REQUIRE(f.run(f.store->removeOutputFenced(jobId, task0, epoch->stat.version)).isOk());
    CHECK(f.run(raw.get(jobstate::partsPath(jobId, 0)))->data.empty());
    const auto again = executionOf(jobId, 0);
    CHECK(*f.run(f.store->recordBatch(jobId, 0, again, session)) == std::set<uint32_t>{0});
    CHECK(summary(jobId) == std::set<uint32_t>{0, 1});
  }
}
