// SPDX-License-Identifier: MIT
// LSH attention (ops/lsh.h): parameter checks, hashing, and the reference kernel.
#include "ops/lsh.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "ops/attention_kinds.h"
#include "ops/op.h"

namespace tern {
namespace {

constexpr int64_t kMaxWindow = int64_t(1) << 24;
constexpr int64_t kMaxBuckets = int64_t(1) << 24;
constexpr int64_t kMaxHashes = 1024;
constexpr int64_t kMaxFactors = 16;

Status in_range(int64_t v, int64_t lo, int64_t hi, const char* name, const std::string& where) {
  if (v < lo || v > hi) {
    return InvalidModel(where + ": LSH " + name + " " + std::to_string(v) + " must be in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]");
  }
  return Status::Ok();
}

}  // namespace

Result<LshAttention> LshAttention::from(const Node& node) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  const auto* k = p->kind_as_Lsh();
  const std::string where = node.label();
  LshAttention a;
  a.heads = p->heads();
  a.head_dim = p->head_dim();
  a.scale = p->scale();
  a.chunk = k->chunk();
  a.before = k->chunks_before();
  a.after = k->chunks_after();
  a.hashes = k->hashes();
  a.pad_to = k->pad_to();
  a.pad_above = k->pad_above();
  a.self_mask_value = k->self_mask_value();
  a.key_norm_eps = k->key_norm_eps();
  TERN_RETURN_IF_ERROR(in_range(a.chunk, 1, kMaxWindow, "chunk", where));
  TERN_RETURN_IF_ERROR(in_range(a.before, 0, kMaxWindow, "chunks_before", where));
  TERN_RETURN_IF_ERROR(in_range(a.after, 0, kMaxWindow, "chunks_after", where));
  if (a.chunk * (1 + a.before + a.after) > kMaxWindow) return InvalidModel(where + ": LSH window of chunks too large");
  TERN_RETURN_IF_ERROR(in_range(a.hashes, 1, kMaxHashes, "hashes", where));
  TERN_RETURN_IF_ERROR(in_range(a.pad_to, a.chunk, int64_t(1) << 31, "pad_to", where));
  if (a.pad_to % a.chunk != 0) return InvalidModel(where + ": LSH pad_to " + std::to_string(a.pad_to) + " is not a multiple of chunk " + std::to_string(a.chunk));
  TERN_RETURN_IF_ERROR(in_range(a.pad_above, 0, a.chunk, "pad_above", where));
  if (!std::isfinite(a.self_mask_value)) return InvalidModel(where + ": LSH self_mask_value must be finite");
  if (!(a.key_norm_eps >= 0.0f) || !std::isfinite(a.key_norm_eps)) return InvalidModel(where + ": LSH key_norm_eps must be finite and >= 0");
  if (!k->buckets() || k->buckets()->size() < 1 || int64_t(k->buckets()->size()) > kMaxFactors) {
    return InvalidModel(where + ": LSH needs 1.." + std::to_string(kMaxFactors) + " bucket factors");
  }
  a.buckets = 1;
  for (int32_t f : *k->buckets()) {
    if (f < 2 || f % 2 != 0) return InvalidModel(where + ": LSH bucket factor " + std::to_string(f) + " must be even and >= 2");
    a.factors.push_back(f);
    a.rot_half += f / 2;
    a.buckets *= f;
    if (a.buckets > kMaxBuckets) return InvalidModel(where + ": LSH bucket count exceeds 2^24");
  }
  if (node.weights.empty() || !node.weights[0]) return InvalidModel(where + ": LSH attention needs its rotations weight");
  for (size_t w = 1; w < node.weights.size(); ++w) {
    if (node.weights[w]) return InvalidModel(where + ": LSH attention takes one weight (rotations)");
  }
  TERN_RETURN_IF_ERROR(expect_shape(node, 0, {a.heads, a.head_dim, a.hashes, a.rot_half}));
  const TensorInfo* rot = node.weights[0];
  if (rot->dtype != fb::DType::F32) return InvalidModel(where + ": LSH rotations must be F32");
  a.rotations = rot->f32();
  for (int64_t i = 0; i < rot->numel(); ++i) {
    if (!std::isfinite(a.rotations[i])) return InvalidModel(where + ": LSH rotations hold a non-finite value");
  }
  return a;
}

