// SPDX-License-Identifier: MIT
#include "cpu/packed_weights.h"

#include <new>

#include "cpu/huge_pages.h"
#include "cpu/isa.h"

namespace tern::cpu {

PackedF32::~PackedF32() { free_large(storage); }

Result<std::shared_ptr<const PackedF32>> PackedWeights::get(const TensorInfo& t, int64_t row0, int64_t rows,
                                                            const float* bias, const std::string& where) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::weak_ptr<const PackedF32>& slot = copies_[Key{&t, row0, rows, bias}];
  if (std::shared_ptr<const PackedF32> held = slot.lock()) return held;
  const IsaKernels& k = isa();
  const int64_t in = t.shape[1], panel_count = (rows + k.gemm_nr - 1) / k.gemm_nr;
  const uint64_t panel_floats = uint64_t(panel_count) * uint64_t(k.gemm_nr) * uint64_t(in);
  const uint64_t bias_floats = bias ? uint64_t(panel_count) * uint64_t(k.gemm_nr) : 0;
  auto packed = std::shared_ptr<PackedF32>(new (std::nothrow) PackedF32());
  if (packed) {
    packed->bytes = (panel_floats + bias_floats) * sizeof(float);
    packed->storage = allocate_large(64, size_t(packed->bytes ? packed->bytes : 64));
  }
  if (!packed || !packed->storage) {
    return OutOfMemory(where + ": no memory to pack weight '" + t.name + "' (" +
                       std::to_string((panel_floats + bias_floats) * sizeof(float)) + " bytes)");
  }
  auto* panels = static_cast<float*>(packed->storage);
  float* padded_bias = bias ? panels + panel_floats : nullptr;
  k.pack_f32_panels(t.f32() + row0 * in, bias, rows, in, panels, padded_bias);
  packed->panels = panels;
  packed->bias = padded_bias;
  packed->in = in;
  packed->rows = rows;
  packed->nr = k.gemm_nr;
  packed->panel_count = panel_count;
  slot = packed;
  return std::shared_ptr<const PackedF32>(std::move(packed));
}

size_t PackedWeights::live_copies() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t count = 0;
  for (const auto& entry : copies_) count += entry.second.expired() ? 0 : 1;
  return count;
}

uint64_t PackedWeights::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t bytes = 0;
  for (const auto& entry : copies_) {
    if (std::shared_ptr<const PackedF32> held = entry.second.lock()) bytes += held->bytes;
  }
  return bytes;
}

PackedWeights& packed_weights(const Model& model) { return model.attachment<PackedWeights>(); }

}  // namespace tern::cpu
