#include "net/frame.h"

#include <fmt/format.h>

#include <array>

namespace tellus::net {
namespace {

constexpr std::array<char, 2> kMagic = {'T', 'L'};

void putUint32(std::string& out, std::size_t offset, std::uint32_t value) {
  out[offset] = static_cast<char>((value >> 24) & 0xff);
  out[offset + 1] = static_cast<char>((value >> 16) & 0xff);
  out[offset + 2] = static_cast<char>((value >> 8) & 0xff);
  out[offset + 3] = static_cast<char>(value & 0xff);
}

std::uint32_t getUint32(const char* p) {
  auto byte = [p](int i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])); };
  return (byte(0) << 24) | (byte(1) << 16) | (byte(2) << 8) | byte(3);
}

}  // namespace

pb::RpcStatus toRpcStatus(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return pb::RPC_INVALID_ARGUMENT;
    case ErrorCode::kNotFound: return pb::RPC_NOT_FOUND;
    case ErrorCode::kAlreadyExists: return pb::RPC_ALREADY_EXISTS;
    case ErrorCode::kUnavailable: return pb::RPC_UNAVAILABLE;
    case ErrorCode::kDeadlineExceeded: return pb::RPC_DEADLINE_EXCEEDED;
    case ErrorCode::kConflict: return pb::RPC_CONFLICT;
    case ErrorCode::kInternal: return pb::RPC_INTERNAL;
    case ErrorCode::kResourceExhausted: return pb::RPC_RESOURCE_EXHAUSTED;
    case ErrorCode::kPermissionDenied: return pb::RPC_PERMISSION_DENIED;
  }
  return pb::RPC_INTERNAL;
}

ErrorCode fromRpcStatus(pb::RpcStatus status) {
  switch (status) {
    case pb::RPC_INVALID_ARGUMENT: return ErrorCode::kInvalidArgument;
    case pb::RPC_NOT_FOUND: return ErrorCode::kNotFound;
    case pb::RPC_ALREADY_EXISTS: return ErrorCode::kAlreadyExists;
    case pb::RPC_UNAVAILABLE: return ErrorCode::kUnavailable;
    case pb::RPC_DEADLINE_EXCEEDED: return ErrorCode::kDeadlineExceeded;
    case pb::RPC_CONFLICT: return ErrorCode::kConflict;
    case pb::RPC_RESOURCE_EXHAUSTED: return ErrorCode::kResourceExhausted;
    case pb::RPC_PERMISSION_DENIED: return ErrorCode::kPermissionDenied;
    default: return ErrorCode::kInternal;  // RPC_INTERNAL, RPC_OK misused as an error, future values
  }
}

Status checkFrameSize(std::size_t metaBytes, std::size_t bodyBytes, std::size_t maxFrameBytes) {
  if (metaBytes > kMaxMetaBytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("frame meta of {} bytes exceeds the limit of {} bytes", metaBytes, kMaxMetaBytes));
  }
  const std::size_t frameBytes = kFrameHeaderBytes + metaBytes + bodyBytes;
  if (frameBytes > maxFrameBytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("frame of {} bytes exceeds the limit of {} bytes", frameBytes, maxFrameBytes));
  }
  return Status::ok();
}

Result<std::string> encodeFrame(const pb::RpcMeta& meta, std::string_view body, std::size_t maxFrameBytes) {
  const std::size_t metaBytes = meta.ByteSizeLong();
  TELLUS_RETURN_IF_ERROR(checkFrameSize(metaBytes, body.size(), maxFrameBytes));
  const std::size_t frameBytes = kFrameHeaderBytes + metaBytes + body.size();
  std::string frame(kFrameHeaderBytes, '\0');
  frame[0] = kMagic[0];
  frame[1] = kMagic[1];
  frame[2] = static_cast<char>(kFrameVersion);
  frame[3] = 0;
  putUint32(frame, 4, static_cast<std::uint32_t>(metaBytes));
  putUint32(frame, 8, static_cast<std::uint32_t>(body.size()));
  frame.reserve(frameBytes);
  if (!meta.AppendToString(&frame)) {
    return makeError(ErrorCode::kInternal, "serializing frame meta failed");
  }
  frame.append(body);
  return frame;
}

