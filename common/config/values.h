#pragma once
// Value rules shared by the config and job-spec parsers (and by anything else that must accept
// the same names and addresses, e.g. the CLI).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/names.h"

namespace tellus::config {

// Site and worker ids: [a-z0-9][a-z0-9-]* (they appear in ZooKeeper paths and host names).
bool isSiteId(std::string_view s);
inline constexpr const char* kSiteIdForm = "[a-z0-9][a-z0-9-]*";

// Job, stage and dataset names: util/names.h (the one name validator), here for the parsers.
bool isName(std::string_view s);
inline constexpr const char* kNameForm = tellus::kNameForm;

struct HostPort {
  std::string host;  // a host name, an IPv4 address, or an IPv6 address without brackets
  uint16_t port = 0;
};

// "host:port" or "[v6addr]:port" with a decimal port in [0, 65535]; nullopt if malformed.
// Callers that connect (rather than listen) must also reject port 0.
std::optional<HostPort> parseHostPort(std::string_view s);

// A ZooKeeper chroot: starts with '/', no empty component, no trailing '/' unless it is "/".
bool isZkChroot(std::string_view s);

// trace | debug | info | warn | error
bool isLogLevel(std::string_view s);
inline constexpr const char* kLogLevelForm = "trace|debug|info|warn|error";

}  // namespace tellus::config
