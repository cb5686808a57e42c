// tellus-master --config master.yaml
#include <cstdio>
#include <cstring>

#include "master/master.h"

int main(int argc, char** argv) {
  if (argc != 3 || std::strcmp(argv[1], "--config") != 0) {
    std::fprintf(stderr, "usage: tellus-master --config FILE\n");
    return 2;
  }
  return tellus::master::run(argv[2]);
}
