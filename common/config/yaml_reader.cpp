#include "config/yaml_reader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <type_traits>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <sstream>

namespace tellus::config {

namespace detail {

struct YamlEntry {
  std::string key;
  YAML::Node value;
  int keyLine = 1;
  bool known = false;  // read (or asked for) by the parser: not an unknown field
};

struct YamlMapState {
  std::string path;
  int line = 1;
  // False for the stand-in returned when a required map is missing or is not a map: an error
  // is already recorded, so reads from it only return fallbacks.
  bool real = false;
  std::vector<YamlEntry> entries;
  std::vector<std::string> queried;  // every key asked for: candidates for "did you mean"
};

struct YamlDocumentState {
  std::string file;
  std::optional<Error> firstError;
  // Every map opened, by path, in opening order: finish() checks them all for unknown fields,
  // and opening the same map twice must share the record of which fields are known.
  std::vector<std::shared_ptr<YamlMapState>> maps;
  std::map<std::string, std::shared_ptr<YamlMapState>> mapsByPath;

  void report(int line, const std::string& field, const std::string& what) {
    if (firstError) return;
    std::string message = file + ":" + std::to_string(line) + ": ";
    if (!field.empty()) message += field + ": ";
    message += what;
    firstError = makeError(ErrorCode::kInvalidArgument, std::move(message));
  }
};

}  // namespace detail

namespace {

int lineOf(const YAML::Node& node, int fallback) {
  const YAML::Mark mark = node.Mark();
  return mark.is_null() || mark.line < 0 ? fallback : mark.line + 1;
}

std::string joinPath(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// Optimal string alignment distance, for "did you mean" on unknown fields.
std::size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

template <class T>
std::string formatNumber(T value) {
  return fmt::format("{}", value);
}

// "a positive integer", "an integer in [1, 65535]", "a non-negative number", ...
template <class T>
std::string expectedNumber(const Bounds<T>& bounds) {
  constexpr bool kInteger = std::is_integral_v<T>;
  const std::string noun = kInteger ? "integer" : "number";
  const bool noMin = bounds.min == std::numeric_limits<T>::lowest();
  const bool noMax = bounds.max == std::numeric_limits<T>::max();
  // Checked first: for unsigned types [0, max] is also the whole range of the type.
  if (noMax && bounds.min == T(0)) return "a non-negative " + noun;
  if (noMin && noMax) return std::string(kInteger ? "an " : "a ") + noun;
  if (noMax && kInteger && bounds.min == T(1)) return "a positive " + noun;
  if (noMax) return std::string(kInteger ? "an " : "a ") + noun + " >= " + formatNumber(bounds.min);
  if (noMin) return std::string(kInteger ? "an " : "a ") + noun + " <= " + formatNumber(bounds.max);
  return std::string(kInteger ? "an " : "a ") + noun + " in [" + formatNumber(bounds.min) + ", " +
         formatNumber(bounds.max) + "]";
}

// Converts `node` into `out`; on failure returns the "expected ..., got ..." text.
template <YamlScalar T>
std::optional<std::string> convertScalar(const YAML::Node& node, const Bounds<T>& bounds, T& out) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (!node.IsScalar()) return "expected a string, got " + describeYamlNode(node);
    out = node.Scalar();
    return std::nullopt;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (node.IsScalar()) {
      const std::string& text = node.Scalar();
      if (text == "true" || text == "True" || text == "TRUE") {
        out = true;
        return std::nullopt;
      }
      if (text == "false" || text == "False" || text == "FALSE") {
        out = false;
        return std::nullopt;
      }
    }
    return "expected true or false, got " + describeYamlNode(node);
  } else {
    const std::string expected = expectedNumber(bounds);
    if (!node.IsScalar()) return "expected " + expected + ", got " + describeYamlNode(node);
    const std::string& text = node.Scalar();
    T value{};
    const char* begin = text.data();
    const char* end = text.data() + text.size();
    std::from_chars_result parsed{};
    if constexpr (std::is_floating_point_v<T>) {
      parsed = std::from_chars(begin, end, value, std::chars_format::general);
      // from_chars accepts "inf" and "nan"; a config value must be a real number.
      if (parsed.ec == std::errc() && !std::isfinite(value)) parsed.ec = std::errc::invalid_argument;
    } else {
      parsed = std::from_chars(begin, end, value, 10);
    }
    if (parsed.ec == std::errc::result_out_of_range) {
      return "expected " + expected + ", got '" + text + "' (out of range)";
    }
    if (parsed.ec != std::errc() || parsed.ptr != end || text.empty()) {
      return "expected " + expected + ", got " + describeYamlNode(node);
    }
    if (value < bounds.min || value > bounds.max) return "expected " + expected + ", got '" + text + "'";
    out = value;
    return std::nullopt;
  }
}

}  // namespace

