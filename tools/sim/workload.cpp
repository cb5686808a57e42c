#include "sim/workload.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace tellus::sim {
namespace {

Error invalid(std::string message) { return makeError(ErrorCode::kInvalidArgument, std::move(message)); }

std::vector<std::string> splitTabs(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) break;
    start = tab + 1;
  }
  return fields;
}

// A non-negative decimal number (integer or with a fraction), nothing else.
std::optional<double> parseNonNegative(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || !std::isfinite(value) || value < 0) return std::nullopt;
  return value;
}

// The compute time of a task moving `bytes` through one slot, with a straggler factor whose
// mean is 1 (Pareto, heavy-tailed like the Facebook tasks of paper 001 §6.1).
float taskSeconds(double bytes, double bytesPerSecond, double overheadSeconds, const BoundedPareto* straggler,
                  Rng& rng) {
  const double base = overheadSeconds + bytes / bytesPerSecond;
  const double factor = straggler != nullptr ? straggler->sample(rng) : 1.0;
  return static_cast<float>(base * factor);
}

// Places `blocks` input blocks over sites: a per-job random ranking of the sites, then a
// Zipf-distributed rank for every block, so each job has its own hot sites.
std::vector<int32_t> placeBlocks(int blocks, int sites, const ZipfDistribution& zipf, Rng& rng) {
  const std::vector<int> ranking = randomPermutation(sites, rng);
  std::vector<int32_t> where(static_cast<size_t>(blocks));
  for (auto& site : where) site = ranking[static_cast<size_t>(zipf.sample(rng))];
  return where;
}

int tasksFor(double bytes, double bytesPerTask) {
  int tasks = static_cast<int>(std::ceil(bytes / bytesPerTask));
  // Division rounding must not add a task for an exact multiple of the block size.
  if (tasks > 1 && (tasks - 1) * bytesPerTask >= bytes) --tasks;
  return std::max(1, tasks);
}

}  // namespace

int64_t JobSpec::totalTasks() const {
  int64_t total = 0;
  for (const auto& stage : stages) total += stage.numTasks();
  return total;
}

double JobSpec::totalTaskSeconds() const {
  double total = 0;
  for (const auto& stage : stages) {
    for (float seconds : stage.taskSeconds) total += seconds;
  }
  return total;
}

Status validateJob(const JobSpec& job, int siteCount) {
  const std::string where = "job " + std::to_string(job.id) + " (" + job.name + ")";
  if (job.stages.empty()) return invalid(where + ": has no stages");
  if (job.submitSite < -1 || job.submitSite >= siteCount) return invalid(where + ": submitted at no site of the cluster");
  if (!std::isfinite(job.arrivalSeconds) || job.arrivalSeconds < 0) {
    return invalid(where + ": arrival time must be a finite non-negative number");
  }
  for (size_t s = 0; s < job.stages.size(); ++s) {
    const StageSpec& stage = job.stages[s];
    const std::string at = where + " stage " + std::to_string(s);
    if (stage.numTasks() <= 0) return invalid(at + ": has no tasks");
    for (int32_t parent : stage.parents) {
      if (parent < 0 || static_cast<size_t>(parent) >= s) {
        return invalid(at + ": parent " + std::to_string(parent) + " is not an earlier stage");
      }
    }
    if (stage.isRoot()) {
      if (stage.blockSite.size() != stage.taskSeconds.size()) {
        return invalid(at + ": needs one input block site per task");
      }
      if (!stage.pinned.empty() && stage.pinned.size() != stage.blockSite.size()) {
        return invalid(at + ": pins none or every input block");
      }
      for (int32_t site : stage.blockSite) {
        if (site < 0 || site >= siteCount) {
          return invalid(at + ": input block at site " + std::to_string(site) + ", but there are " +
                         std::to_string(siteCount) + " sites");
        }
      }
    }
    for (float seconds : stage.taskSeconds) {
      if (!std::isfinite(seconds) || seconds < 0) return invalid(at + ": task durations must be >= 0");
    }
    if (stage.inputBytes < 0 || stage.outputBytes < 0) return invalid(at + ": byte counts must be >= 0");
  }
  return Status::ok();
}

// ---- sites ---------------------------------------------------------------------------------

