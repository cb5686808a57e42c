#include "net/listen.h"

#include <fmt/format.h>

#include <string>

namespace tellus::net::detail {

namespace asio = boost::asio;
using asio::ip::tcp;

Result<tcp::acceptor> openAcceptor(const asio::any_io_executor& executor, const Endpoint& listenOn) {
  const std::string where = listenOn.toString();
  boost::system::error_code ec;
  tcp::resolver resolver(executor);
  const auto results = resolver.resolve(listenOn.host, std::to_string(listenOn.port),
                                        tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("cannot resolve listen address {}: {}", where, ec ? ec.message() : "no address"));
  }
  const tcp::endpoint endpoint = *results.begin();
  tcp::acceptor acceptor(executor);
  auto failed = [&](const char* step) {
    return makeError(ErrorCode::kUnavailable, fmt::format("cannot listen on {}: {}: {}", where, step, ec.message()));
  };
  if (acceptor.open(endpoint.protocol(), ec); ec) return failed("open");
  // Lets a restarted daemon bind its port while old connections sit in TIME_WAIT.
  if (acceptor.set_option(tcp::acceptor::reuse_address(true), ec); ec) return failed("setsockopt");
  if (acceptor.bind(endpoint, ec); ec) return failed("bind");
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) return failed("listen");
  return acceptor;
}

std::string peerName(const tcp::socket& socket) {
  boost::system::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  if (ec) return "unknown peer";
  const auto address = remote.address();
  if (address.is_v6()) return fmt::format("[{}]:{}", address.to_string(), remote.port());
  return fmt::format("{}:{}", address.to_string(), remote.port());
}

std::string peerAddress(const tcp::socket& socket) {
  boost::system::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  if (ec) return "unknown peer";
  return remote.address().to_string();
}

}  // namespace tellus::net::detail
