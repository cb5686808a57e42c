#include "monitor/proc_parse.h"

#include <array>
#include <charconv>
#include <vector>

namespace tellus::monitor {
namespace {

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && isSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && isSpace(text.back())) text.remove_suffix(1);
  return text;
}

// Whitespace-separated tokens of `text`.
std::vector<std::string_view> splitFields(std::string_view text) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && isSpace(text[i])) ++i;
    std::size_t start = i;
    while (i < text.size() && !isSpace(text[i])) ++i;
    if (i > start) fields.push_back(text.substr(start, i - start));
  }
  return fields;
}

// The whole token must be a number of type T (no sign for unsigned types, no trailing junk).
template <class T>
Result<T> parseNumber(std::string_view token, std::string_view what) {
  T value{};
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc() || end != token.data() + token.size() || token.empty()) {
    return makeError(ErrorCode::kInvalidArgument,
                     std::string(what) + " is not a valid number: '" + std::string(token) + "'");
  }
  return value;
}

// Fields that the kernel prints as signed (%ld) but that are never negative for the values we
// read; a negative one means the content is not what we think it is.
Result<std::uint64_t> parseNonNegative(std::string_view token, std::string_view what) {
  auto value = parseNumber<std::int64_t>(token, what);
  if (!value) return value.error();
  if (*value < 0) {
    return makeError(ErrorCode::kInvalidArgument,
                     std::string(what) + " is negative: " + std::string(token));
  }
  return static_cast<std::uint64_t>(*value);
}

}  // namespace

Result<PidStat> parsePidStat(std::string_view content) {
  const std::string context = "/proc/[pid]/stat";
  const std::string prefix = context + ": ";
  auto open = content.find('(');
  if (open == std::string_view::npos) {
    return makeError(ErrorCode::kInvalidArgument, prefix + "no '(' opening the command name");
  }
  // The command name is arbitrary bytes chosen by the process (prctl PR_SET_NAME), so only
  // the last ')' reliably ends it: nothing after it can contain one.
  auto close = content.rfind(')');
  if (close == std::string_view::npos || close < open) {
    return makeError(ErrorCode::kInvalidArgument, prefix + "no ')' closing the command name");
  }

  PidStat stat;
  auto pidToken = trim(content.substr(0, open));
  auto pid = parseNumber<pid_t>(pidToken, "pid (field 1)");
  if (!pid) return pid.error().prepend(context);
  if (*pid <= 0) {
    return makeError(ErrorCode::kInvalidArgument, prefix + "pid is not positive: " + std::string(pidToken));
  }
  stat.pid = *pid;
  stat.comm = std::string(content.substr(open + 1, close - open - 1));

  // fields[0] is field 3 (state) of proc(5); field N is fields[N - 3].
  auto fields = splitFields(content.substr(close + 1));
  constexpr std::size_t kLastNeededField = 24;  // rss
  constexpr std::size_t kFirstFieldAfterComm = 3;
  if (fields.size() < kLastNeededField - kFirstFieldAfterComm + 1) {
    return makeError(ErrorCode::kInvalidArgument,
                     prefix + "truncated: " + std::to_string(fields.size() + 2) +
                         " fields, need at least " + std::to_string(kLastNeededField));
  }
  auto field = [&](std::size_t number) { return fields[number - kFirstFieldAfterComm]; };

  if (field(3).size() != 1) {
    return makeError(ErrorCode::kInvalidArgument,
                     prefix + "state (field 3) is not one character: '" + std::string(field(3)) + "'");
  }
  stat.state = field(3).front();

  // Fills `out` from field `number` (proc(5) numbering, which the error message names).
  auto read = [&](auto& out, auto parser, std::size_t number, const char* name) -> Status {
    auto parsed = parser(field(number), std::string(name) + " (field " + std::to_string(number) + ")");
    if (!parsed) return parsed.error().prepend(context);
    out = *parsed;
    return Status::ok();
  };
  TELLUS_RETURN_IF_ERROR(read(stat.ppid, parseNumber<pid_t>, 4, "ppid"));
  TELLUS_RETURN_IF_ERROR(read(stat.pgrp, parseNumber<pid_t>, 5, "pgrp"));
  TELLUS_RETURN_IF_ERROR(read(stat.utimeTicks, parseNumber<std::uint64_t>, 14, "utime"));
  TELLUS_RETURN_IF_ERROR(read(stat.stimeTicks, parseNumber<std::uint64_t>, 15, "stime"));
  TELLUS_RETURN_IF_ERROR(read(stat.cutimeTicks, parseNonNegative, 16, "cutime"));
  TELLUS_RETURN_IF_ERROR(read(stat.cstimeTicks, parseNonNegative, 17, "cstime"));
  TELLUS_RETURN_IF_ERROR(read(stat.numThreads, parseNumber<std::int64_t>, 20, "num_threads"));
  TELLUS_RETURN_IF_ERROR(read(stat.startTimeTicks, parseNumber<std::uint64_t>, 22, "starttime"));
  TELLUS_RETURN_IF_ERROR(read(stat.rssPages, parseNumber<std::int64_t>, 24, "rss"));

  if (stat.ppid < 0) {
    return makeError(ErrorCode::kInvalidArgument, prefix + "ppid is negative: " + std::to_string(stat.ppid));
  }
  // A zombie reports 0 threads; anything negative is garbage.
  if (stat.numThreads < 0) {
    return makeError(ErrorCode::kInvalidArgument,
                     prefix + "num_threads is negative: " + std::to_string(stat.numThreads));
  }
  // rss can transiently read as a small negative number while per-CPU counters are being
  // folded (mm/rss accounting is approximate); a negative value means "nothing resident".
  if (stat.rssPages < 0) stat.rssPages = 0;
  return stat;
}