std::string describeYamlNode(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a map";
  }
  return "an unknown node";
}

// ---- YamlMap ----

YamlMap YamlMap::open(const std::shared_ptr<detail::YamlDocumentState>& doc, const YAML::Node& node,
                      std::string path, int line) {
  if (auto it = doc->mapsByPath.find(path); it != doc->mapsByPath.end()) return YamlMap(doc, it->second);

  auto state = std::make_shared<detail::YamlMapState>();
  state->path = std::move(path);
  state->line = line;
  state->real = node.IsMap();
  if (state->real) {
    std::map<std::string, int> firstLineOfKey;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const int keyLine = lineOf(it->first, line);
      if (!it->first.IsScalar()) {
        doc->report(keyLine, state->path, "expected field names, got " + describeYamlNode(it->first) + " as a key");
        continue;
      }
      const std::string& key = it->first.Scalar();
      if (auto [seen, inserted] = firstLineOfKey.emplace(key, keyLine); !inserted) {
        doc->report(keyLine, joinPath(state->path, key),
                    "duplicate field (first given at line " + std::to_string(seen->second) + ")");
        continue;
      }
      state->entries.push_back(detail::YamlEntry{key, it->second, keyLine, false});
    }
  }
  doc->maps.push_back(state);
  doc->mapsByPath.emplace(state->path, state);
  return YamlMap(doc, state);
}

const YAML::Node* YamlMap::lookup(const std::string& key) {
  state_->queried.push_back(key);
  for (auto& entry : state_->entries) {
    if (entry.key == key) {
      entry.known = true;
      return &entry.value;
    }
  }
  return nullptr;
}

template <YamlScalar T>
T YamlMap::required(const std::string& key, Bounds<T> bounds) {
  const YAML::Node* value = lookup(key);
  if (!state_->real) return T{};
  if (value == nullptr) {
    doc_->report(line(), fieldPath(key), "required field is missing");
    return T{};
  }
  T out{};
  if (auto problem = convertScalar(*value, bounds, out)) {
    doc_->report(line(key), fieldPath(key), *problem);
    return T{};
  }
  return out;
}

template <YamlScalar T>
T YamlMap::optional(const std::string& key, T fallback, Bounds<T> bounds) {
  const YAML::Node* value = lookup(key);
  if (!state_->real || value == nullptr) return fallback;
  T out{};
  if (auto problem = convertScalar(*value, bounds, out)) {
    doc_->report(line(key), fieldPath(key), *problem);
    return fallback;
  }
  return out;
}

YamlMap YamlMap::map(const std::string& key) {
  const YAML::Node* value = lookup(key);
  if (state_->real && value == nullptr) doc_->report(line(), fieldPath(key), "required field is missing");
  if (state_->real && value != nullptr && !value->IsMap()) {
    doc_->report(line(key), fieldPath(key), "expected a map, got " + describeYamlNode(*value));
  }
  return open(doc_, value != nullptr ? *value : YAML::Node(), fieldPath(key), line(key));
}

