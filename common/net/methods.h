#pragma once
// The typed tag of every method of the daemons' services (proto/tellus.proto). Add a tag here
// and to AllMethods when adding an rpc; tests/unit/net/rpc_method_test.cpp checks the two
// against the proto's descriptors.

#include <tuple>

#include "net/rpc_method.h"
#include "tellus.pb.h"

namespace tellus::rpc {

struct Master {
  TELLUS_RPC_METHOD(Master, Submit);
  TELLUS_RPC_METHOD(Master, StartJm);
  TELLUS_RPC_METHOD(Master, Status);
  TELLUS_RPC_METHOD(Master, List);
  TELLUS_RPC_METHOD(Master, Sites);
  TELLUS_RPC_METHOD(Master, Kill);
  TELLUS_RPC_METHOD(Master, Result);
  TELLUS_RPC_METHOD(Master, Put);
  TELLUS_RPC_METHOD(Master, RegisterWorker);
  TELLUS_RPC_METHOD(Master, Heartbeat);
  TELLUS_RPC_METHOD(Master, JmUpdate);
};

struct Worker {
  TELLUS_RPC_METHOD(Worker, LaunchJm);
  TELLUS_RPC_METHOD(Worker, RunTask);
  TELLUS_RPC_METHOD(Worker, Fetch);
  TELLUS_RPC_METHOD(Worker, KillJobTasks);
  TELLUS_RPC_METHOD(Worker, WriteDataset);
};

struct Jm {
  TELLUS_RPC_METHOD(Jm, Steal);
  TELLUS_RPC_METHOD(Jm, ContainerUsage);
  TELLUS_RPC_METHOD(Jm, Grants);
};

using AllMethods =
    std::tuple<Master::Submit, Master::StartJm, Master::Status, Master::List, Master::Sites, Master::Kill,
               Master::Result, Master::Put, Master::RegisterWorker, Master::Heartbeat, Master::JmUpdate,
               Worker::LaunchJm, Worker::RunTask, Worker::Fetch, Worker::KillJobTasks, Worker::WriteDataset,
               Jm::Steal, Jm::ContainerUsage, Jm::Grants>;

}  // namespace tellus::rpc
