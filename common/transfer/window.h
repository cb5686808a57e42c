#pragma once
// The flow control of a chunked transfer, pure (no I/O, no clock): which chunk to ask for (or
// send) next, how many may be outstanding, and when the transfer is complete. A transfer moves
// one object of `total` bytes as chunks [offset, offset + length) of `chunkBytes` (the last
// one shorter); at most `windowBytes` may be requested and not yet completed in order, so a
// reply that arrives early (out of order) still counts against the window until every chunk
// before it has completed. Used by transfer/chunked.h for reads (fetch, result) and writes
// (put); see common/transfer/README.md.
//
// Reads learn the total from the first reply: until then only the first chunk is outstanding.
// Every size reported by the peer is checked against what was asked (a chunk must be exactly
// min(chunkBytes, total - offset) long) and against `maxTotalBytes`; a violation is an error
// and the transfer must stop.

#include <cstdint>
#include <map>
#include <optional>

#include "util/result.h"

namespace tellus::transfer {

struct WindowOptions {
  std::uint64_t chunkBytes = 1 << 20;
  // Bytes requested and not yet completed in order. At least one chunk.
  std::uint64_t windowBytes = 32ULL << 20;
  // The largest object accepted (a peer announcing more is refused).
  std::uint64_t maxTotalBytes = 1ULL << 40;
};

struct Span {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  bool operator==(const Span&) const = default;
};

class ChunkWindow {
 public:
  // `total`: known for a write, std::nullopt for a read (learnt from the first reply).
  // chunkBytes 0 is taken as 1; windowBytes below chunkBytes as chunkBytes.
  ChunkWindow(WindowOptions options, std::optional<std::uint64_t> total);

  // The next chunk to request or send, or std::nullopt when the window is full, everything
  // has been requested, or (read) the total is not known yet and the first chunk is out.
  std::optional<Span> next();

  // A reply to `span` (which next() returned and was not completed yet) reporting the
  // object's size `total` and carrying `bytes` bytes. Errors (kInternal, naming the
  // violation): a total over maxTotalBytes or different from the one learnt before, a size
  // other than min(span.length, total - span.offset), an unknown or repeated span.
  [[nodiscard]] Status complete(const Span& span, std::uint64_t total, std::uint64_t bytes);
  // For writes: the peer acknowledged `span` (as sent).
  [[nodiscard]] Status acknowledge(const Span& span) { return complete(span, total_.value_or(0), span.length); }

  // Bytes completed in order from offset 0: everything below may be handed on.
  std::uint64_t contiguous() const { return contiguous_; }
  // Chunks requested and not completed yet.
  std::size_t outstanding() const { return outstanding_; }
  std::optional<std::uint64_t> total() const { return total_; }
  // Every byte of the object has completed in order.
  bool finished() const { return requestedAny_ && total_ && contiguous_ >= *total_ && pending_.empty(); }

 private:
  std::uint64_t chunkBytes_;
  std::uint64_t windowBytes_;
  std::uint64_t maxTotalBytes_;
  std::optional<std::uint64_t> total_;
  std::uint64_t nextOffset_ = 0;
  std::uint64_t contiguous_ = 0;
  bool requestedAny_ = false;  // an empty object still takes one (empty) chunk
  struct Pending {
    std::uint64_t length = 0;
    std::optional<std::uint64_t> completedBytes;  // set once its reply came (out of order)
  };
  std::map<std::uint64_t, Pending> pending_;  // requested and not yet completed in order
  std::size_t outstanding_ = 0;  // entries of pending_ without a reply
};

}  // namespace tellus::transfer
