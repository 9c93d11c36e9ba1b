// SPDX-License-Identifier: MIT
// Status and Result<T>: every fallible call in Tern returns one; nothing throws across the API.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "tern/tern.h"

namespace tern {

// [[nodiscard]]: a call whose Status is dropped is a compile warning. Dropping one on purpose takes a cast to void
// and a comment saying why.
class [[nodiscard]] Status {
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
inline Status InternalError(std::string m) { return Status(TERN_INTERNAL_ERROR, std::move(m)); }

// Holds a T or the non-OK Status that says why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_type<T>, std::move(value)) {}  // NOLINT: implicit on purpose
  // An OK status carries no value, so a Result made from one would be neither a value nor an error: it is a bug
  // in the library, reported as one instead of passing for a failure with an OK code.
  Result(Status status)  // NOLINT: implicit on purpose
      : v_(std::in_place_type<Status>,
           status.ok() ? InternalError("internal error: a Result was made from an OK status") : std::move(status)) {}
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

#define TERN_CONCAT_INNER_(a, b) a##b
#define TERN_CONCAT_(a, b) TERN_CONCAT_INNER_(a, b)

// TERN_ASSIGN_OR_RETURN(auto table, load_table(x));  TERN_ASSIGN_OR_RETURN(slice_, low.weight(t));
// Evaluates a Result-returning expression; returns its Status from the enclosing function when it failed, otherwise
// moves the value into `decl` (a declaration or an lvalue). It expands to several statements in the enclosing
// scope, so it cannot be the unbraced body of an if or a loop.
#define TERN_ASSIGN_OR_RETURN(decl, ...) \
  TERN_ASSIGN_OR_RETURN_IMPL_(TERN_CONCAT_(_tern_result_, __COUNTER__), decl, __VA_ARGS__)
#define TERN_ASSIGN_OR_RETURN_IMPL_(result, decl, ...) \
  auto result = (__VA_ARGS__);                        \
  if (!result.ok()) return result.status();           \
  decl = std::move(result).value()

// Returns `status` from the enclosing function unless `cond` holds.
#define TERN_CHECK_OR_RETURN(cond, status)  \
  do {                                      \
    if (!(cond)) return (status);           \
  } while (0)
