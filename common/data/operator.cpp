#include "data/operator.h"

#include <algorithm>
#include <array>
#include <ostream>

#include "data/operator_factories.h"
#include "data/record.h"

namespace tellus::data {
namespace {

struct RegistryEntry {
  const char* name;
  internal::OperatorFactory factory;
  bool derived;  // output is an aggregate, never a copy of input records (isDerivedOperator)
};

// Sorted by name; a constant table rather than self-registration, so that the set of
// operators is visible in one place and there is no static-initialization order to get wrong.
constexpr std::array<RegistryEntry, 8> kRegistry{{
    {"exec", &internal::makeExec, false},
    {"grep", &internal::makeGrep, false},
    {"identity", &internal::makeIdentity, false},
    {"sort", &internal::makeSort, false},
    {"sum", &internal::makeSum, true},
    {"synthetic", &internal::makeSynthetic, true},
    {"wordcount.map", &internal::makeWordcountMap, true},
    {"wordcount.reduce", &internal::makeWordcountReduce, true},
}};

}  // namespace

Result<std::unique_ptr<Operator>> makeOperator(const std::string& name, const OperatorParams& params,
                                               const OperatorEnv& env) {
  for (const auto& entry : kRegistry) {
    if (name != entry.name) continue;
    ParamReader reader(name, params);
    auto op = entry.factory(reader, env);
    if (!op.isOk()) return op.error();
    TELLUS_RETURN_IF_ERROR(reader.finish());
    return op;
  }
  std::string known;
  for (const auto& entry : kRegistry) known += (known.empty() ? "" : ", ") + std::string(entry.name);
  return makeError(ErrorCode::kInvalidArgument,
                   "unknown operator '" + name + "' (known operators: " + known + ")");
}

Status validateOperator(const std::string& name, const OperatorParams& params) {
  // Structure only: an exec that any site allows, run as the current user.
  OperatorEnv permissive;
  permissive.exec.enabled = true;
  permissive.exec.run_as_user.clear();
  return makeOperator(name, params, permissive).status();
}

Status checkExecAllowed(const config::ExecConfig& exec, const std::string& cmd) {
  if (!exec.enabled) {
    return makeError(ErrorCode::kInvalidArgument, "exec is disabled at this site (exec.enabled: false in its config)");
  }
  if (!exec.allowed_commands.empty() &&
      std::find(exec.allowed_commands.begin(), exec.allowed_commands.end(), cmd) == exec.allowed_commands.end()) {
    return makeError(ErrorCode::kInvalidArgument,
                     "command '" + cmd + "' is not in this site's exec.allowed_commands");
  }
  return Status::ok();
}

bool isDerivedOperator(const std::string& name, const std::vector<std::string>& extraDerived) {
  for (const auto& entry : kRegistry) {
    if (name == entry.name) return entry.derived || std::find(extraDerived.begin(), extraDerived.end(), name) != extraDerived.end();
  }
  return std::find(extraDerived.begin(), extraDerived.end(), name) != extraDerived.end();
}

std::vector<std::string> operatorNames() {
  std::vector<std::string> names;
  for (const auto& entry : kRegistry) names.emplace_back(entry.name);
  return names;
}

BucketRouter::BucketRouter(const std::vector<std::ostream*>& buckets) : buckets_(buckets) {}

std::ostream& BucketRouter::bucketFor(std::string_view key) {
  // With one bucket skip hashing: forward edges and final stages are the common case.
  if (buckets_.size() == 1) return *buckets_.front();
  return *buckets_[bucketForKey(key, bucketCount())];
}

void BucketRouter::writeLine(std::string_view line) {
  std::ostream& out = bucketFor(recordKey(line));
  out.write(line.data(), static_cast<std::streamsize>(line.size()));
  out.put('\n');
}

void BucketRouter::writeRecord(std::string_view key, std::string_view value) {
  std::ostream& out = bucketFor(key);
  out.write(key.data(), static_cast<std::streamsize>(key.size()));
  out.put('\t');
  out.write(value.data(), static_cast<std::streamsize>(value.size()));
  out.put('\n');
}

bool BucketRouter::healthy() const {
  for (const std::ostream* out : buckets_) {
    if (!out->good()) return false;
  }
  return true;
}

Status BucketRouter::finish() {
  for (std::size_t bucket = 0; bucket < buckets_.size(); ++bucket) {
    buckets_[bucket]->flush();
    if (!buckets_[bucket]->good()) {
      return makeError(ErrorCode::kInternal, "writing output bucket " + std::to_string(bucket) + " failed");
    }
  }
  return Status::ok();
}

Status checkInputStream(const std::istream& in, std::size_t inputIndex) {
  if (in.bad()) {
    return makeError(ErrorCode::kInternal, "input " + std::to_string(inputIndex) + ": read error");
  }
  return Status::ok();
}

}  // namespace tellus::data

namespace tellus::data {

Status Operator::run(TaskIo& io) {
  if (io.buckets.empty()) {
    return makeError(ErrorCode::kInvalidArgument, name_ + ": a task needs at least one output bucket");
  }
  for (std::size_t i = 0; i < io.inputs.size(); ++i) {
    if (io.inputs[i] == nullptr) {
      return makeError(ErrorCode::kInvalidArgument, name_ + ": input " + std::to_string(i) + " is null");
    }
  }
  for (std::size_t b = 0; b < io.buckets.size(); ++b) {
    if (io.buckets[b] == nullptr) {
      return makeError(ErrorCode::kInvalidArgument, name_ + ": output bucket " + std::to_string(b) + " is null");
    }
  }
  Status processed = process(io);
  if (!processed.isOk()) return processed.prepend(name_);
  BucketRouter router(io.buckets);
  return router.finish().prepend(name_);
}

}  // namespace tellus::data
