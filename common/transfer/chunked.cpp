#include "transfer/chunked.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <deque>
#include <map>
#include <memory>

#include "data/checksum.h"

namespace tellus::transfer {

namespace asio = boost::asio;

namespace {

// The chunk calls in flight and the replies not yet taken, shared with the calls' coroutines
// (which may finish after the driver stopped waiting for them: it waits until running == 0).
template <class Reply>
struct Pipeline {
  explicit Pipeline(const asio::any_io_executor& executor) : wakeup(executor, asio::steady_timer::time_point::max()) {}

  void arrive(const Span& span, Result<Reply> reply) {
    arrived.emplace_back(span, std::move(reply));
    --running;
    wakeup.cancel();
  }

  // Returns once something arrived (at once if something already has).
  asio::awaitable<void> wait() {
    while (arrived.empty()) {
      boost::system::error_code ec;
      co_await wakeup.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

  asio::steady_timer wakeup;  // never expires; arrive() cancels the wait
  std::size_t running = 0;
  std::deque<std::pair<Span, Result<Reply>>> arrived;
};

// Starts `call` for `span` as a coroutine of its own; its outcome lands in the pipeline.
template <class Reply, class Call>
void launch(const asio::any_io_executor& executor, const std::shared_ptr<Pipeline<Reply>>& pipeline, Span span,
            Call call) {
  ++pipeline->running;
  auto slot = std::make_shared<std::optional<Result<Reply>>>();
  asio::co_spawn(
      executor,
      [slot, call = std::move(call)]() mutable -> asio::awaitable<void> {
        Result<Reply> outcome = co_await call();
        slot->emplace(std::move(outcome));
      },
      [pipeline, span, slot](std::exception_ptr) {
        if (slot->has_value()) {
          pipeline->arrive(span, std::move(**slot));
        } else {
          pipeline->arrive(span, makeError(ErrorCode::kInternal, "a chunk call failed with an exception"));
        }
      });
}

struct Empty {};

}  // namespace

asio::awaitable<Result<ReadSummary>> readChunked(ReadChunkFn readChunk, SinkFn sink, TransferOptions options,
                                                 ProgressFn progress) {
  auto executor = co_await asio::this_coro::executor;
  auto pipeline = std::make_shared<Pipeline<ReadReply>>(executor);
  ChunkWindow window(options.window, std::nullopt);
  std::map<std::uint64_t, std::string> early;  // replies ahead of the next byte to hand on
  std::uint64_t handedOn = 0;
  data::Crc32 crc;
  std::optional<std::uint32_t> sourceCrc;
  bool sawReplyWithoutCrc = false;
  std::optional<Error> failure;
  for (;;) {
    while (!failure) {
      auto span = window.next();
      if (!span) break;
      launch<ReadReply>(executor, pipeline, *span, [readChunk, span = *span, timeout = options.chunkTimeout] {
        return readChunk(span.offset, span.length, timeout);
      });
    }
    if (pipeline->running == 0 && pipeline->arrived.empty() && (failure || window.finished())) break;
    co_await pipeline->wait();
    while (!pipeline->arrived.empty()) {
      auto [span, reply] = std::move(pipeline->arrived.front());
      pipeline->arrived.pop_front();
      if (failure) continue;  // the transfer failed: what is still arriving is dropped
      if (!reply) {
        failure = reply.error();
        continue;
      }
      if (auto st = window.complete(span, reply->totalBytes, reply->data.size()); !st) {
        failure = st.error();
        continue;
      }
      if (reply->crc32) {
        if (sawReplyWithoutCrc || (sourceCrc && *sourceCrc != *reply->crc32)) {
          failure = makeError(ErrorCode::kInternal, "checksum mismatch: the source's checksum changed during the transfer");
          continue;
        }
        sourceCrc = reply->crc32;
      } else if (sourceCrc) {
        failure = makeError(ErrorCode::kInternal, "checksum mismatch: a chunk came without the source's checksum");
        continue;
      } else {
        sawReplyWithoutCrc = true;
      }
      early.emplace(span.offset, std::move(reply->data));
      // The window checked every size, so the chunks tile the object: hand on the run that
      // starts at the next byte.
      while (!failure && !early.empty() && early.begin()->first == handedOn) {
        std::string bytes = std::move(early.begin()->second);
        early.erase(early.begin());
        crc.update(bytes);
        handedOn += bytes.size();
        if (auto st = sink(bytes); !st) failure = st.error();
        if (progress) progress(handedOn);
      }
    }
  }
  if (failure) co_return *failure;
  ReadSummary summary;
  summary.bytes = handedOn;
  summary.crc32 = crc.value();
  if (sourceCrc) {
    if (*sourceCrc != summary.crc32) {
      co_return makeError(ErrorCode::kInternal,
                          fmt::format("checksum mismatch: {} bytes received with CRC-32 {}, the source has {}",
                                      handedOn, data::formatCrc32(summary.crc32), data::formatCrc32(*sourceCrc)));
    }
    summary.verified = true;
  }
  co_return summary;
}

asio::awaitable<Status> writeChunked(std::uint64_t totalBytes, WriteChunkFn writeChunk, TransferOptions options) {
  auto executor = co_await asio::this_coro::executor;
  auto pipeline = std::make_shared<Pipeline<Empty>>(executor);
  ChunkWindow window(options.window, totalBytes);
  std::optional<Error> failure;
  for (;;) {
    while (!failure) {
      auto span = window.next();
      if (!span) break;
      const bool last = span->offset + span->length == totalBytes;
      launch<Empty>(executor, pipeline, *span,
                    [writeChunk, span = *span, last, timeout = options.chunkTimeout]() -> asio::awaitable<Result<Empty>> {
                      Status st = co_await writeChunk(span, last, timeout);
                      if (!st) co_return st.error();
                      co_return Empty{};
                    });
    }
    if (pipeline->running == 0 && pipeline->arrived.empty() && (failure || window.finished())) break;
    co_await pipeline->wait();
    while (!pipeline->arrived.empty()) {
      auto [span, reply] = std::move(pipeline->arrived.front());
      pipeline->arrived.pop_front();
      if (failure) continue;
      if (!reply) {
        failure = reply.error();
        continue;
      }
      if (auto st = window.acknowledge(span); !st) failure = st.error();
    }
  }
  if (failure) co_return *failure;
  co_return Status::ok();
}

}  // namespace tellus::transfer
