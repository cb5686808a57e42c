#pragma once
// The one way Tellus reads YAML (daemon configs, job specs, any other YAML format): a typed,
// strict reader over yaml-cpp nodes that reports every problem as
//
//   FILE:LINE: FIELD: what was expected
//
// with LINE 1-based and FIELD a dotted path ("zookeeper.session_timeout_ms",
// "datasets[1].dir"). Unknown fields and duplicate keys are errors, so a typo never silently
// becomes a default.
//
// Reading is "first error wins": getters never fail loudly; the first problem is recorded in the
// document and later getters return their fallback (or a value-initialized T). Read every field,
// then call finish(), which also rejects unknown fields in every map that was opened:
//
//   auto root = parseYamlDocument(text, "master.yaml");
//   if (!root.isOk()) return root.error();
//   MasterConfig c;
//   c.site = root->required<std::string>("site");
//   c.schedule_period_ms = root->optional<uint32_t>("schedule_period_ms", 1000, atLeast<uint32_t>(1));
//   YamlMap zk = root->map("zookeeper");
//   c.zookeeper.connect = zk.required<std::string>("connect");
//   TELLUS_RETURN_IF_ERROR(root->finish());
//
// Readers are cheap handles onto shared state; copies refer to the same map. Not thread-safe.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "util/result.h"

namespace tellus::config {

// Scalar types a field can be read as. Integers are decimal only ("0x10", "1e3", "+5" and
// "007"-style octal are not special: they are rejected or read as decimal digits); booleans
// are true/false (any case); a string field accepts any scalar, e.g. `id: 42` is "42".
template <class T>
concept YamlScalar = std::same_as<T, std::string> || std::same_as<T, bool> ||
                     std::same_as<T, uint32_t> || std::same_as<T, uint64_t> ||
                     std::same_as<T, int32_t> || std::same_as<T, int64_t> || std::same_as<T, double>;

// Inclusive range of a numeric field. The error names it: [0, max] is "a non-negative integer",
// [1, max] "a positive integer", otherwise "an integer in [min, max]" / "an integer >= min".
template <class T>
struct Bounds {
  T min = std::numeric_limits<T>::lowest();
  T max = std::numeric_limits<T>::max();
};

template <class T>
constexpr Bounds<T> atLeast(T min) {
  return Bounds<T>{min, std::numeric_limits<T>::max()};
}
template <class T>
constexpr Bounds<T> between(T min, T max) {
  return Bounds<T>{min, max};
}

namespace detail {
struct YamlDocumentState;
struct YamlMapState;
}  // namespace detail

class YamlSeq;

// A YAML map being read field by field.
class YamlMap {
 public:
  // A scalar field that must be present. Missing: "FIELD: required field is missing" at the
  // line of this map. `bounds` applies to numbers only.
  template <YamlScalar T>
  T required(const std::string& key, Bounds<T> bounds = {});

  // A scalar field that may be absent (then `fallback`). An explicit null (`key:` with no
  // value, `~`) is an error, not a request for the default.
  template <YamlScalar T>
  T optional(const std::string& key, T fallback, Bounds<T> bounds = {});

  // A nested map that must be present / may be absent.
  YamlMap map(const std::string& key);
  std::optional<YamlMap> optionalMap(const std::string& key);
  // A nested sequence that must be present / may be absent (then empty).
  YamlSeq sequence(const std::string& key);
  YamlSeq optionalSequence(const std::string& key);

  bool has(const std::string& key) const;
  // Every key in document order, all marked as known: for maps whose keys are data (e.g. a
  // job stage's params). Non-scalar keys are reported as errors when the map is opened.
  std::vector<std::string> keys();

  // Records "FILE:LINE: FIELD: what" for `key` (at the key's line, or this map's line if the key
  // is absent) unless an error was already recorded. For checks beyond type and range, e.g.
  //   if (!isSiteId(c.site)) root.fail("site", "expected a site id ..., got '" + c.site + "'");
  void fail(const std::string& key, const std::string& what);
  // The same for the map itself ("FIELD" is this map's path, or none for the top level).
  void failHere(const std::string& what);

  // 1-based line of `key` (or of this map if absent) / of this map.
  int line(const std::string& key) const;
  int line() const;
  // Dotted path of this map ("" at the top level) / of one of its fields.
  const std::string& path() const;
  std::string fieldPath(const std::string& key) const;
  const std::string& file() const;

  // True while no error has been recorded in the document.
  bool ok() const;
  // Rejects unknown fields in every map of the document opened so far ("FIELD: unknown field",
  // with a suggestion when a known field is close), then returns the document's first error.
  Status finish();

 private:
  friend class YamlSeq;
  friend Result<YamlMap> parseYamlDocument(const std::string& text, const std::string& file);
  YamlMap(std::shared_ptr<detail::YamlDocumentState> doc, std::shared_ptr<detail::YamlMapState> state)
      : doc_(std::move(doc)), state_(std::move(state)) {}
  // Opens `node` as a map with path `path` whose problems are reported at `line`.
  static YamlMap open(const std::shared_ptr<detail::YamlDocumentState>& doc, const YAML::Node& node,
                      std::string path, int line);
  // The value of `key` (null node when absent) and records that `key` is a known field.
  const YAML::Node* lookup(const std::string& key);

  std::shared_ptr<detail::YamlDocumentState> doc_;
  std::shared_ptr<detail::YamlMapState> state_;
};

// A YAML sequence being read element by element. An absent optional sequence is empty.
class YamlSeq {
 public:
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  // Element i as a map (path "FIELD[i]").
  YamlMap map(std::size_t i);
  // Element i as a scalar.
  template <YamlScalar T>
  T scalar(std::size_t i, Bounds<T> bounds = {});

  void fail(std::size_t i, const std::string& what);
  int line(std::size_t i) const;
  std::string elementPath(std::size_t i) const;

 private:
  friend class YamlMap;
  YamlSeq(std::shared_ptr<detail::YamlDocumentState> doc, std::string path) : doc_(std::move(doc)), path_(std::move(path)) {}

  std::shared_ptr<detail::YamlDocumentState> doc_;
  std::string path_;
  std::vector<YAML::Node> items_;
  std::vector<int> lines_;
};

// Parses one YAML document whose top level is a map. Malformed YAML is
// "FILE:LINE: malformed YAML: <reason>"; an empty document, several documents or a top level
// that is not a map are errors too.
Result<YamlMap> parseYamlDocument(const std::string& text, const std::string& file);

// Reads a whole file: "cannot read FILE: <strerror>" when it cannot.
Result<std::string> readTextFile(const std::string& path);

// "a map", "a sequence", "a scalar 'x'", "nothing (null)": for "expected ..., got ..." messages.
std::string describeYamlNode(const YAML::Node& node);

}  // namespace tellus::config
