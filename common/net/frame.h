#pragma once
// Frame codec of the Tellus RPC wire format. Pure: no sockets, so it is unit-tested alone and
// the same code decodes what the connections read.
//
// A frame is a fixed 12-byte header followed by a serialized pb::RpcMeta and the body bytes
// (the serialized request or response message):
//
//   offset 0  'T' 'L'          magic
//   offset 2  version (1)
//   offset 3  flags (0; reserved, anything else is rejected)
//   offset 4  meta size        uint32, big-endian, <= kMaxMetaBytes
//   offset 8  body size        uint32, big-endian
//
// The whole frame (header + meta + body) must fit in the configured maximum (64 MiB by
// default); the limit is checked from the header alone, before any body byte is buffered.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rpc.pb.h"
#include "util/result.h"

namespace tellus::net {

inline constexpr std::size_t kFrameHeaderBytes = 12;
inline constexpr std::uint8_t kFrameVersion = 1;
inline constexpr std::size_t kDefaultMaxFrameBytes = 64 * 1024 * 1024;
// Meta carries a call id, a method name and at most an error message: never large.
inline constexpr std::size_t kMaxMetaBytes = 64 * 1024;

struct Frame {
  pb::RpcMeta meta;
  std::string body;
};

// Error codes cross the wire as pb::RpcStatus. Unknown wire values map to kInternal.
pb::RpcStatus toRpcStatus(ErrorCode code);
ErrorCode fromRpcStatus(pb::RpcStatus status);

// Whether a frame with a meta of metaBytes and a body of bodyBytes may be sent; the same
// check encodeFrame() makes, for callers that encode later.
[[nodiscard]] Status checkFrameSize(std::size_t metaBytes, std::size_t bodyBytes,
                                    std::size_t maxFrameBytes = kDefaultMaxFrameBytes);

// Serializes meta and body into one frame. Fails (kInvalidArgument) when the meta exceeds
// kMaxMetaBytes or the frame exceeds maxFrameBytes.
[[nodiscard]] Result<std::string> encodeFrame(const pb::RpcMeta& meta, std::string_view body,
                                              std::size_t maxFrameBytes = kDefaultMaxFrameBytes);

// Incremental decoder for one byte stream. Feed it whatever the socket returned, then call
// next() until it yields no frame. Errors are final: a stream that once carried a bad frame
// cannot be resynchronized, so the connection must be closed.
class FrameDecoder {
 public:
  explicit FrameDecoder(std::size_t maxFrameBytes = kDefaultMaxFrameBytes);

  void feed(std::string_view bytes);

  // A complete frame, std::nullopt when more bytes are needed, or an error (kInvalidArgument)
  // for bad magic, unsupported version, non-zero flags, oversized frame or malformed meta.
  // Garbage is reported as soon as the first wrong byte arrives.
  [[nodiscard]] Result<std::optional<Frame>> next();

  // Bytes received but not yet returned as frames.
  std::size_t bufferedBytes() const { return buffer_.size() - consumed_; }

  // The size (header + meta + body) the next frame declares, once its header has arrived;
  // std::nullopt before that. Not validated: next() judges it.
  std::optional<std::size_t> pendingFrameBytes() const;

 private:
  Error fail(std::string message);

  std::size_t maxFrameBytes_;
  std::string buffer_;
  std::size_t consumed_ = 0;  // prefix of buffer_ already returned as frames
  std::optional<Error> error_;
};

}  // namespace tellus::net
