#include "data/partition_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <streambuf>

#include <fmt/format.h>

#include "data/checksum.h"
#include "util/names.h"

namespace tellus::data {
namespace fs = std::filesystem;
namespace {

constexpr const char* kDataFile = "data";
constexpr const char* kMetaFile = "meta";
constexpr std::size_t kWriteBufferBytes = 1 << 16;

Error ioError(const std::string& what, const fs::path& path, int errnum) {
  return makeError(ErrorCode::kInternal, what + " '" + path.string() + "': " + std::strerror(errnum));
}

Error ioError(const std::string& what, const fs::path& path, const std::error_code& ec) {
  return makeError(ErrorCode::kInternal, what + " '" + path.string() + "': " + ec.message());
}

Status writeAllFd(int fd, const char* data, std::size_t size, const fs::path& path) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return ioError("writing", path, errno);
    }
    data += written;
    size -= static_cast<std::size_t>(written);
  }
  return Status::ok();
}

Status syncPath(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return ioError("opening for fsync", path, errno);
  const int rc = ::fsync(fd);
  const int savedErrno = errno;
  ::close(fd);
  if (rc != 0) return ioError("fsync", path, savedErrno);
  return Status::ok();
}

std::string formatMeta(std::uint64_t size, std::uint32_t crc) {
  return "tellus-partition 1\nsize " + std::to_string(size) + "\ncrc32 " + formatCrc32(crc) + "\n";
}

// Parses "tellus-partition 1\nsize <n>\ncrc32 <8 hex>\n" exactly.
bool parseMeta(std::string_view text, std::uint64_t& size, std::uint32_t& crc) {
  constexpr std::string_view kHeader = "tellus-partition 1\nsize ";
  if (text.substr(0, kHeader.size()) != kHeader) return false;
  text.remove_prefix(kHeader.size());
  auto [sizeEnd, sizeEc] = std::from_chars(text.data(), text.data() + text.size(), size);
  if (sizeEc != std::errc() || sizeEnd == text.data()) return false;
  text.remove_prefix(static_cast<std::size_t>(sizeEnd - text.data()));
  constexpr std::string_view kCrc = "\ncrc32 ";
  if (text.substr(0, kCrc.size()) != kCrc) return false;
  text.remove_prefix(kCrc.size());
  if (text.size() != 9 || text.back() != '\n') return false;
  auto [crcEnd, crcEc] = std::from_chars(text.data(), text.data() + 8, crc, 16);
  return crcEc == std::errc() && crcEnd == text.data() + 8;
}

Result<std::string> readSmallFile(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return makeError(ErrorCode::kNotFound, "no such file '" + path.string() + "'");
    return ioError("opening", path, errno);
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int savedErrno = errno;
      ::close(fd);
      return ioError("reading", path, savedErrno);
    }
    if (got == 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
    if (text.size() > 1024) break;  // a meta file is ~50 bytes; more is garbage
  }
  ::close(fd);
  return text;
}

// Reads `size` bytes at `offset` of an open file.
Status preadAll(int fd, char* out, std::size_t size, std::uint64_t offset, const fs::path& path) {
  while (size > 0) {
    const ssize_t got = ::pread(fd, out, size, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ioError("reading", path, errno);
    }
    if (got == 0) return makeError(ErrorCode::kInternal, "partition file '" + path.string() + "' shrank while reading");
    out += got;
    size -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
  return Status::ok();
}

// "s<stage>-t<task>-b<bucket>" -> key fields; false for anything else (e.g. .tmp-* dirs).
bool parsePartitionDirName(std::string_view name, PartitionKey& key) {
  auto field = [&name](char tag, char terminator, std::uint32_t& value) {
    if (name.empty() || name.front() != tag) return false;
    name.remove_prefix(1);
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), value);
    if (ec != std::errc() || end == name.data()) return false;
    name.remove_prefix(static_cast<std::size_t>(end - name.data()));
    if (terminator == '\0') return name.empty();
    if (name.empty() || name.front() != terminator) return false;
    name.remove_prefix(1);
    return true;
  };
  return field('s', '-', key.stage) && field('t', '-', key.task) && field('b', '\0', key.bucket);
}

}  // namespace

std::string PartitionKey::toString() const {
  return jobId + "/s" + std::to_string(stage) + "-t" + std::to_string(task) + "-b" + std::to_string(bucket);
}

