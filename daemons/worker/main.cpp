// tellus-worker --config worker.yaml
#include <cstdio>
#include <cstring>

#include "worker/worker.h"

int main(int argc, char** argv) {
  if (argc != 3 || std::strcmp(argv[1], "--config") != 0) {
    std::fprintf(stderr, "usage: tellus-worker --config FILE\n");
    return 2;
  }
  return tellus::worker::run(argv[2]);
}
