#pragma once
// A worker's store of task output partitions (shuffle buckets), on local disk.
//
// Layout under the root directory:
//   <jobId>/s<stage>-t<task>-b<bucket>/data   the bytes, exactly as the operator wrote them
//   <jobId>/s<stage>-t<task>-b<bucket>/meta   "tellus-partition 1\nsize <n>\ncrc32 <8 hex>\n"
//   <jobId>/.tmp-*                            partitions being written
// A partition is written in a temporary directory and published with one rename() of that
// directory, so a reader sees either nothing or the complete data with its checksum; a crash
// leaves only .tmp-* debris. Committed partitions are immutable: a second commit of the same
// key succeeds only if the content is identical (a re-run of a deterministic task) and keeps
// the first copy, so a fetch in progress is never served bytes from two different files.
//
// The store keeps no state in memory: any number of PartitionStore objects and processes
// (executors of several containers) may use the same root at once.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace tellus::data {

struct PartitionKey {
  std::string jobId;
  std::uint32_t stage = 0;
  std::uint32_t task = 0;
  std::uint32_t bucket = 0;

  auto operator<=>(const PartitionKey&) const = default;
  // "job-7/s1-t3-b0"
  std::string toString() const;
};

// Job ids and dataset names become directory names: util/names.h's checkName.
Status validateStoreName(std::string_view what, const std::string& name);

struct PartitionInfo {
  PartitionKey key;
  std::uint64_t sizeBytes = 0;
  std::uint32_t crc32 = 0;  // of the whole partition, see data/checksum.h
};

// A piece of a partition, for serving fetches.
struct Chunk {
  std::string data;
  std::uint64_t offset = 0;     // of data[0] in the partition
  std::uint64_t totalSize = 0;  // of the whole partition
  std::uint32_t crc32 = 0;      // of the whole partition, as recorded at commit
  bool isLast() const { return offset + data.size() == totalSize; }
};

struct PartitionStoreOptions {
  // fsync data, meta and directories at commit. Off by default: partitions can be recomputed
  // from lineage, and a torn file after a power cut is caught by its size/checksum.
  bool syncOnCommit = false;
};

// Writes one partition. Write through stream() or append(), then commit(); destroying an
// uncommitted writer discards what was written.
class PartitionWriter {
 public:
  ~PartitionWriter();
  PartitionWriter(const PartitionWriter&) = delete;
  PartitionWriter& operator=(const PartitionWriter&) = delete;

  std::ostream& stream();
  Status append(std::string_view bytes);
  // Publishes the partition. Fails with kAlreadyExists if a different partition was committed
  // under the same key meanwhile. The writer is unusable afterwards, whatever the outcome.
  Result<PartitionInfo> commit();
  // commit() only if what was written has this size and CRC-32, e.g. a partition fetched
  // from another worker checked against the Chunk::crc32 its owner reported; otherwise a
  // kInternal "checksum mismatch" error and nothing is published.
  Result<PartitionInfo> commitVerified(std::uint64_t expectedSize, std::uint32_t expectedCrc32);

  const PartitionKey& key() const { return key_; }

 private:
  friend class PartitionStore;
  class ChecksummingFileBuf;
  PartitionWriter(PartitionKey key, std::filesystem::path tempDir, std::filesystem::path finalDir,
                  int dataFd, bool syncOnCommit);
  Result<PartitionInfo> commitImpl(const std::uint64_t* expectedSize, const std::uint32_t* expectedCrc32);

  PartitionKey key_;
  std::filesystem::path tempDir_;
  std::filesystem::path finalDir_;
  std::unique_ptr<ChecksummingFileBuf> buffer_;
  std::unique_ptr<std::ostream> stream_;
  bool syncOnCommit_;
  bool finished_ = false;     // commit() was called
  bool ownsTempDir_ = true;   // until the rename publishes it
};

class PartitionStore {
 public:
  // Creates the root directory if needed; errors if it cannot be created or is not writable.
  static Result<PartitionStore> open(const std::filesystem::path& root, PartitionStoreOptions options = {});

  const std::filesystem::path& root() const { return root_; }

  Result<std::unique_ptr<PartitionWriter>> create(const PartitionKey& key) const;
  // create + append + commit.
  Result<PartitionInfo> write(const PartitionKey& key, std::string_view bytes) const;

  bool exists(const PartitionKey& key) const;
  // Size and checksum from the meta file. kNotFound if absent, and also if damaged (the meta
  // file malformed, the data file gone or of another size): such a partition is not held, and
  // its readers go to another copy, or tell their JM it is lost, rather than fail for good.
  Result<PartitionInfo> stat(const PartitionKey& key) const;
  // Path of a committed partition's data file, for a task on this worker to read directly.
  Result<std::filesystem::path> dataPath(const PartitionKey& key) const;

  // Up to min(maxBytes, kMaxChunkBytes) bytes from offset (fewer at the end; none when offset
  // == size). offset > size is kInvalidArgument. Does not re-verify the checksum: the reader
  // checks the assembled partition against Chunk::crc32, end to end.
  static constexpr std::uint64_t kMaxChunkBytes = 16ULL << 20;
  Result<Chunk> read(const PartitionKey& key, std::uint64_t offset, std::uint64_t maxBytes) const;
  // The whole partition, verified against its checksum.
  Result<std::string> readAll(const PartitionKey& key) const;
  // Recomputes the checksum of the data file; kInternal "checksum mismatch" if it differs.
  Status verify(const PartitionKey& key) const;

  // Committed partitions of a job, sorted by key (empty if the job has none).
  Result<std::vector<PartitionInfo>> list(const std::string& jobId) const;
  // Jobs with a directory in the store, sorted.
  Result<std::vector<std::string>> jobs() const;
  // Drops all partitions of a job (no error if it has none).
  Status remove(const std::string& jobId) const;
  // Drops one partition (no error if absent), e.g. after it failed verification.
  Status remove(const PartitionKey& key) const;

 private:
  PartitionStore(std::filesystem::path root, PartitionStoreOptions options)
      : root_(std::move(root)), options_(options) {}
  std::filesystem::path partitionDir(const PartitionKey& key) const;

  std::filesystem::path root_;
  PartitionStoreOptions options_;
};

}  // namespace tellus::data
