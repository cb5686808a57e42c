#pragma once
// Raw input datasets on a worker: files under a configured directory, separate from the
// partition store (task outputs).
//
// Layout: <root>/<dataset>/<partition files>. The partitions of a dataset are the regular
// files of its directory whose names do not start with '.', in bytewise-sorted name order;
// partition i is the i-th of them. `tellus put FILE --dataset NAME --partitions K` creates
// <root>/NAME/part-00000 ... part-<K-1> with importFile().

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace tellus::data {

inline constexpr std::uint32_t kMaxSplitPartitions = 100000;

struct DatasetPartition {
  std::uint32_t index = 0;
  std::filesystem::path path;
  std::uint64_t sizeBytes = 0;
};

// Where to cut `content` into `partitions` pieces of nearly equal size at line boundaries.
// Returns partitions + 1 offsets: 0 = p[0] <= p[1] <= ... <= p[K] = size; piece i is
// [p[i], p[i+1]). Cut i is the first line start at or after i * size / K (a line start is
// offset 0 or an offset just after '\n'), so no line is ever split; a piece is empty when a
// long line spans its whole share (or K exceeds the line count). partitions == 0 counts as 1.
std::vector<std::uint64_t> lineAlignedSplitPoints(std::string_view content, std::uint32_t partitions);

// The same cut points for a file, reading only around each cut.
Result<std::vector<std::uint64_t>> lineAlignedSplitPointsOfFile(const std::filesystem::path& file,
                                                                std::uint32_t partitions);

// Splits the text file `input` into `partitions` files outDir/part-00000 ... (5-digit,
// zero-padded index) at lineAlignedSplitPoints. outDir must not exist or be empty; it is
// created. 1 <= partitions <= kMaxSplitPartitions.
Result<std::vector<DatasetPartition>> splitFile(const std::filesystem::path& input, std::uint32_t partitions,
                                                const std::filesystem::path& outDir);

// File name of partition `index` as written by splitFile: "part-00042".
std::string splitPartitionName(std::uint32_t index);

class DatasetDir {
 public:
  explicit DatasetDir(std::filesystem::path root) : root_(std::move(root)) {}

  const std::filesystem::path& root() const { return root_; }

  // Dataset names (subdirectories not starting with '.'), sorted; empty if root is missing.
  Result<std::vector<std::string>> datasets() const;
  // kNotFound if the dataset does not exist.
  Result<std::vector<DatasetPartition>> partitions(const std::string& dataset) const;
  Result<DatasetPartition> partition(const std::string& dataset, std::uint32_t index) const;

  // Creates dataset `dataset` from a local text file split into `partitions` partitions.
  // All or nothing: the files are written to a temporary directory that is renamed into
  // place. kAlreadyExists if the dataset exists.
  Result<std::vector<DatasetPartition>> importFile(const std::filesystem::path& input, const std::string& dataset,
                                                   std::uint32_t partitions) const;

 private:
  std::filesystem::path root_;
};

}  // namespace tellus::data
