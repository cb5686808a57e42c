// The built-in record operators (everything but exec). Each reads its inputs line by line and
// writes through a BucketRouter; aggregating operators emit their keys sorted so that a
// task's output is a pure function of its input (re-runs and duplicates produce identical
// partitions with identical checksums).

#include <time.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <ostream>
#include <regex>
#include <unordered_map>

#include <fmt/format.h>

#include "data/operator_factories.h"
#include "data/record.h"

namespace tellus::data::internal {
namespace {

// Lets unordered_map<std::string, ...> be probed with a string_view without allocating.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
template <class Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

std::string inputLine(std::size_t input, std::uint64_t lineNumber) {
  return "input " + std::to_string(input) + " line " + std::to_string(lineNumber);
}

Error badInput(std::size_t input, std::uint64_t lineNumber, const std::string& message) {
  return makeError(ErrorCode::kInvalidArgument, inputLine(input, lineNumber) + ": " + message);
}

template <class Value>
std::vector<typename StringMap<Value>::const_pointer> sortedByKey(const StringMap<Value>& map) {
  std::vector<typename StringMap<Value>::const_pointer> entries;
  entries.reserve(map.size());
  for (const auto& entry : map) entries.push_back(&entry);
  std::sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
  return entries;
}

// ---- identity ----

class IdentityOperator final : public Operator {
 public:
  IdentityOperator() : Operator("identity") {}

 private:
  Status process(TaskIo& io) override {
    BucketRouter router(io.buckets);
    return forEachInputLine(io, [&](std::size_t, std::uint64_t, std::string_view line) {
      router.writeLine(line);
      return Status::ok();
    });
  }
};

// ---- grep ----

class GrepOperator final : public Operator {
 public:
  GrepOperator(std::string pattern, std::optional<std::regex> regex, bool invert)
      : Operator("grep"), pattern_(std::move(pattern)), regex_(std::move(regex)), invert_(invert) {}

 private:
  bool matches(std::string_view line) const {
    if (regex_) return std::regex_search(line.begin(), line.end(), *regex_);
    return line.find(pattern_) != std::string_view::npos;
  }

  Status process(TaskIo& io) override {
    BucketRouter router(io.buckets);
    return forEachInputLine(io, [&](std::size_t, std::uint64_t, std::string_view line) {
      if (matches(line) != invert_) router.writeLine(line);
      return Status::ok();
    });
  }

  std::string pattern_;
  std::optional<std::regex> regex_;
  bool invert_;
};

// ---- sort ----

class SortOperator final : public Operator {
 public:
  SortOperator() : Operator("sort") {}

 private:
  Status process(TaskIo& io) override {
    std::vector<std::string> lines;
    TELLUS_RETURN_IF_ERROR(forEachInputLine(io, [&](std::size_t, std::uint64_t, std::string_view line) {
      lines.emplace_back(line);
      return Status::ok();
    }));
    std::sort(lines.begin(), lines.end());
    BucketRouter router(io.buckets);
    for (const auto& line : lines) router.writeLine(line);
    return Status::ok();
  }
};

// ---- wordcount ----

void emitCounts(const StringMap<std::uint64_t>& counts, BucketRouter& router) {
  for (const auto* entry : sortedByKey(counts)) router.writeRecord(entry->first, std::to_string(entry->second));
}

void addCount(StringMap<std::uint64_t>& counts, std::string_view word, std::uint64_t count) {
  const auto it = counts.find(word);
  if (it == counts.end()) {
    counts.emplace(std::string(word), count);
  } else {
    it->second += count;
  }
}

class WordcountMapOperator final : public Operator {
 public:
  WordcountMapOperator() : Operator("wordcount.map") {}

 private:
  Status process(TaskIo& io) override {
    // Map-side combine: one record per distinct word per task instead of one per occurrence.
    StringMap<std::uint64_t> counts;
    TELLUS_RETURN_IF_ERROR(forEachInputLine(io, [&](std::size_t, std::uint64_t, std::string_view line) {
      forEachWord(line, [&](std::string_view word) { addCount(counts, word, 1); });
      return Status::ok();
    }));
    BucketRouter router(io.buckets);
    emitCounts(counts, router);
    return Status::ok();
  }
};

class WordcountReduceOperator final : public Operator {
 public:
  WordcountReduceOperator() : Operator("wordcount.reduce") {}

