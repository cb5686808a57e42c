#include "harness/certs.h"

#include <algorithm>
#include <chrono>

#include "proc/subprocess.h"

namespace tellus::harness {

Status makeCerts(const std::filesystem::path& dir, const std::vector<std::string>& identities) {
  proc::SpawnOptions opts;
  opts.argv = {std::string(TELLUS_SOURCE_DIR) + "/scripts/make-certs", dir.string()};
  opts.argv.insert(opts.argv.end(), identities.begin(), identities.end());
  auto log = dir.parent_path() / (dir.filename().string() + "-make-certs.log");
  opts.stdoutFile = log;
  opts.stderrFile = log;
  auto p = proc::Subprocess::spawn(opts);
  if (!p) return p.error().prepend("make-certs");
  auto status = p->waitFor(std::chrono::seconds(60));
  if (!status) return makeError(ErrorCode::kDeadlineExceeded, "make-certs did not finish in 60 s");
  if (!status->exited || status->code != 0) {
    return makeError(ErrorCode::kInternal, "make-certs failed (see " + log.string() + ")");
  }
  return {};
}

CertFiles certFiles(const std::filesystem::path& dir, const std::string& identity) {
  std::string base = identity;
  std::replace(base.begin(), base.end(), '/', '.');
  return CertFiles{dir / "ca.pem", dir / (base + ".pem"), dir / (base + ".key")};
}

std::string tlsYaml(const CertFiles& files) {
  return "tls:\n  ca_file: " + files.ca.string() + "\n  cert_file: " + files.cert.string() +
         "\n  key_file: " + files.key.string() + "\n";
}

}  // namespace tellus::harness
