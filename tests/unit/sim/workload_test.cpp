#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include "sim/workload.h"

using namespace tellus::sim;

TEST_CASE("a trace line parses into its six fields", "[unit][sim]") {
  auto record = parseTraceLine("job7\t120\t21\t267631\t594312\t233549", 8, "t.tsv");
  REQUIRE(record.isOk());
  CHECK(record->name == "job7");
  CHECK(record->submitSeconds == 120);
  CHECK(record->gapSeconds == 21);
  CHECK(record->mapInputBytes == 267631);
  CHECK(record->shuffleBytes == 594312);
  CHECK(record->outputBytes == 233549);
  CHECK(parseTraceLine("job7\t120\t21\t1\t2\t3\r", 1, "t").isOk());  // CRLF files
}

TEST_CASE("malformed trace lines give the line number and what is wrong", "[unit][sim]") {
  auto fields = parseTraceLine("job1\t49\t49\t740773", 12, "fb.tsv");
  REQUIRE_FALSE(fields.isOk());
  CHECK_THAT(fields.message(), Catch::StartsWith("fb.tsv:12: expected 6 tab-separated fields"));
  CHECK_THAT(fields.message(), Catch::Contains("got 4"));
  auto number = parseTraceLine("job1\t49\t49\t74x0773\t1\t1", 3, "fb.tsv");
  REQUIRE_FALSE(number.isOk());
  CHECK_THAT(number.message(), Catch::StartsWith("fb.tsv:3: field 4 (map input bytes)"));
  CHECK_THAT(number.message(), Catch::Contains("'74x0773'"));
  auto negative = parseTraceLine("job1\t-4\t49\t1\t1\t1", 5, "fb.tsv");
  REQUIRE_FALSE(negative.isOk());
  CHECK_THAT(negative.message(), Catch::Contains("field 2 (submit time)"));
  CHECK_FALSE(parseTraceLine("\t1\t1\t1\t1\t1", 1, "x").isOk());
  CHECK_FALSE(parseTraceLine("job\t1\t1\t1\t1\t", 1, "x").isOk());
  CHECK_FALSE(parseTraceLine("job 1 1 1 1 1", 1, "x").isOk());  // spaces are not tabs
}

TEST_CASE("the trace reader counts lines, skips blanks and rejects time travel", "[unit][sim]") {
  std::istringstream in("a\t1\t1\t1\t1\t1\n\nb\t5\t4\t1\t1\t1\nc\t3\t1\t1\t1\t1\n");
  TraceReader reader(in, "x.tsv");
  auto a = reader.next();
  REQUIRE(a.isOk());
  CHECK((*a)->name == "a");
  auto b = reader.next();
  REQUIRE(b.isOk());
  CHECK((*b)->name == "b");
  auto c = reader.next();
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.message(), Catch::StartsWith("x.tsv:4: submit time"));

  std::istringstream bad("a\t1\t1\t1\t1\t1\nb\t2\tnope\t1\t1\t1\n");
  TraceReader badReader(bad, "y.tsv");
  REQUIRE(badReader.next().isOk());
  auto error = badReader.next();
  REQUIRE_FALSE(error.isOk());
  CHECK_THAT(error.message(), Catch::StartsWith("y.tsv:2: field 3 (gap)"));

  std::istringstream empty("");
  TraceReader emptyReader(empty, "z");
  auto end = emptyReader.next();
  REQUIRE(end.isOk());
  CHECK_FALSE(end->has_value());
}

TEST_CASE("trace bytes become tasks by block size", "[unit][sim]") {
  TraceToJobOptions options;
  options.sites = 5;
  options.stragglerShape = 0;  // exact durations
  options.taskOverheadSeconds = 0.5;
  options.processingBytesPerSecond = 64 * kMiB;
  const ZipfDistribution zipf(5, 2.0);
  Rng rng(1);
  TraceRecord record{"j", 10, 0, 300 * kMiB, 2048 * kMiB + 1, 7};
  const JobSpec job = traceRecordToJob(record, 3, options, zipf, rng);
  CHECK(job.id == 3);
  CHECK(job.arrivalSeconds == 10);
  REQUIRE(job.stages.size() == 2);
  CHECK(job.stages[0].numTasks() == 3);  // ceil(300 / 128)
  CHECK(job.stages[0].outputBytes == 2048 * kMiB + 1);
  CHECK(job.stages[1].numTasks() == 3);  // ceil(2048 MiB + 1 B / 1024 MiB)
  CHECK(job.stages[1].parents == std::vector<int32_t>{0});
  CHECK(job.stages[1].outputBytes == 7);
  CHECK(job.stages[0].taskSeconds[0] == Approx(0.5 + 100.0 / 64));
  CHECK(validateJob(job, 5).isOk());

  TraceRecord mapOnly{"m", 0, 0, 0, 0, 55};
  const JobSpec small = traceRecordToJob(mapOnly, 4, options, zipf, rng);
  REQUIRE(small.stages.size() == 1);
  CHECK(small.stages[0].numTasks() == 1);
  CHECK(small.stages[0].outputBytes == 55);
}

