#pragma once
// Who a peer is, as its certificate says (net/tls.h), and which roles may call a method
// (net/methods.h). No I/O, no OpenSSL.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace tellus::net {

enum class Role : std::uint8_t { kMaster = 1, kWorker = 2, kClient = 4 };

std::string_view roleName(Role role);

// The roles allowed to call a method (net/methods.h). Empty means any authenticated peer
// (test services only: every daemon method names its callers).
class RoleSet {
 public:
  constexpr RoleSet() = default;
  template <class... R>
  constexpr explicit RoleSet(Role first, R... rest) : bits_(static_cast<std::uint8_t>(first)) {
    ((bits_ = static_cast<std::uint8_t>(bits_ | static_cast<std::uint8_t>(rest))), ...);
  }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool allows(Role role) const { return empty() || (bits_ & static_cast<std::uint8_t>(role)) != 0; }
  // "master or worker"
  std::string toString() const;

 private:
  std::uint8_t bits_ = 0;
};

struct PeerIdentity {
  Role role = Role::kClient;
  std::string site;  // master and worker; "" for a client
  std::string name;  // the worker id or the client's name; "" for a master

  // "worker/us-east/us-east-w1", as in the certificate.
  std::string toString() const;
  bool operator==(const PeerIdentity&) const = default;
};

// Parses "master/<site>", "worker/<site>/<id>" or "client/<name>" (each part [a-z0-9-]+,
// at most 64 characters). Errors are kInvalidArgument and quote the text.
[[nodiscard]] Result<PeerIdentity> parsePeerIdentity(std::string_view text);

// Identity binding in handlers: a request's claim about who sent it must match the caller's
// certificate. `caller` is CallContext::identity; nullopt (plaintext, insecure mode) passes,
// since there is nothing to check against. Errors are kPermissionDenied, one line.
//   checkCaller: the caller is exactly `expected` (e.g. the worker a RegisterWorker names).
[[nodiscard]] Status checkCaller(const std::optional<PeerIdentity>& caller, const PeerIdentity& expected);
//   checkCallerSite: the caller is a master or worker (JM) of `site`.
[[nodiscard]] Status checkCallerSite(const std::optional<PeerIdentity>& caller, std::string_view site);

// Job owners (docs/security.md, "Job owners"): may `caller` `action` ("kill", "read the result
// of", ...) a job whose stored owner is `owner` ("client/alice"; "" when none is recorded)?
// Yes for its owner, an admin (`admins`: client names from the master's config) and a master
// (one forwarding or fanning out a call that the master the client called has checked). A job
// without an owner is an admin's only. nullopt (insecure mode) passes: plaintext has no
// identities. Errors are kPermissionDenied, one line naming the job and the caller.
[[nodiscard]] Status checkJobAccess(const std::optional<PeerIdentity>& caller, std::string_view owner,
                                    const std::vector<std::string>& admins, std::string_view jobId,
                                    std::string_view action);

}  // namespace tellus::net
