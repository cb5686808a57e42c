#pragma once
// The typed tag of every method of the daemons' services (proto/tellus.proto). Add a tag here
// and to AllMethods when adding an rpc; tests/unit/net/rpc_method_test.cpp checks the two
// against the proto's descriptors.
//
// Each tag names the roles allowed to call it (net/identity.h); with TLS on, RpcServer refuses
// any other caller with kPermissionDenied before the handler runs. JMs call with their host
// worker's certificate (role worker), so "worker" here also means "a JM" (docs/security.md).

#include <tuple>

#include "net/rpc_method.h"
#include "tellus.pb.h"

namespace tellus::rpc {

struct Master {
  TELLUS_RPC_METHOD(Master, Submit, net::Role::kClient);
  TELLUS_RPC_METHOD(Master, StartJm, net::Role::kMaster, net::Role::kWorker);
  TELLUS_RPC_METHOD(Master, Status, net::Role::kClient);
  TELLUS_RPC_METHOD(Master, List, net::Role::kClient);
  TELLUS_RPC_METHOD(Master, Sites, net::Role::kClient);
  // A client asks; its master fans the kill out to the other masters (this_site_only).
  TELLUS_RPC_METHOD(Master, Kill, net::Role::kClient, net::Role::kMaster);
  TELLUS_RPC_METHOD(Master, Result, net::Role::kClient);
  TELLUS_RPC_METHOD(Master, Put, net::Role::kClient);
  TELLUS_RPC_METHOD(Master, RegisterWorker, net::Role::kWorker);
  TELLUS_RPC_METHOD(Master, Heartbeat, net::Role::kWorker);
  TELLUS_RPC_METHOD(Master, JmUpdate, net::Role::kWorker);
  // A client asks; a master forwards to the master of the site holding the log.
  TELLUS_RPC_METHOD(Master, Logs, net::Role::kClient, net::Role::kMaster);
};

struct Worker {
  TELLUS_RPC_METHOD(Worker, LaunchJm, net::Role::kMaster);
  TELLUS_RPC_METHOD(Worker, RunTask, net::Role::kWorker);
  TELLUS_RPC_METHOD(Worker, Fetch, net::Role::kMaster, net::Role::kWorker);
  TELLUS_RPC_METHOD(Worker, KillJobTasks, net::Role::kMaster);
  TELLUS_RPC_METHOD(Worker, WriteDataset, net::Role::kMaster);
  TELLUS_RPC_METHOD(Worker, ReadLog, net::Role::kMaster);
  // A worker of the same site asks for a copy of its output (the handler checks the site).
  TELLUS_RPC_METHOD(Worker, Replicate, net::Role::kWorker);
};

struct Jm {
  TELLUS_RPC_METHOD(Jm, Steal, net::Role::kWorker);
  TELLUS_RPC_METHOD(Jm, ContainerUsage, net::Role::kWorker);
  TELLUS_RPC_METHOD(Jm, Grants, net::Role::kMaster);
  TELLUS_RPC_METHOD(Jm, Heartbeat, net::Role::kWorker);
};

using AllMethods =
    std::tuple<Master::Submit, Master::StartJm, Master::Status, Master::List, Master::Sites, Master::Kill,
               Master::Result, Master::Put, Master::RegisterWorker, Master::Heartbeat, Master::JmUpdate,
               Master::Logs,
               Worker::LaunchJm, Worker::RunTask, Worker::Fetch, Worker::KillJobTasks, Worker::WriteDataset,
               Worker::ReadLog, Worker::Replicate,
               Jm::Steal, Jm::ContainerUsage, Jm::Grants, Jm::Heartbeat>;

namespace detail {
template <class Tuple>
struct EveryMethodNamesCallers;
template <class... M>
struct EveryMethodNamesCallers<std::tuple<M...>> {
  static constexpr bool value = (!M::kCallers.empty() && ...);
};
}  // namespace detail
static_assert(detail::EveryMethodNamesCallers<AllMethods>::value,
              "every daemon method names the roles allowed to call it");

}  // namespace tellus::rpc
