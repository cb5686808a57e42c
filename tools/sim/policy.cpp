// parsePolicy: the policy names of tellus-sim's --policy / --compare.
#include <charconv>
#include <cstdio>
#include <cmath>
#include <optional>

#include "sim/simulator.h"

namespace tellus::sim {
namespace {

Error invalid(const std::string& policy, const std::string& message) {
  return makeError(ErrorCode::kInvalidArgument, "policy '" + policy + "': " + message);
}

std::optional<double> number(const std::string& text) {
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

constexpr const char* kKnown =
    "placement inplace|centralized|iridium|proportional|tetrium-place; order "
    "fair|fcfs|gsrpt|isrpt|gsrpt-reorder|isrpt-reorder|swag|tetrium-order; resources slots|static|af|nosteal|rounds; "
    "presets tetrium|houtu|decent-stat; knobs rho= eps= k= period= delta= afrho= tau= static= normalize= round=";

}  // namespace

Result<PolicyConfig> parsePolicy(const std::string& text) {
  if (text.empty()) return makeError(ErrorCode::kInvalidArgument, "empty policy name (expected e.g. 'inplace' or 'tetrium+swag')");
  PolicyConfig config;
  config.label = text;
  std::optional<PlacementPolicy> placement, presetPlacement;
  std::optional<JobOrderPolicy> order, presetOrder;
  std::optional<ResourcePolicy> resources, presetResources;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t plus = text.find('+', start);
    const std::string token = text.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    start = plus == std::string::npos ? text.size() + 1 : plus + 1;
    if (token.empty()) return invalid(text, "empty token between '+' signs");
    auto setOnce = [&]<class T>(std::optional<T>& slot, T value, const char* what) -> Status {
      if (slot && *slot != value) return invalid(text, std::string("two different ") + what + " in one policy");
      slot = value;
      return Status::ok();
    };
    const size_t equals = token.find('=');
    if (equals != std::string::npos) {
      const std::string key = token.substr(0, equals);
      const auto value = number(token.substr(equals + 1));
      if (!value) return invalid(text, "'" + token + "': the value after '=' must be a number");
      auto inRange = [&](double lo, double hi) -> Status {
        if (*value < lo || *value > hi) {
          char range[96];
          std::snprintf(range, sizeof range, " must be in [%g, %g]", lo, hi);
          return invalid(text, "'" + token + "': " + key + range);
        }
        return Status::ok();
      };
      if (key == "rho") {
        TELLUS_RETURN_IF_ERROR(inRange(0, 1));
        config.wanBudgetRho = *value;
      } else if (key == "eps") {
        TELLUS_RETURN_IF_ERROR(inRange(0, 1));
        config.fairnessEpsilon = *value;
      } else if (key == "k") {
        TELLUS_RETURN_IF_ERROR(inRange(0, 1e6));
        config.reassignK = static_cast<int>(*value);
      } else if (key == "period") {
        TELLUS_RETURN_IF_ERROR(inRange(1e-3, 1e6));
        config.periodSeconds = *value;
      } else if (key == "delta") {
        TELLUS_RETURN_IF_ERROR(inRange(0, 1));
        config.af.delta = *value;
        config.parades.delta = *value;
      } else if (key == "afrho") {
        TELLUS_RETURN_IF_ERROR(inRange(1.000001, 1e3));
        config.af.rho = *value;
      } else if (key == "tau") {
        TELLUS_RETURN_IF_ERROR(inRange(0, 1e6));
        config.parades.tau = *value;
      } else if (key == "static") {
        TELLUS_RETURN_IF_ERROR(inRange(0, 1e9));
        config.staticContainers = static_cast<int>(*value);
      } else if (key == "round") {
        TELLUS_RETURN_IF_ERROR(inRange(1e-3, 1e6));
        config.roundIntervalSeconds = *value;
      } else if (key == "normalize") {
        TELLUS_RETURN_IF_ERROR(inRange(0, 1));
        config.normalizeBySlots = *value != 0;
      } else {
        return invalid(text, "unknown knob '" + key + "' (known: " + kKnown + ")");
      }
      continue;
    }
    Status status;
    if (token == "inplace") status = setOnce(placement, PlacementPolicy::kInPlace, "placements");
    else if (token == "centralized") status = setOnce(placement, PlacementPolicy::kCentralized, "placements");
    else if (token == "iridium") status = setOnce(placement, PlacementPolicy::kIridium, "placements");
    else if (token == "proportional") status = setOnce(placement, PlacementPolicy::kProportional, "placements");
    else if (token == "tetrium-place") status = setOnce(placement, PlacementPolicy::kTetrium, "placements");
    else if (token == "fair") status = setOnce(order, JobOrderPolicy::kFair, "job orders");
    else if (token == "fcfs") status = setOnce(order, JobOrderPolicy::kFcfs, "job orders");
    else if (token == "gsrpt") status = setOnce(order, JobOrderPolicy::kGlobalSrpt, "job orders");
    else if (token == "isrpt") status = setOnce(order, JobOrderPolicy::kIndependentSrpt, "job orders");
    else if (token == "gsrpt-reorder") status = setOnce(order, JobOrderPolicy::kGlobalSrptReordering, "job orders");
    else if (token == "isrpt-reorder") status = setOnce(order, JobOrderPolicy::kIndependentSrptReordering, "job orders");
    else if (token == "swag") status = setOnce(order, JobOrderPolicy::kSwag, "job orders");
    else if (token == "tetrium-order") status = setOnce(order, JobOrderPolicy::kTetrium, "job orders");
    else if (token == "slots") status = setOnce(resources, ResourcePolicy::kSlots, "resource managers");
    else if (token == "static") status = setOnce(resources, ResourcePolicy::kStatic, "resource managers");
    else if (token == "af") status = setOnce(resources, ResourcePolicy::kAf, "resource managers");
    else if (token == "nosteal") config.stealing = false;
    else if (token == "rounds") config.tetriumRounds = true;
    else if (token == "tetrium") {
      presetPlacement = PlacementPolicy::kTetrium;
      presetOrder = JobOrderPolicy::kTetrium;
    } else if (token == "houtu" || token == "decent-stat") {
      presetPlacement = PlacementPolicy::kProportional;
      presetOrder = JobOrderPolicy::kFair;
      presetResources = token == "houtu" ? ResourcePolicy::kAf : ResourcePolicy::kStatic;
    } else {
      return invalid(text, "unknown token '" + token + "' (known: " + kKnown + ")");
    }
    TELLUS_RETURN_IF_ERROR(status);
  }
  // Explicit tokens win over a preset's parts: "tetrium+swag" is Tetrium placement, SWAG order.
  config.placement = placement.value_or(presetPlacement.value_or(PlacementPolicy::kInPlace));
  config.order = order.value_or(presetOrder.value_or(JobOrderPolicy::kFair));
  config.resources = resources.value_or(presetResources.value_or(ResourcePolicy::kSlots));
  if (config.fairnessEpsilon < 1) config.tetriumRounds = true;  // ε lives in Tetrium's rounds
  if (config.tetriumRounds &&
      (config.placement != PlacementPolicy::kTetrium || config.order != JobOrderPolicy::kTetrium ||
       config.resources != ResourcePolicy::kSlots)) {
    return invalid(text, "'rounds' and eps < 1 are Tetrium's scheduling rounds: use them with 'tetrium' "
                         "(its placement and order) on plain slots");
  }
  if (config.reassignK > 0 && config.resources != ResourcePolicy::kSlots) {
    return invalid(text, "k-site re-assignment works on slot queues, not with static/af job managers");
  }
  return config;
}

}  // namespace tellus::sim
