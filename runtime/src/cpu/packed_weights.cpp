// SPDX-License-Identifier: MIT
#include "cpu/packed_weights.h"

#include <algorithm>
#include <new>
#include <vector>

#include "format/dequantize.h"
#include "cpu/huge_pages.h"
#include "cpu/isa.h"

namespace tern::cpu {
namespace {

// Rows of the file are read for packing through a buffer of about this size (whole panels at a time).
constexpr int64_t kReadChunkBytes = int64_t(1) << 20;

// Panels of nr rows of row_bytes each that one read of about kReadChunkBytes holds (at least one, at most all).
int64_t read_chunk_panels(int64_t panel_count, int64_t nr, int64_t row_bytes) {
  return std::max<int64_t>(1, std::min<int64_t>(panel_count, kReadChunkBytes / (nr * row_bytes)));
}

// Reads rows [0, rows) of row_bytes each at `rows_at` (inside the model) into `buffer` chunk_panels * nr rows at a
// time (Model::read_bytes: no page faults on the mapping), calling pack(r0, chunk_rows, p0) after each read: rows
// [r0, r0 + chunk_rows), the first of them in panel p0.
template <typename Pack>
void read_in_panel_chunks(const Model& model, const uint8_t* rows_at, int64_t rows, int64_t row_bytes, int64_t nr,
                          int64_t chunk_panels, void* buffer, const Pack& pack) {
  const int64_t panel_count = (rows + nr - 1) / nr;
  for (int64_t p0 = 0; p0 < panel_count; p0 += chunk_panels) {
    const int64_t r0 = p0 * nr, chunk_rows = std::min(rows - r0, chunk_panels * nr);
    model.read_bytes(rows_at + r0 * row_bytes, size_t(chunk_rows * row_bytes), buffer);
    pack(r0, chunk_rows, p0);
  }
}

}  // namespace

PackedF32::~PackedF32() { free_large(storage); }
PackedQ8::~PackedQ8() { free_large(storage); }

DerivedF32 columns_of(const TensorInfo& t, int64_t col0, int64_t cols) {
  const TensorInfo* source = &t;
  return DerivedF32{"columns", source, col0, t.shape[0], cols, [source, col0, cols](float* out) {
                      const int64_t in = source->shape[1];
                      std::vector<float> row(size_t(source->dtype == fb::DType::F32 ? 0 : in));
                      for (int64_t r = 0; r < source->shape[0]; ++r) {
                        const float* values = source->f32() + r * in;
                        if (!row.empty()) {
                          dequantize_rows(*source, r, 1, row.data());
                          values = row.data();
                        }
                        std::copy(values + col0, values + col0 + cols, out + r * cols);
                      }
                    }};
}

DerivedF32 transpose_of(const TensorInfo& t) {
  const TensorInfo* source = &t;
  return DerivedF32{"transpose", source, 0, t.shape[1], t.shape[0], [source](float* out) {
                      const int64_t rows = source->shape[0], in = source->shape[1];
                      std::vector<float> storage;
                      const float* values = float_values(*source, &storage);
                      for (int64_t r = 0; r < rows; ++r)
                        for (int64_t c = 0; c < in; ++c) out[c * rows + r] = values[r * in + c];
                    }};
}

DerivedF32 widened(const TensorInfo& t) {
  const TensorInfo* source = &t;
  return DerivedF32{"widened", source, 0, t.shape[0], t.shape[1],
                    [source](float* out) { dequantize_rows(*source, 0, source->shape[0], out); }};
}

Result<std::shared_ptr<const PackedF32>> PackedWeights::get(const TensorInfo& t, int64_t row0, int64_t rows,
                                                            const float* bias, const std::string& where) {
  const int64_t in = t.shape[1];
  return pack(Key{"", &t, row0, rows, in, bias}, t.f32() + row0 * in, nullptr, rows, in, bias,
              "weight '" + t.name + "'", where);
}

Result<std::shared_ptr<const PackedF32>> PackedWeights::get(const DerivedF32& m, const float* bias,
                                                            const std::string& where) {
  return pack(Key{m.kind, m.source, m.param, m.rows, m.in, bias}, nullptr, &m, m.rows, m.in, bias,
              m.kind + " of weight '" + m.source->name + "'", where);
}

Result<std::shared_ptr<const PackedF32>> PackedWeights::pack(const Key& key, const float* rows_at,
                                                             const DerivedF32* derived, int64_t rows, int64_t in,
                                                             const float* bias, const std::string& name,
                                                             const std::string& where) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::weak_ptr<const PackedF32>& slot = copies_[key];
  if (std::shared_ptr<const PackedF32> held = slot.lock()) return held;
  const IsaKernels& k = isa();
  const int64_t panel_count = (rows + k.gemm_nr - 1) / k.gemm_nr;
  const uint64_t panel_floats = uint64_t(panel_count) * uint64_t(k.gemm_nr) * uint64_t(in);
  const uint64_t bias_floats = bias ? uint64_t(panel_count) * uint64_t(k.gemm_nr) : 0;
  auto packed = std::shared_ptr<PackedF32>(new (std::nothrow) PackedF32());
  if (packed) {
    packed->bytes = (panel_floats + bias_floats) * sizeof(float);
    packed->storage = allocate_large(64, size_t(packed->bytes ? packed->bytes : 64));
  }
  // A derived matrix is written whole into a temporary first: [rows, in]; rows of the file pass through the read
  // buffer, about kReadChunkBytes of whole panels at a time: [chunk_panels * nr, in].
  const int64_t chunk_panels = read_chunk_panels(panel_count, k.gemm_nr, in * int64_t(sizeof(float)));
  std::unique_ptr<float[]> derived_rows;
  float* temporary = nullptr;
  if (rows_at) {
    temporary = reinterpret_cast<float*>(
        read_buffer(size_t(std::min(rows, chunk_panels * k.gemm_nr) * in) * sizeof(float)));
  } else {
    derived_rows.reset(new (std::nothrow) float[size_t(rows * in) + 1]);
    temporary = derived_rows.get();
  }
  if (!packed || !packed->storage || !temporary) {
    return OutOfMemory(where + ": no memory to pack " + name + " (" +
                       std::to_string((panel_floats + bias_floats) * sizeof(float)) + " bytes)");
  }
  auto* panels = static_cast<float*>(packed->storage);
  float* padded_bias = bias ? panels + panel_floats : nullptr;
  if (rows_at) {
    read_in_panel_chunks(model_, reinterpret_cast<const uint8_t*>(rows_at), rows, in * int64_t(sizeof(float)),
                         k.gemm_nr, chunk_panels, temporary, [&](int64_t r0, int64_t chunk_rows, int64_t p0) {
                           k.pack_f32_panels(temporary, bias ? bias + r0 : nullptr, chunk_rows, in,
                                             panels + p0 * k.gemm_nr * in, bias ? padded_bias + r0 : nullptr);
                         });
  } else {
    derived->fill(temporary);
    k.pack_f32_panels(temporary, bias, rows, in, panels, padded_bias);
  }
  packed->panels = panels;
  packed->bias = padded_bias;
  packed->in = in;
  packed->rows = rows;
  packed->nr = k.gemm_nr;
  packed->panel_count = panel_count;
  slot = packed;
  return std::shared_ptr<const PackedF32>(std::move(packed));
}