 private:
  Status process(TaskIo& io) override {
    StringMap<std::uint64_t> counts;
    TELLUS_RETURN_IF_ERROR(forEachInputLine(io, [&](std::size_t input, std::uint64_t lineNumber,
                                                    std::string_view line) -> Status {
      if (line.empty()) return Status::ok();
      if (line.find('\t') == std::string_view::npos) {
        return badInput(input, lineNumber, "expected 'word<TAB>count', got '" + std::string(line) + "'");
      }
      const std::string_view word = recordKey(line);
      const std::string_view text = recordValue(line);
      std::uint64_t count = 0;
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
      if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
        return badInput(input, lineNumber, "count '" + std::string(text) + "' is not a non-negative integer");
      }
      const auto it = counts.find(word);
      std::uint64_t& total = it == counts.end() ? counts.emplace(std::string(word), 0).first->second : it->second;
      if (__builtin_add_overflow(total, count, &total)) {
        return badInput(input, lineNumber, "count of '" + std::string(word) + "' overflows 64 bits");
      }
      return Status::ok();
    }));
    BucketRouter router(io.buckets);
    emitCounts(counts, router);
    return Status::ok();
  }
};

// ---- sum ----

struct NumericSum {
  std::int64_t integer = 0;
  double real = 0;
  bool allIntegers = true;
};

std::string formatDouble(double value) {
  char text[64];
  // Shortest text that reads back as the same double.
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  return ec == std::errc() ? std::string(text, end) : std::to_string(value);
}

class SumOperator final : public Operator {
 public:
  SumOperator() : Operator("sum") {}

 private:
  Status process(TaskIo& io) override {
    StringMap<NumericSum> sums;
    TELLUS_RETURN_IF_ERROR(forEachInputLine(io, [&](std::size_t input, std::uint64_t lineNumber,
                                                    std::string_view line) -> Status {
      if (line.empty()) return Status::ok();
      if (line.find('\t') == std::string_view::npos) {
        return badInput(input, lineNumber, "expected 'key<TAB>number', got '" + std::string(line) + "'");
      }
      const std::string_view key = recordKey(line);
      const std::string_view text = recordValue(line);
      const char* end = text.data() + text.size();
      auto it = sums.find(key);
      NumericSum& sum = it == sums.end() ? sums.emplace(std::string(key), NumericSum{}).first->second : it->second;

      std::int64_t integer = 0;
      const auto asInteger = std::from_chars(text.data(), end, integer);
      if (!text.empty() && asInteger.ec == std::errc() && asInteger.ptr == end) {
        sum.real += static_cast<double>(integer);
        if (sum.allIntegers && __builtin_add_overflow(sum.integer, integer, &sum.integer)) {
          return badInput(input, lineNumber, "integer sum of '" + std::string(key) + "' overflows 64 bits");
        }
        return Status::ok();
      }
      double real = 0;
      const auto asReal = std::from_chars(text.data(), end, real);
      if (text.empty() || asReal.ec != std::errc() || asReal.ptr != end) {
        return badInput(input, lineNumber, "value '" + std::string(text) + "' is not a number");
      }
      sum.real += real;
      sum.allIntegers = false;
      return Status::ok();
    }));
    BucketRouter router(io.buckets);
    for (const auto* entry : sortedByKey(sums)) {
      const NumericSum& sum = entry->second;
      router.writeRecord(entry->first, sum.allIntegers ? std::to_string(sum.integer) : formatDouble(sum.real));
    }
    return Status::ok();
  }
};

// ---- synthetic ----

constexpr std::uint64_t kMaxCpuMs = 24ULL * 3600 * 1000;
constexpr std::uint64_t kMaxOutputBytes = 1ULL << 40;
constexpr std::size_t kSyntheticLineBytes = 100;

std::uint64_t threadCpuNanos() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(now.tv_nsec);
}

// Busy-loops until this thread has used `cpuMs` of CPU time. CPU time rather than wall time:
// a synthetic task stands for a fixed amount of work, so on a contended host it must take
// longer, as a real CPU-bound task would.
void burnCpu(std::uint64_t cpuMs) {
  const std::uint64_t deadline = threadCpuNanos() + cpuMs * 1'000'000ULL;
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;
  while (threadCpuNanos() < deadline) {
    for (int i = 0; i < 10'000; ++i) state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    // Keeps the arithmetic from being optimized away.
    asm volatile("" : : "r"(state) : "memory");
  }
}

// Writes exactly `bytes` bytes of valid records: "s<n>\t<x...>\n" lines of kSyntheticLineBytes,
// the last one shorter.
void writeSyntheticBytes(std::ostream& out, std::uint64_t bytes, std::uint64_t& lineCounter) {
  std::string line;
  while (bytes > 0 && out.good()) {
    const std::size_t length = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, kSyntheticLineBytes));
    line = fmt::format("s{}\t", lineCounter++);
    if (line.size() + 1 > length) line.clear();  // too short for a key: padding only
    line.append(length - 1 - line.size(), 'x');
    line.push_back('\n');
    out.write(line.data(), static_cast<std::streamsize>(line.size()));
    bytes -= length;
  }
}

