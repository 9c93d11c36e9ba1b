// CONVERT_TRY(auto x, expr): evaluates a Result<T>-returning expr, returns its Status from the enclosing
// function on failure, otherwise binds the value to the declaration.
#pragma once

#include <utility>

#define CONVERT_CONCAT_INNER(a, b) a##b
#define CONVERT_CONCAT(a, b) CONVERT_CONCAT_INNER(a, b)
#define CONVERT_TRY_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                      \
  if (!tmp.ok()) return tmp.status();     \
  decl = std::move(tmp.value())
#define CONVERT_TRY(decl, expr) CONVERT_TRY_IMPL(CONVERT_CONCAT(convert_result_, __LINE__), decl, expr)
