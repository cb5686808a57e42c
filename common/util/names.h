#pragma once
// The one validator of names that become ZooKeeper node names or directory and file names:
// job ids, job and stage names, dataset names, upload ids. Everything that arrives over the
// network or from a config and names such a thing goes through it, so no name can escape
// its directory ("..", "/", an absolute path) or grow a path without bound.

#include <cstddef>
#include <string_view>

#include "util/result.h"

namespace tellus {

// 1 to kMaxNameBytes of [A-Za-z0-9_.-], not starting with '.' (so never "." or "..").
inline constexpr std::size_t kMaxNameBytes = 128;
inline constexpr const char* kNameForm = "1-128 of [A-Za-z0-9_.-], not starting with '.'";

bool isName(std::string_view name);

// A part of a certificate identity (net/identity.h: the site, worker id or client name of
// "worker/<site>/<id>", "client/<name>"): 1 to kMaxIdentityPartBytes of [a-z0-9-].
inline constexpr std::size_t kMaxIdentityPartBytes = 64;
bool isIdentityPart(std::string_view part);

// isName as a one-line kInvalidArgument error: "<what> '<name>' <why>" (the name is cut to
// kMaxNameBytes in the message, non-printable bytes escaped).
Status checkName(std::string_view what, std::string_view name);

}  // namespace tellus
