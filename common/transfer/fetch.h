#pragma once
// A worker.Fetch of one object (a task's output partition or a raw dataset file) into a local
// file, through transfer/chunked.h's pipeline: the one fetch path of the worker (task inputs),
// the fetch benchmark (tools/bench/transfer) and its tests.

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/endpoint.h"
#include "net/rpc_client.h"
#include "tellus.pb.h"
#include "transfer/chunked.h"

namespace tellus::transfer {

// One copy of the object: the worker holding it and what to ask it for.
struct FetchSource {
  std::string workerId;
  std::string address;       // host:port of that worker's RPC server
  pb::FetchRequest request;  // the object and from_site; offset and max_bytes are set per chunk
  bool verify = false;       // the reply's crc32 is the object's (partitions): check it
};

struct FetchedFile {
  std::uint64_t bytes = 0;
  std::string workerId;  // the source that served it
  double seconds = 0;    // of the attempt that succeeded
};

// The client for a worker (a daemon's pool: one connection per peer).
using ClientFor = std::function<std::shared_ptr<net::RpcClient>(const net::Endpoint&)>;

// Fetches the object from `source` into `sink`, chunk by chunk in order: a sink that fails
// ends the fetch with its error. When the source gives the object's checksum
// (FetchSource::verify) the bytes are checked against it (ReadSummary::verified).
[[nodiscard]] boost::asio::awaitable<Result<ReadSummary>> fetchInto(const ClientFor& clientFor,
                                                                    const FetchSource& source, SinkFn sink,
                                                                    TransferOptions options,
                                                                    ProgressFn progress = nullptr);

// Fetches the object into `path` (truncated first) from the first source, and after a failure
// (the source died mid-stream, a checksum mismatch, ...) from the next one in order: raw
// dataset partitions have copies on other workers, so a dead VM costs one retry. The error of
// the last source when none succeeds.
[[nodiscard]] boost::asio::awaitable<Result<FetchedFile>> fetchToFile(ClientFor clientFor,
                                                                      std::vector<FetchSource> sources,
                                                                      std::filesystem::path path,
                                                                      TransferOptions options,
                                                                      ProgressFn progress = nullptr);

}  // namespace tellus::transfer
