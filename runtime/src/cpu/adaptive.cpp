// SPDX-License-Identifier: MIT
// ADAPTIVE_EMBEDDING and ADAPTIVE_LOG_SOFTMAX on the CPU (definitions: ops/adaptive.h). Every product runs on
// cpu/matrix.h (float32 packed once per model, shared by its sessions; compressed weights read in place; the
// log-softmax's transposed projections packed once per model in float32); the log-softmax outputs are written
// straight into the caller's [n, V] buffer (row stride V), so no [n, V] scratch exists.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "format/dequantize.h"
#include "cpu/kernels.h"
#include "cpu/matrix.h"
#include "cpu/parallel.h"
#include "ops/adaptive.h"

namespace tern::cpu {
namespace {

constexpr size_t kRowTile = 4;

class AdaptiveEmbeddingKernel : public CpuKernel {
 public:
  AdaptiveEmbeddingKernel(const Node& node, AdaptiveInput spec, int64_t max_batch)
      : node_(node), a_(std::move(spec)), max_batch_(max_batch) {
    for (int64_t di : a_.dims) max_dim_ = std::max(max_dim_, di);
    rows_.resize(size_t(max_batch));
  }

  Status init(const Model& model) {
    for (size_t i = 0; i < a_.clusters(); ++i) {
      Matrix m;
      if (a_.proj_tensors[i]) {
        // proj_i [d, d_i] is already [out, in].
        TERN_ASSIGN_OR_RETURN(m, Matrix::create(model, *a_.proj_tensors[i], nullptr, node_.label()));
        quant_bytes_ = std::max(quant_bytes_, (m.scratch_bytes(max_batch_) + 63) / 64 * 64);
      }
      proj_.push_back(std::move(m));
    }
    return Status::Ok();
  }

  Status run(const RunContext& ctx) override {
    const int64_t V = a_.vocab(), d = a_.d;
    for (int64_t r = 0; r < ctx.n; ++r) {
      if (ctx.ids[r] < 0 || ctx.ids[r] >= V) {
        return InvalidArgument("token id " + std::to_string(ctx.ids[r]) + " at position " + std::to_string(ctx.pos0 + r) +
                               " is outside the vocabulary [0, " + std::to_string(V) + ")");
      }
    }
    float* out = ctx.out(node_, 0);       // [n, d]
    void* quant = ctx.scratch;            // the projections' int8 activations (cpu/matrix.h)
    float* gathered = ctx.scratch + quant_bytes_ / sizeof(float);  // [n, max d_i]
    float* projected = gathered + max_batch_ * max_dim_;  // [n, d]
    for (size_t i = 0; i < a_.clusters(); ++i) {
      const int64_t l = a_.ends[i], r = a_.ends[i + 1], di = a_.dims[i];
      int64_t count = 0;
      for (int64_t t = 0; t < ctx.n; ++t) {
        if (ctx.ids[t] >= l && ctx.ids[t] < r) rows_[size_t(count++)] = t;
      }
      if (count == 0) continue;
      for (int64_t k = 0; k < count; ++k) {
        dequantize_rows(*a_.table_tensors[i], ctx.ids[rows_[size_t(k)]] - l, 1, gathered + k * di);
      }
      const float* src = gathered;
      if (a_.proj_tensors[i]) {
        TERN_RETURN_IF_ERROR(proj_[i].run(ctx.pool, ctx.threads, gathered, count, projected, quant, node_.label()));
        src = projected;
      }
      for (int64_t k = 0; k < count; ++k) {
        float* o = out + rows_[size_t(k)] * d;
        for (int64_t c = 0; c < d; ++c) o[c] = src[k * d + c] * a_.scale;
      }
    }
    return Status::Ok();
  }

  uint64_t packed_weight_bytes() const override {
    uint64_t b = 0;
    for (const auto& p : proj_) b += p.packed_bytes();
    return b;
  }
  uint64_t scratch_bytes() const override {
    return quant_bytes_ + uint64_t(max_batch_) * uint64_t(max_dim_ + a_.d) * sizeof(float);
  }

 private:
  const Node& node_;
  AdaptiveInput a_;
  int64_t max_batch_, max_dim_ = 1;
  uint64_t quant_bytes_ = 0;      // the largest projection's scratch, whole 64-byte lines
  std::vector<Matrix> proj_;      // per cluster; empty without a projection
  std::vector<int64_t> rows_;     // [max_batch], the call's rows in one cluster
};

// Row-wise log(sum(exp)) of x[0..count) with the max taken first; the sum in double.
inline double log_sum_exp(const float* x, int64_t count) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < count; ++j) mx = std::max(mx, x[j]);
  double sum = 0;
  for (int64_t j = 0; j < count; ++j) sum += double(std::exp(x[j] - mx));
  return double(mx) + std::log(sum);
}

class AdaptiveLogSoftmaxKernel : public CpuKernel {
 public:
  AdaptiveLogSoftmaxKernel(const Node& node, AdaptiveSoftmax spec, int64_t max_batch)
      : node_(node), a_(std::move(spec)), max_batch_(max_batch) {
    for (int64_t di : a_.dims) max_dim_ = std::max(max_dim_, di);
  }

