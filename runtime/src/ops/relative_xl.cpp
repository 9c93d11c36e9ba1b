// SPDX-License-Identifier: MIT
#include "ops/relative_xl.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/attention_kinds.h"
#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

constexpr int64_t kMaxMemory = int64_t(1) << 24;

}  // namespace

Result<RelativeXL> RelativeXL::from(const Node& node) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  const auto* k = p->kind_as_RelativeXL();
  const std::string where = node.label();
  RelativeXL x;
  x.heads = p->heads();
  x.head_dim = p->head_dim();
  x.scale = p->scale();
  x.mem_len = k->mem_len();
  x.clamp_len = k->clamp_len();
  x.same_length = k->same_length();
  x.eps = k->norm_eps();
  if (x.mem_len < 0 || x.mem_len > kMaxMemory) {
    return InvalidModel(where + ": mem_len " + std::to_string(x.mem_len) + " must be in [0, 2^24]");
  }
  if (x.clamp_len < 0) return InvalidModel(where + ": clamp_len " + std::to_string(x.clamp_len) + " is negative");
  if (x.same_length && x.mem_len == 0) {
    return Unsupported(where + ": same_length without memory (mem_len 0) hides every key");
  }
  const auto& w = node.weights;
  if (w.size() < 4 || !w[0] || !w[1] || !w[2] || !w[3]) {
    return InvalidModel(where + ": relative attention needs weights qkv, r_net, r_w_bias and r_r_bias");
  }
  if (w[0]->shape.size() != 2 || w[0]->shape[1] < 2 || w[0]->shape[1] % 2 != 0) {
    return InvalidModel(where + ": weight '" + w[0]->name + "' must be [3*heads*head_dim, d] with an even d");
  }
  x.d = w[0]->shape[1];
  const int64_t inner = x.inner();
  TERN_RETURN_IF_ERROR(expect_shape(node, 0, {x.layout().row, x.d}));  // a row of qkv per projected column
  if (double(x.mem_len) * double(x.d) > double(int64_t(1) << 36)) {
    return InvalidModel(where + ": a memory of " + std::to_string(x.mem_len) + " x " + std::to_string(x.d) + " floats is too large");
  }
  TERN_RETURN_IF_ERROR(expect_shape(node, 1, {inner, x.d}));
  TERN_RETURN_IF_ERROR(expect_shape(node, 2, {x.heads, x.head_dim}));
  TERN_RETURN_IF_ERROR(expect_shape(node, 3, {x.heads, x.head_dim}));
  x.qkv = w[0]->f32();
  x.r_net = w[1]->f32();
  x.r_w_bias = w[2]->f32();
  x.r_r_bias = w[3]->f32();
  const TensorInfo* norm_w = w.size() > 4 ? w[4] : nullptr;
  const TensorInfo* norm_b = w.size() > 5 ? w[5] : nullptr;
  const TensorInfo* freq = w.size() > 6 ? w[6] : nullptr;
  if (norm_b && !norm_w) return InvalidModel(where + ": norm_bias given without norm_weight");
  if (norm_w) {
    TERN_RETURN_IF_ERROR(expect_shape(node, 4, {x.d}));
    x.norm_weight = norm_w->f32();
    if (!(x.eps > 0.0f) || !std::isfinite(x.eps)) return InvalidModel(where + ": norm_eps must be positive and finite");
  }
  if (norm_b) {
    TERN_RETURN_IF_ERROR(expect_shape(node, 5, {x.d}));
    x.norm_bias = norm_b->f32();
  }
  if (freq) {
    TERN_RETURN_IF_ERROR(expect_shape(node, 6, {x.d / 2}));
    x.inv_freq = freq->f32();
    for (int64_t i = 0; i < x.d / 2; ++i) {
      if (!std::isfinite(x.inv_freq[i])) return InvalidModel(where + ": inv_freq is not finite");
    }
  }
  return x;
}

int64_t RelativeXL::position_rows(int64_t n) const {
  const int64_t far = max_distance(std::max<int64_t>(n, 1));
  return (clamp_len > 0 ? std::min(far, clamp_len) : far) + 1;
}

