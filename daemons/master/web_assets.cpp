#include "master/web_assets.h"

#include <array>
#include <string>
#include <utility>

namespace tellus::master::web {

std::string urlPathFor(std::string_view file) {
  if (file == "index.html") return "/";
  std::string path("/");
  path.append(file);
  return path;
}

std::string_view contentTypeFor(std::string_view file) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kTypes{{
      {".html", "text/html; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".json", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
  }};
  for (const auto& [ext, type] : kTypes) {
    if (file.size() > ext.size() && file.substr(file.size() - ext.size()) == ext) return type;
  }
  return "application/octet-stream";
}

}  // namespace tellus::master::web
