// SPDX-License-Identifier: MIT
// Compressed weights (F16, I8, I4: schema/tern.fbs, Tensor) widened to float32, portable and exact: value =
// q * scale in float32, as every kernel that reads them compressed defines it. For the paths that need a float32
// copy of a small weight (a transposed projection, a staged upload) and for tests; the hot kernels read the
// compressed bytes in place.
#pragma once

#include <cstdint>
#include <vector>

#include "format/model.h"

namespace tern {

// Rows [row0, row0 + rows) of a matrix t [out, in] (or any F32 / F16 tensor viewed as [numel / in, in]) into
// out [rows, in].
void dequantize_rows(const TensorInfo& t, int64_t row0, int64_t rows, float* out);

// All of t as float32: t's own data when it is F32, else its values widened into *storage.
const float* float_values(const TensorInfo& t, std::vector<float>* storage);

// The scale of element (row, col) of an I8 or I4 matrix.
float quant_scale(const TensorInfo& t, int64_t row, int64_t col);

}  // namespace tern
