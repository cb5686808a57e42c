#include <sys/ioctl.h>
#include <unistd.h>

#include <iostream>

#include "cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  tellus::cli::Terminal terminal;
  terminal.tty = ::isatty(STDOUT_FILENO) == 1;
  winsize size{};
  if (terminal.tty && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) terminal.width = size.ws_col;
  return tellus::cli::run(args, std::cout, std::cerr, terminal);
}
