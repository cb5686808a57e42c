// tellus-jm --config jm.yaml  (started by a worker; see config::JmConfig)
#include <cstdio>
#include <cstring>

#include "jm/jm.h"

int main(int argc, char** argv) {
  if (argc != 3 || std::strcmp(argv[1], "--config") != 0) {
    std::fprintf(stderr, "usage: tellus-jm --config FILE\n");
    return 2;
  }
  return tellus::jm::run(argv[2]);
}