int64_t LshAttention::bucket(int h, int64_t r, const float* x, float* rotated) const {
  // rotated[k] = sum_c x[c] R[h, c, r, k], in blocks of 32 columns held in registers.
  constexpr int64_t kBlock = 32;
  const int64_t stride = hashes * rot_half;                                     // from R[h, c, r, :] to R[h, c+1, r, :]
  const float* base = rotations + (int64_t(h) * head_dim * hashes + r) * rot_half;  // R[h, 0, r, 0]
  for (int64_t k0 = 0; k0 < rot_half; k0 += kBlock) {
    float acc[kBlock] = {};
    if (k0 + kBlock <= rot_half) {
      for (int c = 0; c < head_dim; ++c) {
        const float xc = x[c];
        const float* row = base + c * stride + k0;
        for (int64_t k = 0; k < kBlock; ++k) acc[k] += xc * row[k];
      }
      std::copy(acc, acc + kBlock, rotated + k0);
    } else {
      for (int c = 0; c < head_dim; ++c) {
        const float xc = x[c];
        const float* row = base + c * stride + k0;
        for (int64_t k = 0; k < rot_half - k0; ++k) acc[k] += xc * row[k];
      }
      std::copy(acc, acc + (rot_half - k0), rotated + k0);
    }
  }
  int64_t b = 0, radix = 1, offset = 0;
  for (int64_t f : factors) {
    const int64_t half = f / 2;
    // argmax over [x | -x]: the first maximum, as torch.argmax returns.
    int64_t best = 0;
    float best_v = rotated[offset];
    for (int64_t t = 1; t < f; ++t) {
      const float v = t < half ? rotated[offset + t] : -rotated[offset + t - half];
      if (v > best_v) {
        best_v = v;
        best = t;
      }
    }
    b += best * radix;
    radix *= f;
    offset += half;
  }
  return b;
}

namespace {

// One query against the slots of its window: HF's float32 log-sum-exp; accumulation in double.
// Returns lse; writes out [dh].
float attend_row(const LshAttention& a, const float* qkv, int64_t stride, int h, int64_t i,
                 const std::vector<int64_t>& window, const std::vector<float>& keys, int64_t n, double* out) {
  const int dh = a.head_dim;
  const HeadLayout heads = a.layout();
  const float* q = qkv + i * stride + heads.q_column(h);
  std::vector<double> s;
  std::vector<int64_t> pos;
  for (int64_t j : window) {
    if (j >= n || j > i) continue;  // a pad, or the future
    double v;
    if (j == i) {
      v = a.self_mask_value;
    } else {
      v = 0;
      for (int c = 0; c < dh; ++c) v += double(q[c]) * double(keys[size_t(j * dh + c)]);
    }
    s.push_back(v);
    pos.push_back(j);
  }
  double m = -INFINITY;
  for (double v : s) m = std::max(m, v);
  double l = 0;
  for (double v : s) l += std::exp(v - m);
  const float lse = float(std::log(l)) + float(m);  // float32, as torch.logsumexp on float32 scores
  std::fill(out, out + dh, 0.0);
  for (size_t t = 0; t < s.size(); ++t) {
    const double p = std::exp(s[t] - double(lse));
    const float* v = qkv + pos[t] * stride + heads.v_column(h);
    for (int c = 0; c < dh; ++c) out[c] += p * double(v[c]);
  }
  return lse;
}

}  // namespace

