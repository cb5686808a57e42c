#include "monitor/process_tree.h"

#include <unordered_set>
#include <utility>
#include <vector>

namespace tellus::monitor {

ProcessTreeAccountant::ProcessTreeAccountant(pid_t rootPid, SystemConstants constants)
    : rootPid_(rootPid), constants_(constants) {}

ProcessTreeAccountant::Members ProcessTreeAccountant::collectMembers(const ProcessTable& table,
                                                                     bool rootAlive) const {
  // Seeds: the root and every earlier member that is still the same process, so that a
  // member reparented away from the tree keeps counting (and so do its descendants).
  std::vector<pid_t> pending;
  if (rootAlive) pending.push_back(rootPid_);
  for (const auto& [key, member] : members_) {
    const PidStat* stat = table.find(key.pid);
    if (stat != nullptr && stat->startTimeTicks == key.startTimeTicks) pending.push_back(key.pid);
  }

  Members current;
  std::unordered_set<pid_t> visited;
  while (!pending.empty()) {
    pid_t pid = pending.back();
    pending.pop_back();
    if (!visited.insert(pid).second) continue;
    const PidStat* stat = table.find(pid);
    if (stat == nullptr) continue;
    current.emplace(ProcessKey{pid, stat->startTimeTicks},
                    Member{stat->ppid, stat->ownCpuTicks() + stat->reapedChildrenCpuTicks()});
    for (pid_t child : table.childrenOf(pid)) pending.push_back(child);
  }
  return current;
}

std::int64_t ProcessTreeAccountant::ticksSincePrevious(const Members& current) const {
  std::int64_t ticks = 0;
  for (const auto& [key, member] : current) {
    auto before = members_.find(key);
    std::uint64_t previous = before == members_.end() ? 0 : before->second.cpuTicks;
    // A process's own and reaped-children times only grow; guard anyway so that a kernel
    // quirk cannot wrap the unsigned difference.
    if (member.cpuTicks >= previous) ticks += static_cast<std::int64_t>(member.cpuTicks - previous);
  }

  // Vanished members whose whole time reappeared in a member's cutime/cstime: subtract what
  // was already counted for them. A vanished member was reaped inside the tree when its
  // parent (as of the previous sample) is still a member, or itself vanished and was reaped
  // inside the tree (a chain that exited within one interval).
  std::unordered_map<pid_t, ProcessKey> previousKeyByPid;
  for (const auto& [key, member] : members_) previousKeyByPid.emplace(key.pid, key);
  std::unordered_map<pid_t, bool> reapedInsideMemo;
  std::function<bool(const ProcessKey&, int)> reapedInside = [&](const ProcessKey& key, int depth) -> bool {
    if (auto memo = reapedInsideMemo.find(key.pid); memo != reapedInsideMemo.end()) return memo->second;
    bool inside = false;
    // depth bounds the walk: the previous members form a forest, but a corrupt snapshot
    // must not be able to make us recurse forever.
    if (depth <= static_cast<int>(members_.size())) {
      auto parent = previousKeyByPid.find(members_.at(key).ppid);
      if (parent != previousKeyByPid.end() && parent->second.pid != key.pid) {
        inside = current.contains(parent->second) || reapedInside(parent->second, depth + 1);
      }
    }
    reapedInsideMemo.emplace(key.pid, inside);
    return inside;
  };
  for (const auto& [key, member] : members_) {
    if (current.contains(key)) continue;
    if (reapedInside(key, 0)) ticks -= static_cast<std::int64_t>(member.cpuTicks);
  }
  return ticks;
}

TreeSample ProcessTreeAccountant::update(const ProcessTable& table,
                                         std::chrono::steady_clock::time_point now) {
  TreeSample sample;
  const PidStat* root = rootGone_ ? nullptr : table.find(rootPid_);
  if (root != nullptr && (!rootStartTimeTicks_ || *rootStartTimeTicks_ == root->startTimeTicks)) {
    rootStartTimeTicks_ = root->startTimeTicks;
    sample.rootAlive = true;
  } else {
    rootGone_ = true;
  }

  Members current = collectMembers(table, sample.rootAlive);
  for (const auto& [key, member] : current) {
    const PidStat* stat = table.find(key.pid);
    sample.rssBytes += static_cast<std::uint64_t>(stat->rssPages) * static_cast<std::uint64_t>(constants_.pageSizeBytes);
    sample.threads += stat->numThreads;
  }
  sample.processes = current.size();

  if (previousSampleTime_) {
    // Below 0 only in the misattribution case documented in the header: count nothing rather
    // than report negative use.
    std::int64_t ticks = ticksSincePrevious(current);
    std::uint64_t before = ticksSinceFirstSample_;
    if (ticks > 0) ticksSinceFirstSample_ += static_cast<std::uint64_t>(ticks);
    double wallSeconds = std::chrono::duration<double>(now - *previousSampleTime_).count();
    sample.cpuMeasured = wallSeconds > 0.0;
    sample.cpuCores = cpuCoresBetween(before, ticksSinceFirstSample_, wallSeconds, constants_.ticksPerSecond);
  }
  sample.cpuTicksSinceFirstSample = ticksSinceFirstSample_;

  members_ = std::move(current);
  previousSampleTime_ = now;
  return sample;
}

ProcessTreeSampler::ProcessTreeSampler(pid_t rootPid, SystemConstants constants, std::filesystem::path procRoot)
    : accountant_(rootPid, constants), procRoot_(std::move(procRoot)) {}

Result<TreeSample> ProcessTreeSampler::sample(std::chrono::steady_clock::time_point now) {
  auto table = readProcessTable(procRoot_);
  if (!table) return table.error().prepend("sampling process tree of pid " + std::to_string(rootPid()));
  return accountant_.update(*table, now);
}

}  // namespace tellus::monitor
