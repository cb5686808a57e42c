#pragma once
// Record format of the Tellus data plane, shared by every operator and by anyone who reads a
// job's result.
//
// A partition is a sequence of text lines; each line (without its '\n') is one record.
//  - Every record written by Tellus ends with '\n'. On input, a last line without '\n' is
//    still a record (files produced by other tools often lack the final newline).
//  - Key/value operators use "key\tvalue\n": the key is the text before the FIRST tab, the
//    value is everything after it (it may contain more tabs). A line without a tab is a record
//    whose key is the whole line and whose value is empty.
//  - Bytes are opaque: no encoding is assumed, '\r' is an ordinary byte.
//
// Shuffle: a record goes to bucket fnv1a64(key) % B. FNV-1a 64 is used (not std::hash)
// because the upstream and downstream tasks of a shuffle run in different processes, on
// different machines, possibly built by different compilers: the function must be fixed.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tellus::data {

inline constexpr std::uint64_t kFnv1a64OffsetBasis = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t kFnv1a64Prime = 0x100000001b3ULL;

// FNV-1a, 64 bit, over the bytes of `bytes` (http://www.isthe.com/chongo/tech/comp/fnv/).
constexpr std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t hash = kFnv1a64OffsetBasis;
  for (char c : bytes) {
    hash ^= static_cast<std::uint8_t>(c);
    hash *= kFnv1a64Prime;
  }
  return hash;
}

// The bucket (in [0, bucketCount)) that a record with this key belongs to. bucketCount >= 1.
constexpr std::uint32_t bucketForKey(std::string_view key, std::uint32_t bucketCount) {
  return static_cast<std::uint32_t>(fnv1a64(key) % bucketCount);
}

// Key of a record line (without its '\n'): the text before the first tab, or the whole line.
std::string_view recordKey(std::string_view line);

// Value of a record line: the text after the first tab, or "" if there is no tab.
std::string_view recordValue(std::string_view line);

// Word tokenization used by wordcount.map: a word is a maximal run of ASCII letters and
// digits [A-Za-z0-9], lowercased. Every other byte (space, punctuation, apostrophe, '_',
// bytes >= 0x80 of UTF-8 text) separates words. So "Don't stop_me, Ünïcode!" gives
// ["don", "t", "stop", "me", "n", "code"].
// Calls onWord(std::string_view word) for each word; the view is valid only during the call.
// Words never span calls: feed whole lines (or any text cut at a separator).
template <class OnWord>
void forEachWord(std::string_view text, OnWord&& onWord) {
  std::string word;
  for (char c : text) {
    const bool isDigit = c >= '0' && c <= '9';
    const bool isLower = c >= 'a' && c <= 'z';
    const bool isUpper = c >= 'A' && c <= 'Z';
    if (isDigit || isLower) {
      word.push_back(c);
    } else if (isUpper) {
      word.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if (!word.empty()) {
      onWord(std::string_view(word));
      word.clear();
    }
  }
  if (!word.empty()) onWord(std::string_view(word));
}

// The words of `text`, in order (convenience over forEachWord).
std::vector<std::string> tokenizeWords(std::string_view text);

}  // namespace tellus::data
