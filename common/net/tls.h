#pragma once
// Mutual TLS for RPC connections, and who a peer is (docs/security.md).
//
// Every RPC connection runs TLS 1.3 with certificates on both sides, verified against the
// cluster's CA. A certificate names its holder in exactly one subjectAltName URI:
//
//   tellus:master/<site>              a site's master
//   tellus:worker/<site>/<worker-id>  a worker, and the JMs it launches (they use its files)
//   tellus:client/<name>              an operator's CLI
//
// The CN is ignored. What a peer says about itself in a request is never trusted over its
// certificate: handlers read CallContext::identity (net/rpc_server.h).

#include <memory>
#include <string>
#include <string_view>

#include "net/identity.h"
#include "util/result.h"

namespace boost::asio::ssl {
class context;
}

namespace tellus::net {

// The URI scheme of the subjectAltName that carries the identity.
inline constexpr std::string_view kIdentityUriScheme = "tellus:";

// Config field `tls` of every daemon: PEM files.
struct TlsConfig {
  std::string ca_file;    // the cluster CA: peers must present a certificate it signed
  std::string cert_file;  // this process's certificate (chain), with a tellus: SAN URI
  std::string key_file;   // its private key
};

// A loaded TLS setup, shared by a process's server and clients. Immutable after load().
class TlsContext {
 public:
  // Loads and checks the files: the key matches the certificate, the certificate carries an
  // identity. Errors name the file (kInvalidArgument).
  [[nodiscard]] static Result<std::shared_ptr<TlsContext>> load(const TlsConfig& config);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // This process's own identity, from its certificate.
  const PeerIdentity& identity() const { return identity_; }
  // For common/net's streams; OpenSSL's context is internally synchronized once built.
  boost::asio::ssl::context& native() const { return *context_; }

 private:
  TlsContext(std::unique_ptr<boost::asio::ssl::context> context, PeerIdentity identity);
  std::unique_ptr<boost::asio::ssl::context> context_;
  PeerIdentity identity_;
};

// The identity in a certificate (an OpenSSL X509*), from its single tellus: SAN URI.
[[nodiscard]] Result<PeerIdentity> identityOfCertificate(const void* x509);

}  // namespace tellus::net
