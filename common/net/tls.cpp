#include "net/tls.h"

#include <boost/asio/ssl/context.hpp>
#include <fmt/format.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "util/names.h"

namespace tellus::net {

namespace ssl = boost::asio::ssl;

namespace {

std::vector<std::string_view> splitSlash(std::string_view text) {
  std::vector<std::string_view> parts;
  while (true) {
    const std::size_t slash = text.find('/');
    parts.push_back(text.substr(0, slash));
    if (slash == std::string_view::npos) break;
    text.remove_prefix(slash + 1);
  }
  return parts;
}

// "file: what failed: OpenSSL's reason"
Error fileError(std::string_view field, const std::string& file, std::string_view what, const std::string& why) {
  return makeError(ErrorCode::kInvalidArgument, fmt::format("tls.{} '{}': {}: {}", field, file, what, why));
}

}  // namespace

std::string_view roleName(Role role) {
  switch (role) {
    case Role::kMaster: return "master";
    case Role::kWorker: return "worker";
    case Role::kClient: return "client";
  }
  return "unknown";
}

std::string RoleSet::toString() const {
  if (empty()) return "any role";
  std::string out;
  for (Role r : {Role::kMaster, Role::kWorker, Role::kClient}) {
    if ((bits_ & static_cast<std::uint8_t>(r)) == 0) continue;
    if (!out.empty()) out += " or ";
    out += roleName(r);
  }
  return out;
}

std::string PeerIdentity::toString() const {
  switch (role) {
    case Role::kMaster: return fmt::format("master/{}", site);
    case Role::kWorker: return fmt::format("worker/{}/{}", site, name);
    case Role::kClient: return fmt::format("client/{}", name);
  }
  return "unknown";
}

Result<PeerIdentity> parsePeerIdentity(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return makeError(ErrorCode::kInvalidArgument,
                     fmt::format("bad peer identity '{}': {} (expected master/<site>, worker/<site>/<id> or "
                                 "client/<name>, parts [a-z0-9-]+)",
                                 text.substr(0, 200), why));
  };
  const auto parts = splitSlash(text);
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (!isIdentityPart(parts[i])) return bad("a part is empty, too long or has other characters");
  }
  PeerIdentity id;
  if (parts[0] == "master" && parts.size() == 2) {
    id.role = Role::kMaster;
    id.site = parts[1];
  } else if (parts[0] == "worker" && parts.size() == 3) {
    id.role = Role::kWorker;
    id.site = parts[1];
    id.name = parts[2];
  } else if (parts[0] == "client" && parts.size() == 2) {
    id.role = Role::kClient;
    id.name = parts[1];
  } else {
    return bad("unknown role or wrong number of parts");
  }
  return id;
}

Status checkCaller(const std::optional<PeerIdentity>& caller, const PeerIdentity& expected) {
  if (!caller || *caller == expected) return Status::ok();
  return makeError(ErrorCode::kPermissionDenied, fmt::format("permission denied: the request speaks for {}, but the "
                                                             "caller's certificate is {}",
                                                             expected.toString().substr(0, 200), caller->toString()));
}

Status checkCallerSite(const std::optional<PeerIdentity>& caller, std::string_view site) {
  if (!caller || (caller->role != Role::kClient && caller->site == site)) return Status::ok();
  return makeError(ErrorCode::kPermissionDenied,
                   fmt::format("permission denied: the request speaks for site '{}', but the caller's certificate is {}",
                               site.substr(0, 64), caller->toString()));
}

Status checkJobAccess(const std::optional<PeerIdentity>& caller, std::string_view owner,
                      const std::vector<std::string>& admins, std::string_view jobId, std::string_view action) {
  if (!caller || caller->role == Role::kMaster) return Status::ok();
  const std::string who = caller->toString();
  if (caller->role == Role::kClient) {
    if (!owner.empty() && owner == who) return Status::ok();
    if (std::find(admins.begin(), admins.end(), caller->name) != admins.end()) return Status::ok();
  }
  jobId = jobId.substr(0, 64);
  if (owner.empty()) {
    return makeError(ErrorCode::kPermissionDenied,
                     fmt::format("permission denied: {} may not {} job {}: the job records no owner (submitted before "
                                 "owners were recorded, or its status is unreadable), so only an admin may",
                                 who, action, jobId));
  }
  // The stored owner comes from ZooKeeper: quoted only when it is an identity (one line, bounded).
  const bool readable = parsePeerIdentity(owner).isOk();
  return makeError(ErrorCode::kPermissionDenied,
                   fmt::format("permission denied: {} may not {} job {}: it is not the job's owner ({}) nor an admin",
                               who, action, jobId, readable ? owner : std::string_view("an unreadable identity")));
}

