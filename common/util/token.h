#pragma once
// Random tokens that tell one try of a ZooKeeper write from another (an election candidate,
// an executor start): after a lost reply, the writer finds what it wrote by its token.

#include <string>

namespace tellus {

// 16 hex digits from the system's random source.
std::string randomToken();

}  // namespace tellus
