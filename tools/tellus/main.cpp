#include <iostream>

#include "cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  return tellus::cli::run(args, std::cout, std::cerr);
}
