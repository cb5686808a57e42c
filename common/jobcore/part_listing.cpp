#include "jobcore/part_listing.h"

#include <algorithm>

#include "jobstate/paths.h"

namespace tellus::jobcore {
namespace {

bool isBatch(const std::string& name) { return name.rfind(jobstate::kBatchPrefix, 0) == 0; }

// Batches first, then by name: the order in which the first holder wins.
bool precedes(const std::string& a, const std::string& b) {
  const bool ba = isBatch(a), bb = isBatch(b);
  if (ba != bb) return ba;
  return a < b;
}

}  // namespace

std::vector<std::string> PartListing::relist(const std::set<std::string>& names) {
  // Both sorted by name: one merged pass (a stage of many batches is listed on every new one).
  std::vector<std::string> unread;
  auto listed = names.begin();
  for (auto it = nodes_.begin(); it != nodes_.end() || listed != names.end();) {
    if (it == nodes_.end() || (listed != names.end() && *listed < it->first)) {
      unread.push_back(*listed++);
      continue;
    }
    if (listed != names.end() && *listed == it->first) {
      ++listed;
      ++it;
      continue;
    }
    // Held and no longer listed: its tasks are decided afresh.
    for (const auto& [t, part] : it->second) {
      auto held = holders_.find(t);
      if (held == holders_.end()) continue;
      std::erase(held->second, &it->first);
      if (held->second.empty()) holders_.erase(held);
      changed_.insert(t);
    }
    it = nodes_.erase(it);
  }
  return unread;
}

void PartListing::add(const std::string& name, std::map<uint32_t, ListedPart> outputs) {
  auto [node, added] = nodes_.try_emplace(name, std::move(outputs));
  if (!added) return;  // read already (names are written once)
  for (const auto& [t, part] : node->second) {
    holders_[t].push_back(&node->first);
    changed_.insert(t);
  }
}

const std::string* PartListing::holderOf(uint32_t t) const {
  auto held = holders_.find(t);
  if (held == holders_.end() || held->second.empty()) return nullptr;
  return *std::min_element(held->second.begin(), held->second.end(),
                           [](const std::string* a, const std::string* b) { return precedes(*a, *b); });
}

void PartListing::apply(JobCore& core, uint32_t stage) {
  for (uint32_t t : changed_) {
    const std::string* holder = holderOf(t);
    if (holder == nullptr) {
      core.onPartUnlisted(stage, t);
      continue;
    }
    const ListedPart& part = nodes_.at(*holder).at(t);
    core.onPartRecorded(stage, t, part.location, part.finishKey);
  }
  changed_.clear();
  core.onPartsListed(stage);
}

}  // namespace tellus::jobcore
