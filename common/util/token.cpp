#include "util/token.h"

#include <fmt/format.h>

#include <random>

namespace tellus {

std::string randomToken() {
  std::random_device device;
  std::uniform_int_distribution<uint64_t> dist;
  return fmt::format("{:016x}", dist(device));
}

}  // namespace tellus