Result<std::vector<SiteSpec>> makeCluster(const ClusterOptions& options, Rng rng) {
  if (options.sites < 1) return invalid("--sites must be at least 1");
  if (options.minSlots < 1 || options.maxSlots < options.minSlots) {
    return invalid("site slots need 1 <= min <= max");
  }
  if (options.minBandwidthMbps <= 0 || options.maxBandwidthMbps < options.minBandwidthMbps) {
    return invalid("site bandwidth needs 0 < min <= max");
  }
  constexpr double kBytesPerMbit = 1e6 / 8.0;
  std::vector<SiteSpec> sites(static_cast<size_t>(options.sites));
  for (size_t i = 0; i < sites.size(); ++i) sites[i].name = "site" + std::to_string(i);
  switch (options.shape) {
    case ClusterShape::kTetrium:
      for (auto& site : sites) {
        const double quantile = rng.uniform();
        const double bandwidthQuantile = options.correlatedBandwidth ? quantile : rng.uniform();
        auto logBetween = [](double lo, double hi, double q) { return std::exp(std::log(lo) + q * std::log(hi / lo)); };
        site.slots = static_cast<int32_t>(std::lround(logBetween(options.minSlots, options.maxSlots, quantile)));
        const double mbps = logBetween(options.minBandwidthMbps, options.maxBandwidthMbps, bandwidthQuantile);
        site.uplinkBytesPerSecond = site.downlinkBytesPerSecond = mbps * kBytesPerMbit;
      }
      break;
    case ClusterShape::kZipf: {
      // The largest site has maxSlots / maxBandwidth, the k-th largest 1/k^skew of it,
      // floored at the minimum; slots and bandwidth rank the sites independently.
      const std::vector<int> slotRank = randomPermutation(options.sites, rng);
      const std::vector<int> bandwidthRank = randomPermutation(options.sites, rng);
      for (size_t i = 0; i < sites.size(); ++i) {
        const double slotScale = 1.0 / std::pow(slotRank[i] + 1.0, options.slotSkew);
        const double bandwidthScale = 1.0 / std::pow(bandwidthRank[i] + 1.0, options.bandwidthSkew);
        sites[i].slots = std::max<int32_t>(options.minSlots, static_cast<int32_t>(std::lround(options.maxSlots * slotScale)));
        const double mbps = std::max(options.minBandwidthMbps, options.maxBandwidthMbps * bandwidthScale);
        sites[i].uplinkBytesPerSecond = sites[i].downlinkBytesPerSecond = mbps * kBytesPerMbit;
      }
      break;
    }
    case ClusterShape::kUniform:
      if (options.uniformSlots < 1 || options.uniformBandwidthMbps <= 0) {
        return invalid("uniform sites need slots >= 1 and bandwidth > 0");
      }
      for (auto& site : sites) {
        site.slots = options.uniformSlots;
        site.uplinkBytesPerSecond = site.downlinkBytesPerSecond = options.uniformBandwidthMbps * kBytesPerMbit;
      }
      break;
  }
  return sites;
}

// ---- FB-2009 SWIM trace ------------------------------------------------------------------

Result<TraceRecord> parseTraceLine(const std::string& rawLine, int64_t lineNumber, const std::string& sourceName) {
  std::string line = rawLine;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::string where = sourceName + ":" + std::to_string(lineNumber) + ": ";
  const std::vector<std::string> fields = splitTabs(line);
  if (fields.size() != 6) {
    return invalid(where + "expected 6 tab-separated fields (name, submit s, gap s, map input bytes, " +
                   "shuffle bytes, output bytes), got " + std::to_string(fields.size()) + ": '" + line + "'");
  }
  if (fields[0].empty()) return invalid(where + "empty job name: '" + line + "'");
  static const char* const kFieldNames[] = {"name", "submit time", "gap", "map input bytes", "shuffle bytes",
                                            "output bytes"};
  double values[6] = {};
  for (size_t i = 1; i < 6; ++i) {
    const auto value = parseNonNegative(fields[i]);
    if (!value) {
      return invalid(where + "field " + std::to_string(i + 1) + " (" + kFieldNames[i] +
                     ") must be a non-negative number, got '" + fields[i] + "'");
    }
    values[i] = *value;
  }
  return TraceRecord{fields[0], values[1], values[2], values[3], values[4], values[5]};
}

