# All dependencies come from Debian packages installed by scripts/install-deps.
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS system)
find_package(OpenSSL 3.0 REQUIRED)
find_package(Protobuf REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Catch2 2 REQUIRED)
find_package(PkgConfig REQUIRED)

# No CMake config ships for the ZooKeeper C client or for Clp.
find_path(ZOOKEEPER_INCLUDE_DIR zookeeper/zookeeper.h REQUIRED)
find_library(ZOOKEEPER_MT_LIBRARY zookeeper_mt REQUIRED)
add_library(tellus_zookeeper INTERFACE)
target_include_directories(tellus_zookeeper SYSTEM INTERFACE ${ZOOKEEPER_INCLUDE_DIR})
target_compile_definitions(tellus_zookeeper INTERFACE THREADED)
target_link_libraries(tellus_zookeeper INTERFACE ${ZOOKEEPER_MT_LIBRARY} Threads::Threads)
add_library(Tellus::zookeeper ALIAS tellus_zookeeper)

pkg_check_modules(CLP REQUIRED IMPORTED_TARGET clp)
add_library(Tellus::clp ALIAS PkgConfig::CLP)
