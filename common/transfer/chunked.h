#pragma once
// The one chunked transfer of Tellus: an object (a partition, a dataset file, a job's result,
// a file being put) moved as a pipeline of request/response RPCs of one chunk each, with up to
// a window of chunks in flight on one connection, so a transfer is bounded by the link and not
// by one chunk per round trip (transfer/window.h decides what may go out; this file runs it).
// Used by worker.Fetch's caller (Worker::fetchTo), the master's `put` forwarding and the CLI's
// `tellus put` and `tellus result`. See common/transfer/README.md.
//
// Threading: call from a coroutine on a single-threaded executor; the chunk functions run as
// coroutines on that executor. Both functions return only once no chunk call they started is
// still running (after a failure the calls in flight are awaited, each bounded by its own
// deadline), so nothing outlives them.

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "transfer/window.h"
#include "util/result.h"

namespace tellus::transfer {

struct TransferOptions {
  WindowOptions window;
  // The deadline of each chunk call (the transfer as a whole is bounded by its progress).
  std::chrono::milliseconds chunkTimeout{30000};
};

// A reply to one chunk request of a read.
struct ReadReply {
  std::string data;
  std::uint64_t totalBytes = 0;  // of the whole object
  // CRC-32 (data/checksum.h) of the whole object when the source knows it; every reply must
  // then carry the same value.
  std::optional<std::uint32_t> crc32;
};

// Asks the source for the bytes [offset, offset + maxBytes) of the object (fewer at its end).
using ReadChunkFn = std::function<boost::asio::awaitable<Result<ReadReply>>(
    std::uint64_t offset, std::uint64_t maxBytes, std::chrono::milliseconds timeout)>;
// Receives the object's bytes in order; an error stops the transfer.
using SinkFn = std::function<Status(std::string_view bytes)>;
// Called after each chunk handed to the sink, with the bytes handed on so far (progress).
using ProgressFn = std::function<void(std::uint64_t bytes)>;

struct ReadSummary {
  std::uint64_t bytes = 0;
  std::uint32_t crc32 = 0;  // of the bytes received
  bool verified = false;    // the source sent a checksum and it matched
};

// Reads the whole object, handing its bytes to `sink` in order. Replies are checked by the
// window (sizes, total under options.window.maxTotalBytes); a source checksum that changes
// between replies, or that the bytes do not match, is kInternal "checksum mismatch ...".
// Errors of a chunk call come back as they are (first one wins).
[[nodiscard]] boost::asio::awaitable<Result<ReadSummary>> readChunked(ReadChunkFn readChunk, SinkFn sink,
                                                                      TransferOptions options,
                                                                      ProgressFn progress = nullptr);

// Sends the chunk `span` of the object; `last` is true for the chunk that ends it (an empty
// object is one empty, last chunk). The chunks are started in order of offset: a function
// that sends its request before it first suspends puts them on the connection in order.
using WriteChunkFn =
    std::function<boost::asio::awaitable<Status>(Span span, bool last, std::chrono::milliseconds timeout)>;

// Writes an object of `totalBytes`, up to the window unacknowledged.
[[nodiscard]] boost::asio::awaitable<Status> writeChunked(std::uint64_t totalBytes, WriteChunkFn writeChunk,
                                                          TransferOptions options);

}  // namespace tellus::transfer
