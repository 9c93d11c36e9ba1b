#include "core/dequantize.h"

#include <cstring>

#include "core/half.h"

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
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < in; ++c) out[r * in + c] = float(q[r * in + c]) * quant_scale(t, row0 + r, c);
      return;
    }
    case fb::DType::I4: {
      // Blocks of 32 elements in 16 bytes: byte k holds element k (low nibble) and element k + 16 (high nibble).
      const uint8_t* q = t.data + first / 2;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < in; ++c) {
          const int64_t block = c / kQuantBlock, k = c % kQuantBlock;
          const uint8_t byte = q[(r * in + block * kQuantBlock) / 2 + k % 16];
          const int u = k < 16 ? (byte & 15) : (byte >> 4);
          out[r * in + c] = float(u - 8) * quant_scale(t, row0 + r, c);
        }
      }
      return;
    }
    default:  // F32 (I32 tensors are never weights read as floats)
      std::memcpy(out, t.f32() + first, size_t(count) * sizeof(float));
      return;
  }
}

}  // namespace tern
