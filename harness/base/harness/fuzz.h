#pragma once
// Seeded, time-bounded fuzzing for tests: the settings (seed and duration from the
// environment, printed so that a failure can be replayed) and a mutator of byte strings and
// protobuf messages. Deterministic for a seed, apart from how many rounds fit in the time.
//
//   TELLUS_FUZZ_SEED=12345      replay a run (default: a fresh seed, printed)
//   TELLUS_FUZZ_SECONDS=30      run longer than the test's small default (CI stays fast)

#include <google/protobuf/message.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tellus::harness {

struct FuzzSettings {
  std::uint64_t seed = 0;
  std::chrono::milliseconds duration{0};
};

// Reads the environment (defaults: a seed from the clock, `defaultSeconds`) and prints
// "fuzz <name>: seed S, N s (TELLUS_FUZZ_SEED=S to replay)" to stderr.
// Also silences protobuf's log (it logs every invalid UTF-8 string it parses).
FuzzSettings fuzzSettings(const std::string& name, double defaultSeconds);

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  std::mt19937_64& rng() { return rng_; }
  // Uniform in [0, n); n > 0.
  std::size_t below(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  // Up to maxBytes random bytes.
  std::string randomBytes(std::size_t maxBytes);
  // 1 to 8 random edits of `input`: bit flips, byte sets, inserts, erases, duplicated or
  // truncated ranges, interesting integers written over bytes.
  std::string mutate(std::string input);
  // Numbers that break arithmetic: 0, 1, -1 as unsigned, powers of two and their neighbours,
  // the limits of each width.
  std::uint64_t interestingNumber();
  // Strings that break names and paths: "", "../../x", "/", ".", "a/b", NUL bytes, very long,
  // non-UTF-8, YAML and shell metacharacters.
  std::string hostileString();

  // Sets random values into `message` by reflection: strings from `dictionary` (real names
  // make requests that get past the first checks), hostile strings or random bytes; numbers
  // small, interesting or random; repeated fields empty, short or (rarely) huge; nested
  // messages recursively (bounded depth).
  void randomize(google::protobuf::Message& message, const std::vector<std::string>& dictionary);
  // A few random changes of single fields of a (valid) message, same value sources.
  void mutateFields(google::protobuf::Message& message, const std::vector<std::string>& dictionary);

 private:
  void randomizeAt(google::protobuf::Message& message, const std::vector<std::string>& dictionary, int depth);
  void setField(google::protobuf::Message& message, const google::protobuf::FieldDescriptor* field,
                const std::vector<std::string>& dictionary, int depth);
  std::string stringValue(const std::vector<std::string>& dictionary);

  std::mt19937_64 rng_;
};

}  // namespace tellus::harness
