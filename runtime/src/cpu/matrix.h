// SPDX-License-Identifier: MIT
// y = x W^T + b for one weight matrix of a kernel, whatever its storage (schema/tern.fbs, Tensor): float32 through
// Tern's GEMM (cpu/isa/gemm.inc) on a copy packed once per model and shared by its sessions (cpu/packed_weights.h),
// float16 through Tern's kernels (cpu/isa/quant.inc), which read the model's bytes in place; int8 and int4 the same
// for calls of few rows (generation), and for prefill through the GEMM of cpu/isa/quant_gemm.inc on a copy packed
// once per model like float32's. For int8 and int4 the rows of x are first quantised to int8 in blocks of 32 (one
// float32 scale each; for the packed GEMM also each block's sum) in the caller's scratch.
#pragma once

#include <pthreadpool.h>

#include <cstdint>
#include <memory>
#include <string>

#include "format/model.h"
#include "format/status.h"
#include "cpu/isa/table.h"
#include "cpu/packed_weights.h"

namespace tern::cpu {

class Matrix {
 public:
  // Rows [row0, row0 + rows) of W = t [out, in] (a tensor of `model`), bias [rows] (inside the model) or null; rows
  // of y are out_stride apart.
  static Result<Matrix> create(const Model& model, const TensorInfo& t, int64_t row0, int64_t rows, const float* bias,
                               int64_t out_stride, const std::string& where);
  static Result<Matrix> create(const Model& model, const TensorInfo& t, const float* bias, const std::string& where) {
    return create(model, t, 0, t.shape[0], bias, t.shape[0], where);
  }
  // A float32 matrix derived from the model's tensors (cpu/packed_weights.h), packed once per model like the rest.
  static Result<Matrix> create(const Model& model, const DerivedF32& m, const float* bias, int64_t out_stride,
                               const std::string& where);

  // y [n, out_stride] (the first `rows` columns written) = x [n, in] W^T + b; scratch: scratch_bytes(n) bytes,
  // aligned to 64.
  Status run(pthreadpool_t pool, int threads, const float* x, int64_t n, float* y, void* scratch,
             const std::string& where) const;

  uint64_t scratch_bytes(int64_t n) const;
  // The packed copy of float32, int8 or int4 weights, shared with the model's other sessions (float16: 0, read
  // where it lies).
  uint64_t packed_bytes() const { return f32_ ? f32_->bytes : q8_ ? q8_->bytes : 0; }
  // True when run() never reads the model's copy of the weights and bias (int8 and int4 do for calls of few rows).
  bool packs_weights() const { return f32_ != nullptr || (q8_ && q8_min_rows_ <= 1); }
  int64_t in() const { return in_; }
  int64_t rows() const { return rows_; }

 private:
  void run_f32(const IsaKernels& k, pthreadpool_t pool, int threads, const float* x, int64_t n, float* y) const;
  void run_q8(const IsaKernels& k, pthreadpool_t pool, int threads, const int8_t* q, const float* s,
              const int32_t* sums, int64_t n, float* y) const;

  std::shared_ptr<const PackedF32> f32_;  // float32 weights: the model's packed copy
  std::shared_ptr<const PackedQ8> q8_;    // int8 and int4 weights: the model's packed copy for prefill
  int64_t q8_min_rows_ = 0;               // calls of this many rows or more run on q8_
  const TensorInfo* t_ = nullptr;
  fb::DType dtype_ = fb::DType::F32;
  const uint8_t* w_ = nullptr;  // row row0 of the compressed matrix
  const uint8_t* scales_ = nullptr;  // its first scale
  const float* bias_ = nullptr;
  int64_t in_ = 0, rows_ = 0, out_stride_ = 0;
};

}  // namespace tern::cpu
