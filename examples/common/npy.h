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

// Writes a C-order float32 array; returns false with a message on failure.
bool write_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape, std::string* error);
bool read_f32(const std::string& path, Array* out, std::string* error);

}  // namespace tern::npy
