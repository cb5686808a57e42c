// Frame codec: round trips, arbitrary chunking, and every way a stream can be bad.
#include <catch2/catch.hpp>

#include <string>

#include "net/frame.h"

using tellus::ErrorCode;
using tellus::net::encodeFrame;
using tellus::net::Frame;
using tellus::net::FrameDecoder;
using tellus::net::kFrameHeaderBytes;

namespace {

tellus::pb::RpcMeta requestMeta(std::uint64_t callId, const std::string& method) {
  tellus::pb::RpcMeta meta;
  meta.set_call_id(callId);
  meta.set_method(method);
  meta.set_timeout_ms(1500);
  return meta;
}

std::string encoded(std::uint64_t callId, const std::string& method, const std::string& body) {
  auto frame = encodeFrame(requestMeta(callId, method), body);
  REQUIRE(frame.isOk());
  return *frame;
}

// A header with the right magic/version/flags and the given sizes.
std::string header(std::uint32_t metaBytes, std::uint32_t bodyBytes) {
  std::string h = {'T', 'L', 1, 0};
  for (std::uint32_t v : {metaBytes, bodyBytes}) {
    for (int shift = 24; shift >= 0; shift -= 8) h.push_back(static_cast<char>((v >> shift) & 0xff));
  }
  return h;
}

Frame nextFrame(FrameDecoder& decoder) {
  auto frame = decoder.next();
  REQUIRE(frame.isOk());
  REQUIRE(frame->has_value());
  return std::move(**frame);
}

void requireNeedsMore(FrameDecoder& decoder) {
  auto frame = decoder.next();
  REQUIRE(frame.isOk());
  REQUIRE_FALSE(frame->has_value());
}

std::string requireError(FrameDecoder& decoder) {
  auto frame = decoder.next();
  REQUIRE_FALSE(frame.isOk());
  CHECK(frame.error().code == ErrorCode::kInvalidArgument);
  return frame.message();
}

}  // namespace

TEST_CASE("a frame round-trips meta and body", "[unit][net]") {
  const std::string body("payload\0with\0zeros", 18);
  FrameDecoder decoder;
  decoder.feed(encoded(42, "master.Submit", body));
  Frame frame = nextFrame(decoder);
  CHECK(frame.meta.call_id() == 42);
  CHECK(frame.meta.method() == "master.Submit");
  CHECK(frame.meta.timeout_ms() == 1500);
  CHECK(frame.body == body);
  requireNeedsMore(decoder);
  CHECK(decoder.bufferedBytes() == 0);
}

TEST_CASE("an empty body and an error response round-trip", "[unit][net]") {
  tellus::pb::RpcMeta meta;
  meta.set_call_id(7);
  meta.set_is_response(true);
  meta.set_status(tellus::net::toRpcStatus(ErrorCode::kConflict));
  meta.set_error_message("stale epoch");
  auto bytes = encodeFrame(meta, "");
  REQUIRE(bytes.isOk());
  FrameDecoder decoder;
  decoder.feed(*bytes);
  Frame frame = nextFrame(decoder);
  CHECK(frame.meta.is_response());
  CHECK(tellus::net::fromRpcStatus(frame.meta.status()) == ErrorCode::kConflict);
  CHECK(frame.meta.error_message() == "stale epoch");
  CHECK(frame.body.empty());
}

TEST_CASE("every ErrorCode survives the wire mapping", "[unit][net]") {
  for (ErrorCode code : {ErrorCode::kInvalidArgument, ErrorCode::kNotFound, ErrorCode::kAlreadyExists,
                         ErrorCode::kUnavailable, ErrorCode::kDeadlineExceeded, ErrorCode::kConflict,
                         ErrorCode::kInternal}) {
    CHECK(tellus::net::fromRpcStatus(tellus::net::toRpcStatus(code)) == code);
  }
  CHECK(tellus::net::fromRpcStatus(static_cast<tellus::pb::RpcStatus>(99)) == ErrorCode::kInternal);
}

TEST_CASE("several frames in one chunk come out in order", "[unit][net]") {
  FrameDecoder decoder;
  decoder.feed(encoded(1, "a", "one") + encoded(2, "b", "two") + encoded(3, "c", ""));
  CHECK(nextFrame(decoder).body == "one");
  CHECK(nextFrame(decoder).body == "two");
  Frame third = nextFrame(decoder);
  CHECK(third.meta.call_id() == 3);
  CHECK(third.body.empty());
  requireNeedsMore(decoder);
}

TEST_CASE("frames split at every possible byte boundary decode", "[unit][net]") {
  const std::string stream = encoded(1, "x.Method", std::string(300, 'p')) + encoded(2, "y", "tail");
  for (std::size_t chunk : {std::size_t{1}, std::size_t{2}, std::size_t{5}, std::size_t{11}, std::size_t{12},
                            std::size_t{13}, std::size_t{64}, std::size_t{333}}) {
    FrameDecoder decoder;
    std::vector<Frame> frames;
    for (std::size_t offset = 0; offset < stream.size(); offset += chunk) {
      decoder.feed(std::string_view(stream).substr(offset, chunk));
      for (;;) {
        auto frame = decoder.next();
        REQUIRE(frame.isOk());
        if (!frame->has_value()) break;
        frames.push_back(std::move(**frame));
      }
    }
    INFO("chunk size " << chunk);
    REQUIRE(frames.size() == 2);
    CHECK(frames[0].meta.method() == "x.Method");
    CHECK(frames[0].body == std::string(300, 'p'));
    CHECK(frames[1].body == "tail");
  }
}