Status validateStoreName(std::string_view what, const std::string& name) { return checkName(what, name); }

// ---- PartitionWriter ----

// A streambuf over a file descriptor that computes the CRC-32 of everything written.
class PartitionWriter::ChecksummingFileBuf final : public std::streambuf {
 public:
  ChecksummingFileBuf(int fd, fs::path path) : fd_(fd), path_(std::move(path)), buffer_(kWriteBufferBytes) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  ~ChecksummingFileBuf() override { closeFd(); }

  // Flushes the buffer and closes the file (reporting close errors: on NFS-like filesystems
  // that is where a failed write shows up).
  Status finish(bool sync) {
    TELLUS_RETURN_IF_ERROR(flushBuffer());
    if (sync && ::fsync(fd_) != 0) return ioError("fsync", path_, errno);
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return ioError("closing", path_, errno);
    return Status::ok();
  }

  const Status& firstError() const { return error_; }
  std::uint64_t bytesWritten() const { return bytesWritten_; }
  std::uint32_t crc32() const { return crc_.value(); }

 protected:
  int_type overflow(int_type c) override {
    if (!flushBuffer().isOk()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }

  int sync() override { return flushBuffer().isOk() ? 0 : -1; }

  std::streamsize xsputn(const char* data, std::streamsize count) override {
    const auto size = static_cast<std::size_t>(count);
    if (size <= static_cast<std::size_t>(epptr() - pptr())) {
      std::memcpy(pptr(), data, size);
      pbump(static_cast<int>(size));
      return count;
    }
    if (!flushBuffer().isOk()) return 0;
    if (size >= buffer_.size()) {
      // Large writes bypass the buffer.
      if (!writeThrough(data, size).isOk()) return 0;
      return count;
    }
    std::memcpy(pptr(), data, size);
    pbump(static_cast<int>(size));
    return count;
  }

 private:
  Status flushBuffer() {
    const auto size = static_cast<std::size_t>(pptr() - pbase());
    Status written = writeThrough(pbase(), size);
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return written;
  }

  Status writeThrough(const char* data, std::size_t size) {
    if (!error_.isOk()) return error_;
    if (size == 0) return Status::ok();
    crc_.update(std::string_view(data, size));
    error_ = writeAllFd(fd_, data, size, path_);
    if (error_.isOk()) bytesWritten_ += size;
    return error_;
  }

  void closeFd() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  int fd_;
  fs::path path_;
  std::vector<char> buffer_;
  Crc32 crc_;
  std::uint64_t bytesWritten_ = 0;
  Status error_;
};

PartitionWriter::PartitionWriter(PartitionKey key, fs::path tempDir, fs::path finalDir, int dataFd,
                                 bool syncOnCommit)
    : key_(std::move(key)),
      tempDir_(std::move(tempDir)),
      finalDir_(std::move(finalDir)),
      buffer_(std::make_unique<ChecksummingFileBuf>(dataFd, tempDir_ / kDataFile)),
      stream_(std::make_unique<std::ostream>(buffer_.get())),
      syncOnCommit_(syncOnCommit) {}

PartitionWriter::~PartitionWriter() {
  stream_.reset();
  buffer_.reset();
  if (ownsTempDir_) {
    std::error_code ignored;  // best effort: a crash would leave the same debris
    fs::remove_all(tempDir_, ignored);
  }
}

std::ostream& PartitionWriter::stream() { return *stream_; }

Status PartitionWriter::append(std::string_view bytes) {
  if (finished_) return makeError(ErrorCode::kInvalidArgument, "partition " + key_.toString() + " is already committed");
  stream_->write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!stream_->good()) {
    const Status& error = buffer_->firstError();
    return error.isOk() ? Status(makeError(ErrorCode::kInternal, "writing partition " + key_.toString() + " failed"))
                        : error;
  }
  return Status::ok();
}

Result<PartitionInfo> PartitionWriter::commit() { return commitImpl(nullptr, nullptr); }

Result<PartitionInfo> PartitionWriter::commitVerified(std::uint64_t expectedSize, std::uint32_t expectedCrc32) {
  return commitImpl(&expectedSize, &expectedCrc32);
}