void ref::lsh_attention(const float* qkv, int64_t n, const LshAttention& a, float* out) {
  const int dh = a.head_dim;
  const HeadLayout heads = a.layout();  // qk | v
  const int64_t inner = heads.inner(), stride = heads.row;
  const int64_t n_pad = a.padded_length(n), nh = a.hashes;
  std::vector<float> keys(size_t(n * dh)), rotated(size_t(a.rot_half));
  std::vector<double> row(static_cast<size_t>(dh));
  for (int h = 0; h < a.heads; ++h) {
    for (int64_t j = 0; j < n; ++j) {
      const float* x = qkv + j * stride + heads.k_column(h);
      double ms = 0;
      for (int c = 0; c < dh; ++c) ms += double(x[c]) * double(x[c]);
      const double r = 1.0 / std::sqrt(ms / dh + double(a.key_norm_eps));
      for (int c = 0; c < dh; ++c) keys[size_t(j * dh + c)] = float(double(x[c]) * r * double(a.scale));
    }
    if (!a.chunked(n)) {
      std::vector<int64_t> all(static_cast<size_t>(n));
      std::iota(all.begin(), all.end(), 0);
      for (int64_t i = 0; i < n; ++i) {
        attend_row(a, qkv, stride, h, i, all, keys, n, row.data());
        for (int c = 0; c < dh; ++c) out[i * inner + heads.out_column(h) + c] = float(row[size_t(c)]);
      }
      continue;
    }
    // Sorted by (round * (buckets + 1) + bucket, position); pads take bucket `buckets`.
    std::vector<std::pair<int64_t, int64_t>> order;  // (round-offset bucket, position)
    for (int64_t r = 0; r < nh; ++r) {
      for (int64_t j = 0; j < n_pad; ++j) {
        const int64_t b = j < n ? a.bucket(h, r, qkv + j * stride + heads.k_column(h), rotated.data()) : a.buckets;
        order.push_back({r * (a.buckets + 1) + b, j});
      }
    }
    std::sort(order.begin(), order.end());
    const int64_t slots = nh * n_pad, n_chunks = slots / a.chunk;
    std::vector<double> outs(size_t(nh * n * dh));
    std::vector<float> lses(size_t(nh * n));
    for (int64_t t = 0; t < slots; ++t) {
      const int64_t i = order[size_t(t)].second;
      if (i >= n) continue;
      const int64_t c = t / a.chunk, r = t / n_pad;
      std::vector<int64_t> window;
      for (int64_t d = -a.before; d <= a.after; ++d) {
        const int64_t cc = ((c + d) % n_chunks + n_chunks) % n_chunks;
        for (int64_t u = cc * a.chunk; u < (cc + 1) * a.chunk; ++u) window.push_back(order[size_t(u)].second);
      }
      lses[size_t(r * n + i)] = attend_row(a, qkv, stride, h, i, window, keys, n, outs.data() + (r * n + i) * dh);
    }
    for (int64_t i = 0; i < n; ++i) {
      float* o = out + i * inner + heads.out_column(h);
      if (nh == 1) {
        for (int c = 0; c < dh; ++c) o[c] = float(outs[size_t(i * dh + c)]);
        continue;
      }
      float mx = -INFINITY;
      for (int64_t r = 0; r < nh; ++r) mx = std::max(mx, lses[size_t(r * n + i)]);
      double sum = 0;
      for (int64_t r = 0; r < nh; ++r) sum += std::exp(double(lses[size_t(r * n + i)]) - double(mx));
      const float total = float(std::log(sum)) + mx;  // float32, as HF's logsumexp over rounds
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t r = 0; r < nh; ++r) {
        const double w = std::exp(double(lses[size_t(r * n + i)]) - double(total));
        for (int c = 0; c < dh; ++c) row[size_t(c)] += w * outs[size_t((r * n + i) * dh + c)];
      }
      for (int c = 0; c < dh; ++c) o[c] = float(row[size_t(c)]);
    }
  }
}

HeadLayout LshAttention::layout() const { return head_layout(fb::AttentionKind::Lsh, heads, head_dim); }

Status LshAttention::check_saved_cache(int64_t capacity, int64_t position, const uint8_t* in,
                                       const std::string& label) const {
  int32_t head[2];
  std::memcpy(head, in, 8);
  if ((head[0] != 0 && head[0] != 1) || head[1] != 0) {
    return InvalidArgument(label + ": saved LSH state has an unknown header (" + std::to_string(head[0]) + ", " +
                           std::to_string(head[1]) + ")");
  }
  if (position > capacity) {
    return InvalidArgument(label + ": saved LSH state of " + std::to_string(position) + " positions, the cache holds " +
                           std::to_string(capacity));
  }
  if (head[0] == 0) {
    // Unhashed only while the sequence is within a chunk (HF hashes it once a step reaches one).
    if (position > chunk) {
      return InvalidArgument(label + ": saved LSH state of " + std::to_string(position) +
                             " positions without buckets; past the chunk of " + std::to_string(chunk) +
                             " every position has them");
    }
    return Status::Ok();
  }
  if (position == 0) return InvalidArgument(label + ": saved LSH state has buckets but no positions");
  const LshSavedCache saved = saved_cache(position);
  for (int h = 0; h < heads; ++h) {
    for (int64_t r = 0; r < hashes; ++r) {
      const uint8_t* b = in + saved.buckets_at(h, r);
      for (int64_t j = 0; j < position; ++j) {
        int32_t v;
        std::memcpy(&v, b + j * 4, 4);
        if (v < r * buckets || v > bucket_limit(r)) {
          return InvalidArgument(label + ": saved LSH bucket " + std::to_string(v) + " of head " + std::to_string(h) +
                                 ", round " + std::to_string(r) + ", position " + std::to_string(j) +
                                 " is outside [" + std::to_string(r * buckets) + ", " +
                                 std::to_string(bucket_limit(r)) + "]");
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace tern
