#pragma once
// ZooKeeper path rules and chroot handling, pure and unit-tested.
//
// The client applies the chroot itself (every user path is prefixed, every returned path is
// stripped) rather than through the connect string, so that a missing chroot node can be
// created over the same session and the rules live in one testable place.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace tellus::coord {

// A valid absolute path: starts with '/', no trailing '/' (except "/" itself), no empty, "."
// or ".." components, no NUL or control characters. The error names the path and the rule.
Status validatePath(std::string_view path);

// A valid chroot: "" or "/" (no chroot), or a valid path. Returned normalized ("" for none).
Result<std::string> normalizeChroot(std::string_view chroot);

// "/tellus" + "/jobs/1" -> "/tellus/jobs/1"; "/tellus" + "/" -> "/tellus"; "" + p -> p.
// Both arguments must be valid.
std::string applyChroot(std::string_view chroot, std::string_view path);

// The inverse of applyChroot; nullopt when `fullPath` is not inside `chroot`.
std::optional<std::string> stripChroot(std::string_view chroot, std::string_view fullPath);

// "/a/b" + "c" -> "/a/b/c"; "/" + "c" -> "/c". `child` is a single name (no '/').
std::string joinPath(std::string_view parent, std::string_view child);

// "/a/b" -> "/a"; "/a" -> "/"; "/" -> "/".
std::string parentPath(std::string_view path);

// "/a/b" -> "b"; "/" -> "".
std::string baseName(std::string_view path);

// The sequence number ZooKeeper appends to sequential nodes: the last 10 characters, all
// digits ("n_0000000042" -> 42). nullopt when the name does not end in one.
std::optional<int64_t> sequenceNumber(std::string_view nodeName);

}  // namespace tellus::coord
