// Operators on in-memory streams (no files, no processes: exec is in tests/integration/data).

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <sstream>

#include "data/operator.h"
#include "data/record.h"

using namespace tellus;
using namespace tellus::data;

namespace {

struct Outcome {
  Status status;
  std::vector<std::string> buckets;
};

Outcome runOperator(const std::string& name, const OperatorParams& params, const std::vector<std::string>& inputs,
                    std::uint32_t bucketCount) {
  auto op = makeOperator(name, params);
  INFO((op.isOk() ? std::string() : op.message()));
  REQUIRE(op.isOk());
  std::vector<std::unique_ptr<std::istringstream>> inputStreams;
  std::vector<std::unique_ptr<std::ostringstream>> bucketStreams;
  TaskIo io;
  for (const auto& input : inputs) {
    inputStreams.push_back(std::make_unique<std::istringstream>(input));
    io.inputs.push_back(inputStreams.back().get());
  }
  for (std::uint32_t b = 0; b < bucketCount; ++b) {
    bucketStreams.push_back(std::make_unique<std::ostringstream>());
    io.buckets.push_back(bucketStreams.back().get());
  }
  Outcome outcome{(*op)->run(io), {}};
  for (const auto& out : bucketStreams) outcome.buckets.push_back(out->str());
  return outcome;
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every line of every bucket is in the bucket its key hashes to.
void checkRouting(const std::vector<std::string>& buckets) {
  for (std::uint32_t b = 0; b < buckets.size(); ++b) {
    for (const auto& line : linesOf(buckets[b])) {
      INFO("line '" << line << "' in bucket " << b);
      CHECK(bucketForKey(recordKey(line), static_cast<std::uint32_t>(buckets.size())) == b);
    }
  }
}

std::map<std::string, std::string> recordsOf(const std::vector<std::string>& buckets) {
  std::map<std::string, std::string> records;
  for (const auto& bucket : buckets) {
    for (const auto& line : linesOf(bucket)) {
      const bool inserted = records.emplace(std::string(recordKey(line)), std::string(recordValue(line))).second;
      INFO("duplicate key in '" << line << "'");
      CHECK(inserted);
    }
  }
  return records;
}

}  // namespace

TEST_CASE("wordcount.map combines counts across all inputs of a task", "[unit][data]") {
  const auto out = runOperator("wordcount.map", {}, {"the cat\nThe dog\n", "", "dog, the end"}, 1);
  REQUIRE(out.status.isOk());
  // Sorted by word, one record per distinct word.
  CHECK(out.buckets[0] == "cat\t1\ndog\t2\nend\t1\nthe\t3\n");
}

TEST_CASE("wordcount.map partitions words by their FNV hash", "[unit][data]") {
  const auto out = runOperator("wordcount.map", {}, {"hello world tellus the hello\n"}, 4);
  REQUIRE(out.status.isOk());
  checkRouting(out.buckets);
  CHECK(out.buckets[3] == "hello\t2\nworld\t1\n");  // hello and world hash to bucket 3 of 4
  CHECK(out.buckets[2] == "tellus\t1\n");
  CHECK(out.buckets[0] == "the\t1\n");
  CHECK(out.buckets[1].empty());
}

TEST_CASE("wordcount.reduce sums per word across inputs", "[unit][data]") {
  const auto out = runOperator("wordcount.reduce", {}, {"b\t2\na\t1\n", "\nb\t5\nc\t0", "a\t10\n"}, 1);
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0] == "a\t11\nb\t7\nc\t0\n");
}

