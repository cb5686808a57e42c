#include "harness/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace tellus::harness {

TempDir::TempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/tellus-" + prefix + "-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + templ + ": " + std::strerror(errno));
  }
  path_ = buf.data();
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  // For a post-mortem of a failed run: its daemons' logs and state stay where they were.
  if (const char* keep = std::getenv("TELLUS_KEEP_TEST_DIRS"); keep && *keep && std::string(keep) != "0") {
    std::fprintf(stderr, "kept %s (TELLUS_KEEP_TEST_DIRS)\n", path_.c_str());
    return;
  }
  std::error_code ec;  // best effort: a test must not crash while cleaning up
  std::filesystem::remove_all(path_, ec);
}

}  // namespace tellus::harness
