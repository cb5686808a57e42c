#include "data/record.h"

namespace tellus::data {

std::string_view recordKey(std::string_view line) {
  const auto tab = line.find('\t');
  return tab == std::string_view::npos ? line : line.substr(0, tab);
}

std::string_view recordValue(std::string_view line) {
  const auto tab = line.find('\t');
  return tab == std::string_view::npos ? std::string_view() : line.substr(tab + 1);
}

std::vector<std::string> tokenizeWords(std::string_view text) {
  std::vector<std::string> words;
  forEachWord(text, [&](std::string_view word) { words.emplace_back(word); });
  return words;
}

}  // namespace tellus::data
