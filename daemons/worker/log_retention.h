#pragma once

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace tellus::worker {

// A per-job directory of logs (logs/<job>, jms/<job>) and when anything in it last changed.
struct LogDir {
  std::string name;  // the job id
  std::filesystem::file_time_type newest;
};

// Which of `dirs` to delete: those untouched for `retention` that no running task or JM of
// this worker writes to (`active`, by job id). A zero retention keeps everything. Pure.
std::vector<std::string> expiredLogDirs(const std::vector<LogDir>& dirs, std::filesystem::file_time_type now,
                                        std::chrono::milliseconds retention, const std::set<std::string>& active);

// The per-job directories under `root` with their newest modification time (the directory's
// own and its direct entries', at most `maxEntries` looked at per directory); symlinks and
// plain files at the top are skipped. Missing root: none.
std::vector<LogDir> listLogDirs(const std::filesystem::path& root, size_t maxEntries = 10000);

}  // namespace tellus::worker
