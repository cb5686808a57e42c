#pragma once
// Test certificates, issued by scripts/make-certs (the one script that also serves
// scripts/cluster, docker/ and Ansible): a throwaway CA per directory and a certificate per
// identity ("worker/us-east/us-east-w1"), as docs/security.md describes.

#include <filesystem>
#include <string>
#include <vector>

#include "util/result.h"

namespace tellus::harness {

struct CertFiles {
  std::filesystem::path ca;
  std::filesystem::path cert;
  std::filesystem::path key;
};

// Runs scripts/make-certs DIR IDENTITY... (the CA is made on the first call for a directory).
[[nodiscard]] Status makeCerts(const std::filesystem::path& dir, const std::vector<std::string>& identities);

// Where makeCerts put the files of `identity` (no I/O).
CertFiles certFiles(const std::filesystem::path& dir, const std::string& identity);

// The `tls:` section of a daemon config for these files.
std::string tlsYaml(const CertFiles& files);

}  // namespace tellus::harness
