// SPDX-License-Identifier: MIT
#include "cpu/matrix.h"

#include <algorithm>

#include "cpu/isa.h"
#include "cpu/parallel.h"

namespace tern::cpu {
namespace {

// Output rows per task: enough tasks to balance threads, each long enough to stream its weights.
size_t output_tile(int64_t rows, int threads) {
  const int64_t target = std::max<int64_t>(1, rows / (int64_t(std::max(threads, 1)) * 4));
  return size_t(std::clamp<int64_t>(target, 8, 256));
}

uint64_t align64(uint64_t b) { return (b + 63) / 64 * 64; }

// An int8 / int4 call's scratch for n rows: q [n, in] int8, then s [n, in / 32] float32, then (packed weights only)
// sums [n, in / 32] int32, each 64-aligned; offsets in bytes.
struct QuantScratch {
  uint64_t s_at, sums_at, bytes;
};
QuantScratch quant_scratch(int64_t n, int64_t in, bool sums) {
  const uint64_t blocks = uint64_t(n) * uint64_t(in / kQuantBlock);
  const uint64_t s_at = align64(uint64_t(n) * uint64_t(in)), sums_at = s_at + align64(blocks * sizeof(float));
  return {s_at, sums_at, sums_at + (sums ? blocks * sizeof(int32_t) : 0)};
}

// Activation rows per float32 task: a multiple of every variant's row tile (8, 6, 4: cpu/isa/gemm.inc), few enough
// that the block's rows stay in the core's L2 cache while the task's panels pass (192 KiB at in = 1024).
int64_t f32_row_block(int64_t in) { return in <= 1024 ? 48 : 24; }

// Tasks of (row block x panel group) over n rows and `panels` panels: a generation row splits the panels among the
// threads, a prefill mostly the rows; whole groups of 4 panels (the kernels' one-row tiles read 4 at once).
// task(r0, rows, p0, p1) runs rows [r0, r0 + rows) against panels [p0, p1).
template <typename Task>
void for_each_panel_task(pthreadpool_t pool, int threads, int64_t n, int64_t row_block, int64_t panels,
                         const Task& task) {
  const int64_t row_blocks = (n + row_block - 1) / row_block;
  const int64_t wanted = pool ? int64_t(std::max(threads, 1)) * 4 : 1;
  const int64_t groups = std::clamp<int64_t>((wanted + row_blocks - 1) / row_blocks, 1, panels);
  const int64_t group = ((panels + groups - 1) / groups + 3) / 4 * 4;
  const int64_t group_count = (panels + group - 1) / group;
  parallel_for(pool, size_t(row_blocks * group_count), 1, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      const int64_t r0 = int64_t(t) / group_count * row_block, p0 = int64_t(t) % group_count * group;
      task(r0, std::min(row_block, n - r0), p0, std::min(p0 + group, panels));
    }
  });
}

}  // namespace

// Every output element is summed in the same order whatever task computes it (cpu/isa/gemm.inc), so the split, the
// thread count and pool or inline runs (cpu/core_share.h) give the same bits.
void Matrix::run_f32(const IsaKernels& k, pthreadpool_t pool, int threads, const float* x, int64_t n, float* y) const {
  const PackedF32& w = *f32_;
  for_each_panel_task(pool, threads, n, f32_row_block(in_), w.panel_count,
                      [&](int64_t r0, int64_t rows, int64_t p0, int64_t p1) {
                        k.gemm_f32_panels(w.panels, w.bias, in_, rows_, x + r0 * in_, rows, p0, p1,
                                          y + r0 * out_stride_, out_stride_);
                      });
}

// The packed int8 panels, rows in blocks of 64 (their int8 copies, 64 KiB at in = 1024, stay in L2 while the task's
// panels pass).
void Matrix::run_q8(const IsaKernels& k, pthreadpool_t pool, int threads, const int8_t* q, const float* s,
                    const int32_t* sums, int64_t n, float* y) const {
  const PackedQ8& w = *q8_;
  const int64_t nb = in_ / kQuantBlock;
  for_each_panel_task(pool, threads, n, 64, w.panel_count, [&](int64_t r0, int64_t rows, int64_t p0, int64_t p1) {
    k.qgemm_panels(w.panels, in_, w.group, w.weight_bits, rows_, q + r0 * in_, s + r0 * nb, sums + r0 * nb, rows, p0,
                   p1, y + r0 * out_stride_, out_stride_);
  });
}