Result<PartitionInfo> PartitionWriter::commitImpl(const std::uint64_t* expectedSize, const std::uint32_t* expectedCrc32) {
  if (finished_) return makeError(ErrorCode::kInvalidArgument, "partition " + key_.toString() + " is already committed");
  finished_ = true;
  const std::string context = "committing partition " + key_.toString();
  stream_->flush();
  if (!buffer_->firstError().isOk()) return buffer_->firstError().prepend(context);
  if (!stream_->good()) return makeError(ErrorCode::kInternal, context + ": the output stream failed");
  TELLUS_RETURN_IF_ERROR_CTX(buffer_->finish(syncOnCommit_), context);

  PartitionInfo info{key_, buffer_->bytesWritten(), buffer_->crc32()};
  if (expectedSize != nullptr && (info.sizeBytes != *expectedSize || info.crc32 != *expectedCrc32)) {
    return makeError(ErrorCode::kInternal, context + ": checksum mismatch (received " + std::to_string(info.sizeBytes) +
                                               " bytes, crc32 " + formatCrc32(info.crc32) + "; expected " +
                                               std::to_string(*expectedSize) + " bytes, crc32 " +
                                               formatCrc32(*expectedCrc32) + ")");
  }
  const fs::path metaPath = tempDir_ / kMetaFile;
  const int metaFd = ::open(metaPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (metaFd < 0) return ioError("creating", metaPath, errno).prepend(context);
  const std::string meta = formatMeta(info.sizeBytes, info.crc32);
  Status metaWritten = writeAllFd(metaFd, meta.data(), meta.size(), metaPath);
  if (metaWritten.isOk() && syncOnCommit_ && ::fsync(metaFd) != 0) metaWritten = ioError("fsync", metaPath, errno);
  if (::close(metaFd) != 0 && metaWritten.isOk()) metaWritten = ioError("closing", metaPath, errno);
  TELLUS_RETURN_IF_ERROR_CTX(metaWritten, context);
  if (syncOnCommit_) TELLUS_RETURN_IF_ERROR_CTX(syncPath(tempDir_, O_RDONLY | O_DIRECTORY), context);

  // rename(2) of a directory onto an existing non-empty directory fails: first commit wins.
  if (::rename(tempDir_.c_str(), finalDir_.c_str()) != 0) {
    const int renameErrno = errno;
    if (renameErrno != EEXIST && renameErrno != ENOTEMPTY) {
      return ioError("renaming to", finalDir_, renameErrno).prepend(context);
    }
    auto existing = readSmallFile(finalDir_ / kMetaFile);
    std::uint64_t existingSize = 0;
    std::uint32_t existingCrc = 0;
    if (existing.isOk() && parseMeta(*existing, existingSize, existingCrc) && existingSize == info.sizeBytes &&
        existingCrc == info.crc32) {
      return info;  // identical content already published; the destructor drops our copy
    }
    return makeError(ErrorCode::kAlreadyExists, context + ": a different partition is already stored under this key");
  }
  ownsTempDir_ = false;
  if (syncOnCommit_) TELLUS_RETURN_IF_ERROR_CTX(syncPath(finalDir_.parent_path(), O_RDONLY | O_DIRECTORY), context);
  return info;
}

// ---- PartitionStore ----

Result<PartitionStore> PartitionStore::open(const fs::path& root, PartitionStoreOptions options) {
  if (root.empty()) return makeError(ErrorCode::kInvalidArgument, "partition store: root directory is empty");
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return ioError("partition store: creating root directory", root, ec);
  if (!fs::is_directory(root, ec)) {
    return makeError(ErrorCode::kInvalidArgument, "partition store: '" + root.string() + "' is not a directory");
  }
  if (::access(root.c_str(), W_OK | X_OK) != 0) return ioError("partition store: root directory", root, errno);
  return PartitionStore(fs::absolute(root, ec), options);
}

fs::path PartitionStore::partitionDir(const PartitionKey& key) const {
  return root_ / key.jobId / fmt::format("s{}-t{}-b{}", key.stage, key.task, key.bucket);
}

Result<std::unique_ptr<PartitionWriter>> PartitionStore::create(const PartitionKey& key) const {
  TELLUS_RETURN_IF_ERROR(validateStoreName("job id", key.jobId));
  const fs::path finalDir = partitionDir(key);
  std::error_code ec;
  fs::create_directories(finalDir.parent_path(), ec);
  if (ec) return ioError("creating job directory", finalDir.parent_path(), ec);

  std::string tempTemplate = (finalDir.parent_path() / (".tmp-" + finalDir.filename().string() + "-XXXXXX")).string();
  if (::mkdtemp(tempTemplate.data()) == nullptr) return ioError("creating temporary directory", tempTemplate, errno);
  const fs::path tempDir = tempTemplate;
  const fs::path dataPath = tempDir / kDataFile;
  const int fd = ::open(dataPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int savedErrno = errno;
    fs::remove_all(tempDir, ec);
    return ioError("creating", dataPath, savedErrno);
  }
  return std::unique_ptr<PartitionWriter>(
      new PartitionWriter(key, tempDir, finalDir, fd, options_.syncOnCommit));
}

Result<PartitionInfo> PartitionStore::write(const PartitionKey& key, std::string_view bytes) const {
  auto writer = create(key);
  if (!writer.isOk()) return writer.error();
  TELLUS_RETURN_IF_ERROR((*writer)->append(bytes));
  return (*writer)->commit();
}

bool PartitionStore::exists(const PartitionKey& key) const {
  if (!validateStoreName("job id", key.jobId).isOk()) return false;
  std::error_code ec;
  return fs::is_regular_file(partitionDir(key) / kMetaFile, ec);
}

Result<PartitionInfo> PartitionStore::stat(const PartitionKey& key) const {
  TELLUS_RETURN_IF_ERROR(validateStoreName("job id", key.jobId));
  const fs::path dir = partitionDir(key);
  auto meta = readSmallFile(dir / kMetaFile);
  if (!meta.isOk()) {
    if (meta.error().code == ErrorCode::kNotFound) {
      return makeError(ErrorCode::kNotFound, "partition " + key.toString() + " is not in the store");
    }
    return meta.error();
  }
  PartitionInfo info{key, 0, 0};
  if (!parseMeta(*meta, info.sizeBytes, info.crc32)) {
    return makeError(ErrorCode::kNotFound, "partition " + key.toString() + ": malformed meta file '" +
                                               (dir / kMetaFile).string() + "'");
  }
  std::error_code ec;
  const std::uint64_t actualSize = fs::file_size(dir / kDataFile, ec);
  if (ec == std::errc::no_such_file_or_directory) {
    return makeError(ErrorCode::kNotFound, "partition " + key.toString() + " is damaged: its data file '" +
                                               (dir / kDataFile).string() + "' is gone");
  }
  if (ec) return ioError("partition " + key.toString() + ": data file", dir / kDataFile, ec);
  if (actualSize != info.sizeBytes) {
    return makeError(ErrorCode::kNotFound, "partition " + key.toString() + " is corrupted: data file has " +
                                               std::to_string(actualSize) + " bytes, meta records " +
                                               std::to_string(info.sizeBytes));
  }
  return info;
}

Result<fs::path> PartitionStore::dataPath(const PartitionKey& key) const {
  auto info = stat(key);
  if (!info.isOk()) return info.error();
  return partitionDir(key) / kDataFile;
}

Result<Chunk> PartitionStore::read(const PartitionKey& key, std::uint64_t offset, std::uint64_t maxBytes) const {
  auto info = stat(key);
  if (!info.isOk()) return info.error();
  if (offset > info->sizeBytes) {
    return makeError(ErrorCode::kInvalidArgument, "partition " + key.toString() + ": offset " + std::to_string(offset) +
                                                      " is past its end (" + std::to_string(info->sizeBytes) + " bytes)");
  }
  Chunk chunk;
  chunk.offset = offset;
  chunk.totalSize = info->sizeBytes;
  chunk.crc32 = info->crc32;
  const std::uint64_t length = std::min({maxBytes, kMaxChunkBytes, info->sizeBytes - offset});
  if (length == 0) return chunk;

  const fs::path path = partitionDir(key) / kDataFile;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ioError("opening", path, errno);
  chunk.data.resize(static_cast<std::size_t>(length));
  Status readStatus = preadAll(fd, chunk.data.data(), chunk.data.size(), offset, path);
  ::close(fd);
  if (!readStatus.isOk()) return readStatus.error();
  return chunk;
}

Result<std::string> PartitionStore::readAll(const PartitionKey& key) const {
  std::string data;
  Crc32 crc;
  std::uint64_t offset = 0;
  for (;;) {
    auto chunk = read(key, offset, kMaxChunkBytes);
    if (!chunk.isOk()) return chunk.error();
    if (offset == 0) data.reserve(static_cast<std::size_t>(chunk->totalSize));
    crc.update(chunk->data);
    data += chunk->data;
    offset += chunk->data.size();
    if (chunk->isLast()) {
      if (crc.value() != chunk->crc32) {
        return makeError(ErrorCode::kInternal, "partition " + key.toString() + " is corrupted: checksum mismatch (data " +
                                                   formatCrc32(crc.value()) + ", recorded " + formatCrc32(chunk->crc32) + ")");
      }
      return data;
    }
  }
}

Status PartitionStore::verify(const PartitionKey& key) const {
  auto info = stat(key);
  if (!info.isOk()) return info.error();
  const fs::path path = partitionDir(key) / kDataFile;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ioError("opening", path, errno);
  Crc32 crc;
  std::vector<char> buffer(1 << 20);
  std::uint64_t total = 0;
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int savedErrno = errno;
      ::close(fd);
      return ioError("reading", path, savedErrno);
    }
    if (got == 0) break;
    crc.update(std::string_view(buffer.data(), static_cast<std::size_t>(got)));
    total += static_cast<std::uint64_t>(got);
  }
  ::close(fd);
  if (total != info->sizeBytes || crc.value() != info->crc32) {
    return makeError(ErrorCode::kInternal, "partition " + key.toString() + " is corrupted: checksum mismatch (data " +
                                               formatCrc32(crc.value()) + ", recorded " + formatCrc32(info->crc32) + ")");
  }
  return Status::ok();
}

