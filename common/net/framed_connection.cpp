#include "net/framed_connection.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>
#include <openssl/ssl.h>
#include <fmt/format.h>

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <memory>

#include "net/limits.h"
#include "util/log.h"

namespace tellus::net::detail {

namespace asio = boost::asio;

namespace {
constexpr std::size_t kReadChunkBytes = 256 * 1024;
// The smallest read buffer (what one small RPC needs).
constexpr std::size_t kMinReadBytes = 4 * 1024;
// One TLS record's plaintext (a TLS read returns at most one record).
constexpr std::size_t kTlsReadBytes = 16 * 1024;
}  // namespace

FramedConnection::FramedConnection(asio::ip::tcp::socket socket, ConnectionOptions options, std::string peer,
                                   std::shared_ptr<TlsContext> tls)
    : socket_(std::move(socket)),
      tlsContext_(std::move(tls)),
      options_(options),
      peer_(std::move(peer)),
      decoder_(options.maxFrameBytes),
      readerWakeup_(socket_.get_executor()),
      idleTimer_(socket_.get_executor()),
      frameTimer_(socket_.get_executor()) {
  readerWakeup_.expires_at(asio::steady_timer::time_point::max());
  if (tlsContext_) tls_.emplace(std::move(socket_), tlsContext_->native());
}

asio::awaitable<Status> FramedConnection::handshake(bool asServer, std::chrono::milliseconds timeout) {
  if (!tls_) co_return Status::ok();
  // Closing the socket is what aborts a handshake in progress (a peer that connects and
  // says nothing must not hold the connection open).
  auto timedOut = std::make_shared<bool>(false);
  asio::steady_timer timer(socket().get_executor(), timeout);
  timer.async_wait([weak = weak_from_this(), timedOut](boost::system::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock(); self && !self->started_ && !self->closed_) {
      *timedOut = true;
      boost::system::error_code ignored;
      self->socket().close(ignored);
    }
  });
  boost::system::error_code ec;
  co_await tls_->async_handshake(asServer ? asio::ssl::stream_base::server : asio::ssl::stream_base::client,
                                 asio::redirect_error(asio::use_awaitable, ec));
  timer.cancel();
  if (closed_) co_return makeError(ErrorCode::kUnavailable, fmt::format("connection to {} closed", peer_));
  if (*timedOut) {
    co_return makeError(ErrorCode::kUnavailable,
                        fmt::format("TLS handshake with {} timed out after {} ms", peer_, timeout.count()));
  }
  if (ec) {
    // A verification failure is a refusal; anything else is the connection failing.
    const bool refused = ec.category() == asio::error::get_ssl_category();
    co_return makeError(refused ? ErrorCode::kPermissionDenied : ErrorCode::kUnavailable,
                        fmt::format("TLS handshake with {} failed: {}", peer_, ec.message()));
  }
  auto identity = identityOfCertificate(SSL_get0_peer_certificate(tls_->native_handle()));
  if (!identity) co_return identity.error().prepend(fmt::format("TLS peer {}", peer_));
  peerIdentity_ = std::move(*identity);
  co_return Status::ok();
}

asio::awaitable<std::size_t> FramedConnection::readSome(asio::mutable_buffer buffer, boost::system::error_code& ec) {
  if (tls_) co_return co_await tls_->async_read_some(buffer, asio::redirect_error(asio::use_awaitable, ec));
  co_return co_await socket_.async_read_some(buffer, asio::redirect_error(asio::use_awaitable, ec));
}

asio::awaitable<void> FramedConnection::writeAll(asio::const_buffer buffer, boost::system::error_code& ec) {
  if (tls_) {
    co_await asio::async_write(*tls_, buffer, asio::redirect_error(asio::use_awaitable, ec));
  } else {
    co_await asio::async_write(socket_, buffer, asio::redirect_error(asio::use_awaitable, ec));
  }
}

void FramedConnection::start() {
  if (started_ || closed_) return;
  started_ = true;
  lastActivity_ = std::chrono::steady_clock::now();
  if (options_.idleTimeout.count() > 0) armIdleTimer(lastActivity_ + options_.idleTimeout);
  asio::co_spawn(socket_.get_executor(), readLoop(shared_from_this()), asio::detached);
  startWriting();
}

Status FramedConnection::send(pb::RpcMeta meta, std::string body,
                              std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (closed_) return makeError(ErrorCode::kUnavailable, fmt::format("connection to {} is closed", peer_));
  // Restamping timeout_ms at write time can only shrink the meta, so the check holds then too.
  const std::size_t metaBytes = meta.ByteSizeLong();
  TELLUS_RETURN_IF_ERROR(checkFrameSize(metaBytes, body.size(), options_.maxFrameBytes));
  const std::size_t frameBytes = kFrameHeaderBytes + metaBytes + body.size();
  if (queuedBytes_ > 0 && queuedBytes_ + frameBytes > options_.maxQueuedBytes) {
    return makeError(ErrorCode::kUnavailable, fmt::format("send queue to {} is full ({} bytes waiting)", peer_,
                                                          queuedBytes_));
  }
  queuedBytes_ += frameBytes;
  sendQueue_.push_back(Outgoing{std::move(meta), std::move(body), deadline, frameBytes});
  startWriting();
  return Status::ok();
}

