#pragma once
// The sanctioned way for a test to wait: poll a real condition until it holds or a deadline
// passes (Kudu's ASSERT_EVENTUALLY). Never a fixed sleep.

#include <chrono>
#include <functional>

namespace tellus::harness {

// Polls `condition` every `pollInterval` until it returns true (-> true) or `deadline` has
// elapsed (-> false, after one last check).
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds deadline,
                std::chrono::milliseconds pollInterval = std::chrono::milliseconds(5));

}  // namespace tellus::harness