Result<std::vector<PartitionInfo>> PartitionStore::list(const std::string& jobId) const {
  TELLUS_RETURN_IF_ERROR(validateStoreName("job id", jobId));
  std::vector<PartitionInfo> partitions;
  const fs::path jobDir = root_ / jobId;
  std::error_code ec;
  if (!fs::exists(jobDir, ec)) return partitions;
  for (fs::directory_iterator it(jobDir, ec), end; !ec && it != end; it.increment(ec)) {
    PartitionKey key{jobId, 0, 0, 0};
    if (!parsePartitionDirName(it->path().filename().string(), key)) continue;
    auto info = stat(key);
    // A partition removed concurrently is simply not listed.
    if (!info.isOk() && info.error().code == ErrorCode::kNotFound) continue;
    if (!info.isOk()) return info.error();
    partitions.push_back(*info);
  }
  if (ec) return ioError("listing", jobDir, ec);
  std::sort(partitions.begin(), partitions.end(),
            [](const PartitionInfo& a, const PartitionInfo& b) { return a.key < b.key; });
  return partitions;
}

Result<std::vector<std::string>> PartitionStore::jobs() const {
  std::vector<std::string> jobIds;
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_directory(ec) && validateStoreName("job id", name).isOk()) jobIds.push_back(name);
  }
  if (ec) return ioError("listing", root_, ec);
  std::sort(jobIds.begin(), jobIds.end());
  return jobIds;
}

