#include "util/names.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace tellus {
namespace {

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

// A hostile name is echoed in an error message: bounded, one line, printable.
std::string printable(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, kMaxNameBytes)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\'') {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  if (name.size() > kMaxNameBytes) out += "...";
  return out;
}

}  // namespace

bool isName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), isNameChar);
}

bool isIdentityPart(std::string_view part) {
  if (part.empty() || part.size() > kMaxIdentityPartBytes) return false;
  return std::all_of(part.begin(), part.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

Status checkName(std::string_view what, std::string_view name) {
  if (isName(name)) return Status::ok();
  std::string why;
  if (name.empty()) {
    why = "is empty";
  } else if (name.size() > kMaxNameBytes) {
    why = fmt::format("is longer than {} bytes ({})", kMaxNameBytes, name.size());
  } else if (name.front() == '.') {
    why = "must not start with '.'";
  } else {
    why = "may contain only letters, digits, '.', '_' and '-'";
  }
  return makeError(ErrorCode::kInvalidArgument, fmt::format("{} '{}' {}", what, printable(name), why));
}

}  // namespace tellus