Result<std::optional<TraceRecord>> TraceReader::next() {
  std::string line;
  while (std::getline(in_, line)) {
    ++lineNumber_;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto record = parseTraceLine(line, lineNumber_, sourceName_);
    if (!record) return record.error();
    if (record->submitSeconds < lastSubmit_) {
      return invalid(sourceName_ + ":" + std::to_string(lineNumber_) + ": submit time " +
                     std::to_string(record->submitSeconds) + " is earlier than the previous line's " +
                     std::to_string(lastSubmit_) + " (the trace must be sorted by submit time)");
    }
    lastSubmit_ = record->submitSeconds;
    return std::optional<TraceRecord>(std::move(record.value()));
  }
  if (in_.bad()) return makeError(ErrorCode::kInternal, sourceName_ + ": read error");
  return std::optional<TraceRecord>();
}

BoundedPareto stragglerDistribution(double shape, double maxMultiplier) {
  return BoundedPareto(shape > 0 ? shape : 1.5, 1.0, std::max(1.000001, maxMultiplier));
}

JobSpec traceRecordToJob(const TraceRecord& record, int64_t id, const TraceToJobOptions& options,
                         const ZipfDistribution& zipf, Rng& rng) {
  const BoundedPareto distribution = stragglerDistribution(options.stragglerShape, options.stragglerMax);
  const BoundedPareto* straggler = options.stragglerShape > 0 ? &distribution : nullptr;
  JobSpec job;
  job.id = id;
  job.name = record.name;
  job.arrivalSeconds = record.submitSeconds * options.arrivalScale;
  StageSpec map;
  const int mapTasks = tasksFor(record.mapInputBytes, options.blockBytes);
  map.inputBytes = record.mapInputBytes;
  const bool hasReduce = record.shuffleBytes > 0;
  map.outputBytes = hasReduce ? record.shuffleBytes : record.outputBytes;
  map.blockSite = placeBlocks(mapTasks, options.sites, zipf, rng);
  map.taskSeconds.resize(static_cast<size_t>(mapTasks));
  const double bytesPerMap = record.mapInputBytes / mapTasks;
  for (auto& seconds : map.taskSeconds) {
    seconds = taskSeconds(bytesPerMap, options.processingBytesPerSecond, options.taskOverheadSeconds,
                          straggler, rng);
  }
  job.stages.push_back(std::move(map));
  if (hasReduce) {
    StageSpec reduce;
    reduce.parents = {0};
    const int reduceTasks = tasksFor(record.shuffleBytes, options.reduceBytesPerTask);
    reduce.inputBytes = record.shuffleBytes;
    reduce.outputBytes = record.outputBytes;
    reduce.taskSeconds.resize(static_cast<size_t>(reduceTasks));
    const double bytesPerReduce = record.shuffleBytes / reduceTasks;
    for (auto& seconds : reduce.taskSeconds) {
      seconds = taskSeconds(bytesPerReduce, options.processingBytesPerSecond, options.taskOverheadSeconds,
                            straggler, rng);
    }
    job.stages.push_back(std::move(reduce));
  }
  return job;
}

double TraceWorkload::expectedTaskSeconds(const TraceRecord& record, const TraceToJobOptions& options) {
  const int maps = tasksFor(record.mapInputBytes, options.blockBytes);
  double total = maps * options.taskOverheadSeconds + record.mapInputBytes / options.processingBytesPerSecond;
  if (record.shuffleBytes > 0) {
    const int reduces = tasksFor(record.shuffleBytes, options.reduceBytesPerTask);
    total += reduces * options.taskOverheadSeconds + record.shuffleBytes / options.processingBytesPerSecond;
  }
  return total;
}

TraceWorkload::TraceWorkload(std::unique_ptr<std::istream> in, std::string sourceName, TraceToJobOptions options,
                             Rng rng)
    : in_(std::move(in)),
      reader_(*in_, std::move(sourceName)),
      options_(options),
      rng_(rng),
      zipf_(options.sites, options.dataSkew) {}

