// SPDX-License-Identifier: MIT
// ATTENTION of kind RelativeXL on the CPU (definition: ops/relative_xl.h).
//
// Per call of n tokens: keys and values of [memory; h] ([M + n, 2*H*dh]) and the queries of h come from two float32
// GEMMs (cpu/matrix.h) over the row blocks of qkv (the model's packed copy of the weight); pre-LN normalises the
// rows first. Attention is blockwise with online softmax, per thread one [kQueryBlock, dh] tile, never an
// [n, M + n] matrix. The position term needs r(p) = r_net pe(p) for p = 0 .. min(max distance, clamp_len): a
// function of the weights only, so it is computed once at session creation ([P, H*dh]), with r_r_bias . r(p) per
// head. With u = r_w_bias, v = r_r_bias:
//   score = (q + u)·k + (q + v)·r = q·(k + r) + u·k + v·r,   u·k per key and call, v·r per position and session.
// State: the memory, [M, d] floats, oldest first; it shifts by n rows after each call.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"
#include "cpu/matrix.h"
#include "cpu/online_softmax.h"
#include "ops/relative_xl.h"

namespace tern::cpu {
namespace {

constexpr int64_t kQueryBlock = 16;
constexpr int64_t kKeyBlock = 64;

// Per-slot scratch: query rows and one row's scores (cpu/online_softmax.h); keys are read in place.
constexpr TileShape kTile{kQueryBlock, kKeyBlock};

// What one call's attention reads.
struct XlCall {
  const RelativeXL* xl;
  const float* kv;   // [M + n, 2*inner]: k | v
  const float* q;    // [n, inner]
  const float* uk;   // [M + n, H]: scale * r_w_bias . k
  const float* r;    // [P, inner]: r(p)
  const float* vr;   // [P, H]: scale * r_r_bias . r(p)
  int64_t n;
  float* out;        // [n, inner]
  const IsaKernels* kernels;  // the score and softmax loops (cpu/isa.h)
};

void attend_block(const XlCall& a, int h, int64_t r0, int64_t r1, const Tile& t) {
  const RelativeXL& x = *a.xl;
  const int dh = x.head_dim, H = x.heads;
  const int64_t inner = x.inner(), M = x.mem_len, rows = r1 - r0;
  for (int64_t r = 0; r < rows; ++r) t.start_row(r, a.q + (r0 + r) * inner + int64_t(h) * dh, x.scale, dh);
  // The block's rows together read keys [first_key(r0), M + r1 - 1].
  const int64_t first = x.first_key(r0), last = M + r1 - 1;
  for (int64_t j0 = first; j0 <= last; j0 += kKeyBlock) {
    const int64_t j1 = std::min(j0 + kKeyBlock, last + 1);  // exclusive
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r0 + r;
      const int64_t lo = std::max(j0, x.first_key(i)), hi = std::min(j1, M + i + 1);
      if (lo >= hi) continue;
      int64_t pos[kKeyBlock];  // the relative position each key reads
      for (int64_t j = lo; j < hi; ++j) pos[j - lo] = x.position(M + i - j);
      a.kernels->xl_update_row(t.q + r * dh, dh, a.kv + lo * 2 * inner + int64_t(h) * dh, 2 * inner, inner,
                               a.r + int64_t(h) * dh, inner, a.uk + lo * H + h, H, a.vr + h, H, pos, hi - lo, t.s,
                               &t.m[r], &t.l[r], t.acc + r * dh);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {  // every query sees itself: l > 0
    t.write_row(r, 1.0f / t.l[r], dh, a.out + (r0 + r) * inner + int64_t(h) * dh);
  }
}

class RelativeXLKernel : public CpuKernel {
 public:
  RelativeXLKernel(const Node& node, const RelativeXL& xl, const KernelConfig& cfg)
      : node_(node),
        xl_(xl),
        threads_(std::max(cfg.threads, 1)),
        max_batch_(cfg.max_batch),
        r_(large_vector<float>(cfg.buffers)),
        vr_(large_vector<float>(cfg.buffers)),
        memory_(large_vector<float>(cfg.buffers)) {}

  Status init(const Model& model, pthreadpool_t pool) {
    const int64_t inner = xl_.inner(), d = xl_.d, H = xl_.heads, dh = xl_.head_dim;
    const TensorInfo& qkv = *node_.weights[0];  // [heads.row, d], any storage (cpu/matrix.h)
    // Its rows are the columns of the projected rows: the queries, then the keys and values (k | v, adjacent).
    const HeadLayout heads = xl_.layout();
    TERN_ASSIGN_OR_RETURN(q_, Matrix::create(model, qkv, heads.q, inner, nullptr, inner, node_.label()));
    TERN_ASSIGN_OR_RETURN(kv_, Matrix::create(model, qkv, heads.k, 2 * heads.kv_inner(), nullptr, 2 * heads.kv_inner(),
                                              node_.label()));
    // r(p) for every position a call can read, and scale * r_r_bias . r(p).
    const int64_t P = xl_.position_rows(max_batch_);
    std::vector<float> pe(size_t(P * d));
    xl_.position_encodings(0, P, pe.data());
    // r_net [inner, d] runs once, here, in float32 (a compressed one widened): the packed copy goes when the last
    // session being created at once drops it.
    const TensorInfo& r_net_weight = *node_.weights[1];
    Matrix r_net;
    if (r_net_weight.dtype == fb::DType::F32) {
      TERN_ASSIGN_OR_RETURN(r_net, Matrix::create(model, r_net_weight, nullptr, node_.label()));
    } else {
      TERN_ASSIGN_OR_RETURN(r_net, Matrix::create(model, widened(r_net_weight), nullptr, inner, node_.label()));
    }
    r_.resize(size_t(P * inner));
    TERN_RETURN_IF_ERROR(r_net.run(pool, threads_, pe.data(), P, r_.data(), nullptr, node_.label()));
    vr_.resize(size_t(P * H));
    for (int64_t p = 0; p < P; ++p)
      for (int64_t h = 0; h < H; ++h) {
        double s = 0;
        for (int64_t c = 0; c < dh; ++c) s += double(xl_.r_r_bias[h * dh + c]) * double(r_[size_t(p * inner + h * dh + c)]);
        vr_[size_t(p * H + h)] = float(s * double(xl_.scale));
      }
    memory_.assign(size_t(xl_.mem_len * d), 0.0f);
    return Status::Ok();
  }

  Status run(const RunContext& ctx) override {
    const int64_t n = ctx.n, M = xl_.mem_len, d = xl_.d, inner = xl_.inner(), H = xl_.heads, dh = xl_.head_dim;
    const float* h = ctx.in(node_, 0);  // [n, d]
    Scratch s = scratch(ctx.scratch);
    const int t = ctx.threads;
    // Rows the projections read: [memory; h], normalised for pre-LN.
    const float* mem_rows = memory_.data();
    const float* seg_rows = h;
    if (xl_.pre_norm()) {
      layer_norm(ctx.pool, memory_.data(), M, d, xl_.norm_weight, xl_.norm_bias, xl_.eps, s.norm);
      layer_norm(ctx.pool, h, n, d, xl_.norm_weight, xl_.norm_bias, xl_.eps, s.norm + M * d);
      mem_rows = s.norm;
      seg_rows = s.norm + M * d;
    }
    TERN_RETURN_IF_ERROR(kv_.run(ctx.pool, t, mem_rows, M, s.kv, s.quant, node_.label()));
    TERN_RETURN_IF_ERROR(kv_.run(ctx.pool, t, seg_rows, n, s.kv + M * 2 * inner, s.quant, node_.label()));
    TERN_RETURN_IF_ERROR(q_.run(ctx.pool, t, seg_rows, n, s.q, s.quant, node_.label()));
    const int64_t keys = M + n;
    parallel_for(ctx.pool, size_t(keys), 64, [&](size_t b, size_t e) {
      for (size_t j = b; j < e; ++j)
        for (int64_t hd = 0; hd < H; ++hd) {
          const float* k = s.kv + int64_t(j) * 2 * inner + hd * dh;
          float acc = 0.0f;
          for (int64_t c = 0; c < dh; ++c) acc += xl_.r_w_bias[hd * dh + c] * k[c];
          s.uk[int64_t(j) * H + hd] = acc * xl_.scale;
        }
    });
    XlCall call{&xl_, s.kv, s.q, s.uk, r_.data(), vr_.data(), n, ctx.out(node_, 0), &isa()};
    const int64_t q_blocks = (n + kQueryBlock - 1) / kQueryBlock;
    const int64_t items = q_blocks * H;
    const int slots = int(std::min<int64_t>(threads_, items));
    std::atomic<int64_t> next{0};
    parallel_for(ctx.pool, size_t(slots), 1, [&](size_t b, size_t e) {
      for (size_t slot = b; slot < e; ++slot) {
        Tile tile = tile_at(s.tiles + int64_t(slot) * tile_floats(kTile, xl_.head_dim), kTile, xl_.head_dim);
        for (int64_t item; (item = next.fetch_add(1)) < items;) {
          const int64_t qb = q_blocks - 1 - item / H;  // later rows see more keys: hand them out first
          attend_block(call, int(item % H), qb * kQueryBlock, std::min(n, (qb + 1) * kQueryBlock), tile);
        }
      }
    });
    // memory <- the last M rows of [memory; h] (none when mem_len is 0: the vector is empty, its data() may be null)
    if (M == 0) {
      return Status::Ok();
    } else if (n >= M) {
      std::memcpy(memory_.data(), h + (n - M) * d, size_t(M * d) * sizeof(float));
    } else {
      std::memmove(memory_.data(), memory_.data() + n * d, size_t((M - n) * d) * sizeof(float));
      std::memcpy(memory_.data() + (M - n) * d, h, size_t(n * d) * sizeof(float));
    }
    return Status::Ok();
  }

  void reset() override { std::fill(memory_.begin(), memory_.end(), 0.0f); }
  bool has_state() const override { return xl_.mem_len > 0; }
  uint64_t state_bytes() const override { return memory_.size() * sizeof(float); }
  uint64_t saved_state_bytes(int64_t) const override { return memory_.size() * sizeof(float); }
  void save_state(int64_t, uint8_t* out) const override {
    std::memcpy(out, memory_.data(), memory_.size() * sizeof(float));
  }
  void load_state(int64_t, const uint8_t* in) override { std::memcpy(memory_.data(), in, memory_.size() * sizeof(float)); }
  uint64_t packed_weight_bytes() const override {
    return q_.packed_bytes() + kv_.packed_bytes() + (r_.size() + vr_.size()) * sizeof(float);
  }
  uint64_t scratch_bytes() const override { return uint64_t(scratch_floats()) * sizeof(float); }

 private:
  struct Scratch {
    void* quant;   // the projections' int8 activations (cpu/matrix.h), quant_floats()
    float* norm;   // [M + B, d], pre-LN only
    float* kv;     // [M + B, 2*inner]
    float* q;      // [B, inner]
    float* uk;     // [M + B, H]
    float* tiles;  // threads x tile_floats
  };
  int64_t scratch_floats() const {
    const int64_t K = xl_.mem_len + max_batch_, inner = xl_.inner();
    return quant_floats() + (xl_.pre_norm() ? K * xl_.d : 0) + K * 2 * inner + max_batch_ * inner +
           K * xl_.heads + int64_t(threads_) * tile_floats(kTile, xl_.head_dim);
  }
  // The larger of the projections' scratch (one runs at a time), in whole 64-byte lines of floats.
  int64_t quant_floats() const {
    const uint64_t b = std::max(kv_.scratch_bytes(std::max(xl_.mem_len, max_batch_)), q_.scratch_bytes(max_batch_));
    return int64_t((b + 63) / 64 * 16);
  }
  Scratch scratch(float* base) const {
    const int64_t K = xl_.mem_len + max_batch_, inner = xl_.inner();
    Scratch s;
    s.quant = base;
    s.norm = base + quant_floats();
    s.kv = s.norm + (xl_.pre_norm() ? K * xl_.d : 0);
    s.q = s.kv + K * 2 * inner;
    s.uk = s.q + max_batch_ * inner;
    s.tiles = s.uk + K * xl_.heads;
    return s;
  }

  const Node& node_;
  RelativeXL xl_;
  int threads_;
  int64_t max_batch_;
  Matrix q_, kv_;               // rows [0, inner) and [inner, 3*inner) of qkv
  LargeVector<float> r_;        // [P, inner], r(p)
  LargeVector<float> vr_;       // [P, H], scale * r_r_bias . r(p)
  LargeVector<float> memory_;   // [M, d], the state
};

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_relative_xl_attention(const Node& node, const Model& model,
                                                              const KernelConfig& cfg) {
  TERN_ASSIGN_OR_RETURN(auto xl, RelativeXL::from(node));
  const uint64_t table = uint64_t(xl.position_rows(cfg.max_batch)) * uint64_t(xl.inner()) * sizeof(float);
  if (table > (uint64_t(1) << 40)) return OutOfMemory(node.label() + ": position table of " + std::to_string(table) + " bytes is too large");
  std::unique_ptr<RelativeXLKernel> k(new RelativeXLKernel(node, xl, cfg));
  TERN_RETURN_IF_ERROR(k->init(model, cfg.pool));
  return std::unique_ptr<CpuKernel>(std::move(k));
}

}  // namespace tern::cpu
