#include "master/lease_book.h"

#include <algorithm>

namespace tellus::master {

void LeaseBook::stated(const Key& key, uint64_t endsInMs, Clock::time_point now) {
  const auto length = std::min<uint64_t>(endsInMs, static_cast<uint64_t>(max_.count()));
  ends_[key] = now + std::chrono::milliseconds(static_cast<int64_t>(length));
}

bool LeaseBook::extend(const Key& key, Clock::time_point now) {
  ends_[key] = now + grace_;
  return extended_.insert(key).second;
}

LeaseBook::Clock::time_point LeaseBook::endOf(const Key& key, Clock::time_point now) const {
  auto it = ends_.find(key);
  return it == ends_.end() ? now + default_ : it->second;
}

std::vector<LeaseBook::Key> LeaseBook::overdue(const std::vector<Key>& held, Clock::time_point now) const {
  std::vector<Key> out;
  for (const auto& key : held) {
    auto it = ends_.find(key);
    if (it != ends_.end() && now - it->second > grace_) out.push_back(key);
  }
  return out;
}

void LeaseBook::retain(const std::vector<Key>& held) {
  std::erase_if(ends_, [&](const auto& kv) { return !std::binary_search(held.begin(), held.end(), kv.first); });
  std::erase_if(extended_, [&](const Key& key) { return !std::binary_search(held.begin(), held.end(), key); });
}

}  // namespace tellus::master