class SyntheticOperator final : public Operator {
 public:
  SyntheticOperator(std::uint64_t cpuMs, std::uint64_t outputBytes, double outputRatio)
      : Operator("synthetic"), cpuMs_(cpuMs), outputBytes_(outputBytes), outputRatio_(outputRatio) {}

 private:
  Status process(TaskIo& io) override {
    std::uint64_t inputBytes = 0;
    std::vector<char> buffer(1 << 16);
    for (std::size_t input = 0; input < io.inputs.size(); ++input) {
      std::istream& in = *io.inputs[input];
      while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
        inputBytes += static_cast<std::uint64_t>(in.gcount());
      }
      TELLUS_RETURN_IF_ERROR(checkInputStream(in, input));
    }
    burnCpu(cpuMs_);

    const double total = static_cast<double>(outputBytes_) + outputRatio_ * static_cast<double>(inputBytes);
    if (total > static_cast<double>(kMaxOutputBytes)) {
      return makeError(ErrorCode::kInvalidArgument, "output of " + formatDouble(total) +
                                                        " bytes is larger than the maximum " +
                                                        std::to_string(kMaxOutputBytes));
    }
    const auto totalBytes = static_cast<std::uint64_t>(total);
    const std::uint64_t bucketCount = io.buckets.size();
    std::uint64_t lineCounter = 0;
    for (std::uint64_t bucket = 0; bucket < bucketCount; ++bucket) {
      const std::uint64_t share = totalBytes / bucketCount + (bucket < totalBytes % bucketCount ? 1 : 0);
      writeSyntheticBytes(*io.buckets[bucket], share, lineCounter);
    }
    return Status::ok();
  }

  std::uint64_t cpuMs_;
  std::uint64_t outputBytes_;
  double outputRatio_;
};

}  // namespace

Result<std::unique_ptr<Operator>> makeIdentity(ParamReader&, const OperatorEnv&) { return std::unique_ptr<Operator>(new IdentityOperator()); }

Result<std::unique_ptr<Operator>> makeGrep(ParamReader& params, const OperatorEnv&) {
  auto pattern = params.requiredString("pattern");
  if (!pattern.isOk()) return pattern.error();
  auto useRegex = params.optionalBool("regex", false);
  if (!useRegex.isOk()) return useRegex.error();
  auto invert = params.optionalBool("invert", false);
  if (!invert.isOk()) return invert.error();
  std::optional<std::regex> regex;
  if (*useRegex) {
    // std::regex reports syntax errors only by throwing; keep that inside the library.
    try {
      regex.emplace(*pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return params.error("param pattern: invalid regex '" + *pattern + "': " + e.what());
    }
  }
  return std::unique_ptr<Operator>(new GrepOperator(*pattern, std::move(regex), *invert));
}

Result<std::unique_ptr<Operator>> makeSort(ParamReader&, const OperatorEnv&) { return std::unique_ptr<Operator>(new SortOperator()); }

Result<std::unique_ptr<Operator>> makeWordcountMap(ParamReader&, const OperatorEnv&) {
  return std::unique_ptr<Operator>(new WordcountMapOperator());
}

Result<std::unique_ptr<Operator>> makeWordcountReduce(ParamReader&, const OperatorEnv&) {
  return std::unique_ptr<Operator>(new WordcountReduceOperator());
}

Result<std::unique_ptr<Operator>> makeSum(ParamReader&, const OperatorEnv&) { return std::unique_ptr<Operator>(new SumOperator()); }

Result<std::unique_ptr<Operator>> makeSynthetic(ParamReader& params, const OperatorEnv&) {
  auto cpuMs = params.optionalUint("cpu_ms", 0, kMaxCpuMs);
  if (!cpuMs.isOk()) return cpuMs.error();
  auto outputBytes = params.optionalUint("output_bytes", 0, kMaxOutputBytes);
  if (!outputBytes.isOk()) return outputBytes.error();
  auto outputRatio = params.optionalNonNegativeDouble("output_ratio", 0);
  if (!outputRatio.isOk()) return outputRatio.error();
  return std::unique_ptr<Operator>(new SyntheticOperator(*cpuMs, *outputBytes, *outputRatio));
}

}  // namespace tellus::data::internal
