#include "data/dataset.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "data/partition_store.h"

namespace tellus::data {
namespace fs = std::filesystem;
namespace {

Error ioError(const std::string& what, const fs::path& path, int errnum) {
  return makeError(ErrorCode::kInternal, what + " '" + path.string() + "': " + std::strerror(errnum));
}

Error ioError(const std::string& what, const fs::path& path, const std::error_code& ec) {
  return makeError(ErrorCode::kInternal, what + " '" + path.string() + "': " + ec.message());
}

// The split logic, shared by the in-memory and the file version. nextLineStart(t) returns
// the first line start at or after t (t < size).
template <class NextLineStart>
Result<std::vector<std::uint64_t>> splitPoints(std::uint64_t size, std::uint32_t partitions,
                                               NextLineStart&& nextLineStart) {
  std::vector<std::uint64_t> points(partitions + 1, 0);
  points[partitions] = size;
  for (std::uint32_t i = 1; i < partitions; ++i) {
    // 128-bit product: i * size overflows 64 bits for large files and many partitions.
    const auto target = static_cast<std::uint64_t>(static_cast<unsigned __int128>(size) * i / partitions);
    if (target <= points[i - 1]) {
      points[i] = points[i - 1];
      continue;
    }
    auto start = nextLineStart(target);
    if (!start.isOk()) return start.error();
    points[i] = std::max(points[i - 1], *start);
  }
  return points;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting the error (writes may fail only at close on some filesystems).
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

Status copyRange(int in, const fs::path& inPath, std::uint64_t begin, std::uint64_t end, const fs::path& outPath) {
  Fd out(::open(outPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (out.get() < 0) return ioError("creating", outPath, errno);
  std::vector<char> buffer(1 << 20);
  std::uint64_t offset = begin;
  while (offset < end) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), end - offset));
    const ssize_t got = ::pread(in, buffer.data(), want, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ioError("reading", inPath, errno);
    if (got == 0) return makeError(ErrorCode::kInternal, fmt::format("'{}' shrank while being split", inPath.string()));
    std::size_t done = 0;
    while (done < static_cast<std::size_t>(got)) {
      const ssize_t written = ::write(out.get(), buffer.data() + done, static_cast<std::size_t>(got) - done);
      if (written < 0 && errno == EINTR) continue;
      if (written < 0) return ioError("writing", outPath, errno);
      done += static_cast<std::size_t>(written);
    }
    offset += static_cast<std::uint64_t>(got);
  }
  if (out.close() != 0) return ioError("closing", outPath, errno);
  return Status::ok();
}

Status checkPartitionCount(std::uint32_t partitions) {
  if (partitions == 0 || partitions > kMaxSplitPartitions) {
    return makeError(ErrorCode::kInvalidArgument, "partition count must be between 1 and " +
                                                      std::to_string(kMaxSplitPartitions) + ", got " +
                                                      std::to_string(partitions));
  }
  return Status::ok();
}

}  // namespace

std::vector<std::uint64_t> lineAlignedSplitPoints(std::string_view content, std::uint32_t partitions) {
  if (partitions == 0) partitions = 1;
  auto points = splitPoints(content.size(), partitions, [&](std::uint64_t target) -> Result<std::uint64_t> {
    if (content[target - 1] == '\n') return target;
    const auto newline = content.find('\n', target);
    return newline == std::string_view::npos ? content.size() : newline + 1;
  });
  return std::move(points).value();  // the in-memory probe cannot fail
}

Result<std::vector<std::uint64_t>> lineAlignedSplitPointsOfFile(const fs::path& file, std::uint32_t partitions) {
  TELLUS_RETURN_IF_ERROR(checkPartitionCount(partitions));
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    return makeError(ErrorCode::kInvalidArgument, fmt::format("'{}' is not a regular file", file.string()));
  }
  const std::uint64_t size = fs::file_size(file, ec);
  if (ec) return ioError("reading size of", file, ec);
  Fd in(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) return ioError("opening", file, errno);
  std::vector<char> buffer(1 << 16);
  return splitPoints(size, partitions, [&](std::uint64_t target) -> Result<std::uint64_t> {
    // Scan from target - 1 so that a '\n' just before target makes target itself a line start.
    std::uint64_t offset = target - 1;
    while (offset < size) {
      const ssize_t got = ::pread(in.get(), buffer.data(), buffer.size(), static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return ioError("reading", file, errno);
      if (got == 0) break;
      const auto* newline = static_cast<const char*>(std::memchr(buffer.data(), '\n', static_cast<std::size_t>(got)));
      if (newline != nullptr) return offset + static_cast<std::uint64_t>(newline - buffer.data()) + 1;
      offset += static_cast<std::uint64_t>(got);
    }
    return size;
  });
}

std::string splitPartitionName(std::uint32_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "part-%05u", index);
  return name;
}

