// Options structs of the C API that grow without breaking old callers: each starts with `size_t struct_size`,
// set by its *_init function. A caller built against an older header passes a smaller struct_size; the fields it
// does not have take their defaults.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

#include "core/status.h"

namespace tern {

// Copies *options into *out over the defaults from init (NULL options: the defaults). name: the struct's name for
// messages. Rejects a struct_size of 0 (never initialised), one smaller than the first field's end, or one larger
// than this library's struct (a newer header).
template <typename Options>
[[nodiscard]] Status read_options(const Options* options, const char* name, void (*init)(Options*), Options* out) {
  init(out);
  if (!options) return Status::Ok();
  const size_t size = options->struct_size;
  if (size == 0) return InvalidArgument(std::string(name) + ".struct_size is 0: initialise the struct with its _init function");
  if (size < sizeof(size_t) || size > sizeof(Options)) {
    return InvalidArgument(std::string(name) + ".struct_size " + std::to_string(size) + " is not a size this library reads (" +
                           std::to_string(sizeof(Options)) + " bytes or fewer): options from a newer tern, or not initialised "
                           "with the _init function");
  }
  std::memcpy(static_cast<void*>(out), static_cast<const void*>(options), size);
  out->struct_size = sizeof(Options);
  return Status::Ok();
}

}  // namespace tern
