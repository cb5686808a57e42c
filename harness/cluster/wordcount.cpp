#include "harness/wordcount.h"

#include <fmt/format.h>

#include <sstream>

namespace tellus::harness {

namespace {

bool isWordByte(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

char lowered(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Parses a non-negative decimal integer that must fill `text` (at most 19 digits: no overflow).
bool parseUint(std::string_view text, uint64_t& out) {
  if (text.empty() || text.size() > 19) return false;
  out = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

}  // namespace

WordCounts countWords(std::string_view text) {
  WordCounts counts;
  std::string word;
  for (char c : text) {
    if (isWordByte(c)) {
      word += lowered(c);
    } else if (!word.empty()) {
      ++counts[word];
      word.clear();
    }
  }
  if (!word.empty()) ++counts[word];
  return counts;
}

Result<WordCounts> parseWordCounts(std::string_view text) {
  WordCounts counts;
  std::istringstream in{std::string(text)};
  size_t lineNo = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineNo;
    if (line.empty()) continue;
    auto tab = line.find('\t');
    if (tab == std::string::npos || tab == 0 || tab + 1 == line.size()) {
      return makeError(ErrorCode::kInvalidArgument,
                       "result line " + std::to_string(lineNo) + ": '" + line + "' is not word<TAB>count");
    }
    uint64_t count = 0;
    if (!parseUint(std::string_view(line).substr(tab + 1), count)) {
      return makeError(ErrorCode::kInvalidArgument, "result line " + std::to_string(lineNo) + ": count '" +
                                                        line.substr(tab + 1) + "' is not a non-negative integer");
    }
    auto [it, fresh] = counts.emplace(line.substr(0, tab), count);
    if (!fresh) {
      return makeError(ErrorCode::kInvalidArgument,
                       "result line " + std::to_string(lineNo) + ": word '" + it->first + "' appears twice");
    }
  }
  return counts;
}

std::string describeDifferences(const WordCounts& expected, const WordCounts& actual, size_t limit) {
  std::string out;
  size_t found = 0;
  auto note = [&](const std::string& word, uint64_t want, uint64_t got) {
    if (found++ < limit) out += word + ": expected " + std::to_string(want) + ", got " + std::to_string(got) + "; ";
  };
  for (const auto& [word, n] : expected) {
    auto it = actual.find(word);
    uint64_t got = it == actual.end() ? 0 : it->second;
    if (got != n) note(word, n, got);
  }
  for (const auto& [word, n] : actual) {
    if (!expected.count(word)) note(word, 0, n);
  }
  if (found > limit) out += fmt::format("({} more)", found - limit);
  return out;
}

}  // namespace tellus::harness