  Status init(const Model& model) {
    const int64_t V = a_.vocab();
    auto note_scratch = [&](const Matrix& m) {
      quant_bytes_ = std::max(quant_bytes_, (m.scratch_bytes(max_batch_) + 63) / 64 * 64);
    };
    for (size_t i = 0; i < a_.clusters(); ++i) {
      const int64_t di = a_.dims[i], rows = a_.ends[i + 1] - a_.ends[i];
      Matrix p;
      if (const TensorInfo* proj = a_.proj_tensors[i]) {
        // x proj_i with proj_i [d, d_i]: a linear layer with weight proj_i^T [d_i, d], in float32 (a compressed
        // proj_i is widened for the transpose).
        TERN_ASSIGN_OR_RETURN(p, Matrix::create(model, transpose_of(*proj), nullptr, di, node_.label()));
      }
      proj_.push_back(std::move(p));
      // Cluster i's logits go straight to its columns of the output (row stride V).
      TERN_ASSIGN_OR_RETURN(Matrix out, Matrix::create(model, *a_.weight_tensors[i], a_.weight_row0[i], rows,
                                                       a_.biases[i], V, node_.label()));
      note_scratch(out);
      out_.push_back(std::move(out));
    }
    if (a_.tails() > 0) {
      TERN_ASSIGN_OR_RETURN(cluster_, Matrix::create(model, *a_.cluster_weight_tensor, 0, a_.tails(), a_.cluster_bias,
                                                     a_.tails(), node_.label()));
      note_scratch(cluster_);
    }
    return Status::Ok();
  }

  Status run(const RunContext& ctx) override {
    const int64_t n = ctx.n, V = a_.vocab(), C = a_.tails(), shortlist = a_.shortlist();
    const float* x = ctx.in(node_, 0);   // [n, d]
    float* out = ctx.out(node_, 0);      // [n, V]
    void* quant = ctx.scratch;           // the products' int8 activations (cpu/matrix.h)
    float* px = ctx.scratch + quant_bytes_ / sizeof(float);  // [n, max d_i]: x proj_i
    float* head_c = px + max_batch_ * max_dim_;  // [n, C]: the head's cluster columns
    for (size_t i = 0; i < a_.clusters(); ++i) {
      const float* xi = x;
      if (a_.proj_tensors[i]) {  // float32: no scratch
        TERN_RETURN_IF_ERROR(proj_[i].run(ctx.pool, ctx.threads, x, n, px, nullptr, node_.label()));
        xi = px;
      }
      TERN_RETURN_IF_ERROR(out_[i].run(ctx.pool, ctx.threads, xi, n, out + a_.ends[i], quant, node_.label()));
      if (i == 0 && C > 0) {
        TERN_RETURN_IF_ERROR(cluster_.run(ctx.pool, ctx.threads, xi, n, head_c, quant, node_.label()));
      }
    }
    parallel_for(ctx.pool, size_t(n), kRowTile, [&](size_t b, size_t e) {
      for (size_t r = b; r < e; ++r) {
        float* o = out + int64_t(r) * V;
        float* hc = head_c + int64_t(r) * C;
        // Head: the shortlist columns and the cluster columns form one softmax.
        float mx = -INFINITY;
        for (int64_t j = 0; j < shortlist; ++j) mx = std::max(mx, o[j]);
        for (int64_t j = 0; j < C; ++j) mx = std::max(mx, hc[j]);
        double sum = 0;
        for (int64_t j = 0; j < shortlist; ++j) sum += double(std::exp(o[j] - mx));
        for (int64_t j = 0; j < C; ++j) sum += double(std::exp(hc[j] - mx));
        const float lse = float(double(mx) + std::log(sum));
        for (int64_t j = 0; j < shortlist; ++j) o[j] -= lse;
        for (int64_t j = 0; j < C; ++j) hc[j] -= lse;
        // Tail i: its own log-softmax, offset by head column i - 1.
        for (int64_t i = 1; i <= C; ++i) {
          float* t = o + a_.ends[size_t(i)];
          const int64_t rows = a_.ends[size_t(i) + 1] - a_.ends[size_t(i)];
          const float shift = hc[i - 1] - float(log_sum_exp(t, rows));
          for (int64_t j = 0; j < rows; ++j) t[j] += shift;
        }
      }
    });
    return Status::Ok();
  }

  uint64_t packed_weight_bytes() const override {
    uint64_t b = cluster_.packed_bytes();
    for (const auto& p : proj_) b += p.packed_bytes();
    for (const auto& o : out_) b += o.packed_bytes();
    return b;
  }
  uint64_t scratch_bytes() const override {
    return quant_bytes_ + uint64_t(max_batch_) * uint64_t(max_dim_ + std::max<int64_t>(a_.tails(), 1)) * sizeof(float);
  }

 private:
  const Node& node_;
  AdaptiveSoftmax a_;
  int64_t max_batch_, max_dim_ = 1;
  uint64_t quant_bytes_ = 0;     // the largest product's scratch, whole 64-byte lines
  std::vector<Matrix> proj_;     // per cluster; empty without a projection
  std::vector<Matrix> out_;      // per cluster
  Matrix cluster_;               // the head's cluster columns
};

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_adaptive_embedding(const Node& node, const Model& model, const KernelConfig& cfg) {
  TERN_ASSIGN_OR_RETURN(auto spec, AdaptiveInput::from(node, model.values()));
  std::unique_ptr<AdaptiveEmbeddingKernel> k(new AdaptiveEmbeddingKernel(node, std::move(spec), cfg.max_batch));
  TERN_RETURN_IF_ERROR(k->init(model));
  return std::unique_ptr<CpuKernel>(std::move(k));
}

Result<std::unique_ptr<CpuKernel>> make_adaptive_log_softmax(const Node& node, const Model& model,
                                                              const KernelConfig& cfg) {
  TERN_ASSIGN_OR_RETURN(auto spec, AdaptiveSoftmax::from(node, model.values()));
  std::unique_ptr<AdaptiveLogSoftmaxKernel> k(new AdaptiveLogSoftmaxKernel(node, std::move(spec), cfg.max_batch));
  TERN_RETURN_IF_ERROR(k->init(model));
  return std::unique_ptr<CpuKernel>(std::move(k));
}

}  // namespace tern::cpu
