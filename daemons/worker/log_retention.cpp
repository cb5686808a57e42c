#include "worker/log_retention.h"

#include <algorithm>

namespace tellus::worker {

std::vector<std::string> expiredLogDirs(const std::vector<LogDir>& dirs, std::filesystem::file_time_type now,
                                        std::chrono::milliseconds retention, const std::set<std::string>& active) {
  std::vector<std::string> out;
  if (retention.count() <= 0) return out;
  for (const auto& d : dirs) {
    if (active.count(d.name)) continue;
    if (now - d.newest >= retention) out.push_back(d.name);
  }
  return out;
}

std::vector<LogDir> listLogDirs(const std::filesystem::path& root, size_t maxEntries) {
  namespace fs = std::filesystem;
  std::vector<LogDir> out;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_symlink(ec) || !it->is_directory(ec)) continue;
    LogDir d{it->path().filename().string(), fs::last_write_time(it->path(), ec)};
    if (ec) continue;  // gone meanwhile
    size_t seen = 0;
    std::error_code inner;
    for (fs::directory_iterator f(it->path(), inner); !inner && f != end && seen < maxEntries; f.increment(inner), ++seen) {
      std::error_code timeEc;
      // Not followed: a symlink's own time, never its target's.
      const auto t = fs::symlink_status(f->path(), timeEc).type() == fs::file_type::symlink
                         ? d.newest
                         : fs::last_write_time(f->path(), timeEc);
      if (!timeEc) d.newest = std::max(d.newest, t);
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace tellus::worker