std::optional<YamlMap> YamlMap::optionalMap(const std::string& key) {
  if (!state_->real || !has(key)) {
    state_->queried.push_back(key);
    return std::nullopt;
  }
  return map(key);
}

YamlSeq YamlMap::sequence(const std::string& key) {
  const YAML::Node* value = lookup(key);
  YamlSeq seq(doc_, fieldPath(key));
  if (!state_->real) return seq;
  if (value == nullptr) {
    doc_->report(line(), fieldPath(key), "required field is missing");
    return seq;
  }
  if (!value->IsSequence()) {
    doc_->report(line(key), fieldPath(key), "expected a sequence, got " + describeYamlNode(*value));
    return seq;
  }
  for (const auto& item : *value) {
    seq.items_.push_back(item);
    seq.lines_.push_back(lineOf(item, line(key)));
  }
  return seq;
}

YamlSeq YamlMap::optionalSequence(const std::string& key) {
  if (!state_->real || !has(key)) {
    state_->queried.push_back(key);
    return YamlSeq(doc_, fieldPath(key));
  }
  return sequence(key);
}

bool YamlMap::has(const std::string& key) const {
  return std::any_of(state_->entries.begin(), state_->entries.end(),
                     [&](const detail::YamlEntry& e) { return e.key == key; });
}

std::vector<std::string> YamlMap::keys() {
  std::vector<std::string> result;
  for (auto& entry : state_->entries) {
    entry.known = true;
    result.push_back(entry.key);
  }
  return result;
}

void YamlMap::fail(const std::string& key, const std::string& what) {
  doc_->report(line(key), fieldPath(key), what);
}

void YamlMap::failHere(const std::string& what) { doc_->report(line(), path(), what); }

int YamlMap::line(const std::string& key) const {
  for (const auto& entry : state_->entries) {
    if (entry.key == key) return entry.keyLine;
  }
  return line();
}

int YamlMap::line() const { return state_->line; }
const std::string& YamlMap::path() const { return state_->path; }
std::string YamlMap::fieldPath(const std::string& key) const { return joinPath(state_->path, key); }
const std::string& YamlMap::file() const { return doc_->file; }
bool YamlMap::ok() const { return !doc_->firstError.has_value(); }

Status YamlMap::finish() {
  for (const auto& map : doc_->maps) {
    for (const auto& entry : map->entries) {
      if (entry.known) continue;
      std::string what = "unknown field";
      std::size_t best = 3;  // suggest only close names: at most two edits
      std::string suggestion;
      for (const auto& candidate : map->queried) {
        const std::size_t d = editDistance(entry.key, candidate);
        if (d < best && d < candidate.size()) {
          best = d;
          suggestion = candidate;
        }
      }
      if (!suggestion.empty()) what += " (did you mean '" + suggestion + "'?)";
      doc_->report(entry.keyLine, joinPath(map->path, entry.key), what);
    }
  }
  if (doc_->firstError) return *doc_->firstError;
  return Status::ok();
}

// ---- YamlSeq ----

YamlMap YamlSeq::map(std::size_t i) {
  const YAML::Node& item = items_.at(i);
  if (!item.IsMap()) doc_->report(lines_[i], elementPath(i), "expected a map, got " + describeYamlNode(item));
  return YamlMap::open(doc_, item, elementPath(i), lines_[i]);
}

template <YamlScalar T>
T YamlSeq::scalar(std::size_t i, Bounds<T> bounds) {
  T out{};
  if (auto problem = convertScalar(items_.at(i), bounds, out)) {
    doc_->report(lines_[i], elementPath(i), *problem);
    return T{};
  }
  return out;
}

void YamlSeq::fail(std::size_t i, const std::string& what) { doc_->report(line(i), elementPath(i), what); }
int YamlSeq::line(std::size_t i) const { return lines_.at(i); }
std::string YamlSeq::elementPath(std::size_t i) const { return path_ + "[" + std::to_string(i) + "]"; }

// ---- documents and files ----

