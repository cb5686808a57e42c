#pragma once
// Jobs for the simulator: the data model (a DAG of stages of tasks, input data spread over
// sites), the FB-2009 SWIM trace reader, and the synthetic generators of paper 001 (SWAG,
// Table 2), multi-stage DAGs for Tetrium-style runs, and site heterogeneity. Every source is
// a stream (one job at a time) so that a run's memory does not grow with the trace length.

#include <cstddef>
#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/random.h"
#include "util/result.h"

namespace tellus::sim {

inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGB = 1e9;

struct StageSpec {
  std::vector<int32_t> parents;  // indices of earlier stages; empty = reads the job's input
  // Root stages: where task i's input block lives (site index). Empty for non-root stages,
  // whose tasks each read 1/numTasks of every parent's output, wherever it was written.
  std::vector<int32_t> blockSite;
  // Root stages, optional: whether block i is residency-local (never leaves its site, so its
  // task is never stolen; HOUTU modes). Empty: none is.
  std::vector<bool> pinned;
  std::vector<float> taskSeconds;  // compute time of each task (numTasks = its size)
  double inputBytes = 0;           // root: the stage's input; non-root: informational
  double outputBytes = 0;          // written by the stage, spread evenly over its tasks

  int32_t numTasks() const { return static_cast<int32_t>(taskSeconds.size()); }
  bool isRoot() const { return parents.empty(); }
};

struct JobSpec {
  int64_t id = 0;
  std::string name;
  double arrivalSeconds = 0;
  // HOUTU modes: the site the job is submitted at (its JM is the first primary, and it is a
  // site of the job even without input there, as tellus-master makes it). -1: the first site
  // holding input.
  int32_t submitSite = -1;
  std::vector<StageSpec> stages;  // topological order: parents have smaller indices

  int64_t totalTasks() const;
  double totalTaskSeconds() const;
};

// Checks the invariants the simulator relies on; the message names the job and stage.
Status validateJob(const JobSpec& job, int siteCount);

// A stream of jobs in non-decreasing arrival order.
class WorkloadSource {
 public:
  virtual ~WorkloadSource() = default;
  // The next job, std::nullopt at the end, or an error (e.g. a malformed trace line).
  virtual Result<std::optional<JobSpec>> next() = 0;
};

// ---- sites ---------------------------------------------------------------------------------

struct SiteSpec {
  std::string name;
  int32_t slots = 0;
  double uplinkBytesPerSecond = 0;
  double downlinkBytesPerSecond = 0;
  // HOUTU modes: hosts sharing the slots evenly ("<name>-w1" ...; with one, the host is named
  // as the site). Containers are granted as tellus-master grants them (interleaved over the
  // workers by slot index, lowest first), a task's output is stored on its container's worker
  // and is lost with it (ClusterEventSpec::loseWorker); raw input has a copy on every worker.
  int32_t workers = 1;
};

enum class ClusterShape {
  kTetrium,  // slots log-uniform in [25, 5000], bandwidth log-uniform in [100 Mbps, 2 Gbps] (§6.1),
             // independently (or from the same quantile: a big datacenter with a big pipe)
  kZipf,     // slots and bandwidth Zipf-skewed over a random site ranking (Tetrium §6.4)
  kUniform,  // every site alike (SWAG §6.1: 30 datacenters x 300 slots)
};

struct ClusterOptions {
  int sites = 50;
  ClusterShape shape = ClusterShape::kTetrium;
  int minSlots = 25, maxSlots = 5000;               // kTetrium range; kZipf: the largest site
  double minBandwidthMbps = 100, maxBandwidthMbps = 2000;
  double slotSkew = 1.0, bandwidthSkew = 1.0;       // kZipf exponents
  bool correlatedBandwidth = false;                 // kTetrium: bandwidth from the slots' quantile
  int uniformSlots = 300;                           // kUniform
  double uniformBandwidthMbps = 1000;               // kUniform
};

Result<std::vector<SiteSpec>> makeCluster(const ClusterOptions& options, Rng rng);

// ---- FB-2009 SWIM trace ------------------------------------------------------------------

struct TraceRecord {
  std::string name;
  double submitSeconds = 0;
  double gapSeconds = 0;
  double mapInputBytes = 0;
  double shuffleBytes = 0;
  double outputBytes = 0;
};

// Parses one line "name<TAB>submit<TAB>gap<TAB>input<TAB>shuffle<TAB>output". Errors read
// "<source>:<line>: <what is wrong>: '<the line>'".
Result<TraceRecord> parseTraceLine(const std::string& line, int64_t lineNumber, const std::string& sourceName);

// Reads records from a stream (blank lines are skipped; submit times must not decrease).
class TraceReader {
 public:
  TraceReader(std::istream& in, std::string sourceName) : in_(in), sourceName_(std::move(sourceName)) {}
  Result<std::optional<TraceRecord>> next();