TEST_CASE("job sizes match Table 2 of paper 001", "[unit][sim]") {
  struct Row {
    JobSizeModel model;
    double mean, small, medium, large;
  };
  for (const Row& row : {Row{JobSizeModel::kFacebook, 364.6, 0.89, 0.08, 0.03},
                         Row{JobSizeModel::kGoogle, 86.9, 0.96, 0.02, 0.02},
                         Row{JobSizeModel::kExponential, 800, 0.171, 0.294, 0.535}}) {
    const JobSizeDistribution sizes(row.model);
    CHECK(sizes.mean() == Approx(row.mean).epsilon(0.01));
    Rng rng(42);
    const int n = 200000;
    double total = 0;
    int small = 0, medium = 0, large = 0;
    for (int i = 0; i < n; ++i) {
      const int size = sizes.sample(rng);
      REQUIRE(size >= 1);
      total += size;
      (size <= 150 ? small : size <= 500 ? medium : large)++;
    }
    CHECK(total / n == Approx(row.mean).epsilon(0.05));
    CHECK(small / double(n) == Approx(row.small).margin(0.01));
    CHECK(medium / double(n) == Approx(row.medium).margin(0.01));
    CHECK(large / double(n) == Approx(row.large).margin(0.01));
  }
}

TEST_CASE("bounded Pareto keeps its mean and bounds; Zipf weights follow 1/k^s", "[unit][sim]") {
  const BoundedPareto durations(1.259, 2.0, 30);
  CHECK(BoundedPareto::meanOf(1.259, durations.lo(), durations.hi()) == Approx(2.0));
  Rng rng(5);
  double total = 0;
  for (int i = 0; i < 400000; ++i) {
    const double x = durations.sample(rng);
    REQUIRE(x >= durations.lo());
    REQUIRE(x <= durations.hi() * (1 + 1e-12));
    total += x;
  }
  CHECK(total / 400000 == Approx(2.0).epsilon(0.02));
  const ZipfDistribution zipf(4, 2.0);
  const double norm = 1 + 1 / 4.0 + 1 / 9.0 + 1 / 16.0;
  CHECK(zipf.weights()[0] == Approx(1 / norm));
  CHECK(zipf.weights()[3] == Approx(1 / 16.0 / norm));
}

TEST_CASE("synthetic and DAG workloads are valid and reproducible", "[unit][sim]") {
  SyntheticOptions synthetic;
  synthetic.jobs = 50;
  synthetic.sites = 8;
  synthetic.totalSlots = 80;
  SyntheticWorkload a(synthetic, Rng(9)), b(synthetic, Rng(9));
  double last = 0;
  for (int i = 0; i < 50; ++i) {
    auto x = a.next();
    auto y = b.next();
    REQUIRE(x.isOk());
    REQUIRE(x->has_value());
    CHECK(validateJob(**x, 8).isOk());
    CHECK((*x)->arrivalSeconds >= last);
    last = (*x)->arrivalSeconds;
    CHECK((*x)->stages[0].blockSite == (*y)->stages[0].blockSite);
  }
  CHECK_FALSE(a.next()->has_value());

  DagOptions dag;
  dag.jobs = 30;
  dag.sites = 10;
  DagWorkload dags(dag, Rng(3));
  for (int i = 0; i < 30; ++i) {
    auto job = dags.next();
    REQUIRE(job.isOk());
    REQUIRE(job->has_value());
    CHECK(validateJob(**job, 10).isOk());
    const auto& stages = (*job)->stages;
    int computeStages = 0;
    for (const auto& stage : stages) computeStages += stage.parents.empty() ? 0 : 1;
    CHECK(computeStages + 1 >= dag.minStages);
    CHECK(computeStages + 1 <= dag.maxStages);
    // Intermediate data shrinks along the chain.
    for (const auto& stage : stages) {
      if (!stage.parents.empty()) {
        CHECK(stage.outputBytes < stage.inputBytes);
      }
    }
  }
}

TEST_CASE("clusters: Tetrium ranges, Zipf skew, uniform", "[unit][sim]") {
  ClusterOptions options;
  auto tetrium = makeCluster(options, Rng(1));
  REQUIRE(tetrium.isOk());
  REQUIRE(tetrium->size() == 50);
  for (const auto& site : *tetrium) {
    CHECK(site.slots >= 25);
    CHECK(site.slots <= 5000);
    CHECK(site.uplinkBytesPerSecond >= 100e6 / 8 * 0.999);
    CHECK(site.uplinkBytesPerSecond <= 2000e6 / 8 * 1.001);
  }
  options.shape = ClusterShape::kZipf;
  options.sites = 10;
  options.slotSkew = 1.0;
  auto zipf = makeCluster(options, Rng(1));
  REQUIRE(zipf.isOk());
  int largest = 0;
  for (const auto& site : *zipf) largest = std::max(largest, site.slots);
  CHECK(largest == 5000);
  options.sites = 0;
  CHECK_FALSE(makeCluster(options, Rng(1)).isOk());
}