Result<Matrix> Matrix::create(const Model& model, const TensorInfo& t, int64_t row0, int64_t rows, const float* bias,
                              int64_t out_stride, const std::string& where) {
  Matrix m;
  m.t_ = &t;
  m.dtype_ = t.dtype;
  m.in_ = t.shape[1];
  m.rows_ = rows;
  m.out_stride_ = out_stride;
  m.bias_ = bias;
  switch (t.dtype) {
    case fb::DType::F32: {
      TERN_ASSIGN_OR_RETURN(m.f32_, packed_weights(model).get(t, row0, rows, bias, where));
      break;
    }
    case fb::DType::F16:
      m.w_ = t.data + row0 * m.in_ * 2;
      break;
    case fb::DType::I8:
    case fb::DType::I4: {
      const int64_t groups = m.in_ / t.group();
      const size_t scale_size = t.dtype == fb::DType::I8 ? sizeof(float) : sizeof(uint16_t);
      m.w_ = t.data + (t.dtype == fb::DType::I8 ? row0 * m.in_ : row0 * m.in_ / 2);
      m.scales_ = t.scales->data + size_t(row0 * groups) * scale_size;
      m.q8_min_rows_ = t.dtype == fb::DType::I8 ? isa().qgemm_min_rows_i8 : isa().qgemm_min_rows_i4;
      if (isa().qgemm_nr > 0 && m.q8_min_rows_ < INT64_MAX) {
        TERN_ASSIGN_OR_RETURN(m.q8_, packed_weights(model).get_compressed(t, row0, rows, bias, where));
      }
      break;
    }
    default:
      return Unsupported(where + ": weight '" + t.name + "' is " + dtype_name(t.dtype) + ", not a matrix type");
  }
  return m;
}

Result<Matrix> Matrix::create(const Model& model, const DerivedF32& derived, const float* bias, int64_t out_stride,
                              const std::string& where) {
  Matrix m;
  m.in_ = derived.in;
  m.rows_ = derived.rows;
  m.out_stride_ = out_stride;
  m.bias_ = bias;
  TERN_ASSIGN_OR_RETURN(m.f32_, packed_weights(model).get(derived, bias, where));
  return m;
}

uint64_t Matrix::scratch_bytes(int64_t n) const {
  if (dtype_ != fb::DType::I8 && dtype_ != fb::DType::I4) return 0;
  return quant_scratch(n, in_, q8_ != nullptr).bytes;
}

Status Matrix::run(pthreadpool_t pool, int threads, const float* x, int64_t n, float* y, void* scratch,
                   const std::string& /*where*/) const {  // no run of these kernels can fail
  if (n == 0 || rows_ == 0) return Status::Ok();
  const IsaKernels& k = isa();
  if (f32_) {
    run_f32(k, pool, threads, x, n, y);
    return Status::Ok();
  }
  const size_t tile = output_tile(rows_, threads);
  if (dtype_ == fb::DType::F16) {
    const auto* w = reinterpret_cast<const uint16_t*>(w_);
    parallel_for(pool, size_t(rows_), tile, [&](size_t b, size_t e) {
      k.linear_f16(w, in_, x, n, bias_, int64_t(b), int64_t(e), y, out_stride_);
    });
    return Status::Ok();
  }
  // Activations as int8 blocks: q [n, in], then one scale per block s [n, in / 32], then each block's sum for the
  // packed GEMM (quant_scratch).
  const QuantScratch at = quant_scratch(n, in_, q8_ != nullptr);
  auto* q = static_cast<int8_t*>(scratch);
  auto* s = reinterpret_cast<float*>(static_cast<uint8_t*>(scratch) + at.s_at);
  auto* sums = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(scratch) + at.sums_at);
  const int64_t blocks = in_ / kQuantBlock;
  const bool packed = q8_ && n >= q8_min_rows_;
  parallel_for(pool, size_t(n), 16, [&](size_t b, size_t e) {
    k.quantize_rows_q8(x + int64_t(b) * in_, int64_t(e - b), in_, q + int64_t(b) * in_, s + int64_t(b) * blocks);
    if (packed) k.qgemm_activation_sums(q + int64_t(b) * in_, int64_t(e - b), in_, sums + int64_t(b) * blocks);
  });
  if (packed) {
    run_q8(k, pool, threads, q, s, sums, n, y);
    return Status::Ok();
  }
  const int64_t group = t_->group();
  parallel_for(pool, size_t(rows_), tile, [&](size_t b, size_t e) {
    if (dtype_ == fb::DType::I8) {
      k.linear_i8(reinterpret_cast<const int8_t*>(w_), reinterpret_cast<const float*>(scales_), in_, group, q, s, n,
                  bias_, int64_t(b), int64_t(e), y, out_stride_);
    } else {
      k.linear_i4(w_, reinterpret_cast<const uint16_t*>(scales_), in_, group, q, s, n, bias_, int64_t(b), int64_t(e),
                  y, out_stride_);
    }
  });
  return Status::Ok();
}

}  // namespace tern::cpu
