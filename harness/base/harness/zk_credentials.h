#pragma once
// Throwaway ZooKeeper digest credentials for a test cluster, as `scripts/cluster up` makes
// them (docs/security.md, "ZooKeeper ACLs").

#include <filesystem>

#include "coord/credentials.h"
#include "util/result.h"

namespace tellus::harness {

// Writes a fresh credential, user "tellus" and 32 random hex digits, to `path` (created with
// mode 0600; an existing file is an error) and returns it.
Result<coord::DigestCredentials> writeZkCredentials(const std::filesystem::path& path);

}  // namespace tellus::harness
