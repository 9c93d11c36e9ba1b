// Status and Result<T>: every fallible call in Tern returns one; nothing throws across the API.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "tern/tern.h"

namespace tern {

class Status {
 public:
  Status() = default;  // OK
  Status(tern_status code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == TERN_OK; }
  tern_status code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  tern_status code_ = TERN_OK;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(TERN_INVALID_ARGUMENT, std::move(m)); }
inline Status InvalidModel(std::string m) { return Status(TERN_INVALID_MODEL, std::move(m)); }
inline Status Unsupported(std::string m) { return Status(TERN_UNSUPPORTED, std::move(m)); }
inline Status OutOfMemory(std::string m) { return Status(TERN_OUT_OF_MEMORY, std::move(m)); }
inline Status IoError(std::string m) { return Status(TERN_IO_ERROR, std::move(m)); }

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit on purpose
  Result(Status status) : v_(std::move(status)) {}   // NOLINT: must not be OK
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tern

// Returns from the enclosing function when a Status-returning expression fails.
#define TERN_RETURN_IF_ERROR(expr)          \
  do {                                      \
    ::tern::Status _tern_st = (expr);       \
    if (!_tern_st.ok()) return _tern_st;    \
  } while (0)

// Returns `status` from the enclosing function unless `cond` holds.
#define TERN_CHECK_OR_RETURN(cond, status)  \
  do {                                      \
    if (!(cond)) return (status);           \
  } while (0)
