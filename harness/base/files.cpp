#include "harness/files.h"

#include <fstream>
#include <iterator>

namespace tellus::harness {

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  // A /proc file of a process that exits while it is read fails the read (ESRCH), which the
  // stream reports by throwing from underflow: that is "cannot be read", not a test failure.
  try {
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    return std::string();
  }
}

bool processAlive(pid_t pid) {
  // "pid (comm) S ...": comm may hold spaces and parentheses, so the state is the first field
  // after the last ')'.
  const std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  return stat[close + 2] != 'Z' && stat[close + 2] != 'X';
}

}  // namespace tellus::harness