namespace {

// Counts documents without building them, remembering where the second one's content starts.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { note(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { note(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override { note(mark); }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    note(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    note(mark);
  }
  void OnMapEnd() override {}

  bool inSecondDocument = false;
  int secondDocumentLine = 1;

 private:
  void note(const YAML::Mark& mark) {
    if (inSecondDocument && !noted_) {
      noted_ = true;
      if (!mark.is_null() && mark.line >= 0) secondDocumentLine = mark.line + 1;
    }
  }
  bool noted_ = false;
};

// yaml-cpp 0.7's LoadAll() never returns on some malformed input: a stream starting with ','
// yields empty documents until memory runs out (found by fuzzing). So documents are counted
// by hand, and only up to this many.
constexpr int kMaxDocumentsCounted = 16;

}  // namespace

Result<YamlMap> parseYamlDocument(const std::string& text, const std::string& file) {
  YAML::Node root;
  DocumentCounter counter;
  int documents = 0;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    while (documents <= kMaxDocumentsCounted) {
      counter.inSecondDocument = documents == 1;
      if (!parser.HandleNextDocument(counter)) break;
      ++documents;
    }
    if (documents == 1) root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() || e.mark.line < 0 ? 1 : e.mark.line + 1;
    return makeError(ErrorCode::kInvalidArgument, file + ":" + std::to_string(line) + ": malformed YAML: " + e.msg);
  }
  if (documents == 0) {
    return makeError(ErrorCode::kInvalidArgument, file + ":1: expected a map of fields, got an empty document");
  }
  if (documents > 1) {
    return makeError(ErrorCode::kInvalidArgument,
                     file + ":" + std::to_string(counter.secondDocumentLine) + ": expected one YAML document, got " +
                         (documents > kMaxDocumentsCounted ? "more than " + std::to_string(kMaxDocumentsCounted)
                                                           : std::to_string(documents)));
  }
  if (!root.IsMap()) {
    return makeError(ErrorCode::kInvalidArgument, file + ":" + std::to_string(lineOf(root, 1)) +
                                                      ": expected a map of fields at the top level, got " +
                                                      describeYamlNode(root));
  }
  auto doc = std::make_shared<detail::YamlDocumentState>();
  doc->file = file;
  YamlMap map = YamlMap::open(doc, root, "", lineOf(root, 1));
  // Duplicate or non-scalar keys at the top level are reported while opening.
  if (doc->firstError) return *doc->firstError;
  return map;
}

Result<std::string> readTextFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int openErrno = errno;
    return makeError(openErrno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument,
                     "cannot read " + path + ": " + std::strerror(openErrno));
  }
  std::string content;
  char buffer[64 * 1024];
  while (true) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, f);
    content.append(buffer, n);
    if (n < sizeof buffer) break;
  }
  const bool failed = std::ferror(f) != 0;
  const int readErrno = errno;
  std::fclose(f);
  if (failed) {
    return makeError(ErrorCode::kInvalidArgument, "cannot read " + path + ": " + std::strerror(readErrno));
  }
  return content;
}

// The scalar types of YamlScalar, instantiated once here.
#define TELLUS_YAML_INSTANTIATE(T)                                                       \
  template T YamlMap::required<T>(const std::string&, Bounds<T>);                       \
  template T YamlMap::optional<T>(const std::string&, T, Bounds<T>);                    \
  template T YamlSeq::scalar<T>(std::size_t, Bounds<T>);
TELLUS_YAML_INSTANTIATE(std::string)
TELLUS_YAML_INSTANTIATE(bool)
TELLUS_YAML_INSTANTIATE(uint32_t)
TELLUS_YAML_INSTANTIATE(uint64_t)
TELLUS_YAML_INSTANTIATE(int32_t)
TELLUS_YAML_INSTANTIATE(int64_t)
TELLUS_YAML_INSTANTIATE(double)
#undef TELLUS_YAML_INSTANTIATE

}  // namespace tellus::config