Result<std::uint64_t> parseStatusVmRssKb(std::string_view content) {
  const std::string prefix = "/proc/[pid]/status";
  constexpr std::string_view kKey = "VmRSS:";
  std::size_t lineStart = 0;
  while (lineStart < content.size()) {
    auto lineEnd = content.find('\n', lineStart);
    if (lineEnd == std::string_view::npos) lineEnd = content.size();
    auto line = content.substr(lineStart, lineEnd - lineStart);
    lineStart = lineEnd + 1;
    if (!line.starts_with(kKey)) continue;

    auto fields = splitFields(line.substr(kKey.size()));
    if (fields.size() != 2 || fields[1] != "kB") {
      return makeError(ErrorCode::kInvalidArgument,
                       prefix + ": VmRSS line is not '<number> kB': '" + std::string(line) + "'");
    }
    auto kb = parseNumber<std::uint64_t>(fields[0], "VmRSS");
    if (!kb) return kb.error().prepend(prefix);
    return *kb;
  }
  return makeError(ErrorCode::kNotFound, prefix + ": no VmRSS line (kernel thread or zombie)");
}

Result<HostCpuTicks> parseHostCpuLine(std::string_view procStatContent) {
  const std::string prefix = "/proc/stat";
  constexpr std::string_view kKey = "cpu ";  // "cpu0 " etc. are the per-CPU lines
  std::size_t lineStart = 0;
  while (lineStart < procStatContent.size()) {
    auto lineEnd = procStatContent.find('\n', lineStart);
    if (lineEnd == std::string_view::npos) lineEnd = procStatContent.size();
    auto line = procStatContent.substr(lineStart, lineEnd - lineStart);
    lineStart = lineEnd + 1;
    if (!line.starts_with(kKey)) continue;

    auto fields = splitFields(line.substr(kKey.size()));
    constexpr std::size_t kMinFields = 4;  // user nice system idle
    if (fields.size() < kMinFields) {
      return makeError(ErrorCode::kInvalidArgument,
                       prefix + ": cpu line has " + std::to_string(fields.size()) +
                           " fields, need at least 4: '" + std::string(line) + "'");
    }
    constexpr std::array<const char*, 8> kNames = {"user", "nice",    "system", "idle",
                                                   "iowait", "irq", "softirq", "steal"};
    std::array<std::uint64_t, 8> values{};
    for (std::size_t i = 0; i < kNames.size() && i < fields.size(); ++i) {
      auto value = parseNumber<std::uint64_t>(fields[i], std::string("cpu ") + kNames[i]);
      if (!value) return value.error().prepend(prefix);
      values[i] = *value;
    }
    return HostCpuTicks{values[0], values[1], values[2], values[3],
                        values[4], values[5], values[6], values[7]};
  }
  return makeError(ErrorCode::kInvalidArgument, prefix + ": no aggregate 'cpu ' line");
}

double cpuCoresBetween(std::uint64_t prevTicks, std::uint64_t nextTicks, double wallSeconds,
                       long ticksPerSecond) {
  if (!(wallSeconds > 0.0) || ticksPerSecond <= 0 || nextTicks < prevTicks) return 0.0;
  double cpuSeconds = static_cast<double>(nextTicks - prevTicks) / static_cast<double>(ticksPerSecond);
  return cpuSeconds / wallSeconds;
}

}  // namespace tellus::monitor
