#include "data/checksum.h"

#include <zlib.h>

#include <cstdio>

namespace tellus::data {

void Crc32::update(std::string_view bytes) {
  // crc32_z takes a size_t length, so arbitrarily large pieces need no splitting.
  crc_ = static_cast<std::uint32_t>(
      crc32_z(crc_, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

std::uint32_t crc32Of(std::string_view bytes) {
  Crc32 crc;
  crc.update(bytes);
  return crc.value();
}

std::string formatCrc32(std::uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

}  // namespace tellus::data
