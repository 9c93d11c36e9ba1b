// SPDX-License-Identifier: MIT
// CPU kernels for the row-wise ops: embedding, position, layer norm, activation, add, log-softmax. (RMS norm,
// rotary embedding and gated activations: cpu/decoder_ops.cpp.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "format/dequantize.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"

namespace tern::cpu {
namespace {

constexpr size_t kRowTile = 16;

class EmbeddingKernel : public CpuKernel {
 public:
  explicit EmbeddingKernel(const Node& node)
      : node_(node), table_(node.weights[0]), scale_(node.fb_op->params_as_EmbeddingParams()->scale()) {}
  Status run(const RunContext& ctx) override {
    const int64_t vocab = table_->shape[0], d = table_->shape[1];
    float* out = ctx.out(node_, 0);
    for (int64_t i = 0; i < ctx.n; ++i) {
      int32_t id = ctx.ids[i];
      if (id < 0 || id >= vocab) {
        return InvalidArgument("token id " + std::to_string(id) + " at position " + std::to_string(ctx.pos0 + i) +
                               " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
      }
      dequantize_rows(*table_, id, 1, out + i * d);  // a copy of a float32 row
      if (scale_ != 1.0f)
        for (int64_t j = 0; j < d; ++j) out[i * d + j] *= scale_;
    }
    return Status::Ok();
  }

 private:
  const Node& node_;
  const TensorInfo* table_;  // [V, d]
  float scale_;              // EmbeddingParams.scale (Gemma: sqrt(d))
};

class PositionKernel : public CpuKernel {
 public:
  PositionKernel(const Node& node, int64_t d) : node_(node), d_(d) {
    const auto* p = node.fb_op->params_as_PositionParams();
    learned_ = p->kind() == fb::PositionKind::LEARNED;
    max_positions_ = learned_ ? p->max_positions() : 0;
    if (!learned_) {
      inv_freq_.resize(size_t(d / 2));  // [d/2]
      for (int64_t k = 0; k < d / 2; ++k) inv_freq_[k] = std::pow(10000.0, -double(2 * k) / double(d));
    }
  }
  Status run(const RunContext& ctx) override {
    if (learned_ && ctx.pos0 + ctx.n > max_positions_) {
      return InvalidArgument("position " + std::to_string(ctx.pos0 + ctx.n - 1) + " is past the model's " +
                             std::to_string(max_positions_) + " learned positions");
    }
    const float* x = ctx.in(node_, 0);
    float* out = ctx.out(node_, 0);
    const float* table = learned_ ? node_.weights[0]->f32() : nullptr;
    const IsaKernels& kernels = isa();
    parallel_for(ctx.pool, size_t(ctx.n), kRowTile, [&](size_t b, size_t e) {
      if (learned_) {  // rows b..e of x and of the table from position pos0 + b: one contiguous sum
        kernels.add(x + b * d_, table + (ctx.pos0 + int64_t(b)) * d_, int64_t(e - b) * d_, out + b * d_);
        return;
      }
      for (size_t i = b; i < e; ++i) {
        const int64_t p = ctx.pos0 + int64_t(i);
        const float* xi = x + i * d_;
        float* oi = out + i * d_;
        for (int64_t k = 0; k < d_ / 2; ++k) {
          double angle = double(p) * inv_freq_[k];
          oi[2 * k] = xi[2 * k] + float(std::sin(angle));
          oi[2 * k + 1] = xi[2 * k + 1] + float(std::cos(angle));
        }
      }
    });
    return Status::Ok();
  }

 private:
  const Node& node_;
  int64_t d_;
  bool learned_ = true;
  int64_t max_positions_ = 0;
  std::vector<double> inv_freq_;
};

class LayerNormKernel : public CpuKernel {
 public:
  LayerNormKernel(const Node& node, int64_t d) : node_(node), d_(d) {}
  Status run(const RunContext& ctx) override {
    const float* beta = node_.weights.size() > 1 && node_.weights[1] ? node_.weights[1]->f32() : nullptr;
    layer_norm(ctx.pool, ctx.in(node_, 0), ctx.n, d_, node_.weights[0]->f32(), beta,
               node_.fb_op->params_as_LayerNormParams()->eps(), ctx.out(node_, 0));
    return Status::Ok();
  }

 private:
  const Node& node_;
  int64_t d_;
};

class ActivationKernel : public CpuKernel {
 public:
  ActivationKernel(const Node& node, int64_t d) : node_(node), d_(d) {}
  Status run(const RunContext& ctx) override {
    const auto* p = node_.fb_op->params_as_ActivationParams();
    activation(ctx.pool, p->kind(), ctx.in(node_, 0), ctx.n * d_, ctx.out(node_, 0), p->cap());
    return Status::Ok();
  }

 private:
  const Node& node_;
  int64_t d_;
};

class AddKernel : public CpuKernel {
 public:
  AddKernel(const Node& node, int64_t d) : node_(node), d_(d) {}
  Status run(const RunContext& ctx) override {
    add(ctx.pool, ctx.in(node_, 0), ctx.in(node_, 1), ctx.n * d_, ctx.out(node_, 0));
    return Status::Ok();
  }

