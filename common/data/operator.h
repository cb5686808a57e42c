#pragma once
// Operators: the work a task does on its input partitions. See data/record.h for the record
// format and the shuffle hash.
//
// Built-in operators (params are strings; every bad or unknown param is an error):
//   identity           copy every input line; routed to buckets by key.
//   grep               pattern=<text> (required), regex=false|true (std::regex ECMAScript,
//                      searched anywhere in the line), invert=false|true. Matching lines,
//                      routed by key.
//   sort               all input lines sorted bytewise (in memory); each bucket is sorted.
//   wordcount.map      words of the input (see tokenizeWords), combined per task, emitted as
//                      "word\tcount" sorted by word, routed by word.
//   wordcount.reduce   "word\tcount" records from all inputs, summed per word, emitted sorted
//                      by word, routed by word.
//   sum                "key\tnumber" records summed per key (integers stay integers; any
//                      decimal value makes that key's sum a double), sorted by key.
//   synthetic          cpu_ms=<n> CPU time to burn, output_bytes=<n> bytes to write spread
//                      evenly over the buckets, output_ratio=<x> more output bytes per input
//                      byte (output = output_bytes + x * input bytes). Reads all inputs.
//   exec               cmd=<shell command> run with /bin/sh -c; the inputs, concatenated in
//                      order, are its stdin; its stdout lines are the output, routed by key.
//                      timeout_ms=<n> (default 0: none) kills it after that long. A non-zero
//                      exit is an error with the exit status and the last lines of stderr.
//                      Confined by the site's ExecConfig (OperatorEnv): refused unless enabled
//                      (and allowed); runs as run_as_user with rlimits in a private directory,
//                      with only PATH, HOME and TMPDIR in its environment.
// The key/value aggregators (wordcount.reduce, sum) skip empty lines.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <istream>
#include <ostream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "util/result.h"

namespace tellus::data {

using OperatorParams = std::map<std::string, std::string>;

// What the site lets operators do. Default: exec disabled.
struct OperatorEnv {
  config::ExecConfig exec;
  // Where an operator writes diagnostics for the task's log: the executor's stderr, which its
  // worker keeps per execution for `tellus logs`. nullptr: nowhere. exec copies its command's
  // stderr here (the first kMaxForwardedStderrBytes).
  std::ostream* log = nullptr;
};
inline constexpr std::uint64_t kMaxForwardedStderrBytes = std::uint64_t{16} << 20;

// What a task reads and writes. The streams are owned by the caller and outlive run().
struct TaskIo {
  // Input partitions in order; an operator reads each one to its end.
  std::vector<std::istream*> inputs;
  // Output buckets: buckets.size() == B >= 1, the downstream stage's task count (1 for a
  // forward edge or the final stage).
  std::vector<std::ostream*> buckets;
};

class Operator {
 public:
  explicit Operator(std::string name) : name_(std::move(name)) {}
  virtual ~Operator() = default;
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  const std::string& name() const { return name_; }

  // Reads all of io.inputs and writes records to io.buckets, then flushes the buckets. Errors
  // start with the operator name and name the input/line or the command at fault; the
  // buckets' contents are then undefined and must be discarded. An io without buckets or with
  // a null stream is a kInvalidArgument error.
  Status run(TaskIo& io);

 private:
  // The operator's work; run() has checked io and prefixes errors with the name.
  virtual Status process(TaskIo& io) = 0;

  std::string name_;
};

// A built-in operator configured by params. Unknown names and missing, malformed or unknown
// params are kInvalidArgument errors such as
// "synthetic: param cpu_ms: expected a non-negative integer, got 'abc'".
// `env` is the site's policy (exec is refused unless env.exec enables it).
Result<std::unique_ptr<Operator>> makeOperator(const std::string& name, const OperatorParams& params,
                                               const OperatorEnv& env = {});

// The same checks as makeOperator without keeping the operator, and without any site's policy
// (exec is checked against sites with checkExecAllowed): for validating a job spec's structure.
// Has no side effects.
Status validateOperator(const std::string& name, const OperatorParams& params);

// Whether a site's exec policy lets the command `cmd` run: kInvalidArgument with a one-line
// reason ("exec is disabled at this site ..."), or ok.
Status checkExecAllowed(const config::ExecConfig& exec, const std::string& cmd);

// Whether this host can confine exec commands as `exec` says (run_as_user exists, is not root,
// and the process can switch to it): a daemon's start-up check, so that a site enabling exec
// with an impossible user fails at start rather than at every task.
Status checkExecConfinement(const config::ExecConfig& exec);

// Removes the private directories that exec commands run by process `pid` left in
// `workDir` (each is named after the process that made it): what a process killed before its
// cleanup ran left behind. Call only while `pid` cannot name another process (before it is
// reaped). Returns how many were removed.
size_t removeExecDirsOf(const std::filesystem::path& workDir, pid_t pid);

// Names of the built-in operators, sorted.
std::vector<std::string> operatorNames();

// Residency (docs/jobs.md): a derived operator's output is an aggregate of its input and may
// leave the site of pinned data it read; every other operator may copy raw records, so its
// output stays pinned. Built-in derived: wordcount.map, wordcount.reduce, sum, synthetic.
// `extraDerived` are a site's configured additions.
bool isDerivedOperator(const std::string& name, const std::vector<std::string>& extraDerived = {});

// ---- Helpers for operator implementations ----

// Writes records to the buckets of a TaskIo: with B buckets a record goes to
// bucketForKey(key, B); every record gets its '\n'.
class BucketRouter {
 public:
  explicit BucketRouter(const std::vector<std::ostream*>& buckets);

  // A whole record line (without '\n'), routed by recordKey(line).
  void writeLine(std::string_view line);
  // "key\tvalue\n", routed by key.
  void writeRecord(std::string_view key, std::string_view value);
  std::uint32_t bucketCount() const { return static_cast<std::uint32_t>(buckets_.size()); }
  // False once any bucket stream has failed (e.g. disk full).
  bool healthy() const;
  // Flushes every bucket; an error names the first bucket that failed.
  Status finish();

 private:
  std::ostream& bucketFor(std::string_view key);

  std::vector<std::ostream*> buckets_;
};

// Calls onLine(inputIndex, lineNumber (1-based), line-without-'\n') for every line of every
// input in order; stops at the first error onLine returns. A stream read error (badbit) is an
// error naming the input.
template <class OnLine>
Status forEachInputLine(const TaskIo& io, OnLine&& onLine);

// Error if the stream hit a read error (badbit): "input 2: read error".
Status checkInputStream(const std::istream& in, std::size_t inputIndex);

template <class OnLine>
Status forEachInputLine(const TaskIo& io, OnLine&& onLine) {
  std::string line;
  for (std::size_t input = 0; input < io.inputs.size(); ++input) {
    std::istream& in = *io.inputs[input];
    std::uint64_t lineNumber = 0;
    while (std::getline(in, line)) {
      ++lineNumber;
      TELLUS_RETURN_IF_ERROR(onLine(input, lineNumber, std::string_view(line)));
    }
    TELLUS_RETURN_IF_ERROR(checkInputStream(in, input));
  }
  return Status::ok();
}

}  // namespace tellus::data
