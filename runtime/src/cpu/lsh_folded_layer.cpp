// SPDX-License-Identifier: MIT
#include "cpu/lsh_folded_layer.h"

#include <algorithm>

#include "cpu/half_rows.h"
#include "cpu/kernels.h"

namespace tern::cpu {

Result<LshFoldedLayer> LshFoldedLayer::create(const LshFold& fold, const Model& model, int heads, int head_dim) {
  const auto& nodes = model.nodes();
  const Node& norm = nodes[size_t(fold.norm)];
  const Node& projection = nodes[size_t(fold.projection)];
  auto weight = [](const Node& node, size_t i) {
    return node.weights.size() > i && node.weights[i] ? node.weights[i]->f32() : nullptr;
  };
  LshFoldedLayer f;
  f.x2_ = norm.inputs[0];
  f.d_ = model.values()[size_t(f.x2_)].width;
  f.head_dim_ = head_dim;
  f.gamma_ = weight(norm, 0);
  f.beta_ = weight(norm, 1);
  f.eps_ = norm.fb_op->params_as_LayerNormParams()->eps();
  const int64_t dh = head_dim, inner = int64_t(heads) * dh;
  const TensorInfo& w = *projection.weights[0];  // [2*inner, d]: every head's qk rows, then every head's v rows
  const float* b = weight(projection, 1);
  for (int h = 0; h < heads; ++h) {
    for (const int64_t row0 : {int64_t(h) * dh, inner + int64_t(h) * dh}) {
      TERN_ASSIGN_OR_RETURN(Matrix m, Matrix::create(model, w, row0, dh, b ? b + row0 : nullptr, 2 * dh,
                                                     projection.label()));
      (row0 < inner ? f.qk_ : f.v_).push_back(std::move(m));
    }
  }
  if (fold.output < 0) return f;
  const Node& output = nodes[size_t(fold.output)];
  f.residual_ = fold.residual_out;
  const TensorInfo& wo = *output.weights[0];  // [d, inner]
  const float* bo = weight(output, 1);
  for (int h = 0; h < heads; ++h) {
    TERN_ASSIGN_OR_RETURN(Matrix m, Matrix::create(model, columns_of(wo, h * dh, dh), h == 0 ? bo : nullptr, f.d_,
                                                   output.label()));
    f.out_.push_back(std::move(m));
  }
  return f;
}

uint64_t LshFoldedLayer::packed_bytes() const {
  uint64_t bytes = 0;
  for (const auto* list : {&qk_, &v_, &out_}) {
    for (const Matrix& m : *list) bytes += m.packed_bytes();
  }
  return bytes;
}

Status LshFoldedLayer::project(const RunContext& ctx, int h, int64_t n, float* head_qkv, float* block,
                               const std::string& where) const {
  const void* x2 = (*ctx.values)[size_t(x2_)];
  const bool half = ctx.stores_half(x2_);  // x2 [n, d] in float16: widened a block at a time, then normalised in place
  const int64_t dh = head_dim_;
  for (int64_t r0 = 0; r0 < n; r0 += kRows) {
    const int64_t rows = std::min(kRows, n - r0);
    if (half) halves_to_floats(ctx.pool, static_cast<const uint16_t*>(x2) + r0 * d_, rows * d_, block);
    const float* x = half ? block : static_cast<const float*>(x2) + r0 * d_;
    layer_norm(ctx.pool, x, rows, d_, gamma_, beta_, eps_, block);
    // Float32 products need no scratch (cpu/matrix.h).
    TERN_RETURN_IF_ERROR(
        qk_[size_t(h)].run(ctx.pool, ctx.threads, block, rows, head_qkv + r0 * 2 * dh, nullptr, where));
    TERN_RETURN_IF_ERROR(
        v_[size_t(h)].run(ctx.pool, ctx.threads, block, rows, head_qkv + r0 * 2 * dh + dh, nullptr, where));
  }
  return Status::Ok();
}

Status LshFoldedLayer::add_output(const RunContext& ctx, int h, int64_t n, const float* out, float* block,
                                  const std::string& where) const {
  void* x1 = (*ctx.values)[size_t(residual_)];
  const bool half = ctx.stores_half(residual_);  // x1 [n, d] in float16: each head's share rounded into it
  for (int64_t r0 = 0; r0 < n; r0 += kRows) {
    const int64_t rows = std::min(kRows, n - r0);
    TERN_RETURN_IF_ERROR(out_[size_t(h)].run(ctx.pool, ctx.threads, out + r0 * head_dim_, rows, block, nullptr, where));
    if (half) {
      add_into_halves(ctx.pool, static_cast<uint16_t*>(x1) + r0 * d_, block, rows * d_);
    } else {
      float* x = static_cast<float*>(x1) + r0 * d_;
      add(ctx.pool, x, block, rows * d_, x);
    }
  }
  return Status::Ok();
}

}  // namespace tern::cpu
