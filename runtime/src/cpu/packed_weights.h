// SPDX-License-Identifier: MIT
// Float32 matrices packed for the CPU's GEMM (cpu/isa/gemm.inc) once per model and shared read-only by its sessions:
// four sessions on one model hold one packed copy, not four. The model owns the cache (Model::attachment); the cache
// holds weak references only, so a copy lives as long as some session's kernel holds it and is freed with the last
// one (the cache's entry then expires and a later session packs again).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "format/model.h"
#include "format/status.h"

namespace tern::cpu {

// Rows [row0, row0 + rows) of a float32 matrix [out, in] and its bias, in the kernel table's panels (cpu/isa/table.h,
// pack_f32_panels) of the process's variant.
struct PackedF32 {
  PackedF32() = default;
  PackedF32(const PackedF32&) = delete;
  PackedF32& operator=(const PackedF32&) = delete;
  ~PackedF32();

  const float* panels = nullptr;  // [panel_count][in][nr], 64-byte aligned (on huge pages when large)
  const float* bias = nullptr;    // [panel_count * nr] zero-padded, or null
  int64_t in = 0, rows = 0, nr = 0, panel_count = 0;
  uint64_t bytes = 0;  // the allocation: panels and bias
  void* storage = nullptr;
};

// Rows [row0, row0 + rows) of an I8 or I4 matrix [out, in], its scales and bias, in the kernel table's panels
// (cpu/isa/table.h, pack_i8_panels / pack_i4_panels) of the process's variant: int4 unpacked to one byte a weight.
struct PackedQ8 {
  PackedQ8() = default;
  PackedQ8(const PackedQ8&) = delete;
  PackedQ8& operator=(const PackedQ8&) = delete;
  ~PackedQ8();

  const uint8_t* panels = nullptr;  // [panel_count][panel_bytes], 64-byte aligned (on huge pages when large)
  int64_t in = 0, rows = 0, group = 0, panel_count = 0;
  int weight_bits = 8;  // 8 for I8, 4 for I4
  uint64_t panel_bytes = 0;
  uint64_t bytes = 0;  // the allocation
  void* storage = nullptr;
};

// A float32 matrix [rows, in] that a kernel derives from a tensor of the model (a block of its columns, its
// transpose, a compressed one widened): `fill` writes it into a temporary, which is packed and dropped. kind, source,
// param and shape name it in the cache: calls with the same ones and bias get one copy.
struct DerivedF32 {
  std::string kind;
  const TensorInfo* source = nullptr;
  int64_t param = 0;
  int64_t rows = 0, in = 0;
  std::function<void(float* out)> fill;  // out [rows, in]
};

// Columns [col0, col0 + cols) of t [out, in]: [out, cols] (compressed t widened).
DerivedF32 columns_of(const TensorInfo& t, int64_t col0, int64_t cols);
// t [out, in] transposed: [in, out] (compressed t widened).
DerivedF32 transpose_of(const TensorInfo& t);
// A compressed t [out, in] widened to float32: [out, in].
DerivedF32 widened(const TensorInfo& t);

class PackedWeights {
 public:
  // The cache of `model` (Model::attachment makes it), which reads rows of its tensors through Model::read_bytes.
  explicit PackedWeights(const Model& model) : model_(model) {}
  // The packed copy of rows [row0, row0 + rows) of t (float32 [out, in]) with bias ([rows] inside the model, or
  // null): the one another session of the model holds, else packed now. Sessions created at once pack it once: the
  // first packs while the others wait. `where` names the caller in messages.
  Result<std::shared_ptr<const PackedF32>> get(const TensorInfo& t, int64_t row0, int64_t rows, const float* bias,
                                               const std::string& where);
  // The packed copy of a derived matrix with bias ([m.rows] inside the model, or null), as get() shares it.
  Result<std::shared_ptr<const PackedF32>> get(const DerivedF32& m, const float* bias, const std::string& where);
  // The packed copy of rows [row0, row0 + rows) of t (I8 or I4 [out, in]) with bias, shared as get() shares it.
  Result<std::shared_ptr<const PackedQ8>> get_compressed(const TensorInfo& t, int64_t row0, int64_t rows,
                                                         const float* bias, const std::string& where);
  // Frees the buffer that file rows pass through while packing (kept from one matrix to the next). The CPU backend
  // calls it once its kernels are built, so nothing of packing outlives a session's creation but the packed copies.
  void end_packing();
  // Copies alive now and their bytes (tests and diagnostics).
  size_t live_copies() const;
  uint64_t live_bytes() const;

 private:
  // kind ("" for rows of the tensor as they lie), tensor, row0 or the derivation's param, rows, in, bias
  using Key = std::tuple<std::string, const TensorInfo*, int64_t, int64_t, int64_t, const float*>;
  // Packs rows [rows, in] (rows of the model's file at `rows_at`, read a few panels at a time through
  // Model::read_bytes; or written by `fill` into a temporary when rows_at is null) under key.
  Result<std::shared_ptr<const PackedF32>> pack(const Key& key, const float* rows_at, const DerivedF32* fill,
                                                int64_t rows, int64_t in, const float* bias, const std::string& name,
                                                const std::string& where);
  // The read buffer of at least `bytes`, grown when needed, or null when memory is short; mutex_ held. One buffer for
  // all of a model's matrices, not one allocation each.
  uint8_t* read_buffer(size_t bytes);
  const Model& model_;
  mutable std::mutex mutex_;
  std::unique_ptr<uint8_t[]> read_buffer_;  // [read_buffer_bytes_]: file rows on their way into panels
  size_t read_buffer_bytes_ = 0;
  std::map<Key, std::weak_ptr<const PackedF32>> copies_;
  std::map<Key, std::weak_ptr<const PackedQ8>> compressed_;
};

// The model's cache, made on first use.
PackedWeights& packed_weights(const Model& model);

}  // namespace tern::cpu