void FramedConnection::startWriting() {
  if (!started_ || closed_ || writing_ || sendQueue_.empty()) return;
  writing_ = true;
  asio::co_spawn(socket_.get_executor(), writeLoop(shared_from_this()), asio::detached);
}

void FramedConnection::close(const Error& reason) {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  // TLS: no close_notify exchange; the frames carry their own ends.
  socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket().close(ignored);
  readerWakeup_.cancel();
  idleTimer_.cancel();
  frameTimer_.cancel();
  sendQueue_.clear();
  queuedBytes_ = 0;
  onClosed(reason);
}

void FramedConnection::wakeReader() { readerWakeup_.cancel(); }

bool FramedConnection::peerHasClosed() {
  if (closed_ || !started_) return false;
  char byte;
  const ssize_t n = ::recv(socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// The idle timer is not moved on every read: it fires at the first possible idle moment and
// re-arms itself from the last activity, so a busy connection costs one timer wait per period.
void FramedConnection::armIdleTimer(std::chrono::steady_clock::time_point at) {
  idleTimer_.expires_at(at);
  idleTimer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->onIdleTimer();
  });
}

void FramedConnection::onIdleTimer() {
  if (closed_) return;
  const auto now = std::chrono::steady_clock::now();
  if (busy() || queuedBytes_ > 0) {
    armIdleTimer(now + options_.idleTimeout);
    return;
  }
  if (now < lastActivity_ + options_.idleTimeout) {
    armIdleTimer(lastActivity_ + options_.idleTimeout);
    return;
  }
  spdlog::debug("rpc: closing connection with {}: idle for {} ms", peer_, options_.idleTimeout.count());
  close(makeError(ErrorCode::kUnavailable, fmt::format("connection with {} closed after {} ms idle", peer_,
                                                       options_.idleTimeout.count())));
}

// Called after every read: starts, extends (once the header tells the size) or ends the
// deadline of the frame being received.
void FramedConnection::trackPartialFrame(bool completedFrames) {
  if (decoder_.bufferedBytes() == 0) {
    if (frameDeadlineAt_) frameTimer_.cancel();
    frameStarted_.reset();
    frameDeadlineAt_.reset();
    return;
  }
  // The partial frame began in this read when a frame was completed in it.
  if (!frameStarted_ || completedFrames) frameStarted_ = std::chrono::steady_clock::now();
  const auto allowed = net::frameDeadline(decoder_.pendingFrameBytes(), options_.frameDeadline,
                                          options_.frameMinBytesPerSecond);
  if (!allowed) return;
  const auto at = *frameStarted_ + *allowed;
  if (frameDeadlineAt_ == at) return;
  frameDeadlineAt_ = at;
  frameTimer_.expires_at(at);
  frameTimer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->onFrameTimer();
  });
}

void FramedConnection::onFrameTimer() {
  if (closed_ || !frameDeadlineAt_ || std::chrono::steady_clock::now() < *frameDeadlineAt_) return;
  if (!readingAllowed()) {
    // We stopped reading (back-pressure), so the rest may be waiting in our socket: not the
    // peer's fault. Give it a fresh deadline once reading resumes.
    frameDeadlineAt_ = std::chrono::steady_clock::now() + options_.frameDeadline;
    frameTimer_.expires_at(*frameDeadlineAt_);
    frameTimer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->onFrameTimer();
    });
    return;
  }
  const auto declared = decoder_.pendingFrameBytes();
  spdlog::warn("rpc: closing connection with {}: a frame ({} of {} bytes received) did not arrive within its deadline",
               peer_, decoder_.bufferedBytes(), declared ? fmt::format("{}", *declared) : std::string("unknown"));
  close(makeError(ErrorCode::kUnavailable, fmt::format("connection with {} closed: frame not received within its "
                                                       "deadline", peer_)));
}

bool FramedConnection::readingAllowed() const {
  return queuedBytes_ <= options_.pauseReadingAboveQueuedBytes && mayRead();
}