Result<std::shared_ptr<const PackedQ8>> PackedWeights::get_compressed(const TensorInfo& t, int64_t row0, int64_t rows,
                                                                     const float* bias, const std::string& where) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t in = t.shape[1], group = t.group();
  std::weak_ptr<const PackedQ8>& slot = compressed_[Key{"", &t, row0, rows, in, bias}];
  if (std::shared_ptr<const PackedQ8> held = slot.lock()) return held;
  const IsaKernels& k = isa();
  const int64_t panel_count = (rows + k.qgemm_nr - 1) / k.qgemm_nr;
  const int weight_bits = t.dtype == fb::DType::I8 ? 8 : 4;
  const uint64_t panel_bytes = k.qgemm_panel_bytes(in, group, weight_bits);
  auto packed = std::shared_ptr<PackedQ8>(new (std::nothrow) PackedQ8());
  if (packed) {
    packed->bytes = uint64_t(panel_count) * panel_bytes;
    packed->storage = allocate_large(64, size_t(packed->bytes ? packed->bytes : 64));
  }
  if (!packed || !packed->storage) {
    return OutOfMemory(where + ": no memory to pack weight '" + t.name + "' (" +
                       std::to_string(uint64_t(panel_count) * panel_bytes) + " bytes)");
  }
  auto* panels = static_cast<uint8_t*>(packed->storage);
  const int64_t groups = in / group;
  // The weight rows are read from the file a few panels at a time (Model::read_bytes, as pack() does: no page faults
  // on the mapping); the scales, an eighth of the bytes or less, are read in place.
  const int64_t row_bytes = weight_bits == 8 ? in : in / 2;
  const int64_t chunk_panels = read_chunk_panels(panel_count, k.qgemm_nr, row_bytes);
  const int64_t read_bytes = std::min(rows, chunk_panels * k.qgemm_nr) * row_bytes;
  const uint8_t* rows_read = read_buffer(size_t(read_bytes));
  if (!rows_read) return OutOfMemory(where + ": no memory to read weight '" + t.name + "' for packing");
  const auto pack_chunk = [&](int64_t r0, int64_t chunk_rows, int64_t p0) {
    const float* chunk_bias = bias ? bias + r0 : nullptr;
    uint8_t* chunk_panels_at = panels + p0 * panel_bytes;
    if (weight_bits == 8) {
      k.pack_i8_panels(reinterpret_cast<const int8_t*>(rows_read),
                       reinterpret_cast<const float*>(t.scales->data) + (row0 + r0) * groups, chunk_bias, chunk_rows,
                       in, group, chunk_panels_at);
    } else {
      k.pack_i4_panels(rows_read, reinterpret_cast<const uint16_t*>(t.scales->data) + (row0 + r0) * groups,
                       chunk_bias, chunk_rows, in, group, chunk_panels_at);
    }
  };
  read_in_panel_chunks(model_, t.data + row0 * row_bytes, rows, row_bytes, k.qgemm_nr, chunk_panels, read_buffer_.get(),
                       pack_chunk);
  packed->panels = panels;
  packed->in = in;
  packed->rows = rows;
  packed->group = group;
  packed->weight_bits = weight_bits;
  packed->panel_count = panel_count;
  packed->panel_bytes = panel_bytes;
  slot = packed;
  return std::shared_ptr<const PackedQ8>(std::move(packed));
}

