// SPDX-License-Identifier: MIT
// Options structs whose first field is `size_t struct_size` (tern_session_options, tern_sampler_options,
// tern_generator_options): an app built against an older tern.h passes a shorter struct, and the fields it does not
// have take their defaults. Fields are only ever appended, and no field sits in an older struct's trailing padding.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

#include "format/status.h"

namespace tern {

// *out holds the defaults; copies the caller's first struct_size bytes over them. NULL: the defaults. A struct_size
// of 0 (or below the field itself) or above sizeof(T) is TERN_INVALID_ARGUMENT naming `what`.
template <typename T>
[[nodiscard]] Status read_sized_options(const T* in, const char* what, T* out) {
  if (in == nullptr) return Status::Ok();
  size_t size = 0;
  std::memcpy(&size, in, sizeof size);
  if (size < sizeof(size_t)) {
    return InvalidArgument(std::string(what) + ".struct_size is " + std::to_string(size) +
                           ": the options come from an uninitialised struct (set them with " + what + "_init)");
  }
  if (size > sizeof(T)) {
    return InvalidArgument(std::string(what) + ".struct_size is " + std::to_string(size) + ", larger than this library's " +
                           std::to_string(sizeof(T)) + " bytes: the options come from a newer tern.h than this library");
  }
  std::memcpy(static_cast<void*>(out), in, size);
  out->struct_size = sizeof(T);
  return Status::Ok();
}

}  // namespace tern