TEST_CASE("wordcount map then reduce over a shuffle gives the exact counts", "[unit][data]") {
  const std::vector<std::string> documents = {
      "It was the best of times, it was the worst of times,\n",
      "it was the age of wisdom, it was the age of foolishness,\n",
      "IT WAS the epoch of belief; it was the epoch of incredulity",
  };
  constexpr std::uint32_t kReducers = 3;
  // Two map tasks, as a stage would run them.
  const auto mapA = runOperator("wordcount.map", {}, {documents[0], documents[1]}, kReducers);
  const auto mapB = runOperator("wordcount.map", {}, {documents[2]}, kReducers);
  REQUIRE(mapA.status.isOk());
  REQUIRE(mapB.status.isOk());
  std::vector<std::string> reduced;
  for (std::uint32_t r = 0; r < kReducers; ++r) {
    const auto reduce = runOperator("wordcount.reduce", {}, {mapA.buckets[r], mapB.buckets[r]}, 1);
    REQUIRE(reduce.status.isOk());
    reduced.push_back(reduce.buckets[0]);
  }
  std::map<std::string, std::string> expected;
  std::map<std::string, int> direct;
  for (const auto& doc : documents) {
    for (const auto& word : tokenizeWords(doc)) ++direct[word];
  }
  for (const auto& [word, count] : direct) expected[word] = std::to_string(count);
  CHECK(recordsOf(reduced) == expected);
  CHECK(expected.at("it") == "6");
  CHECK(expected.at("was") == "6");
}

TEST_CASE("wordcount.reduce rejects malformed records with their position", "[unit][data]") {
  auto out = runOperator("wordcount.reduce", {}, {"a\t1\n", "b\t1\nc\tmany\n"}, 1);
  REQUIRE_FALSE(out.status.isOk());
  CHECK(out.status.code() == ErrorCode::kInvalidArgument);
  CHECK(out.status.message() == "wordcount.reduce: input 1 line 2: count 'many' is not a non-negative integer");

  out = runOperator("wordcount.reduce", {}, {"just words\n"}, 1);
  REQUIRE_FALSE(out.status.isOk());
  CHECK(out.status.message() == "wordcount.reduce: input 0 line 1: expected 'word<TAB>count', got 'just words'");

  out = runOperator("wordcount.reduce", {}, {"a\t-1\n"}, 1);
  CHECK_FALSE(out.status.isOk());
  out = runOperator("wordcount.reduce", {}, {"a\t18446744073709551615\na\t1\n"}, 1);
  REQUIRE_FALSE(out.status.isOk());
  CHECK(out.status.message() == "wordcount.reduce: input 0 line 2: count of 'a' overflows 64 bits");
}

TEST_CASE("sum adds integers exactly and switches to doubles on decimals", "[unit][data]") {
  const auto out = runOperator("sum", {}, {"x\t5\ny\t1.5\nx\t-7\n", "y\t2\nz\t9223372036854775807\n"}, 1);
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0] == "x\t-2\ny\t3.5\nz\t9223372036854775807\n");

  const auto bad = runOperator("sum", {}, {"x\t5\nx\tfive\n"}, 1);
  REQUIRE_FALSE(bad.status.isOk());
  CHECK(bad.status.message() == "sum: input 0 line 2: value 'five' is not a number");

  const auto overflow = runOperator("sum", {}, {"z\t9223372036854775807\nz\t1\n"}, 1);
  REQUIRE_FALSE(overflow.status.isOk());
  CHECK(overflow.status.message() == "sum: input 0 line 2: integer sum of 'z' overflows 64 bits");
}

TEST_CASE("grep keeps matching lines: substring, regex, inverted", "[unit][data]") {
  const std::string text = "error: disk\ninfo: ok\nERROR: net\nwarn: error soon\n";
  auto out = runOperator("grep", {{"pattern", "error"}}, {text}, 1);
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0] == "error: disk\nwarn: error soon\n");

  out = runOperator("grep", {{"pattern", "^[A-Z]+:"}, {"regex", "true"}}, {text}, 1);
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0] == "ERROR: net\n");

  out = runOperator("grep", {{"pattern", "error"}, {"invert", "true"}}, {text}, 1);
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0] == "info: ok\nERROR: net\n");
}

TEST_CASE("identity and sort keep every line, end each with a newline and route by key", "[unit][data]") {
  auto out = runOperator("identity", {}, {"b\t1\na\t2\n", "c\t3"}, 1);
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0] == "b\t1\na\t2\nc\t3\n");

  out = runOperator("sort", {}, {"b\t1\na\t2\n", "c\t3\na\t1"}, 1);
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0] == "a\t1\na\t2\nb\t1\nc\t3\n");

  std::string many;
  for (int i = 0; i < 200; ++i) many += "key" + std::to_string(i % 37) + "\tv" + std::to_string(i) + "\n";
  out = runOperator("identity", {}, {many}, 5);
  REQUIRE(out.status.isOk());
  checkRouting(out.buckets);
  std::size_t total = 0;
  for (const auto& bucket : out.buckets) total += linesOf(bucket).size();
  CHECK(total == 200);
}

