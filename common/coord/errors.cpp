#include "coord/errors.h"

#include <zookeeper/zookeeper.h>

namespace tellus::coord {
namespace {

struct CodeInfo {
  const char* name;
  const char* text;
  ErrorCode code;
};

CodeInfo describe(int rc) {
  switch (rc) {
    case ZOK:
      return {"ZOK", "ok", ErrorCode::kInternal};
    case ZNONODE:
      return {"ZNONODE", "no node", ErrorCode::kNotFound};
    case ZNODEEXISTS:
      return {"ZNODEEXISTS", "node already exists", ErrorCode::kAlreadyExists};
    case ZBADVERSION:
      return {"ZBADVERSION", "version mismatch", ErrorCode::kConflict};
    case ZNOTEMPTY:
      return {"ZNOTEMPTY", "node has children", ErrorCode::kConflict};
    case ZCONNECTIONLOSS:
      return {"ZCONNECTIONLOSS", "connection to ZooKeeper lost", ErrorCode::kUnavailable};
    case ZOPERATIONTIMEOUT:
      return {"ZOPERATIONTIMEOUT", "operation timed out", ErrorCode::kUnavailable};
    case ZSESSIONEXPIRED:
      return {"ZSESSIONEXPIRED", "ZooKeeper session expired", ErrorCode::kUnavailable};
    case ZINVALIDSTATE:
      return {"ZINVALIDSTATE", "ZooKeeper session expired or closed", ErrorCode::kUnavailable};
    case ZCLOSING:
      return {"ZCLOSING", "ZooKeeper client closing", ErrorCode::kUnavailable};
    case ZSESSIONMOVED:
      return {"ZSESSIONMOVED", "session moved to another server", ErrorCode::kUnavailable};
    case ZTHROTTLEDOP:
      return {"ZTHROTTLEDOP", "operation throttled by the server", ErrorCode::kUnavailable};
    case ZNOTREADONLY:
      return {"ZNOTREADONLY", "server is read-only", ErrorCode::kUnavailable};
    case ZBADARGUMENTS:
      return {"ZBADARGUMENTS", "invalid arguments", ErrorCode::kInvalidArgument};
    case ZNOCHILDRENFOREPHEMERALS:
      return {"ZNOCHILDRENFOREPHEMERALS", "ephemeral nodes cannot have children", ErrorCode::kInvalidArgument};
    case ZINVALIDACL:
      return {"ZINVALIDACL", "invalid ACL", ErrorCode::kInvalidArgument};
    case ZNOAUTH:
      // The node's ACL does not admit this session's identity (docs/security.md).
      return {"ZNOAUTH", "not authorized", ErrorCode::kPermissionDenied};
    case ZAUTHFAILED:
      return {"ZAUTHFAILED", "authentication failed", ErrorCode::kInternal};
    case ZMARSHALLINGERROR:
      return {"ZMARSHALLINGERROR", "marshalling error", ErrorCode::kInternal};
    case ZRUNTIMEINCONSISTENCY:
      return {"ZRUNTIMEINCONSISTENCY", "runtime inconsistency", ErrorCode::kInternal};
    case ZDATAINCONSISTENCY:
      return {"ZDATAINCONSISTENCY", "data inconsistency", ErrorCode::kInternal};
    case ZSYSTEMERROR:
      return {"ZSYSTEMERROR", "system error", ErrorCode::kInternal};
    case ZUNIMPLEMENTED:
      return {"ZUNIMPLEMENTED", "unimplemented", ErrorCode::kInternal};
    default:
      return {nullptr, "unknown error", ErrorCode::kInternal};
  }
}

}  // namespace

std::string zkCodeName(int rc) {
  auto info = describe(rc);
  return info.name ? info.name : "ZUNKNOWN(" + std::to_string(rc) + ")";
}

Error zkError(int rc, std::string_view operation, std::string_view path, bool outcomeUnknown) {
  auto info = describe(rc);
  std::string message =
      std::string(operation) + " " + std::string(path) + ": " + info.text + " (" + zkCodeName(rc) + ")";
  if (outcomeUnknown && isConnectionError(rc)) message += "; the write may or may not have been applied";
  return Error{info.code, std::move(message)};
}

bool isConnectionError(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE ||
         rc == ZCLOSING || rc == ZSESSIONMOVED;
}

bool isRetryableForIdempotent(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZTHROTTLEDOP || rc == ZSESSIONEXPIRED ||
         rc == ZINVALIDSTATE || rc == ZCLOSING || rc == ZSESSIONMOVED;
}

}  // namespace tellus::coord
