// SPDX-License-Identifier: MIT
#include "ops/compressive.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/attention_kinds.h"
#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

constexpr int64_t kMaxRows = int64_t(1) << 24;

}  // namespace

Result<Compressive> Compressive::from(const Node& node) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  const auto* k = p->kind_as_Compressive();
  const std::string where = node.label();
  Compressive c;
  c.heads = p->heads();
  c.head_dim = p->head_dim();
  c.scale = p->scale();
  c.mem_len = k->mem_len();
  c.cmem_len = k->cmem_len();
  c.rate = k->rate();
  c.compression = k->compression();
  if (c.mem_len < 1 || c.mem_len > kMaxRows || c.cmem_len < 1 || c.cmem_len > kMaxRows || c.rate < 1 || c.rate > kMaxRows) {
    return InvalidModel(where + ": mem_len, cmem_len and rate must be in [1, 2^24]");
  }
  if (c.compression != fb::Compression::CONV && c.compression != fb::Compression::MEAN_POOL &&
      c.compression != fb::Compression::MAX_POOL) {
    return InvalidModel(where + ": unknown compression " + std::to_string(int(c.compression)));
  }
  const auto& w = node.weights;
  if (w.empty() || !w[0] || w[0]->shape.size() != 2) {
    return InvalidModel(where + ": compressive attention needs its qkv weight [3*heads*head_dim, d]");
  }
  c.d = w[0]->shape[1];
  TERN_RETURN_IF_ERROR(expect_shape(node, 0, {c.layout().row, c.d}));  // a row of qkv per projected column
  c.qkv = w[0]->f32();
  if (w.size() > 1 && w[1]) {
    TERN_RETURN_IF_ERROR(expect_shape(node, 1, {c.layout().row}));
    c.qkv_bias = w[1]->f32();
  }
  const TensorInfo* conv_w = w.size() > 2 ? w[2] : nullptr;
  const TensorInfo* conv_b = w.size() > 3 ? w[3] : nullptr;
  if (c.compression == fb::Compression::CONV) {
    if (!conv_w) return InvalidModel(where + ": CONV compression needs its conv_weight [d, rate*d]");
    TERN_RETURN_IF_ERROR(expect_shape(node, 2, {c.d, c.rate * c.d}));
    c.conv_weight = conv_w->f32();
    if (conv_b) {
      TERN_RETURN_IF_ERROR(expect_shape(node, 3, {c.d}));
      c.conv_bias = conv_b->f32();
    }
  } else if (conv_w || conv_b) {
    return InvalidModel(where + ": only CONV compression has conv weights");
  }
  if (w.size() > 4) return InvalidModel(where + ": compressive attention takes at most 4 weights");
  // The memories and the compression scratch must be allocatable: at most 2^36 floats each.
  const double floats = std::max(double(c.mem_capacity() + c.cmem_len), double(c.cmem_len) * double(c.rate)) * double(c.d);
  if (floats > double(int64_t(1) << 36)) return InvalidModel(where + ": memories of " + std::to_string(floats) + " floats are too large");
  return c;
}

int64_t Compressive::state_rows(int64_t n) const {
  const int64_t evicted = std::max<int64_t>(0, n - mem_len);
  return std::min(n, mem_capacity()) + std::min(cmem_len, evicted / rate);
}

void Compressive::compress(const float* g, float* out) const {
  for (int64_t o = 0; o < d; ++o) {
    double acc = 0;
    switch (compression) {
      case fb::Compression::CONV: {
        const float* w = conv_weight + o * rate * d;
        acc = conv_bias ? double(conv_bias[o]) : 0.0;
        for (int64_t t = 0; t < rate * d; ++t) acc += double(w[t]) * double(g[t]);
        break;
      }
      case fb::Compression::MEAN_POOL:
        for (int64_t t = 0; t < rate; ++t) acc += double(g[t * d + o]);
        acc /= double(rate);
        break;
      case fb::Compression::MAX_POOL:
        acc = g[o];
        for (int64_t t = 1; t < rate; ++t) acc = std::max(acc, double(g[t * d + o]));
        break;
    }
    out[o] = float(acc);
  }
}

HeadLayout Compressive::layout() const { return head_layout(fb::AttentionKind::Compressive, heads, head_dim); }

void ref::compressive_attention(const float* a, int64_t n, CompressiveMemory& memory, const Compressive& c, float* out) {
  const HeadLayout heads = c.layout();  // of the projected rows qkv
  const int64_t d = c.d, inner = heads.inner(), width = heads.row, dh = c.head_dim;
  std::vector<float> ctx(memory.cmem);
  ctx.insert(ctx.end(), memory.mem.begin(), memory.mem.end());
  ctx.insert(ctx.end(), a, a + n * d);
  const int64_t rows = int64_t(ctx.size()) / d, P = rows - n;
  std::vector<double> qkv(size_t(rows * width));
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t o = 0; o < width; ++o) {
      double s = c.qkv_bias ? double(c.qkv_bias[o]) : 0.0;
      for (int64_t x = 0; x < d; ++x) s += double(ctx[size_t(j * d + x)]) * double(c.qkv[o * d + x]);
      qkv[size_t(j * width + o)] = s;
    }
  std::vector<double> p(static_cast<size_t>(rows));
  for (int h = 0; h < c.heads; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      const double* q = &qkv[size_t((P + i) * width + heads.q_column(h))];
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j <= P + i; ++j) {
        double s = 0;
        for (int64_t x = 0; x < dh; ++x) s += q[x] * qkv[size_t(j * width + heads.k_column(h) + x)];
        p[size_t(j)] = s * double(c.scale);
        mx = std::max(mx, p[size_t(j)]);
      }
      for (int64_t j = 0; j <= P + i; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
      for (int64_t x = 0; x < dh; ++x) {
        double acc = 0;
        for (int64_t j = 0; j <= P + i; ++j) acc += p[size_t(j)] * qkv[size_t(j * width + heads.v_column(h) + x)];
        out[i * inner + heads.out_column(h) + x] = float(acc / sum);
      }
    }
  }
  // mem ++ a; whole groups beyond mem_len compressed into cmem.
  memory.mem.insert(memory.mem.end(), a, a + n * d);
  const int64_t held = int64_t(memory.mem.size()) / d;
  const int64_t e = std::max<int64_t>(0, held - c.mem_len) / c.rate * c.rate;
  std::vector<float> row(static_cast<size_t>(d));
  for (int64_t g = 0; g < e; g += c.rate) {
    c.compress(memory.mem.data() + g * d, row.data());
    memory.cmem.insert(memory.cmem.end(), row.begin(), row.end());
  }
  memory.mem.erase(memory.mem.begin(), memory.mem.begin() + e * d);
  const int64_t kept = std::min<int64_t>(int64_t(memory.cmem.size()) / d, c.cmem_len);
  memory.cmem.erase(memory.cmem.begin(), memory.cmem.end() - kept * d);
}

}  // namespace tern