asio::awaitable<void> FramedConnection::readLoop(std::shared_ptr<FramedConnection> self) {
  // An idle connection holds no read buffer: wait until the socket is readable, then read what
  // is there into a buffer sized to it (at most kReadChunkBytes), kept while data keeps coming
  // and given back when the socket runs dry. (Thousands of idle peers used to cost 256 KiB each.)
  std::unique_ptr<char[]> chunk;
  std::size_t chunkBytes = 0;
  boost::system::error_code ec;
  while (!self->closed_) {
    if (!self->readingAllowed()) {
      // The wait ends (operation_aborted) on wakeReader() or close(); then re-check.
      co_await self->readerWakeup_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    std::size_t n = 0;
    if (self->tls_) {
      // Decrypted bytes can wait inside the TLS layer while the socket is not readable, so
      // TLS reads at once (its stream holds record buffers per connection anyway).
      if (chunkBytes < kTlsReadBytes) {
        chunk = std::make_unique_for_overwrite<char[]>(kTlsReadBytes);
        chunkBytes = kTlsReadBytes;
      }
      n = co_await self->readSome(asio::buffer(chunk.get(), chunkBytes), ec);
    } else {
      co_await self->socket_.async_wait(asio::ip::tcp::socket::wait_read, asio::redirect_error(asio::use_awaitable, ec));
    }
    if (!self->tls_ && !ec && !self->closed_) {
      const std::size_t ready = self->socket_.available(ec);
      const std::size_t want = std::clamp(ready, kMinReadBytes, kReadChunkBytes);
      if (!ec && chunkBytes < want) {
        chunk = std::make_unique_for_overwrite<char[]>(want);
        chunkBytes = want;
      }
      if (!ec) n = co_await self->readSome(asio::buffer(chunk.get(), chunkBytes), ec);
    }
    if (self->closed_) co_return;
    if (ec) {
      const bool orderly = ec == asio::error::eof || ec == asio::error::connection_reset ||
                           ec == asio::ssl::error::stream_truncated;
      if (orderly) {
        spdlog::debug("rpc: {} closed the connection", self->peer_);
      } else {
        spdlog::info("rpc: reading from {} failed: {}", self->peer_, ec.message());
      }
      self->close(makeError(ErrorCode::kUnavailable,
                            fmt::format("connection to {} lost: {}", self->peer_, ec.message())));
      co_return;
    }
    self->lastActivity_ = std::chrono::steady_clock::now();
    self->decoder_.feed(std::string_view(chunk.get(), n));
    bool completedFrames = false;
    while (!self->closed_) {
      auto frame = self->decoder_.next();
      if (!frame) {
        spdlog::warn("rpc: closing connection with {}: {}", self->peer_, frame.message());
        self->close(frame.error().prepend(fmt::format("protocol error on connection with {}", self->peer_)));
        co_return;
      }
      if (!*frame) break;
      completedFrames = true;
      self->onFrame(std::move(**frame));
    }
    if (self->closed_) co_return;
    self->trackPartialFrame(completedFrames);
    boost::system::error_code availableError;
    if (!self->tls_ && chunkBytes > 0 && self->socket_.available(availableError) == 0) {
      chunk.reset();
      chunkBytes = 0;
    }
  }
}

asio::awaitable<void> FramedConnection::writeLoop(std::shared_ptr<FramedConnection> self) {
  boost::system::error_code ec;
  while (!self->closed_ && !self->sendQueue_.empty()) {
    Outgoing out = std::move(self->sendQueue_.front());
    self->sendQueue_.pop_front();
    if (out.deadline) {
      // The receiver's deadline is relative (no clock sync between sites), so it must be
      // measured now, after the time spent connecting or queued behind other frames.
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(*out.deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        spdlog::debug("rpc: not sending call {} '{}' to {}: its deadline passed in the send queue",
                      out.meta.call_id(), out.meta.method(), self->peer_);
        self->queuedBytes_ -= out.frameBytes;
        continue;
      }
      out.meta.set_timeout_ms(static_cast<std::uint32_t>(
          std::min<std::chrono::milliseconds::rep>(left.count(), std::numeric_limits<std::uint32_t>::max())));
    }
    auto frame = encodeFrame(out.meta, out.body, self->options_.maxFrameBytes);
    out.body = std::string();  // the frame holds a copy; do not keep two while writing
    if (!frame) {  // checked in send(); only a broken invariant gets here
      spdlog::error("rpc: cannot encode frame for {}: {}", self->peer_, frame.message());
      self->queuedBytes_ -= out.frameBytes;
      continue;
    }
    co_await self->writeAll(asio::buffer(*frame), ec);
    if (self->closed_) co_return;  // close() already reset the queue accounting
    self->queuedBytes_ -= out.frameBytes;
    self->lastActivity_ = std::chrono::steady_clock::now();
    if (ec) {
      spdlog::info("rpc: writing to {} failed: {}", self->peer_, ec.message());
      self->close(makeError(ErrorCode::kUnavailable,
                            fmt::format("connection to {} lost: {}", self->peer_, ec.message())));
      co_return;
    }
    self->wakeReader();  // the queue shrank: a reader paused by back-pressure may go on
  }
  self->writing_ = false;
}

}  // namespace tellus::net::detail
