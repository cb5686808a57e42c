#include "coord/paths.h"

namespace tellus::coord {

Status validatePath(std::string_view path) {
  auto bad = [&](const std::string& why) {
    return makeError(ErrorCode::kInvalidArgument, "invalid ZooKeeper path '" + std::string(path) + "': " + why);
  };
  if (path.empty()) return bad("empty");
  if (path.front() != '/') return bad("must start with '/'");
  if (path.size() == 1) return Status::ok();
  if (path.back() == '/') return bad("must not end with '/'");
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view component = path.substr(start, end - start);
    if (component.empty()) return bad("empty component ('//')");
    if (component == "." || component == "..") return bad("relative component '" + std::string(component) + "'");
    for (char c : component) {
      auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) return bad("control or NUL character");
    }
    start = end + 1;
  }
  return Status::ok();
}

Result<std::string> normalizeChroot(std::string_view chroot) {
  if (chroot.empty() || chroot == "/") return std::string();
  auto st = validatePath(chroot);
  if (!st.isOk()) return st.error().prepend("chroot");
  return std::string(chroot);
}

std::string applyChroot(std::string_view chroot, std::string_view path) {
  if (chroot.empty()) return std::string(path);
  if (path == "/") return std::string(chroot);
  std::string out(chroot);
  out += path;
  return out;
}

std::optional<std::string> stripChroot(std::string_view chroot, std::string_view fullPath) {
  if (chroot.empty()) return std::string(fullPath);
  if (fullPath == chroot) return std::string("/");
  if (fullPath.size() > chroot.size() && fullPath.substr(0, chroot.size()) == chroot &&
      fullPath[chroot.size()] == '/') {
    return std::string(fullPath.substr(chroot.size()));
  }
  return std::nullopt;
}

std::string joinPath(std::string_view parent, std::string_view child) {
  std::string out(parent);
  if (out.empty() || out.back() != '/') out += '/';
  out += child;
  return out;
}

std::string parentPath(std::string_view path) {
  auto slash = path.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string baseName(std::string_view path) {
  auto slash = path.rfind('/');
  if (slash == std::string_view::npos) return std::string(path);
  return std::string(path.substr(slash + 1));
}

std::optional<int64_t> sequenceNumber(std::string_view nodeName) {
  constexpr size_t kDigits = 10;  // ZooKeeper formats the counter as %010d
  if (nodeName.size() < kDigits) return std::nullopt;
  int64_t value = 0;
  for (char c : nodeName.substr(nodeName.size() - kDigits)) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace tellus::coord
