#include "jobcore/decision.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tellus::jobcore {
namespace {

Error bad(std::string_view what) { return makeError(ErrorCode::kInvalidArgument, fmt::format("decision record: {}", what)); }

// A field of `j` that must be a string, or absent when !wanted.
Result<std::string> stringField(const nlohmann::json& j, const char* name, bool wanted) {
  const auto it = j.find(name);
  if (it == j.end()) {
    if (wanted) return bad(fmt::format("no \"{}\"", name));
    return std::string();
  }
  if (!wanted) return bad(fmt::format("\"{}\" does not belong to this kind", name));
  if (!it->is_string() || it->get_ref<const std::string&>().empty()) return bad(fmt::format("\"{}\" is not a non-empty string", name));
  return it->get<std::string>();
}

Result<uint32_t> indexOf(const nlohmann::json& j, const char* what) {
  if (!j.is_number_unsigned() || j.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
    return bad(fmt::format("{} is not a 32-bit unsigned integer", what));
  }
  return static_cast<uint32_t>(j.get<uint64_t>());
}

}  // namespace

std::string_view kindName(Decision::Kind kind) {
  switch (kind) {
    case Decision::Kind::kPlace:
      return "place";
    case Decision::Kind::kSteal:
      return "steal";
    case Decision::Kind::kRerun:
      return "rerun";
  }
  return "?";
}

std::string formatDecision(const Decision& d) {
  // nlohmann's ordered_json keeps the fields in the order written: the lines read well.
  nlohmann::ordered_json j;
  j["kind"] = kindName(d.kind);
  j["stage"] = d.stage;
  j["tasks"] = d.tasks;
  j["site"] = d.site;
  if (d.kind == Decision::Kind::kSteal) j["from"] = d.from;
  if (d.kind == Decision::Kind::kRerun) j["reason"] = d.reason;
  return j.dump();
}

Result<Decision> parseDecision(std::string_view line) {
  if (line.size() > kMaxDecisionLineBytes) return bad(fmt::format("{} bytes, more than {}", line.size(), kMaxDecisionLineBytes));
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  Decision d;
  const auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string()) return bad("no \"kind\"");
  const auto& k = kind->get_ref<const std::string&>();
  if (k == "place") {
    d.kind = Decision::Kind::kPlace;
  } else if (k == "steal") {
    d.kind = Decision::Kind::kSteal;
  } else if (k == "rerun") {
    d.kind = Decision::Kind::kRerun;
  } else {
    return bad("unknown kind");
  }
  const auto stage = j.find("stage");
  if (stage == j.end()) return bad("no \"stage\"");
  auto s = indexOf(*stage, "stage");
  if (!s) return s.error();
  d.stage = *s;
  const auto tasks = j.find("tasks");
  if (tasks == j.end() || !tasks->is_array() || tasks->empty()) return bad("\"tasks\" is not a non-empty array");
  if (d.kind != Decision::Kind::kSteal && tasks->size() != 1) return bad("a place or rerun names one task");
  for (const auto& t : *tasks) {
    auto task = indexOf(t, "a task");
    if (!task) return task.error();
    if (!d.tasks.empty() && *task <= d.tasks.back()) return bad("tasks are not sorted and distinct");
    d.tasks.push_back(*task);
  }
  auto site = stringField(j, "site", true);
  if (!site) return site.error();
  d.site = std::move(*site);
  auto from = stringField(j, "from", d.kind == Decision::Kind::kSteal);
  if (!from) return from.error();
  d.from = std::move(*from);
  auto reason = stringField(j, "reason", d.kind == Decision::Kind::kRerun);
  if (!reason) return reason.error();
  d.reason = std::move(*reason);
  if (j.size() != 4u + (d.kind == Decision::Kind::kPlace ? 0u : 1u)) return bad("unknown fields");
  return d;
}

}  // namespace tellus::jobcore
