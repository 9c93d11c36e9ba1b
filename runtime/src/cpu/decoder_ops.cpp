// SPDX-License-Identifier: MIT
// CPU kernels of the Llama-family row-wise ops: RMS_NORM, ROTARY and GATED_ACTIVATION (schema/tern.fbs). Plain
// loops over rows split across threads; each row is computed as the reference computes it, in float32 with the
// sums of squares in double.
#include <cmath>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/parallel.h"
#include "ops/rotary.h"

namespace tern::cpu {
namespace {

constexpr size_t kRowTile = 8;

int64_t in_width(const Node& node, const Model& model) { return model.values()[node.inputs[0]].width; }

class RmsNormKernel : public CpuKernel {
 public:
  RmsNormKernel(const Node& node, int64_t width) : node_(node), width_(width) {
    const auto* p = node.fb_op->params_as_RmsNormParams();
    columns_ = node.weights[0]->shape[0];
    group_ = p->group() > 0 ? p->group() : columns_;
    eps_ = p->eps();
    // (offset + gain) once, in float32 as transformers adds them (Gemma: 1 + weight).
    scale_.resize(size_t(columns_));
    const float* gain = node.weights[0]->f32();
    for (int64_t j = 0; j < columns_; ++j) scale_[size_t(j)] = p->weight_offset() + gain[j];
  }
  Status run(const RunContext& ctx) override {
    const float* x = ctx.in(node_, 0);
    float* out = ctx.out(node_, 0);
    parallel_for(ctx.pool, size_t(ctx.n), kRowTile, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        const float* row = x + int64_t(i) * width_;
        float* o = out + int64_t(i) * width_;
        for (int64_t g0 = 0; g0 < columns_; g0 += group_) {
          double squares = 0;
          for (int64_t j = g0; j < g0 + group_; ++j) squares += double(row[j]) * double(row[j]);
          const float inv = float(1.0 / std::sqrt(squares / double(group_) + double(eps_)));
          for (int64_t j = g0; j < g0 + group_; ++j) o[j] = row[j] * inv * scale_[size_t(j)];
        }
        for (int64_t j = columns_; j < width_; ++j) o[j] = row[j];
      }
    });
    return Status::Ok();
  }

 private:
  const Node& node_;
  int64_t width_, columns_ = 0, group_ = 0;
  float eps_ = 1e-6f;
  std::vector<float> scale_;  // [columns]
};

class RotaryKernel : public CpuKernel {
 public:
  // rotate false (a session with attention sinks): the rows pass unrotated; the attention op they feed rotates
  // them by their index in its cache (ops/sink_cache.h).
  RotaryKernel(const Node& node, int64_t width, int64_t max_batch, bool rotate)
      : node_(node), width_(width), max_batch_(max_batch), rotary_(Rotary::of(node)), freq_(size_t(rotary_.pairs())),
        rotate_(rotate) {}
  Status run(const RunContext& ctx) override {
    const int pairs = rotary_.pairs();
    const float* x = ctx.in(node_, 0);
    float* out = ctx.out(node_, 0);
    if (!rotate_) {
      if (out != x) std::copy(x, x + ctx.n * width_, out);
      return Status::Ok();
    }
    // cos | sin [n, 2, pairs] of this block's positions, shared by every head.
    float* cos_sin = ctx.scratch;
    rotary_.cos_sin_table(ctx.pos0, ctx.n, ctx.call_end, freq_.data(), cos_sin);
    parallel_for(ctx.pool, size_t(ctx.n), kRowTile, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        const float* xi = x + int64_t(i) * width_;
        float* oi = out + int64_t(i) * width_;
        const float* c = cos_sin + 2 * int64_t(i) * pairs;
        if (oi != xi)
          for (int64_t col = 0; col < width_; ++col) oi[col] = xi[col];
        rotary_.rotate(c, c + pairs, xi, oi, rotary_.heads);
      }
    });
    return Status::Ok();
  }
  // cos | sin of every row of a call: [n, 2, pairs].
  uint64_t scratch_bytes() const override { return scratch_bytes_for(max_batch_); }
  uint64_t scratch_bytes_for(int64_t n) const override { return uint64_t(2 * n * rotary_.pairs()) * sizeof(float); }

 private:
  const Node& node_;
  int64_t width_, max_batch_;
  Rotary rotary_;
  std::vector<float> freq_;  // [pairs] of the current call
  bool rotate_ = true;
};

class GatedActivationKernel : public CpuKernel {
 public:
  GatedActivationKernel(const Node& node, int64_t f) : node_(node), f_(f) {}
  Status run(const RunContext& ctx) override {
    const float* x = ctx.in(node_, 0);
    float* out = ctx.out(node_, 0);
    const fb::ActivationKind kind = node_.fb_op->params_as_GatedActivationParams()->kind();
    parallel_for(ctx.pool, size_t(ctx.n), kRowTile, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        const float* gate = x + int64_t(i) * 2 * f_;
        const float* up = gate + f_;
        float* o = out + int64_t(i) * f_;
        activation_row(kind, gate, f_, o);  // act(gate), then times up
        for (int64_t j = 0; j < f_; ++j) o[j] *= up[j];
      }
    });
    return Status::Ok();
  }

 private:
  const Node& node_;
  int64_t f_;
};

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_rms_norm(const Node& node, const Model& model, const KernelConfig&) {
  return std::unique_ptr<CpuKernel>(new RmsNormKernel(node, in_width(node, model)));
}
Result<std::unique_ptr<CpuKernel>> make_rotary(const Node& node, const Model& model, const KernelConfig& cfg) {
  return std::unique_ptr<CpuKernel>(new RotaryKernel(node, in_width(node, model), cfg.max_batch, !cfg.sinks.on()));
}
Result<std::unique_ptr<CpuKernel>> make_gated_activation(const Node& node, const Model& model, const KernelConfig&) {
  return std::unique_ptr<CpuKernel>(new GatedActivationKernel(node, in_width(node, model) / 2));
}

}  // namespace tern::cpu