namespace {

// HF keeps the frequencies as a float32 buffer; without the checkpoint's, the float32 rounding of the formula.
double frequency(const RelativeXL& x, int64_t k) {
  return x.inv_freq ? double(x.inv_freq[k]) : double(float(1.0 / std::pow(10000.0, double(2 * k) / double(x.d))));
}

void encode(const double* freq, int64_t half, int64_t p, float* out) {
  for (int64_t k = 0; k < half; ++k) {
    const double angle = double(p) * freq[k];
    out[k] = float(std::sin(angle));
    out[half + k] = float(std::cos(angle));
  }
}

}  // namespace

void RelativeXL::position_encoding(int64_t p, float* out) const { position_encodings(p, 1, out); }

void RelativeXL::position_encodings(int64_t first, int64_t rows, float* out) const {
  const int64_t half = d / 2;
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t k = 0; k < half; ++k) freq[size_t(k)] = frequency(*this, k);
  for (int64_t i = 0; i < rows; ++i) encode(freq.data(), half, first + i, out + i * d);
}

HeadLayout RelativeXL::layout() const { return head_layout(fb::AttentionKind::RelativeXL, heads, head_dim); }

void ref::relative_xl_attention(const float* h, int64_t n, float* memory, const RelativeXL& x, float* out) {
  const HeadLayout heads = x.layout();  // of the projected rows qkv
  const int64_t M = x.mem_len, d = x.d, inner = heads.inner(), width = heads.row, rows = M + n;
  const int H = x.heads, dh = x.head_dim;
  // x' = [memory; h], normalised for pre-LN.
  std::vector<float> cat(size_t(rows * d));
  std::copy(memory, memory + M * d, cat.begin());
  std::copy(h, h + n * d, cat.begin() + M * d);
  if (x.pre_norm()) ref::layer_norm(cat.data(), rows, d, x.norm_weight, x.norm_bias, x.eps, cat.data());
  std::vector<double> qkv(size_t(rows * width));  // [rows, width]; q only used for the last n rows
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t o = 0; o < width; ++o) {
      double s = 0;
      for (int64_t c = 0; c < d; ++c) s += double(cat[size_t(j * d + c)]) * double(x.qkv[o * d + c]);
      qkv[size_t(j * width + o)] = s;
    }
  const int64_t positions = x.position_rows(n);
  std::vector<double> r(size_t(positions * inner));  // [positions, inner]
  std::vector<float> pe(static_cast<size_t>(d));
  for (int64_t p = 0; p < positions; ++p) {
    x.position_encoding(p, pe.data());
    for (int64_t o = 0; o < inner; ++o) {
      double s = 0;
      for (int64_t c = 0; c < d; ++c) s += double(pe[size_t(c)]) * double(x.r_net[o * d + c]);
      r[size_t(p * inner + o)] = s;
    }
  }
  std::vector<double> score(static_cast<size_t>(rows));
  for (int hd = 0; hd < H; ++hd) {
    for (int64_t i = 0; i < n; ++i) {
      const double* q = &qkv[size_t((M + i) * width + heads.q_column(hd))];
      const int64_t lo = x.first_key(i), hi = M + i;  // visible keys [lo, hi]
      double mx = -INFINITY;
      for (int64_t j = lo; j <= hi; ++j) {
        const double* k = &qkv[size_t(j * width + heads.k_column(hd))];
        const double* rp = &r[size_t(x.position(M + i - j) * inner + hd * dh)];
        double s = 0;
        for (int c = 0; c < dh; ++c) {
          s += (q[c] + double(x.r_w_bias[hd * dh + c])) * k[c] + (q[c] + double(x.r_r_bias[hd * dh + c])) * rp[c];
        }
        score[size_t(j)] = s * double(x.scale);
        mx = std::max(mx, score[size_t(j)]);
      }
      double sum = 0;
      for (int64_t j = lo; j <= hi; ++j) sum += (score[size_t(j)] = std::exp(score[size_t(j)] - mx));
      for (int c = 0; c < dh; ++c) {
        double acc = 0;
        for (int64_t j = lo; j <= hi; ++j) acc += score[size_t(j)] * qkv[size_t(j * width + heads.v_column(hd) + c)];
        out[i * inner + heads.out_column(hd) + c] = float(acc / sum);
      }
    }
  }
  // memory <- last M rows of [memory; h]
  std::vector<float> raw(memory, memory + M * d);
  raw.insert(raw.end(), h, h + n * d);
  std::copy(raw.end() - M * d, raw.end(), memory);
}

}  // namespace tern
