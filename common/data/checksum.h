#pragma once
// Partition checksums: CRC-32 (IEEE 802.3 polynomial, the one of zlib, gzip and PNG), computed
// by zlib. Check value: crc32("123456789") == 0xcbf43926.

#include <cstdint>
#include <string>
#include <string_view>

namespace tellus::data {

// Incremental CRC-32: feeding the bytes in any number of pieces gives the same value.
class Crc32 {
 public:
  void update(std::string_view bytes);
  std::uint32_t value() const { return crc_; }

 private:
  std::uint32_t crc_ = 0;
};

std::uint32_t crc32Of(std::string_view bytes);

// "cbf43926": 8 lowercase hex digits, the form used in sidecar files and logs.
std::string formatCrc32(std::uint32_t crc);

}  // namespace tellus::data