 private:
  std::istream& in_;
  std::string sourceName_;
  int64_t lineNumber_ = 0;
  double lastSubmit_ = 0;
};

// How trace bytes become tasks (documented in docs/sim.md).
struct TraceToJobOptions {
  double blockBytes = 128 * kMiB;             // one map task per block of map input
  double reduceBytesPerTask = 1024 * kMiB;    // one reduce task per this much shuffle data
  double processingBytesPerSecond = 8 * kMiB;   // per slot: a 128 MiB block takes 16 s
  double taskOverheadSeconds = 0.5;           // launch/JVM cost of any task
  double stragglerShape = 1.259;              // Pareto multiplier (mean 1), 0 = none
  double stragglerMax = 10;                   // the multiplier's upper bound
  double dataSkew = 2.0;                      // Zipf skew of the input over sites
  double arrivalScale = 1.0;                  // multiplies submit times (< 1 = more load)
  int sites = 50;
};

// Turns trace records into jobs: map stage (+ reduce stage when shuffle > 0).
class TraceWorkload : public WorkloadSource {
 public:
  TraceWorkload(std::unique_ptr<std::istream> in, std::string sourceName, TraceToJobOptions options, Rng rng);
  static Result<std::unique_ptr<TraceWorkload>> open(const std::string& path, TraceToJobOptions options, Rng rng);
  Result<std::optional<JobSpec>> next() override;
  // Expected compute seconds of a record's tasks (for utilization targeting).
  static double expectedTaskSeconds(const TraceRecord& record, const TraceToJobOptions& options);

 private:
  std::unique_ptr<std::istream> in_;
  TraceReader reader_;
  TraceToJobOptions options_;
  Rng rng_;
  ZipfDistribution zipf_;
  int64_t nextId_ = 0;
};

// Builds the job of one record (also used by tests).
JobSpec traceRecordToJob(const TraceRecord& record, int64_t id, const TraceToJobOptions& options,
                         const ZipfDistribution& zipf, Rng& rng);

// The straggler multiplier of trace/DAG tasks: bounded Pareto with mean 1 (shape 0 = none).
BoundedPareto stragglerDistribution(double shape, double maxMultiplier);

// ---- synthetic workloads (paper 001 §6.1, Table 2) -----------------------------------------

enum class JobSizeModel { kFacebook, kGoogle, kExponential };

// Job sizes (tasks per job) matching Table 2 of paper 001: mean and the share of small
// (1-150), medium (151-500) and large (501+) jobs.
class JobSizeDistribution {
 public:
  explicit JobSizeDistribution(JobSizeModel model);
  int sample(Rng& rng) const;
  double mean() const { return mean_; }

 private:
  JobSizeModel model_;
  double largeUpper_ = 0;  // log-uniform upper bound of large jobs (solved for the mean)
  double mean_ = 0;
};

struct SyntheticOptions {
  JobSizeModel sizes = JobSizeModel::kExponential;
  int jobs = 1000;
  int sites = 30;
  double totalSlots = 9000;        // for the arrival rate
  double targetUtilization = 0.78; // Poisson rate tuned to this
  double meanTaskSeconds = 2.0;    // Pareto(β) with this mean
  double paretoShape = 1.259;
  double maxTaskOverMean = 30;     // truncation of the Pareto tail (60 s for a 2 s mean)
  double dataSkew = 2.0;           // Zipf skew of task assignment; < 0 = one site per job
};

// Single-stage jobs whose tasks are assigned to sites (no input bytes: SWAG's model).
class SyntheticWorkload : public WorkloadSource {
 public:
  SyntheticWorkload(SyntheticOptions options, Rng rng);
  Result<std::optional<JobSpec>> next() override;
  double meanInterArrivalSeconds() const { return meanGap_; }

 private:
  SyntheticOptions options_;
  Rng rng_;
  JobSizeDistribution sizes_;
  ZipfDistribution zipf_;
  BoundedPareto durations_;
  double meanGap_ = 0;
  double clock_ = 0;
  int64_t produced_ = 0;
};

// ---- multi-stage DAGs (Tetrium-style) ----------------------------------------------------

struct DagOptions {
  int jobs = 200;
  int sites = 50;
  int minStages = 2, maxStages = 16;
  double minInputBytes = 1 * kGB, maxInputBytes = 200 * kGB;  // log-uniform
  double shrinkMin = 0.2, shrinkMax = 0.9;  // output/input ratio of every stage
  double joinProbability = 0.25;            // a stage also joins a fresh input table
  double blockBytes = 128 * kMiB;
  double bytesPerLaterTask = 256 * kMiB;
  double processingBytesPerSecond = 8 * kMiB;
  double taskOverheadSeconds = 0.5;
  double stragglerShape = 1.259;
  double stragglerMax = 10;
  double dataSkew = 2.0;
  double meanInterArrivalSeconds = 10;
};

class DagWorkload : public WorkloadSource {
 public:
  DagWorkload(DagOptions options, Rng rng);
  Result<std::optional<JobSpec>> next() override;

 private:
  StageSpec rootStage(double bytes);
  const BoundedPareto* stragglerOrNull() const { return options_.stragglerShape > 0 ? &straggler_ : nullptr; }
  DagOptions options_;
  Rng rng_;
  ZipfDistribution zipf_;
  BoundedPareto straggler_;
  double clock_ = 0;
  int64_t produced_ = 0;
};

// A fixed list of jobs (tests, brute-force comparisons).
class VectorWorkload : public WorkloadSource {
 public:
  explicit VectorWorkload(std::vector<JobSpec> jobs) : jobs_(std::move(jobs)) {}
  Result<std::optional<JobSpec>> next() override;

 private:
  std::vector<JobSpec> jobs_;
  size_t next_ = 0;
};

}  // namespace tellus::sim
