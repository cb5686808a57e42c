#pragma once
// Internal to common/net: opening a listening socket, shared by RpcServer and HttpServer.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "net/endpoint.h"
#include "util/result.h"

namespace tellus::net::detail {

// Resolves, binds (SO_REUSEADDR) and listens. Errors: kInvalidArgument for an unresolvable
// host, kUnavailable when the address cannot be bound (in use, not local).
[[nodiscard]] Result<boost::asio::ip::tcp::acceptor> openAcceptor(const boost::asio::any_io_executor& executor,
                                                                  const Endpoint& listenOn);

// "ip:port" of a connected socket's peer, or "unknown peer".
std::string peerName(const boost::asio::ip::tcp::socket& socket);

// The peer's IP address alone ("10.0.0.7", "::1"), or "unknown peer"; what per-peer limits count.
std::string peerAddress(const boost::asio::ip::tcp::socket& socket);

}  // namespace tellus::net::detail