 private:
  const Node& node_;
  int64_t d_;
};

class LogSoftmaxKernel : public CpuKernel {
 public:
  LogSoftmaxKernel(const Node& node, int64_t d) : node_(node), d_(d) {}
  Status run(const RunContext& ctx) override {
    log_softmax(ctx.pool, ctx.in(node_, 0), ctx.n, d_, ctx.out(node_, 0));
    return Status::Ok();
  }

 private:
  const Node& node_;
  int64_t d_;
};

int64_t out_width(const Node& node, const Model& model) { return model.values()[node.outputs[0]].width; }

}  // namespace

void layer_norm(pthreadpool_t pool, const float* x, int64_t n, int64_t d, const float* gamma, const float* beta,
                float eps, float* out) {
  const IsaKernels& k = isa();
  parallel_for(pool, size_t(n), kRowTile, [&](size_t b, size_t e) {
    k.layer_norm(x + b * d, int64_t(e - b), d, gamma, beta, eps, out + b * d);
  });
}

void activation_row(fb::ActivationKind kind, const float* x, int64_t count, float* out, float cap) {
  const IsaKernels& k = isa();
  switch (kind) {
    case fb::ActivationKind::RELU: k.relu(x, count, out); break;
    case fb::ActivationKind::GELU_ERF: k.gelu_erf(x, count, out); break;
    case fb::ActivationKind::GELU_TANH: k.gelu_tanh(x, count, out); break;
    case fb::ActivationKind::SILU: k.silu(x, count, out); break;
    case fb::ActivationKind::SOFTCAP:
      for (int64_t i = 0; i < count; ++i) out[i] = cap * std::tanh(x[i] / cap);
      break;
  }
}

void activation(pthreadpool_t pool, fb::ActivationKind kind, const float* x, int64_t count, float* out, float cap) {
  constexpr size_t kTile = 4096;
  parallel_for(pool, size_t(count), kTile,
               [&](size_t b, size_t e) { activation_row(kind, x + b, int64_t(e - b), out + b, cap); });
}

void add(pthreadpool_t pool, const float* a, const float* b, int64_t count, float* out) {
  constexpr size_t kTile = 8192;
  const IsaKernels& k = isa();
  parallel_for(pool, size_t(count), kTile, [&](size_t s, size_t e) { k.add(a + s, b + s, int64_t(e - s), out + s); });
}

void log_softmax(pthreadpool_t pool, const float* x, int64_t n, int64_t d, float* out) {
  parallel_for(pool, size_t(n), kRowTile, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const float* row = x + i * d;
      float* o = out + i * d;
      float mx = -INFINITY;
      for (int64_t j = 0; j < d; ++j) mx = std::max(mx, row[j]);
      // exp in float, the sum in double: a vocabulary of many small terms keeps full precision.
      double sum = 0;
      for (int64_t j = 0; j < d; ++j) sum += double(std::exp(row[j] - mx));
      const float lse = mx + float(std::log(sum));
      for (int64_t j = 0; j < d; ++j) o[j] = row[j] - lse;
    }
  });
}

Result<std::unique_ptr<CpuKernel>> make_embedding(const Node& node, const Model&, const KernelConfig&) {
  return std::unique_ptr<CpuKernel>(new EmbeddingKernel(node));
}
Result<std::unique_ptr<CpuKernel>> make_position(const Node& node, const Model& model, const KernelConfig& cfg) {
  const auto* p = node.fb_op->params_as_PositionParams();
  if (p->kind() == fb::PositionKind::AXIAL) return make_axial_position(node, model, cfg);
  if (p->kind() == fb::PositionKind::LEARNED && cfg.max_tokens > p->max_positions()) {
    return InvalidArgument("max_tokens " + std::to_string(cfg.max_tokens) + " exceeds the model's " +
                           std::to_string(p->max_positions()) + " learned positions");
  }
  return std::unique_ptr<CpuKernel>(new PositionKernel(node, out_width(node, model)));
}
Result<std::unique_ptr<CpuKernel>> make_layer_norm(const Node& node, const Model& model, const KernelConfig&) {
  return std::unique_ptr<CpuKernel>(new LayerNormKernel(node, out_width(node, model)));
}
Result<std::unique_ptr<CpuKernel>> make_activation(const Node& node, const Model& model, const KernelConfig&) {
  return std::unique_ptr<CpuKernel>(new ActivationKernel(node, out_width(node, model)));
}
Result<std::unique_ptr<CpuKernel>> make_add(const Node& node, const Model& model, const KernelConfig&) {
  return std::unique_ptr<CpuKernel>(new AddKernel(node, out_width(node, model)));
}
Result<std::unique_ptr<CpuKernel>> make_log_softmax(const Node& node, const Model& model, const KernelConfig&) {
  return std::unique_ptr<CpuKernel>(new LogSoftmaxKernel(node, out_width(node, model)));
}

}  // namespace tern::cpu