FrameDecoder::FrameDecoder(std::size_t maxFrameBytes) : maxFrameBytes_(maxFrameBytes) {}

void FrameDecoder::feed(std::string_view bytes) {
  if (error_) return;  // the stream is dead; do not grow the buffer
  // Drop what was already returned before growing, so the buffer holds at most one frame
  // plus one read's worth of bytes.
  if (consumed_ > 0 && (consumed_ == buffer_.size() || consumed_ >= buffer_.size() / 2)) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(bytes);
}

std::optional<std::size_t> FrameDecoder::pendingFrameBytes() const {
  if (error_ || bufferedBytes() < kFrameHeaderBytes) return std::nullopt;
  const char* p = buffer_.data() + consumed_;
  return std::size_t{kFrameHeaderBytes} + getUint32(p + 4) + getUint32(p + 8);
}

Error FrameDecoder::fail(std::string message) {
  error_ = makeError(ErrorCode::kInvalidArgument, std::move(message));
  buffer_.clear();
  buffer_.shrink_to_fit();
  consumed_ = 0;
  return *error_;
}

Result<std::optional<Frame>> FrameDecoder::next() {
  if (error_) return *error_;
  const char* p = buffer_.data() + consumed_;
  const std::size_t available = buffer_.size() - consumed_;

  // Check the fixed prefix byte by byte so that garbage is rejected without waiting for a
  // full header (a peer sending 3 wrong bytes and then idling is still caught).
  for (std::size_t i = 0; i < available && i < kMagic.size(); ++i) {
    if (p[i] != kMagic[i]) {
      return fail(fmt::format("bad frame magic byte 0x{:02x} at offset {} (peer does not speak Tellus RPC)",
                              static_cast<unsigned char>(p[i]), i));
    }
  }
  if (available > 2 && static_cast<std::uint8_t>(p[2]) != kFrameVersion) {
    return fail(fmt::format("unsupported frame version {} (expected {})", static_cast<unsigned char>(p[2]),
                            kFrameVersion));
  }
  if (available > 3 && p[3] != 0) {
    return fail(fmt::format("unsupported frame flags 0x{:02x}", static_cast<unsigned char>(p[3])));
  }
  if (available < kFrameHeaderBytes) return std::optional<Frame>();

  const std::uint32_t metaBytes = getUint32(p + 4);
  const std::uint32_t bodyBytes = getUint32(p + 8);
  if (metaBytes > kMaxMetaBytes) {
    return fail(fmt::format("frame meta of {} bytes exceeds the limit of {} bytes", metaBytes, kMaxMetaBytes));
  }
  const std::uint64_t frameBytes = std::uint64_t{kFrameHeaderBytes} + metaBytes + bodyBytes;
  if (frameBytes > maxFrameBytes_) {
    return fail(fmt::format("frame of {} bytes exceeds the limit of {} bytes", frameBytes, maxFrameBytes_));
  }
  // No reserve() for the announced size: memory follows the bytes actually received, so a
  // peer that only sends a header cannot make us allocate maxFrameBytes.
  if (available < frameBytes) return std::optional<Frame>();

  Frame frame;
  if (!frame.meta.ParseFromArray(p + kFrameHeaderBytes, static_cast<int>(metaBytes))) {
    return fail(fmt::format("malformed frame meta ({} bytes)", metaBytes));
  }
  frame.body.assign(p + kFrameHeaderBytes + metaBytes, bodyBytes);
  consumed_ += frameBytes;
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  }
  return std::optional<Frame>(std::move(frame));
}

}  // namespace tellus::net
