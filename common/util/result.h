#pragma once
// The one error convention of Tellus: functions that can fail return Status (no value) or
// Result<T> (a value or an error). Errors carry a human-readable message to which callers
// prepend context ("loading master.yaml: ..."), never an exception across a library boundary.

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace tellus {

// Why a call failed. `code` lets callers branch on retryable vs. final failures.
enum class ErrorCode {
  kInvalidArgument,  // bad input: config, spec, frame, CLI argument
  kNotFound,
  kAlreadyExists,
  kUnavailable,       // peer unreachable, connection lost: retryable
  kDeadlineExceeded,  // retryable
  kConflict,          // CAS lost / version mismatch / fenced by a newer epoch
  kInternal,
  kResourceExhausted,  // a limit of the callee (e.g. its call rate): retryable after a pause
  kPermissionDenied,  // the caller's identity (certificate) does not allow it: final
};

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  // "context: message"
  [[nodiscard]] Error prepend(const std::string& context) const {
    return Error{code, context + ": " + message};
  }
};

inline Error makeError(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(Error e) : error_(std::move(e)), ok_(false) {}  // NOLINT: implicit by design

  static Status ok() { return {}; }
  bool isOk() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }
  const std::string& message() const { return error_.message; }
  ErrorCode code() const { return error_.code; }
  Status prepend(const std::string& context) const { return ok_ ? *this : Status(error_.prepend(context)); }

 private:
  Error error_;
  bool ok_ = true;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error e) : v_(std::move(e)) {}      // NOLINT
  Result(Status s) : v_(s.error()) { assert(!s.isOk()); }  // NOLINT: only from a failed Status

  bool isOk() const { return v_.index() == 0; }
  explicit operator bool() const { return isOk(); }
  T& value() & {
    assert(isOk());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(isOk());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(isOk());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const {
    assert(!isOk());
    return std::get<1>(v_);
  }
  const std::string& message() const { return error().message; }
  Status status() const { return isOk() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace tellus

// Propagate a failed Status/Result from the current function, with optional context.
#define TELLUS_RETURN_IF_ERROR(expr)              \
  do {                                            \
    auto _st = (expr);                            \
    if (!_st.isOk()) return ::tellus::Status(_st.error()); \
  } while (0)

#define TELLUS_RETURN_IF_ERROR_CTX(expr, ctx)                   \
  do {                                                          \
    auto _st = (expr);                                          \
    if (!_st.isOk()) return ::tellus::Status(_st.error().prepend(ctx)); \
  } while (0)
