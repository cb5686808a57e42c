#pragma once
// The identity Tellus authenticates as to ZooKeeper (docs/security.md, "ZooKeeper ACLs"): a
// digest credential `user:password`, read from a file named in the config (never from the
// command line, where `ps` would show it). Every node a client created with it carries an ACL
// for that identity alone (ZkClient, SessionOptions::credentials).

#include <cstddef>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tellus::coord {

struct DigestCredentials {
  std::string user;      // [A-Za-z0-9._-]+: it is the id of every ACL, and appears in logs
  std::string password;  // printable ASCII; never logged
  // What zoo_add_auth("digest", ...) takes: "user:password".
  std::string authString() const { return user + ":" + password; }
};

inline constexpr std::size_t kMaxCredentialsFileBytes = 4096;
inline constexpr std::size_t kMaxCredentialsUserBytes = 64;

// Parses the contents of a credentials file: one line `user:password`, optionally ended by a
// newline ("\n" or "\r\n"). The user is [A-Za-z0-9._-]+ of at most 64 bytes; the password is
// everything after the first ':' (it may contain ':'), non-empty printable ASCII (no control
// characters, so no NUL or second line). At most kMaxCredentialsFileBytes. kInvalidArgument
// naming `file` and the rule broken, never quoting the password.
Result<DigestCredentials> parseDigestCredentials(std::string_view text, const std::string& file);

// Reads and parses the file at `path`: kNotFound when it is missing, kInvalidArgument when
// it cannot be read, is not a regular file, is larger than kMaxCredentialsFileBytes or does
// not parse. `groupOrOtherReadable` (when given) is set when the file's mode lets anyone but
// its owner read it, which the caller reports.
Result<DigestCredentials> readDigestCredentials(const std::string& path, bool* groupOrOtherReadable = nullptr);

}  // namespace tellus::coord
