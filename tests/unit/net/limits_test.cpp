// Transport limit decisions (net/limits.h): connection caps, the call-rate token bucket, the
// frame deadline and the log throttle. Time is passed in, so nothing here sleeps.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "net/frame.h"
#include "net/limits.h"

namespace tellus::net {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Verdict = ConnectionLimiter::Verdict;

TEST_CASE("the connection limiter caps each peer IP and the total", "[unit][net][limits]") {
  ConnectionLimiter limiter(5, 2);
  CHECK(limiter.admit("10.0.0.1") == Verdict::kAdmit);
  CHECK(limiter.admit("10.0.0.1") == Verdict::kAdmit);
  CHECK(limiter.admit("10.0.0.1") == Verdict::kOverPerPeer);  // refused: not counted
  CHECK(limiter.of("10.0.0.1") == 2u);
  CHECK(limiter.admit("10.0.0.2") == Verdict::kAdmit);
  CHECK(limiter.admit("10.0.0.2") == Verdict::kAdmit);
  CHECK(limiter.admit("10.0.0.3") == Verdict::kAdmit);
  CHECK(limiter.total() == 5u);
  CHECK(limiter.admit("10.0.0.4") == Verdict::kOverTotal);
  CHECK(limiter.of("10.0.0.4") == 0u);

  limiter.release("10.0.0.1");
  CHECK(limiter.total() == 4u);
  CHECK(limiter.admit("10.0.0.4") == Verdict::kAdmit);
  CHECK(limiter.admit("10.0.0.1") == Verdict::kOverTotal);

  // Releasing what was never admitted changes nothing.
  limiter.release("192.168.1.1");
  limiter.release("10.0.0.4");
  limiter.release("10.0.0.4");
  CHECK(limiter.total() == 4u);
  CHECK(limiter.of("10.0.0.4") == 0u);
}

TEST_CASE("a zero connection cap means unlimited", "[unit][net][limits]") {
  ConnectionLimiter limiter(0, 0);
  for (int i = 0; i < 1000; ++i) REQUIRE(limiter.admit("::1") == Verdict::kAdmit);
  CHECK(limiter.total() == 1000u);
  ConnectionLimiter perPeerOnly(0, 1);
  CHECK(perPeerOnly.admit("a") == Verdict::kAdmit);
  CHECK(perPeerOnly.admit("a") == Verdict::kOverPerPeer);
  CHECK(perPeerOnly.admit("b") == Verdict::kAdmit);
}

TEST_CASE("the token bucket allows the burst, then the rate", "[unit][net][limits]") {
  const auto t0 = Clock::time_point{} + 1h;
  TokenBucket bucket(10, 3, t0);  // 10/s, burst 3
  CHECK(bucket.take(t0));
  CHECK(bucket.take(t0));
  CHECK(bucket.take(t0));
  CHECK_FALSE(bucket.take(t0));
  CHECK_FALSE(bucket.take(t0 + 50ms));  // half a token
  CHECK(bucket.take(t0 + 100ms));
  CHECK_FALSE(bucket.take(t0 + 100ms));
  // A long pause refills to the burst, not beyond.
  const auto later = t0 + 1h;
  for (int i = 0; i < 3; ++i) CHECK(bucket.take(later));
  CHECK_FALSE(bucket.take(later));
  // A clock that goes backwards (not steady in a test) does not mint tokens.
  CHECK_FALSE(bucket.take(t0));
}

TEST_CASE("a zero rate disables the token bucket", "[unit][net][limits]") {
  const auto t0 = Clock::time_point{};
  TokenBucket bucket(0, 0, t0);
  for (int i = 0; i < 100000; ++i) REQUIRE(bucket.take(t0));
}

TEST_CASE("the frame deadline grows with the declared size", "[unit][net][limits]") {
  CHECK(frameDeadline(std::nullopt, 30s, 65536) == std::chrono::milliseconds(30s));
  CHECK(frameDeadline(std::size_t{12}, 30s, 0) == std::chrono::milliseconds(30s));
  CHECK(frameDeadline(std::size_t{65536}, 30s, 65536) == std::chrono::milliseconds(31s));
  // 64 MiB at 64 KiB/s: 1024 s on top of the base.
  CHECK(frameDeadline(kDefaultMaxFrameBytes, 30s, 64 * 1024) == std::chrono::milliseconds(30s + 1024s));
  // Rounded up to whole milliseconds.
  CHECK(frameDeadline(std::size_t{1}, 1ms, 1000) == std::chrono::milliseconds(2));
  // The largest size a header can declare does not overflow.
  CHECK(frameDeadline(std::size_t{12} + 2 * 0xffffffffull, 1s, 1) > std::chrono::milliseconds(8'000'000'000LL));
  CHECK_FALSE(frameDeadline(std::size_t{100}, 0ms, 65536).has_value());
}

TEST_CASE("the log throttle lets one line per interval through and counts the rest", "[unit][net][limits]") {
  LogThrottle throttle(10s);
  const auto t0 = Clock::time_point{} + 1h;
  CHECK(throttle.allow(t0) == std::optional<std::uint64_t>(0));
  CHECK_FALSE(throttle.allow(t0 + 1s).has_value());
  CHECK_FALSE(throttle.allow(t0 + 9s).has_value());
  CHECK(throttle.allow(t0 + 10s) == std::optional<std::uint64_t>(2));
  CHECK(throttle.allow(t0 + 25s) == std::optional<std::uint64_t>(0));
}

TEST_CASE("the decoder tells the declared size of a frame once its header is in", "[unit][net][limits]") {
  FrameDecoder decoder;
  CHECK_FALSE(decoder.pendingFrameBytes().has_value());
  decoder.feed(std::string{'T', 'L', 1, 0, 0, 0, 0});
  CHECK_FALSE(decoder.pendingFrameBytes().has_value());
  decoder.feed(std::string{5, 0, 0, 1, 0});  // meta 5, body 256
  REQUIRE(decoder.pendingFrameBytes().has_value());
  CHECK(*decoder.pendingFrameBytes() == kFrameHeaderBytes + 5 + 256);
}

}  // namespace
}  // namespace tellus::net