Result<PeerIdentity> identityOfCertificate(const void* x509) {
  auto* cert = static_cast<X509*>(const_cast<void*>(x509));
  if (cert == nullptr) return makeError(ErrorCode::kPermissionDenied, "no certificate");
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) {
    return makeError(ErrorCode::kPermissionDenied, "certificate has no subjectAltName (expected a tellus: URI)");
  }
  std::optional<std::string> uri;
  int found = 0;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type != GEN_URI) continue;
    const auto* data = reinterpret_cast<const char*>(ASN1_STRING_get0_data(name->d.uniformResourceIdentifier));
    const std::string_view value(data, static_cast<std::size_t>(ASN1_STRING_length(name->d.uniformResourceIdentifier)));
    if (!value.starts_with(kIdentityUriScheme)) continue;
    ++found;
    uri.emplace(value.substr(kIdentityUriScheme.size()));
  }
  GENERAL_NAMES_free(names);
  if (found != 1) {
    return makeError(ErrorCode::kPermissionDenied,
                     fmt::format("certificate has {} tellus: subjectAltName URIs (expected exactly one)", found));
  }
  auto id = parsePeerIdentity(*uri);
  if (!id) return makeError(ErrorCode::kPermissionDenied, id.message());
  return id;
}

TlsContext::TlsContext(std::unique_ptr<ssl::context> context, PeerIdentity identity)
    : context_(std::move(context)), identity_(std::move(identity)) {}

TlsContext::~TlsContext() = default;

Result<std::shared_ptr<TlsContext>> TlsContext::load(const TlsConfig& config) {
  if (config.ca_file.empty() || config.cert_file.empty() || config.key_file.empty()) {
    return makeError(ErrorCode::kInvalidArgument, "tls: ca_file, cert_file and key_file are all required");
  }
  auto context = std::make_unique<ssl::context>(ssl::context::tls);
  SSL_CTX* native = context->native_handle();
  // TLS 1.3 only: no downgrade, forward secrecy, one round trip.
  SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(native, TLS1_3_VERSION);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_compression);
  boost::system::error_code ec;
  if (context->load_verify_file(config.ca_file, ec); ec) {
    return fileError("ca_file", config.ca_file, "cannot load the CA certificate", ec.message());
  }
  if (context->use_certificate_chain_file(config.cert_file, ec); ec) {
    return fileError("cert_file", config.cert_file, "cannot load the certificate", ec.message());
  }
  if (context->use_private_key_file(config.key_file, ssl::context::pem, ec); ec) {
    return fileError("key_file", config.key_file, "cannot load the private key", ec.message());
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    return fileError("key_file", config.key_file, "does not match", config.cert_file);
  }
  // Both sides must present a certificate from the CA; the handshake fails otherwise.
  context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);

  X509* own = SSL_CTX_get0_certificate(native);
  // A certificate from another CA would be refused by every peer: say so at start instead.
  X509_STORE_CTX* check = X509_STORE_CTX_new();
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(native, &chain);
  bool signedByCa = check != nullptr && X509_STORE_CTX_init(check, SSL_CTX_get_cert_store(native), own, chain) == 1 &&
                    X509_verify_cert(check) == 1;
  std::string why = check != nullptr ? X509_verify_cert_error_string(X509_STORE_CTX_get_error(check)) : "out of memory";
  X509_STORE_CTX_free(check);
  if (!signedByCa) {
    return fileError("cert_file", config.cert_file, fmt::format("not valid under tls.ca_file '{}'", config.ca_file),
                     why);
  }
  auto identity = identityOfCertificate(own);
  if (!identity) return fileError("cert_file", config.cert_file, "no identity", identity.message());
  return std::shared_ptr<TlsContext>(new TlsContext(std::move(context), std::move(*identity)));
}

}  // namespace tellus::net
