#pragma once
// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.

#include <filesystem>
#include <string>

namespace tellus::harness {

class TempDir {
 public:
  // Creates <tmp>/tellus-<prefix>-XXXXXX; throws std::runtime_error if that fails (tests only).
  explicit TempDir(const std::string& prefix);
  TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TempDir& operator=(TempDir&&) = delete;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace tellus::harness
