#include "monitor/container_monitor.h"

#include <utility>

namespace tellus::monitor {

ContainerMonitor::ContainerMonitor(SystemConstants constants, std::filesystem::path procRoot)
    : constants_(constants), procRoot_(std::move(procRoot)) {}

Status ContainerMonitor::track(const std::string& containerId, pid_t rootPid) {
  if (containerId.empty()) return makeError(ErrorCode::kInvalidArgument, "tracking a container: empty container id");
  if (rootPid <= 0) {
    return makeError(ErrorCode::kInvalidArgument,
                     "tracking container " + containerId + ": pid must be positive, got " + std::to_string(rootPid));
  }
  if (auto it = trees_.find(containerId); it != trees_.end()) {
    return makeError(ErrorCode::kAlreadyExists, "container " + containerId + " is already tracked (root pid " +
                                                    std::to_string(it->second.rootPid()) + ")");
  }
  trees_.emplace(containerId, ProcessTreeAccountant(rootPid, constants_));
  return Status::ok();
}

Status ContainerMonitor::untrack(const std::string& containerId) {
  if (trees_.erase(containerId) == 0) {
    return makeError(ErrorCode::kNotFound, "untracking container " + containerId + ": not tracked");
  }
  return Status::ok();
}

Result<std::vector<ContainerUsage>> ContainerMonitor::sampleAll(std::chrono::steady_clock::time_point now) {
  // Nothing to look at: skip the scan so an idle worker pays nothing.
  if (trees_.empty()) return std::vector<ContainerUsage>{};
  auto table = readProcessTable(procRoot_);
  if (!table) return table.error().prepend("sampling containers");
  lastMalformedEntries_ = table->malformedEntries();
  return sampleAll(*table, now);
}

std::vector<ContainerUsage> ContainerMonitor::sampleAll(const ProcessTable& table,
                                                        std::chrono::steady_clock::time_point now) {
  std::vector<ContainerUsage> usages;
  usages.reserve(trees_.size());
  for (auto& [containerId, tree] : trees_) {
    TreeSample sample = tree.update(table, now);
    usages.push_back(ContainerUsage{containerId, tree.rootPid(), sample.rootAlive, sample.cpuMeasured,
                                    sample.cpuCores, sample.rssBytes, sample.processes});
  }
  return usages;
}

}  // namespace tellus::monitor
