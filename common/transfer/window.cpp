#include "transfer/window.h"

#include <fmt/format.h>

#include <algorithm>

namespace tellus::transfer {

ChunkWindow::ChunkWindow(WindowOptions options, std::optional<std::uint64_t> total)
    : chunkBytes_(std::max<std::uint64_t>(1, options.chunkBytes)),
      windowBytes_(std::max(options.windowBytes, chunkBytes_)),
      maxTotalBytes_(options.maxTotalBytes),
      total_(total) {}

std::optional<Span> ChunkWindow::next() {
  if (!requestedAny_) {
    // The first chunk always goes out: a read learns the size from it, and an empty write
    // still sends one (empty, last) chunk.
    requestedAny_ = true;
    Span span{0, total_ ? std::min(chunkBytes_, *total_) : chunkBytes_};
    pending_[0] = Pending{span.length, std::nullopt};
    ++outstanding_;
    nextOffset_ = span.length;
    return span;
  }
  if (!total_) return std::nullopt;  // a read waits for the first reply
  if (nextOffset_ >= *total_) return std::nullopt;
  if (nextOffset_ - contiguous_ + chunkBytes_ > windowBytes_) return std::nullopt;
  Span span{nextOffset_, std::min(chunkBytes_, *total_ - nextOffset_)};
  pending_[span.offset] = Pending{span.length, std::nullopt};
  ++outstanding_;
  nextOffset_ += span.length;
  return span;
}

Status ChunkWindow::complete(const Span& span, std::uint64_t total, std::uint64_t bytes) {
  auto it = pending_.find(span.offset);
  if (it == pending_.end() || it->second.length != span.length || it->second.completedBytes) {
    return makeError(ErrorCode::kInternal, fmt::format("a reply for bytes {}+{}, which were not asked for (or twice)",
                                                       span.offset, span.length));
  }
  if (total > maxTotalBytes_) {
    return makeError(ErrorCode::kInternal,
                     fmt::format("the peer announces {} bytes, over the limit of {}", total, maxTotalBytes_));
  }
  if (total_ && *total_ != total) {
    return makeError(ErrorCode::kInternal,
                     fmt::format("the object's size changed from {} to {} bytes during the transfer", *total_, total));
  }
  if (span.offset > total) {
    return makeError(ErrorCode::kInternal, fmt::format("chunk at {} lies beyond the end ({} bytes)", span.offset, total));
  }
  const std::uint64_t expected = std::min(span.length, total - span.offset);
  if (bytes != expected) {
    return makeError(ErrorCode::kInternal,
                     fmt::format("chunk at {} has {} bytes, expected {} (of {})", span.offset, bytes, expected, total));
  }
  total_ = total;
  it->second.completedBytes = bytes;
  --outstanding_;
  while (!pending_.empty() && pending_.begin()->first == contiguous_ && pending_.begin()->second.completedBytes) {
    contiguous_ += *pending_.begin()->second.completedBytes;
    pending_.erase(pending_.begin());
  }
  return Status::ok();
}

}  // namespace tellus::transfer
