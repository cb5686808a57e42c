#include "coord/connection_limit.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <charconv>

#include <fmt/format.h>

namespace tellus::coord {

namespace asio = boost::asio;

namespace {
constexpr std::size_t kMaxAnswerBytes = 64 * 1024;
}

std::optional<uint32_t> parseMaxClientCnxns(std::string_view confOutput) {
  constexpr std::string_view key = "maxClientCnxns=";
  std::size_t at = 0;
  while ((at = confOutput.find(key, at)) != std::string_view::npos) {
    // The key must start a line.
    if (at == 0 || confOutput[at - 1] == '\n') {
      std::string_view rest = confOutput.substr(at + key.size());
      uint32_t value = 0;
      auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
      const bool lineEnds = end == rest.data() + rest.size() || *end == '\n' || *end == '\r';
      if (ec == std::errc() && end != rest.data() && lineEnds) return value;
      return std::nullopt;
    }
    at += key.size();
  }
  return std::nullopt;
}

Result<std::string> fourLetterWord(const std::string& hostPort, std::string_view word,
                                   std::chrono::milliseconds timeout) {
  const auto colon = hostPort.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == hostPort.size()) {
    return makeError(ErrorCode::kInvalidArgument, "'" + hostPort + "' is not host:port");
  }
  std::string host = hostPort.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = hostPort.substr(colon + 1);

  // A private io_context run for at most `timeout`: the whole exchange has one deadline.
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  asio::ip::tcp::socket socket(io);
  std::string answer;
  std::string request(word);
  std::array<char, 4096> chunk{};
  boost::system::error_code failure;
  bool done = false;
  std::function<void()> readMore = [&] {
    socket.async_read_some(asio::buffer(chunk), [&](boost::system::error_code ec, std::size_t n) {
      answer.append(chunk.data(), n);
      if (ec == asio::error::eof) {
        done = true;
      } else if (ec) {
        failure = ec;
      } else if (answer.size() > kMaxAnswerBytes) {
        failure = asio::error::message_size;
      } else {
        readMore();
      }
    });
  };
  resolver.async_resolve(host, port, [&](boost::system::error_code ec, asio::ip::tcp::resolver::results_type found) {
    if (ec) {
      failure = ec;
      return;
    }
    asio::async_connect(socket, found, [&](boost::system::error_code ec2, const asio::ip::tcp::endpoint&) {
      if (ec2) {
        failure = ec2;
        return;
      }
      asio::async_write(socket, asio::buffer(request), [&](boost::system::error_code ec3, std::size_t) {
        if (ec3) {
          failure = ec3;
          return;
        }
        readMore();
      });
    });
  });
  io.run_for(timeout);
  if (!done && !failure) {
    return makeError(ErrorCode::kDeadlineExceeded,
                     fmt::format("{}: no answer to '{}' within {} ms", hostPort, word, timeout.count()));
  }
  if (failure) return makeError(ErrorCode::kUnavailable, fmt::format("{}: {}", hostPort, failure.message()));
  return answer;
}

Result<ConnectionLimitCheck> checkConnectionLimit(const std::string& connect, uint32_t needed,
                                                  std::chrono::milliseconds timeout) {
  ConnectionLimitCheck out;
  std::string servers = connect.substr(0, connect.find('/'));
  std::size_t start = 0;
  while (start <= servers.size()) {
    const std::size_t comma = std::min(servers.find(',', start), servers.size());
    const std::string server = servers.substr(start, comma - start);
    start = comma + 1;
    if (server.empty()) continue;
    auto conf = fourLetterWord(server, "conf", timeout);
    if (!conf) {
      out.unchecked.push_back(conf.message());
      continue;
    }
    auto limit = parseMaxClientCnxns(*conf);
    if (!limit) {
      std::string firstLine = conf->substr(0, conf->find('\n'));
      out.unchecked.push_back(fmt::format("{}: 'conf' gave no maxClientCnxns ({})", server, firstLine));
      continue;
    }
    if (*limit != 0 && *limit < needed) {
      return makeError(ErrorCode::kInvalidArgument,
                       fmt::format("ZooKeeper {} allows {} connections per client address (maxClientCnxns) but "
                                   "this host may open {}: raise maxClientCnxns in its zoo.cfg",
                                   server, *limit, needed));
    }
  }
  return out;
}

}  // namespace tellus::coord