uint8_t* PackedWeights::read_buffer(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes > read_buffer_bytes_) {
    read_buffer_.reset();  // the old one goes first: the peak is the larger buffer alone
    read_buffer_bytes_ = 0;
    read_buffer_.reset(new (std::nothrow) uint8_t[bytes]);
    if (!read_buffer_) return nullptr;
    read_buffer_bytes_ = bytes;
  }
  return read_buffer_.get();
}

void PackedWeights::end_packing() {
  std::lock_guard<std::mutex> lock(mutex_);
  read_buffer_.reset();
  read_buffer_bytes_ = 0;
}

size_t PackedWeights::live_copies() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t count = 0;
  for (const auto& entry : copies_) count += entry.second.expired() ? 0 : 1;
  for (const auto& entry : compressed_) count += entry.second.expired() ? 0 : 1;
  return count;
}

uint64_t PackedWeights::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t bytes = 0;
  for (const auto& entry : copies_) {
    if (std::shared_ptr<const PackedF32> held = entry.second.lock()) bytes += held->bytes;
  }
  for (const auto& entry : compressed_) {
    if (std::shared_ptr<const PackedQ8> held = entry.second.lock()) bytes += held->bytes;
  }
  return bytes;
}

PackedWeights& packed_weights(const Model& model) { return model.attachment<PackedWeights>(); }

}  // namespace tern::cpu