Status PartitionStore::remove(const std::string& jobId) const {
  TELLUS_RETURN_IF_ERROR(validateStoreName("job id", jobId));
  std::error_code ec;
  fs::remove_all(root_ / jobId, ec);
  if (ec) return ioError("removing job directory", root_ / jobId, ec);
  return Status::ok();
}

Status PartitionStore::remove(const PartitionKey& key) const {
  TELLUS_RETURN_IF_ERROR(validateStoreName("job id", key.jobId));
  const fs::path dir = partitionDir(key);
  // Unpublish with one rename first, so no reader sees a data file without its meta.
  std::string graveyard = (dir.parent_path() / (".tmp-removed-" + dir.filename().string() + "-XXXXXX")).string();
  if (::mkdtemp(graveyard.data()) == nullptr) {
    if (errno == ENOENT) return Status::ok();  // the job directory is gone: nothing to remove
    return ioError("creating temporary directory", graveyard, errno);
  }
  const fs::path target = fs::path(graveyard) / "partition";
  std::error_code ec;
  if (::rename(dir.c_str(), target.c_str()) != 0 && errno != ENOENT) {
    const int savedErrno = errno;
    fs::remove_all(graveyard, ec);
    return ioError("removing partition", dir, savedErrno);
  }
  fs::remove_all(graveyard, ec);
  if (ec) return ioError("removing", graveyard, ec);
  return Status::ok();
}

}  // namespace tellus::data
