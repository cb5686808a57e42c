#include "monitor/process_table.h"

#include <signal.h>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>

namespace tellus::monitor {
namespace {

// Closes a directory stream at scope exit.
class DirGuard {
 public:
  explicit DirGuard(DIR* dir) : dir_(dir) {}
  DirGuard(const DirGuard&) = delete;
  DirGuard& operator=(const DirGuard&) = delete;
  ~DirGuard() {
    if (dir_ != nullptr) ::closedir(dir_);
  }
  DIR* get() const { return dir_; }

 private:
  DIR* dir_;
};

// The pid named by a /proc entry, or 0 for non-process entries ("self", "meminfo", ...).
pid_t pidFromEntryName(const char* name) {
  std::string_view text(name);
  pid_t pid = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (ec != std::errc() || end != text.data() + text.size() || pid <= 0) return 0;
  return pid;
}

enum class ReadOutcome { kOk, kGone };

// Reads a small /proc file relative to the open /proc directory into `out` with one read()
// (the kernel produces /proc/<pid>/stat in one go; it is a few hundred bytes). kGone when the
// process exited before or while we read it.
ReadOutcome readSmallFile(int dirFd, const std::string& relativePath, std::string& out) {
  int fd = ::openat(dirFd, relativePath.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ReadOutcome::kGone;  // ENOENT (exited) or EACCES (hidepid): not ours to see
  char buffer[4096];
  ssize_t n;
  do {
    n = ::read(fd, buffer, sizeof(buffer));
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  // ESRCH: the task was released between open and read.
  if (n <= 0) return ReadOutcome::kGone;
  out.assign(buffer, static_cast<std::size_t>(n));
  return ReadOutcome::kOk;
}

}  // namespace

Result<SystemConstants> SystemConstants::query() {
  long ticks = ::sysconf(_SC_CLK_TCK);
  long page = ::sysconf(_SC_PAGESIZE);
  if (ticks <= 0 || page <= 0) {
    return makeError(ErrorCode::kInternal, "sysconf(_SC_CLK_TCK/_SC_PAGESIZE) failed: " +
                                               std::string(std::strerror(errno)));
  }
  return SystemConstants{ticks, page};
}

ProcessTable ProcessTable::fromStats(std::vector<PidStat> stats) {
  ProcessTable table;
  table.byPid_.reserve(stats.size());
  for (auto& stat : stats) {
    pid_t pid = stat.pid;
    table.byPid_.insert_or_assign(pid, std::move(stat));
  }
  for (const auto& [pid, stat] : table.byPid_) table.childrenByPid_[stat.ppid].push_back(pid);
  return table;
}

const PidStat* ProcessTable::find(pid_t pid) const {
  auto it = byPid_.find(pid);
  return it == byPid_.end() ? nullptr : &it->second;
}

const std::vector<pid_t>& ProcessTable::childrenOf(pid_t pid) const {
  static const std::vector<pid_t> kNoChildren;
  auto it = childrenByPid_.find(pid);
  return it == childrenByPid_.end() ? kNoChildren : it->second;
}

Result<ProcessTable> readProcessTable(const std::filesystem::path& procRoot) {
  DirGuard dir(::opendir(procRoot.c_str()));
  if (dir.get() == nullptr) {
    return makeError(ErrorCode::kUnavailable,
                     "listing " + procRoot.string() + ": " + std::strerror(errno));
  }
  int dirFd = ::dirfd(dir.get());

  std::vector<PidStat> stats;
  std::size_t malformed = 0;
  std::string content;
  std::string relativePath;
  for (;;) {
    errno = 0;  // readdir reports errors only through errno
    dirent* entry = ::readdir(dir.get());
    if (entry == nullptr) {
      if (errno != 0) {
        return makeError(ErrorCode::kUnavailable,
                         "reading directory " + procRoot.string() + ": " + std::strerror(errno));
      }
      break;
    }
    pid_t pid = pidFromEntryName(entry->d_name);
    if (pid == 0) continue;
    relativePath.assign(entry->d_name);
    relativePath += "/stat";
    if (readSmallFile(dirFd, relativePath, content) == ReadOutcome::kGone) continue;
    auto stat = parsePidStat(content);
    if (!stat) {
      ++malformed;
      continue;
    }
    stats.push_back(std::move(*stat));
  }

  auto table = ProcessTable::fromStats(std::move(stats));
  table.setMalformedEntries(malformed);
  return table;
}

std::vector<pid_t> processTree(const ProcessTable& table, pid_t root) {
  std::vector<pid_t> tree{root};
  for (size_t i = 0; i < tree.size(); ++i) {
    for (pid_t child : table.childrenOf(tree[i])) tree.push_back(child);
  }
  return tree;
}

void signalProcessTree(pid_t root, int sig) {
  std::vector<pid_t> tree{root};
  if (auto table = readProcessTable()) tree = processTree(*table, root);
  for (pid_t pid : tree) ::kill(pid, sig);
}

}  // namespace tellus::monitor
