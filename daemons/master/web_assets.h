#pragma once
// The web status page's files (web/ at the repository root), compiled into tellus-master so a
// deployed master needs no files besides its binary. CMake generates the table from web/
// (cmake/EmbedFiles.cmake); the mapping of file names to URL paths and content types is here
// (pure; tests/unit/master/status_page_test.cpp).

#include <span>
#include <string>
#include <string_view>

namespace tellus::master::web {

struct Asset {
  std::string_view file;  // "index.html", "app.js": a name directly under web/
  std::string_view body;
};

// Every file under web/, in name order (generated).
std::span<const Asset> assets();

// "index.html" -> "/", any other file -> "/<file>".
std::string urlPathFor(std::string_view file);
// By extension: html, css, js, json, svg, png, ico, txt; anything else application/octet-stream.
std::string_view contentTypeFor(std::string_view file);

}  // namespace tellus::master::web