Result<std::vector<DatasetPartition>> splitFile(const fs::path& input, std::uint32_t partitions, const fs::path& outDir) {
  const std::string context = "splitting '" + input.string() + "'";
  auto points = lineAlignedSplitPointsOfFile(input, partitions);
  if (!points.isOk()) return points.error().prepend(context);

  std::error_code ec;
  if (fs::exists(outDir, ec) && !fs::is_empty(outDir, ec)) {
    return makeError(ErrorCode::kAlreadyExists, context + ": output directory '" + outDir.string() + "' is not empty");
  }
  fs::create_directories(outDir, ec);
  if (ec) return ioError(context + ": creating", outDir, ec);

  Fd in(::open(input.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) return ioError(context + ": opening", input, errno);
  std::vector<DatasetPartition> written;
  for (std::uint32_t i = 0; i < partitions; ++i) {
    const fs::path path = outDir / splitPartitionName(i);
    TELLUS_RETURN_IF_ERROR_CTX(copyRange(in.get(), input, (*points)[i], (*points)[i + 1], path), context);
    written.push_back(DatasetPartition{i, path, (*points)[i + 1] - (*points)[i]});
  }
  return written;
}

Result<std::vector<std::string>> DatasetDir::datasets() const {
  std::vector<std::string> names;
  std::error_code ec;
  if (!fs::exists(root_, ec)) return names;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name.front() != '.' && it->is_directory(ec)) names.push_back(name);
  }
  if (ec) return ioError("listing datasets in", root_, ec);
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::vector<DatasetPartition>> DatasetDir::partitions(const std::string& dataset) const {
  TELLUS_RETURN_IF_ERROR(validateStoreName("dataset name", dataset));
  const fs::path dir = root_ / dataset;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return makeError(ErrorCode::kNotFound, "dataset '" + dataset + "' not found in '" + root_.string() + "'");
  }
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name.front() != '.' && it->is_regular_file(ec)) files.push_back(it->path());
  }
  if (ec) return ioError("listing dataset", dir, ec);
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename().string() < b.filename().string(); });
  std::vector<DatasetPartition> result;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::uint64_t size = fs::file_size(files[i], ec);
    if (ec) return ioError("reading size of", files[i], ec);
    result.push_back(DatasetPartition{static_cast<std::uint32_t>(i), files[i], size});
  }
  return result;
}

Result<DatasetPartition> DatasetDir::partition(const std::string& dataset, std::uint32_t index) const {
  auto all = partitions(dataset);
  if (!all.isOk()) return all.error();
  if (index >= all->size()) {
    return makeError(ErrorCode::kNotFound, "dataset '" + dataset + "' has " + std::to_string(all->size()) +
                                               " partitions, no partition " + std::to_string(index));
  }
  return (*all)[index];
}

Result<std::vector<DatasetPartition>> DatasetDir::importFile(const fs::path& input, const std::string& dataset,
                                                             std::uint32_t partitions) const {
  TELLUS_RETURN_IF_ERROR(validateStoreName("dataset name", dataset));
  const fs::path finalDir = root_ / dataset;
  std::error_code ec;
  if (fs::exists(finalDir, ec)) {
    return makeError(ErrorCode::kAlreadyExists, "dataset '" + dataset + "' already exists in '" + root_.string() + "'");
  }
  fs::create_directories(root_, ec);
  if (ec) return ioError("creating dataset directory", root_, ec);
  std::string tempTemplate = (root_ / (".tmp-" + dataset + "-XXXXXX")).string();
  if (::mkdtemp(tempTemplate.data()) == nullptr) return ioError("creating temporary directory", tempTemplate, errno);
  const fs::path tempDir = tempTemplate;

  auto split = splitFile(input, partitions, tempDir);
  if (split.isOk() && ::rename(tempDir.c_str(), finalDir.c_str()) != 0) {
    const int renameErrno = errno;
    split = (renameErrno == EEXIST || renameErrno == ENOTEMPTY)
                ? makeError(ErrorCode::kAlreadyExists, "dataset '" + dataset + "' was created concurrently")
                : ioError("renaming into place", finalDir, renameErrno);
  }
  if (!split.isOk()) {
    fs::remove_all(tempDir, ec);
    return split.error();
  }
  for (auto& part : *split) part.path = finalDir / part.path.filename();
  return split;
}

}  // namespace tellus::data
