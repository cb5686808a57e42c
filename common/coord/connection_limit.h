#pragma once
// ZooKeeper bounds the connections one client address may hold (maxClientCnxns, default 60)
// and refuses the rest without a useful error: every JM of a host has its own session, so a
// busy host would see JMs that cannot start. A worker checks at start that every server it
// may connect to allows what it can open, using ZooKeeper's `conf` four-letter word.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace tellus::coord {

// maxClientCnxns from the output of `conf`; nullopt when the output does not carry it (e.g.
// "conf is not executed because it is not in the whitelist."). 0 means unlimited.
std::optional<uint32_t> parseMaxClientCnxns(std::string_view confOutput);

// Sends a four-letter word (`conf`, `srvr`, ...) to one server, "host:port", and returns its
// whole answer (bounded at 64 KiB). Every step is bounded by `timeout` in total.
Result<std::string> fourLetterWord(const std::string& hostPort, std::string_view word,
                                   std::chrono::milliseconds timeout);

struct ConnectionLimitCheck {
  std::vector<std::string> unchecked;  // "host:port: why" for servers whose limit is unknown
};

// Asks every server of `connect` ("host:port[,host:port...]", chroot excluded) for its limit.
// kInvalidArgument naming the server and the setting when one allows fewer than `needed`
// connections per client address; servers that do not answer `conf` are listed, not fatal
// (a down voter, or `conf` left out of 4lw.commands.whitelist).
Result<ConnectionLimitCheck> checkConnectionLimit(const std::string& connect, uint32_t needed,
                                                  std::chrono::milliseconds timeout);

}  // namespace tellus::coord
