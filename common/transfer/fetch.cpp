#include "transfer/fetch.h"

#include <chrono>
#include <fstream>

#include "net/methods.h"
#include "util/log.h"

namespace tellus::transfer {

namespace asio = boost::asio;

asio::awaitable<Result<ReadSummary>> fetchInto(const ClientFor& clientFor, const FetchSource& source, SinkFn sink,
                                               TransferOptions options, ProgressFn progress) {
  auto ep = net::Endpoint::parse(source.address);
  if (!ep) co_return ep.error().prepend("input on worker " + source.workerId);
  auto readChunk = [client = clientFor(*ep), request = source.request, verify = source.verify](
                       std::uint64_t offset, std::uint64_t maxBytes,
                       std::chrono::milliseconds timeout) -> asio::awaitable<Result<ReadReply>> {
    pb::FetchRequest chunkRequest = request;
    chunkRequest.set_offset(offset);
    chunkRequest.set_max_bytes(static_cast<std::uint32_t>(maxBytes));
    auto chunk = co_await client->call<rpc::Worker::Fetch>(chunkRequest, timeout);
    if (!chunk) co_return chunk.error();
    ReadReply reply;
    reply.data = std::move(*chunk->mutable_data());
    reply.totalBytes = chunk->total_bytes();
    if (verify) reply.crc32 = chunk->crc32();
    co_return reply;
  };
  auto summary = co_await readChunked(readChunk, std::move(sink), options, std::move(progress));
  if (!summary) co_return summary.error().prepend("fetching from " + source.workerId);
  co_return summary;
}

namespace {

asio::awaitable<Result<ReadSummary>> fetchOnce(const ClientFor& clientFor, const FetchSource& source,
                                               const std::filesystem::path& path, const TransferOptions& options,
                                               const ProgressFn& progress) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) co_return makeError(ErrorCode::kInternal, "cannot write " + path.string());
  SinkFn sink = [&out, &path](std::string_view bytes) -> Status {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) return makeError(ErrorCode::kInternal, "cannot write " + path.string());
    return Status::ok();
  };
  auto summary = co_await fetchInto(clientFor, source, sink, options, progress);
  if (!summary) co_return summary.error();
  out.close();
  if (!out) co_return makeError(ErrorCode::kInternal, "cannot write " + path.string());
  co_return summary;
}

}  // namespace

asio::awaitable<Result<FetchedFile>> fetchToFile(ClientFor clientFor, std::vector<FetchSource> sources,
                                                 std::filesystem::path path, TransferOptions options,
                                                 ProgressFn progress) {
  if (sources.empty()) co_return makeError(ErrorCode::kInvalidArgument, "no source to fetch " + path.string() + " from");
  std::optional<Error> last;
  for (const auto& source : sources) {
    if (last) {
      spdlog::warn("fetch into {} failed ({}): trying the copy on {}", path.filename().string(), last->message,
                   source.workerId);
    }
    const auto started = std::chrono::steady_clock::now();
    auto fetched = co_await fetchOnce(clientFor, source, path, options, progress);
    if (fetched) {
      FetchedFile file;
      file.bytes = fetched->bytes;
      file.workerId = source.workerId;
      file.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      co_return file;
    }
    last = fetched.error();
  }
  co_return *last;
}

}  // namespace tellus::transfer
