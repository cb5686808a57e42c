#pragma once
// The `tellus` command line client. Every command talks to one master (any site's: job state
// is in ZooKeeper, so any master answers for any job) with a deadline on every call.

#include <iosfwd>
#include <string>
#include <vector>

namespace tellus::cli {

// What `out` is connected to. On a terminal, `submit --wait` and `status --watch` redraw
// progress bars in place (ANSI); elsewhere they print a line per change.
struct Terminal {
  bool tty = false;
  int width = 80;  // columns
};

// Runs the CLI with argv (argv[0] is the program name). Returns the process exit code:
// 0 ok, 1 the operation failed (unreachable master, unknown job, failed job), 2 bad usage or
// bad input. Errors are one line on `err`.
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, Terminal terminal = {});

// "tellus <version> (git <describe>)", the describe taken when the binary was built.
std::string versionString();

}  // namespace tellus::cli
