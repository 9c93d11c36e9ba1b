// SPDX-License-Identifier: MIT
#include "format/dequantize.h"

#include <cstring>

#include "format/half.h"

namespace tern {

float quant_scale(const TensorInfo& t, int64_t row, int64_t col) {
  const int64_t per_row = t.shape[1] / t.group();
  const int64_t i = row * per_row + col / t.group();
  if (t.scales->dtype == fb::DType::F16) return half_to_float(reinterpret_cast<const uint16_t*>(t.scales->data)[i]);
  return t.scales->f32()[i];
}

void dequantize_rows(const TensorInfo& t, int64_t row0, int64_t rows, float* out) {
  const int64_t in = t.shape.empty() ? 1 : t.shape.back();
  const int64_t count = rows * in, first = row0 * in;
  switch (t.dtype) {
    case fb::DType::F16:
      halves_to_floats(reinterpret_cast<const uint16_t*>(t.data) + first, out, 0, size_t(count));
      return;
    case fb::DType::I8: {
      const int8_t* q = reinterpret_cast<const int8_t*>(t.data) + first;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c0 = 0; c0 < in; c0 += t.group()) {  // one scale a group
          const float scale = quant_scale(t, row0 + r, c0);
          for (int64_t c = c0; c < c0 + t.group(); ++c) out[r * in + c] = float(q[r * in + c]) * scale;
        }
      }
      return;
    }
    case fb::DType::I4: {
      // Blocks of 32 elements in 16 bytes: byte k holds element k (low nibble) and element k + 16 (high nibble);
      // a group is a whole number of blocks.
      const uint8_t* q = t.data + first / 2;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c0 = 0; c0 < in; c0 += t.group()) {
          const float scale = quant_scale(t, row0 + r, c0);
          for (int64_t b = c0; b < c0 + t.group(); b += kQuantBlock) {
            const uint8_t* block = q + (r * in + b) / 2;
            for (int64_t k = 0; k < 16; ++k) {
              out[r * in + b + k] = float((block[k] & 15) - 8) * scale;
              out[r * in + b + k + 16] = float((block[k] >> 4) - 8) * scale;
            }
          }
        }
      }
      return;
    }
    default:  // F32 (I32 tensors are never weights read as floats)
      std::memcpy(out, t.f32() + first, size_t(count) * sizeof(float));
      return;
  }
}

const float* float_values(const TensorInfo& t, std::vector<float>* storage) {
  if (t.dtype == fb::DType::F32) return t.f32();
  const int64_t in = t.shape.empty() ? 1 : t.shape.back();
  storage->resize(size_t(t.numel()));
  dequantize_rows(t, 0, in > 0 ? t.numel() / in : 0, storage->data());
  return storage->data();
}

}  // namespace tern