TEST_CASE("synthetic writes exactly output_bytes of valid records spread over the buckets", "[unit][data]") {
  auto out = runOperator("synthetic", {{"output_bytes", "1003"}}, {}, 4);
  REQUIRE(out.status.isOk());
  REQUIRE(out.buckets.size() == 4);
  CHECK(out.buckets[0].size() == 251);
  CHECK(out.buckets[1].size() == 251);
  CHECK(out.buckets[2].size() == 251);
  CHECK(out.buckets[3].size() == 250);
  for (const auto& bucket : out.buckets) CHECK(bucket.back() == '\n');
  CHECK(linesOf(out.buckets[0]).front().substr(0, 3) == "s0\t");

  // output_ratio adds output proportional to the input size.
  out = runOperator("synthetic", {{"output_ratio", "0.5"}, {"output_bytes", "10"}}, {std::string(1000, 'a'), "bb"}, 1);
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0].size() == 10 + 501);

  out = runOperator("synthetic", {}, {"ignored\n"}, 2);
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0].empty());
  CHECK(out.buckets[1].empty());

  out = runOperator("synthetic", {{"output_bytes", "1"}}, {}, 1);
  REQUIRE(out.status.isOk());
  CHECK(out.buckets[0] == "\n");
}

TEST_CASE("operator params are validated with clear messages", "[unit][data]") {
  auto error = [](const std::string& name, const OperatorParams& params) {
    const Status status = validateOperator(name, params);
    REQUIRE_FALSE(status.isOk());
    CHECK(status.code() == ErrorCode::kInvalidArgument);
    return status.message();
  };
  CHECK(error("synthetic", {{"cpu_ms", "abc"}}) == "synthetic: param cpu_ms: expected a non-negative integer, got 'abc'");
  CHECK(error("synthetic", {{"cpu_ms", "-5"}}) == "synthetic: param cpu_ms: expected a non-negative integer, got '-5'");
  CHECK(error("synthetic", {{"cpu_ms", ""}}) == "synthetic: param cpu_ms: expected a non-negative integer, got ''");
  CHECK(error("synthetic", {{"cpu_ms", "10 "}}) == "synthetic: param cpu_ms: expected a non-negative integer, got '10 '");
  CHECK(error("synthetic", {{"cpu_ms", "99999999999999999999999"}}) ==
        "synthetic: param cpu_ms: 99999999999999999999999 is larger than the maximum 86400000");
  CHECK(error("synthetic", {{"output_ratio", "-1"}}) ==
        "synthetic: param output_ratio: expected a non-negative number, got '-1'");
  CHECK(error("synthetic", {{"output_ratio", "nan"}}) ==
        "synthetic: param output_ratio: expected a non-negative number, got 'nan'");
  CHECK(error("synthetic", {{"cpu-ms", "5"}}) ==
        "synthetic: unknown param 'cpu-ms' (accepted: cpu_ms, output_bytes, output_ratio)");
  CHECK(error("exec", {{"cmd", "cat"}, {"timeout_ms", "soon"}}) ==
        "exec: param timeout_ms: expected a non-negative integer, got 'soon'");
  CHECK(error("wordcount.map", {{"x", "1"}}) == "wordcount.map: unknown param 'x' (accepted: none)");
  CHECK(error("exec", {}) == "exec: missing required param 'cmd'");
  CHECK(error("exec", {{"cmd", ""}}) == "exec: param cmd: must not be empty");
  CHECK(error("grep", {{"pattern", "x"}, {"regex", "yes"}}) == "grep: param regex: expected 'true' or 'false', got 'yes'");
  CHECK_THAT(error("grep", {{"pattern", "(unclosed"}, {"regex", "true"}}),
             Catch::StartsWith("grep: param pattern: invalid regex '(unclosed': "));
  CHECK(error("wordcount", {}) ==
        "unknown operator 'wordcount' (known operators: exec, grep, identity, sort, sum, synthetic, wordcount.map, "
        "wordcount.reduce)");

  CHECK(validateOperator("synthetic", {{"cpu_ms", "10"}, {"output_bytes", "0"}, {"output_ratio", "1.5"}}).isOk());
  CHECK(validateOperator("exec", {{"cmd", "tr a-z A-Z"}}).isOk());
  CHECK(validateOperator("grep", {{"pattern", "(a|b)+"}, {"regex", "true"}}).isOk());
}