Result<std::unique_ptr<TraceWorkload>> TraceWorkload::open(const std::string& path, TraceToJobOptions options,
                                                            Rng rng) {
  auto file = std::make_unique<std::ifstream>(path);
  if (!*file) return makeError(ErrorCode::kNotFound, "cannot open trace '" + path + "'");
  return std::make_unique<TraceWorkload>(std::move(file), path, options, rng);
}

Result<std::optional<JobSpec>> TraceWorkload::next() {
  auto record = reader_.next();
  if (!record) return record.error();
  if (!record->has_value()) return std::optional<JobSpec>();
  return std::optional<JobSpec>(traceRecordToJob(**record, nextId_++, options_, zipf_, rng_));
}

// ---- synthetic workloads -----------------------------------------------------------------

namespace {

struct SizeMix {
  double small, medium, large, mean;
};

SizeMix mixOf(JobSizeModel model) {
  switch (model) {
    case JobSizeModel::kFacebook: return {0.89, 0.08, 0.03, 364.6};
    case JobSizeModel::kGoogle: return {0.96, 0.02, 0.02, 86.9};
    case JobSizeModel::kExponential: return {0, 0, 0, 800};
  }
  return {0, 0, 0, 0};
}

// Mean of floor(X) for X log-uniform on [lo, hi).
double meanFloorLogUniform(double lo, double hi) {
  const double span = std::log(hi / lo);
  double mean = 0;
  for (double k = std::floor(lo); k < hi; k += 1) {
    const double a = std::max(k, lo), b = std::min(k + 1, hi);
    if (b > a) mean += k * std::log(b / a) / span;
  }
  return mean;
}

constexpr double kSmallLo = 1, kSmallHi = 151, kMediumLo = 151, kMediumHi = 500, kLargeLo = 501;

}  // namespace

JobSizeDistribution::JobSizeDistribution(JobSizeModel model) : model_(model) {
  const SizeMix mix = mixOf(model);
  if (model == JobSizeModel::kExponential) {
    mean_ = mix.mean;
    return;
  }
  const double smallMean = meanFloorLogUniform(kSmallLo, kSmallHi);
  const double mediumMean = (kMediumLo + kMediumHi) / 2;
  const double largeMean = (mix.mean - mix.small * smallMean - mix.medium * mediumMean) / mix.large;
  // Continuous approximation for the bisection, then the exact floor mean is reported.
  double lo = kLargeLo + 1, hi = 1e7;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    const double m = (mid - kLargeLo) / std::log(mid / kLargeLo) - 0.5;
    (m < largeMean ? lo : hi) = mid;
  }
  largeUpper_ = (lo + hi) / 2;
  mean_ = mix.small * smallMean + mix.medium * mediumMean + mix.large * ((largeUpper_ - kLargeLo) / std::log(largeUpper_ / kLargeLo) - 0.5);
}

int JobSizeDistribution::sample(Rng& rng) const {
  if (model_ == JobSizeModel::kExponential) {
    return std::max(1, static_cast<int>(std::ceil(rng.exponential(mean_))));
  }
  const SizeMix mix = mixOf(model_);
  const double u = rng.uniform();
  if (u < mix.small) return static_cast<int>(std::floor(rng.logUniform(kSmallLo, kSmallHi)));
  if (u < mix.small + mix.medium) {
    return static_cast<int>(kMediumLo + rng.below(static_cast<uint64_t>(kMediumHi - kMediumLo + 1)));
  }
  return static_cast<int>(std::floor(rng.logUniform(kLargeLo, largeUpper_)));
}

SyntheticWorkload::SyntheticWorkload(SyntheticOptions options, Rng rng)
    : options_(options),
      rng_(rng),
      sizes_(options.sizes),
      zipf_(options.sites, std::max(0.0, options.dataSkew)),
      durations_(options.paretoShape, options.meanTaskSeconds, options.maxTaskOverMean) {
  meanGap_ = sizes_.mean() * options_.meanTaskSeconds / (options_.targetUtilization * options_.totalSlots);
}

