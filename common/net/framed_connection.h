#pragma once
// Internal to common/net: one TCP connection carrying frames, shared by server sessions and
// client connections. Not part of the public API.
//
// Contract: every member runs on the socket's executor, which is run by one thread.
// Lifetime: the read and write loops hold a shared_ptr, so the object lives until the socket
// is closed and both loops have returned.

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "net/frame.h"
#include "net/tls.h"
#include "util/result.h"

namespace tellus::net::detail {

struct ConnectionOptions {
  std::size_t maxFrameBytes = kDefaultMaxFrameBytes;
  // Back-pressure: reading pauses while more than this many bytes wait to be written, so a
  // peer that does not read its responses stops being read.
  std::size_t pauseReadingAboveQueuedBytes = 32 * 1024 * 1024;
  // send() refuses a frame that would grow the queue past this (a frame into an empty queue
  // is always accepted, so a single maximum-size frame can be sent).
  std::size_t maxQueuedBytes = 256 * 1024 * 1024;
  // Closed after this long with nothing received or sent and !busy() (0: never). Servers
  // only: a client's idle connection costs the server, not the client.
  std::chrono::milliseconds idleTimeout{0};
  // Once the first byte of a frame has arrived, the whole frame must arrive within
  // net::frameDeadline(size, frameDeadline, frameMinBytesPerSecond) (net/limits.h), else the
  // connection is closed: a peer trickling a frame (slowloris) cannot hold it forever.
  std::chrono::milliseconds frameDeadline{0};
  std::uint64_t frameMinBytesPerSecond = 0;
};

class FramedConnection : public std::enable_shared_from_this<FramedConnection> {
 public:
  // `peer` names the other side in logs and errors ("10.0.0.7:7000"). With `tls`, frames go
  // over TLS and handshake() must succeed before start().
  FramedConnection(boost::asio::ip::tcp::socket socket, ConnectionOptions options, std::string peer,
                   std::shared_ptr<TlsContext> tls = nullptr);
  virtual ~FramedConnection() = default;
  FramedConnection(const FramedConnection&) = delete;
  FramedConnection& operator=(const FramedConnection&) = delete;

  // Starts reading and writing. Call once, with the socket connected. Frames sent before
  // start() are queued and go out in order.
  void start();

  // Queues one frame. One write is in flight at a time. Errors: kUnavailable when closed or
  // the queue is full, kInvalidArgument when the frame exceeds the maximum size.
  // A request with a deadline is stamped with the time left (meta.timeout_ms) when it is
  // written, and dropped unsent if the deadline passes while it waits in the queue.
  [[nodiscard]] Status send(pb::RpcMeta meta, std::string body,
                            std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

  // Idempotent. Closes the socket, drops queued frames and calls onClosed(reason) once.
  void close(const Error& reason);

  // TLS only: the handshake, as server or client, bounded by `timeout` (the socket is closed
  // when it passes). On success peerIdentity() is the identity in the peer's verified
  // certificate. Errors are kPermissionDenied (refused) or kUnavailable (the connection failed).
  boost::asio::awaitable<Status> handshake(bool asServer, std::chrono::milliseconds timeout);
  // Set by a successful handshake; nullopt in plaintext mode.
  const std::optional<PeerIdentity>& peerIdentity() const { return peerIdentity_; }

  bool isClosed() const { return closed_; }
  bool isStarted() const { return started_; }
  const std::string& peer() const { return peer_; }
  // Whether the peer's close (FIN or RST) is already waiting in our socket, not yet seen by the
  // read loop. Does not consume anything.
  bool peerHasClosed();
  // When a byte was last received or a frame last written (start() counts as both).
  std::chrono::steady_clock::time_point lastActivity() const { return lastActivity_; }

 protected:
  // The TCP socket (under the TLS stream in TLS mode).
  boost::asio::ip::tcp::socket& socket() { return tls_ ? tls_->next_layer() : socket_; }

  // Called for every decoded frame, in order. May call close() or send().
  virtual void onFrame(Frame frame) = 0;
  // Called exactly once, from close(). Protocol errors are already logged by then.
  virtual void onClosed(const Error& reason) = 0;
  // An owner's extra read gate (e.g. too many calls in flight); call wakeReader() when it
  // may have turned true again.
  virtual bool mayRead() const { return true; }
  // Work in progress for the peer (e.g. calls running): the connection is not idle.
  virtual bool busy() const { return false; }
  void wakeReader();

 private:
  bool readingAllowed() const;
  static boost::asio::awaitable<void> readLoop(std::shared_ptr<FramedConnection> self);
  static boost::asio::awaitable<void> writeLoop(std::shared_ptr<FramedConnection> self);
  void startWriting();
  void armIdleTimer(std::chrono::steady_clock::time_point at);
  void onIdleTimer();
  void trackPartialFrame(bool completedFrames);
  void onFrameTimer();
  // The one place that knows about TLS: plaintext or TLS reads and writes.
  boost::asio::awaitable<std::size_t> readSome(boost::asio::mutable_buffer buffer, boost::system::error_code& ec);
  boost::asio::awaitable<void> writeAll(boost::asio::const_buffer buffer, boost::system::error_code& ec);

  struct Outgoing {
    pb::RpcMeta meta;
    std::string body;
    std::optional<std::chrono::steady_clock::time_point> deadline;
    std::size_t frameBytes;  // as accounted in queuedBytes_
  };

  boost::asio::ip::tcp::socket socket_;  // plaintext mode; moved into tls_ in TLS mode
  std::shared_ptr<TlsContext> tlsContext_;  // outlives tls_, which refers to it
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> tls_;
  std::optional<PeerIdentity> peerIdentity_;
  ConnectionOptions options_;
  std::string peer_;
  FrameDecoder decoder_;
  std::deque<Outgoing> sendQueue_;
  std::size_t queuedBytes_ = 0;  // bytes in sendQueue_ plus the frame being written
  bool started_ = false;
  bool writing_ = false;
  bool closed_ = false;
  // Never expires; the paused reader waits on it and wakeReader() cancels the wait.
  boost::asio::steady_timer readerWakeup_;
  // Transport limits (ConnectionOptions::idleTimeout, frameDeadline).
  std::chrono::steady_clock::time_point lastActivity_;
  boost::asio::steady_timer idleTimer_;
  std::optional<std::chrono::steady_clock::time_point> frameStarted_;  // first byte of the partial frame
  std::optional<std::chrono::steady_clock::time_point> frameDeadlineAt_;
  boost::asio::steady_timer frameTimer_;
};

}  // namespace tellus::net::detail
