#pragma once
// What tests read off the machine: a file's bytes, whether a process is alive.

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace tellus::harness {

// The whole file, "" when it cannot be read.
std::string readFile(const std::filesystem::path& path);

// True while `pid` exists and has not exited (zombies count as gone).
bool processAlive(pid_t pid);

}  // namespace tellus::harness
