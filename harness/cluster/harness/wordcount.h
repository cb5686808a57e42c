#pragma once
// Word count checks shared by the integration tests and benchmarks that run word count jobs:
// an independent counter (what the daemons must compute), a parser of their result and a
// short description of how two counts differ. One definition, so every test checks results
// against the same rule (docs/jobs.md): a word is a maximal run of ASCII letters and digits,
// lowercased; every other byte, including non-ASCII UTF-8 bytes, separates words.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tellus::harness {

using WordCounts = std::map<std::string, uint64_t>;

// Word counts of `text`, computed here independently of the daemons.
WordCounts countWords(std::string_view text);

// Parses a word count result ("word\tcount" per line; empty lines are skipped). Errors
// (kInvalidArgument) name the offending line, including a word that appears twice (every word
// must come from exactly one reduce task).
Result<WordCounts> parseWordCounts(std::string_view text);

// "word: expected a, got b; ..." for the first `limit` differences, words missing from either
// side included (for failure messages). Empty when the counts are equal.
std::string describeDifferences(const WordCounts& expected, const WordCounts& actual, size_t limit = 8);

}  // namespace tellus::harness