TEST_CASE("operatorNames lists every built-in, sorted, and each can be made", "[unit][data]") {
  const auto names = operatorNames();
  CHECK(names == std::vector<std::string>{"exec", "grep", "identity", "sort", "sum", "synthetic", "wordcount.map",
                                          "wordcount.reduce"});
  const std::map<std::string, OperatorParams> required = {{"exec", {{"cmd", "cat"}}}, {"grep", {{"pattern", "x"}}}};
  for (const auto& name : names) {
    const auto it = required.find(name);
    INFO(name);
    OperatorEnv execOn;
    execOn.exec.enabled = true;
    CHECK(makeOperator(name, it == required.end() ? OperatorParams{} : it->second, execOn).isOk());
  }
}

TEST_CASE("an operator refuses a task without output buckets or with null streams", "[unit][data]") {
  auto op = makeOperator("identity", {});
  REQUIRE(op.isOk());
  TaskIo noBuckets;
  Status status = (*op)->run(noBuckets);
  REQUIRE_FALSE(status.isOk());
  CHECK(status.message() == "identity: a task needs at least one output bucket");

  std::ostringstream out;
  TaskIo nullInput{{nullptr}, {&out}};
  status = (*op)->run(nullInput);
  REQUIRE_FALSE(status.isOk());
  CHECK(status.message() == "identity: input 0 is null");
}

TEST_CASE("a failing output stream is reported", "[unit][data]") {
  auto op = makeOperator("identity", {});
  REQUIRE(op.isOk());
  std::istringstream in("a\nb\n");
  std::ostringstream out;
  out.setstate(std::ios::badbit);  // what a full disk does to a file stream
  TaskIo io{{&in}, {&out}};
  const Status status = (*op)->run(io);
  REQUIRE_FALSE(status.isOk());
  CHECK(status.message() == "identity: writing output bucket 0 failed");
}

TEST_CASE("exec policy: disabled by default, allow-list matches whole commands", "[unit][data]") {
  config::ExecConfig exec;
  CHECK(checkExecAllowed(exec, "cat").message() == "exec is disabled at this site (exec.enabled: false in its config)");
  exec.enabled = true;
  CHECK(checkExecAllowed(exec, "anything at all").isOk());
  exec.allowed_commands = {"sort -u"};
  CHECK(checkExecAllowed(exec, "sort -u").isOk());
  CHECK(checkExecAllowed(exec, "sort -u; id").message() == "command 'sort -u; id' is not in this site's exec.allowed_commands");
  CHECK_FALSE(checkExecAllowed(exec, "sort").isOk());
  // The site's policy applies when the operator is made, not when a spec's structure is checked.
  CHECK(validateOperator("exec", {{"cmd", "id"}}).isOk());
  CHECK(makeOperator("exec", {{"cmd", "id"}}).status().message() ==
        "exec is disabled at this site (exec.enabled: false in its config)");
}

TEST_CASE("derived operators: aggregations only, plus a site's list", "[unit][data]") {
  for (const char* op : {"wordcount.map", "wordcount.reduce", "sum", "synthetic"}) CHECK(isDerivedOperator(op));
  for (const char* op : {"identity", "grep", "sort", "exec", "unknown"}) CHECK_FALSE(isDerivedOperator(op));
  CHECK(isDerivedOperator("exec", {"exec"}));
  CHECK_FALSE(isDerivedOperator("grep", {"exec"}));
}
