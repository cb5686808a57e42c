#include "harness/eventually.h"

#include <thread>

namespace tellus::harness {

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds deadline,
                std::chrono::milliseconds pollInterval) {
  auto end = std::chrono::steady_clock::now() + deadline;
  while (true) {
    if (condition()) return true;
    auto now = std::chrono::steady_clock::now();
    if (now >= end) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pollInterval, end - now));
  }
}

}  // namespace tellus::harness