Result<std::optional<JobSpec>> SyntheticWorkload::next() {
  if (produced_ >= options_.jobs) return std::optional<JobSpec>();
  JobSpec job;
  job.id = produced_;
  job.name = "job" + std::to_string(produced_);
  ++produced_;
  clock_ += rng_.exponential(meanGap_);
  job.arrivalSeconds = clock_;
  StageSpec stage;
  const int tasks = sizes_.sample(rng_);
  if (options_.dataSkew < 0) {
    stage.blockSite.assign(static_cast<size_t>(tasks), static_cast<int32_t>(rng_.below(static_cast<uint64_t>(options_.sites))));
  } else {
    stage.blockSite = placeBlocks(tasks, options_.sites, zipf_, rng_);
  }
  stage.taskSeconds.resize(static_cast<size_t>(tasks));
  for (auto& seconds : stage.taskSeconds) {
    seconds = static_cast<float>(durations_.sample(rng_));
  }
  job.stages.push_back(std::move(stage));
  return std::optional<JobSpec>(std::move(job));
}

// ---- multi-stage DAGs --------------------------------------------------------------------

DagWorkload::DagWorkload(DagOptions options, Rng rng)
    : options_(options),
      rng_(rng),
      zipf_(options.sites, options.dataSkew),
      straggler_(stragglerDistribution(options.stragglerShape, options.stragglerMax)) {}

StageSpec DagWorkload::rootStage(double bytes) {
  StageSpec stage;
  const int tasks = tasksFor(bytes, options_.blockBytes);
  stage.inputBytes = bytes;
  stage.blockSite = placeBlocks(tasks, options_.sites, zipf_, rng_);
  stage.taskSeconds.resize(static_cast<size_t>(tasks));
  for (auto& seconds : stage.taskSeconds) {
    seconds = taskSeconds(bytes / tasks, options_.processingBytesPerSecond, options_.taskOverheadSeconds,
                          stragglerOrNull(), rng_);
  }
  return stage;
}

Result<std::optional<JobSpec>> DagWorkload::next() {
  if (produced_ >= options_.jobs) return std::optional<JobSpec>();
  JobSpec job;
  job.id = produced_;
  job.name = "dag" + std::to_string(produced_);
  ++produced_;
  clock_ += rng_.exponential(options_.meanInterArrivalSeconds);
  job.arrivalSeconds = clock_;
  const int computeStages = options_.minStages +
      static_cast<int>(rng_.below(static_cast<uint64_t>(options_.maxStages - options_.minStages + 1)));
  const double inputBytes = rng_.logUniform(options_.minInputBytes, options_.maxInputBytes);
  job.stages.push_back(rootStage(inputBytes));
  job.stages.back().outputBytes = inputBytes * rng_.uniform(options_.shrinkMin, options_.shrinkMax);
  // Every later stage reads the previous one (a shuffle) and sometimes joins a fresh table,
  // whose scan stage is inserted just before it; intermediate data shrinks stage by stage.
  for (int k = 1; k < computeStages; ++k) {
    std::vector<int32_t> parents = {static_cast<int32_t>(job.stages.size() - 1)};
    if (rng_.uniform() < options_.joinProbability) {
      const double tableBytes = inputBytes * rng_.uniform(0.05, 0.5);
      job.stages.push_back(rootStage(tableBytes));
      job.stages.back().outputBytes = tableBytes * rng_.uniform(options_.shrinkMin, options_.shrinkMax);
      parents.push_back(static_cast<int32_t>(job.stages.size() - 1));
    }
    double stageInput = 0;
    for (int32_t parent : parents) stageInput += job.stages[static_cast<size_t>(parent)].outputBytes;
    StageSpec stage;
    stage.parents = parents;
    stage.inputBytes = stageInput;
    const int tasks = tasksFor(stageInput, options_.bytesPerLaterTask);
    stage.taskSeconds.resize(static_cast<size_t>(tasks));
    for (auto& seconds : stage.taskSeconds) {
      seconds = taskSeconds(stageInput / tasks, options_.processingBytesPerSecond, options_.taskOverheadSeconds,
                            stragglerOrNull(), rng_);
    }
    stage.outputBytes = stageInput * rng_.uniform(options_.shrinkMin, options_.shrinkMax);
    job.stages.push_back(std::move(stage));
  }
  return std::optional<JobSpec>(std::move(job));
}

Result<std::optional<JobSpec>> VectorWorkload::next() {
  if (next_ >= jobs_.size()) return std::optional<JobSpec>();
  return std::optional<JobSpec>(std::move(jobs_[next_++]));
}

}  // namespace tellus::sim
