#pragma once
// Typed RPC method tags. A tag names one `rpc` of a proto `service` and carries its request and
// response types, taken from protoc's generated service class (cc_generic_services), so
// RpcServer::handle<M> and RpcClient::call<M> cannot disagree on types or misspell a name:
//
//   struct Jm { TELLUS_RPC_METHOD(Jm, Steal); };        // Jm::Steal::Request == pb::StealRequest
//   server.handle<Jm::Steal>(handler);
//   auto r = co_await client->call<Jm::Steal>(request, 2s);
//
// On the wire the method is "<service in lower case>.<method>" ("jm.Steal"), the string every
// Tellus version has sent, so mixed versions keep talking. Only the generated types are used:
// calls go over common/net's framing, never protobuf's RPC stack.

#include <google/protobuf/message.h>
#include <google/protobuf/service.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <string_view>

#include "net/identity.h"

namespace tellus::net {

// What handle<M>/call<M> need of a tag.
template <class M>
concept RpcMethod = requires {
  typename M::Request;
  typename M::Response;
  { M::kService } -> std::convertible_to<std::string_view>;  // proto service name ("Jm")
  { M::kMethod } -> std::convertible_to<std::string_view>;   // proto rpc name ("Steal")
  { M::kWireName } -> std::convertible_to<std::string_view>;  // "jm.Steal"
  { M::kCallers } -> std::convertible_to<RoleSet>;              // who may call it (TLS mode)
} && std::derived_from<typename M::Request, google::protobuf::Message> &&
    std::derived_from<typename M::Response, google::protobuf::Message>;

namespace detail {

// Deduces request and response from a generated service method's signature.
template <class MemberFunction>
struct GeneratedMethod;

template <class Service, class Req, class Resp>
struct GeneratedMethod<void (Service::*)(google::protobuf::RpcController*, const Req*, Resp*,
                                         google::protobuf::Closure*)> {
  using Request = Req;
  using Response = Resp;
};

// "<service lower-cased>.<method>" as a NUL-terminated array, built at compile time from the
// two string literals (sizes include their NULs: the '.' takes one of the two).
template <std::size_t S, std::size_t M>
constexpr std::array<char, S + M> wireName(const char (&service)[S], const char (&method)[M]) {
  std::array<char, S + M> out{};
  std::size_t n = 0;
  for (std::size_t i = 0; i + 1 < S; ++i) {
    const char c = service[i];
    out[n++] = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  out[n++] = '.';
  for (std::size_t i = 0; i + 1 < M; ++i) out[n++] = method[i];
  out[n] = '\0';
  return out;
}

}  // namespace detail
}  // namespace tellus::net

// Declares the tag struct `Method` for rpc `Method` of service `tellus.pb.Service`. A name
// that is not in the proto does not compile. The optional trailing arguments are the roles
// allowed to call it (net::Role::kClient, ...); none means any authenticated peer, which only
// test services use (net/methods.h checks that every daemon method names its callers).
#define TELLUS_RPC_METHOD(Service, Method, ...)                                                   \
  struct Method : ::tellus::net::detail::GeneratedMethod<decltype(&::tellus::pb::Service::Method)> { \
    static constexpr std::string_view kService = #Service;                                        \
    static constexpr std::string_view kMethod = #Method;                                          \
    static constexpr auto kWireNameChars = ::tellus::net::detail::wireName(#Service, #Method); \
    static constexpr std::string_view kWireName{kWireNameChars.data(), kWireNameChars.size() - 1}; \
    static constexpr ::tellus::net::RoleSet kCallers{__VA_ARGS__};                                 \
  }
