// parsePolicy: the policy names of tellus-sim's --policy / --compare.
#include <charconv>
#include <cstdio>
#include <cmath>
#include <optional>

#include "sched/placement.h"
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

std::string known() {
  return "placement " + sched::joinNames(sched::placementNames()) + " (place=NAME); order " +
         sched::joinNames(sched::jobOrderNames()) + " (order=NAME); resources " + sched::joinNames(sched::resourcesNames()) +
         "|nosteal|steal|unmeasured|noleases|rounds; presets tetrium|houtu|decent-stat; knobs rho= cost= eps= k= period= steal= delta= afrho= tau= "
         "static= normalize= round= refresh=";
}

}  // namespace

Result<PolicyConfig> parsePolicy(const std::string& text) {
  if (text.empty()) return makeError(ErrorCode::kInvalidArgument, "empty policy name (expected e.g. 'in-place' or 'tetrium+swag')");
  PolicyConfig config;
  config.label = text;
  std::optional<sched::Placement> placement, presetPlacement;
  std::optional<sched::JobOrder> order, presetOrder;
  std::optional<sched::Resources> resources, presetResources;
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
    if (equals != std::string::npos && (token.starts_with("place=") || token.starts_with("order="))) {
      const std::string value = token.substr(equals + 1);
      Status status;
      if (token.starts_with("place=")) {
        const auto policy = sched::parsePlacement(value);
        if (!policy) return invalid(text, "'" + token + "': unknown placement (known: " + sched::joinNames(sched::placementNames()) + ")");
        status = setOnce(placement, *policy, "placements");
      } else {
        const auto policy = sched::parseJobOrder(value);
        if (!policy) return invalid(text, "'" + token + "': unknown job order (known: " + sched::joinNames(sched::jobOrderNames()) + ")");
        status = setOnce(order, *policy, "job orders");
      }
      TELLUS_RETURN_IF_ERROR(status);
      continue;
    }
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
      } else if (key == "cost") {
        TELLUS_RETURN_IF_ERROR(inRange(0, sched::kMaxCostWeightSPerUnit));
        config.costWeight = *value;
      } else if (key == "eps") {
        TELLUS_RETURN_IF_ERROR(inRange(0, 1));
        config.fairnessEpsilon = *value;
      } else if (key == "k") {
        TELLUS_RETURN_IF_ERROR(inRange(0, 1e6));
        config.reassignK = static_cast<int>(*value);
      } else if (key == "period") {
        TELLUS_RETURN_IF_ERROR(inRange(1e-3, 1e6));
        config.periodSeconds = *value;
      } else if (key == "steal") {
        TELLUS_RETURN_IF_ERROR(inRange(1e-3, 1e6));
        config.stealIntervalSeconds = *value;
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
      } else if (key == "refresh") {
        TELLUS_RETURN_IF_ERROR(inRange(0, 1e6));
        config.orderRefreshSeconds = *value;
      } else if (key == "normalize") {
        TELLUS_RETURN_IF_ERROR(inRange(0, 1));
        config.normalizeBySlots = *value != 0;
      } else {
        return invalid(text, "unknown knob '" + key + "' (known: " + known() + ")");
      }
      continue;
    }
    Status status;
    if (token == "tetrium") {
      presetPlacement = sched::Placement::kTetrium;
      presetOrder = sched::JobOrder::kTetrium;
    } else if (token == "houtu" || token == "decent-stat") {
      presetPlacement = sched::Placement::kProportional;
      presetOrder = sched::JobOrder::kFair;
      presetResources = token == "houtu" ? sched::Resources::kAf : sched::Resources::kStatic;
    } else if (const auto p = sched::parsePlacement(token)) {
      status = setOnce(placement, *p, "placements");
    } else if (const auto o = sched::parseJobOrder(token)) {
      status = setOnce(order, *o, "job orders");
    } else if (const auto r = sched::parseResources(token)) {
      status = setOnce(resources, *r, "resource managers");
    } else if (token == "nosteal") {
      config.stealing = false;
    } else if (token == "steal") {
      config.staticSteals = true;
    } else if (token == "unmeasured") {
      config.measuredLinks = false;
    } else if (token == "noleases") {
      config.leases = false;
    } else if (token == "rounds") {
      config.tetriumRounds = true;
    } else {
      return invalid(text, "unknown token '" + token + "' (known: " + known() + ")");
    }
    TELLUS_RETURN_IF_ERROR(status);
  }
  // Explicit tokens win over a preset's parts: "tetrium+swag" is Tetrium placement, SWAG order.
  config.placement = placement.value_or(presetPlacement.value_or(sched::Placement::kInPlace));
  config.order = order.value_or(presetOrder.value_or(sched::JobOrder::kFair));
  config.resources = resources.value_or(presetResources.value_or(sched::Resources::kSlots));
  if (config.fairnessEpsilon < 1) config.tetriumRounds = true;  // ε lives in Tetrium's rounds
  if (config.tetriumRounds &&
      (config.placement != sched::Placement::kTetrium || config.order != sched::JobOrder::kTetrium ||
       config.resources != sched::Resources::kSlots)) {
    return invalid(text, "'rounds' and eps < 1 are Tetrium's scheduling rounds: use them with 'tetrium' "
                         "(its placement and order) on plain slots");
  }
  if (config.reassignK > 0 && config.resources != sched::Resources::kSlots) {
    return invalid(text, "k-site re-assignment works on slot queues, not with static/af job managers");
  }
  return config;
}

}  // namespace tellus::sim