TEST_CASE("a truncated frame waits for more bytes without error", "[unit][net]") {
  const std::string frame = encoded(5, "m", "body bytes");
  FrameDecoder decoder;
  decoder.feed(std::string_view(frame).substr(0, kFrameHeaderBytes - 1));
  requireNeedsMore(decoder);
  decoder.feed(std::string_view(frame).substr(kFrameHeaderBytes - 1, 5));
  requireNeedsMore(decoder);
  decoder.feed(std::string_view(frame).substr(kFrameHeaderBytes + 4, frame.size() - kFrameHeaderBytes - 5));
  requireNeedsMore(decoder);
  CHECK(decoder.bufferedBytes() == frame.size() - 1);
  decoder.feed(std::string_view(frame).substr(frame.size() - 1));
  CHECK(nextFrame(decoder).body == "body bytes");
}

TEST_CASE("garbage is rejected from its first wrong byte", "[unit][net]") {
  FrameDecoder decoder;
  decoder.feed("G");
  CHECK_THAT(requireError(decoder), Catch::Contains("bad frame magic"));

  FrameDecoder http;
  http.feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK_THAT(requireError(http), Catch::Contains("bad frame magic byte 0x47 at offset 0"));

  FrameDecoder secondByte;
  secondByte.feed("TX");
  CHECK_THAT(requireError(secondByte), Catch::Contains("at offset 1"));
}

TEST_CASE("an unsupported version or flags is rejected", "[unit][net]") {
  std::string frame = encoded(1, "m", "b");
  frame[2] = 2;
  FrameDecoder version;
  version.feed(std::string_view(frame).substr(0, 3));
  CHECK_THAT(requireError(version), Catch::Contains("unsupported frame version 2"));

  frame = encoded(1, "m", "b");
  frame[3] = 0x40;
  FrameDecoder flags;
  flags.feed(frame);
  CHECK_THAT(requireError(flags), Catch::Contains("unsupported frame flags 0x40"));
}

TEST_CASE("an oversized frame is rejected from its header alone", "[unit][net]") {
  FrameDecoder decoder(1024);
  decoder.feed(header(10, 2000));  // no meta or body bytes follow yet
  CHECK_THAT(requireError(decoder), Catch::Contains("exceeds the limit of 1024 bytes"));

  // The largest sizes a header can announce must not overflow the check.
  FrameDecoder huge;
  huge.feed(header(0, 0xffffffffu));
  CHECK_THAT(requireError(huge), Catch::Contains("exceeds the limit"));

  FrameDecoder bigMeta;
  bigMeta.feed(header(0xffffffffu, 0));
  CHECK_THAT(requireError(bigMeta), Catch::Contains("frame meta of"));
}

TEST_CASE("a frame exactly at the limit is accepted", "[unit][net]") {
  const std::string body(1000, 'x');
  const std::size_t frameBytes = encoded(1, "m", body).size();
  auto bytes = encodeFrame(requestMeta(1, "m"), body, frameBytes);
  REQUIRE(bytes.isOk());
  FrameDecoder decoder(frameBytes);
  decoder.feed(*bytes);
  CHECK(nextFrame(decoder).body == body);

  auto tooBig = encodeFrame(requestMeta(1, "m"), body, frameBytes - 1);
  REQUIRE_FALSE(tooBig.isOk());
  CHECK(tooBig.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(tooBig.message(), Catch::Contains("exceeds the limit"));
}

TEST_CASE("a malformed meta is rejected", "[unit][net]") {
  // 0xff is a field header with wire type 7, which does not exist.
  std::string frame = header(3, 1) + std::string("\xff\xff\xff", 3) + "b";
  FrameDecoder decoder;
  decoder.feed(frame);
  CHECK_THAT(requireError(decoder), Catch::Contains("malformed frame meta (3 bytes)"));
}

TEST_CASE("errors are final: later valid bytes do not resynchronize", "[unit][net]") {
  FrameDecoder decoder;
  decoder.feed("junk");
  const std::string first = requireError(decoder);
  decoder.feed(encoded(1, "m", "b"));
  CHECK(requireError(decoder) == first);
  CHECK(decoder.bufferedBytes() == 0);
}

TEST_CASE("a large body decodes when fed in socket-sized chunks", "[unit][net]") {
  std::string body(8 * 1024 * 1024 + 3, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 131);
  const std::string stream = encoded(9, "data.Put", body);
  FrameDecoder decoder;
  for (std::size_t offset = 0; offset < stream.size(); offset += 256 * 1024) {
    decoder.feed(std::string_view(stream).substr(offset, 256 * 1024));
    if (offset + 256 * 1024 < stream.size()) requireNeedsMore(decoder);
  }
  CHECK(nextFrame(decoder).body == body);
}
