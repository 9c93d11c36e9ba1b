// SPDX-License-Identifier: MIT
// Minimal .npy (NumPy format 1.0) reader and writer for little-endian float32 and int32 arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tern::npy {

struct Array {
  std::vector<int64_t> shape;
  std::vector<float> data;  // float32 arrays only
};

// The bytes before a C-order float32 array of `shape` in a .npy file (magic, version 1.0, header padded to 64).
std::string header_f32(const std::vector<int64_t>& shape);
// Writes a C-order float32 array; returns false with a message on failure.
bool write_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape, std::string* error);
bool read_f32(const std::string& path, Array* out, std::string* error);

}  // namespace tern::npy
