// SPDX-License-Identifier: MIT
// ATTENTION of kind Compressive on the CPU (definition: ops/compressive.h).
//
// Per call of n rows: keys and values of [cmem; mem; a] and the queries of a come from two float32 GEMMs
// (cpu/matrix.h) over the row blocks of qkv (the model's packed copy of the weight); attention is blockwise with
// online softmax (a [kQueryBlock, dh] tile per thread). Then the memory takes the call's rows, and the whole groups
// of `rate` rows beyond mem_len are compressed (CONV on cpu/matrix.h, MEAN, MAX) into the compressed memory; only
// the groups that can still be among its last cmem_len rows are computed.
// State: mem [M + rate - 1, d] and cmem [C, d], oldest first, with their row counts; allocated once.
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
#include "ops/compressive.h"

namespace tern::cpu {
namespace {

constexpr int64_t kQueryBlock = 16;
constexpr int64_t kKeyBlock = 64;

// Per-slot scratch: query rows and one row's scores (cpu/online_softmax.h); keys are read in place.
constexpr TileShape kTile{kQueryBlock, kKeyBlock};

// One head, query rows [r0, r1): row r sees keys [0, P + r] of kv [P + n, 2*inner].
void attend_block(const IsaKernels& kernels, const float* kv, const float* q, int64_t P, int64_t inner, int dh, int h,
                  float scale, int64_t r0, int64_t r1, const Tile& t, float* out) {
  const int64_t rows = r1 - r0;
  for (int64_t r = 0; r < rows; ++r) t.start_row(r, q + (r0 + r) * inner + int64_t(h) * dh, scale, dh);
  const int64_t last = P + r1 - 1;
  for (int64_t j0 = 0; j0 <= last; j0 += kKeyBlock) {
    const int64_t j1 = std::min(j0 + kKeyBlock, last + 1);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t hi = std::min(j1, P + r0 + r + 1);
      if (j0 >= hi) continue;
      kernels.strided_update_row(t.q + r * dh, dh, kv + j0 * 2 * inner + int64_t(h) * dh, 2 * inner, inner, hi - j0,
                                 t.s, &t.m[r], &t.l[r], t.acc + r * dh);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {  // every query sees itself: l > 0
    t.write_row(r, 1.0f / t.l[r], dh, out + (r0 + r) * inner + int64_t(h) * dh);
  }
}

class CompressiveKernel : public CpuKernel {
 public:
  CompressiveKernel(const Node& node, const Compressive& c, const KernelConfig& cfg)
      : node_(node),
        c_(c),
        threads_(std::max(cfg.threads, 1)),
        max_batch_(cfg.max_batch),
        mem_(large_vector<float>(cfg.buffers)),
        cmem_(large_vector<float>(cfg.buffers)) {}

  Status init(const Model& model) {
    const int64_t inner = c_.inner(), d = c_.d;
    const TensorInfo& qkv = *node_.weights[0];  // [heads.row, d], any storage (cpu/matrix.h)
    // Its rows are the columns of the projected rows: the queries, then the keys and values (k | v, adjacent).
    const HeadLayout heads = c_.layout();
    const int64_t kv_rows = 2 * heads.kv_inner();
    TERN_ASSIGN_OR_RETURN(q_, Matrix::create(model, qkv, heads.q, inner, c_.qkv_bias ? c_.qkv_bias + heads.q : nullptr,
                                             inner, node_.label()));
    TERN_ASSIGN_OR_RETURN(kv_, Matrix::create(model, qkv, heads.k, kv_rows,
                                              c_.qkv_bias ? c_.qkv_bias + heads.k : nullptr, kv_rows, node_.label()));
    if (c_.compression == fb::Compression::CONV) {
      // [d, rate*d]
      TERN_ASSIGN_OR_RETURN(conv_, Matrix::create(model, *node_.weights[2], c_.conv_bias, node_.label()));
    }
    mem_.assign(size_t(c_.mem_capacity() * d), 0.0f);
    cmem_.assign(size_t(c_.cmem_len * d), 0.0f);
    return Status::Ok();
  }

  Status run(const RunContext& ctx) override {
    const int64_t n = ctx.n, d = c_.d, inner = c_.inner(), H = c_.heads;
    const float* a = ctx.in(node_, 0);  // [n, d]
    void* quant = ctx.scratch;                                 // the projections' int8 activations (cpu/matrix.h)
    float* kv = ctx.scratch + quant_floats();                  // [C + M + rate - 1 + B, 2*inner]
    float* q = kv + key_rows() * 2 * inner;                    // [B, inner]
    float* groups = q + max_batch_ * inner;                    // [C, rate*d]
    float* compressed = groups + c_.cmem_len * c_.rate * d;    // [C, d]
    float* tiles = compressed + c_.cmem_len * d;
    const int64_t P = cmem_n_ + mem_n_;
    const int t = ctx.threads;
    TERN_RETURN_IF_ERROR(kv_.run(ctx.pool, t, cmem_.data(), cmem_n_, kv, quant, node_.label()));
    TERN_RETURN_IF_ERROR(kv_.run(ctx.pool, t, mem_.data(), mem_n_, kv + cmem_n_ * 2 * inner, quant, node_.label()));
    TERN_RETURN_IF_ERROR(kv_.run(ctx.pool, t, a, n, kv + P * 2 * inner, quant, node_.label()));
    TERN_RETURN_IF_ERROR(q_.run(ctx.pool, t, a, n, q, quant, node_.label()));
    float* out = ctx.out(node_, 0);
    const int64_t q_blocks = (n + kQueryBlock - 1) / kQueryBlock, items = q_blocks * H;
    const IsaKernels& kernels = isa();
    const int slots = int(std::min<int64_t>(threads_, items));
    std::atomic<int64_t> next{0};
    parallel_for(ctx.pool, size_t(slots), 1, [&](size_t b, size_t e) {
      for (size_t slot = b; slot < e; ++slot) {
        Tile tile = tile_at(tiles + int64_t(slot) * tile_floats(kTile, c_.head_dim), kTile, c_.head_dim);
        for (int64_t item; (item = next.fetch_add(1)) < items;) {
          const int64_t qb = q_blocks - 1 - item / H;
          attend_block(kernels, kv, q, P, inner, c_.head_dim, int(item % H), c_.scale, qb * kQueryBlock,
                       std::min(n, (qb + 1) * kQueryBlock), tile, out);
        }
      }
    });
    return update(a, n, groups, compressed, ctx.pool, t, quant);
  }

  void reset() override { mem_n_ = cmem_n_ = 0; }
  bool has_state() const override { return true; }
  uint64_t state_bytes() const override { return (mem_.size() + cmem_.size()) * sizeof(float); }
  // Saved as ops/compressive.h lays it out (Compressive::saved_bytes).
  uint64_t saved_state_bytes(int64_t) const override { return c_.saved_bytes(); }
  uint64_t saved_count_bytes(int64_t) const override { return Compressive::kSavedCountBytes; }  // mem_n_, cmem_n_
  void save_state(int64_t, uint8_t* out) const override {
    std::memcpy(out, &mem_n_, sizeof mem_n_);
    std::memcpy(out + sizeof mem_n_, &cmem_n_, sizeof cmem_n_);
    std::memcpy(out + c_.saved_mem_at(), mem_.data(), c_.mem_bytes());
    std::memcpy(out + c_.saved_cmem_at(), cmem_.data(), c_.cmem_bytes());
  }
  void load_state(int64_t, const uint8_t* in) override {
    std::memcpy(&mem_n_, in, sizeof mem_n_);
    std::memcpy(&cmem_n_, in + sizeof mem_n_, sizeof cmem_n_);
    mem_n_ = std::clamp<int64_t>(mem_n_, 0, c_.mem_capacity());  // a checksummed blob never needs this; a forged one
    cmem_n_ = std::clamp<int64_t>(cmem_n_, 0, c_.cmem_len);      // cannot send the kernel out of its buffers
    std::memcpy(mem_.data(), in + c_.saved_mem_at(), c_.mem_bytes());
    std::memcpy(cmem_.data(), in + c_.saved_cmem_at(), c_.cmem_bytes());
  }
  uint64_t packed_weight_bytes() const override { return q_.packed_bytes() + kv_.packed_bytes() + conv_.packed_bytes(); }
  uint64_t scratch_bytes() const override {
    const int64_t d = c_.d, inner = c_.inner();
    return uint64_t(quant_floats() + key_rows() * 2 * inner + max_batch_ * inner + c_.cmem_len * c_.rate * d +
                    c_.cmem_len * d + int64_t(threads_) * tile_floats(kTile, c_.head_dim)) * sizeof(float);
  }

 private:
  int64_t key_rows() const { return c_.cmem_len + c_.mem_capacity() + max_batch_; }
  // The largest of the projections' scratch (one runs at a time), in whole 64-byte lines of floats.
  int64_t quant_floats() const {
    const int64_t rows = std::max({c_.cmem_len, c_.mem_capacity(), max_batch_});
    const uint64_t b = std::max({kv_.scratch_bytes(rows), q_.scratch_bytes(max_batch_), conv_.scratch_bytes(c_.cmem_len)});
    return int64_t((b + 63) / 64 * 16);
  }

  // mem ++ a, then whole groups beyond mem_len compressed into cmem (its last C rows kept).
  Status update(const float* a, int64_t n, float* groups, float* compressed, pthreadpool_t pool, int threads,
                void* quant) {
    const int64_t d = c_.d, rate = c_.rate, C = c_.cmem_len, total = mem_n_ + n;
    const int64_t e = std::max<int64_t>(0, total - c_.mem_len) / rate * rate;
    const int64_t g = e / rate, count = std::min(g, C), g0 = g - count;
    // Row t of mem ++ a.
    auto row = [&](int64_t t) { return t < mem_n_ ? mem_.data() + t * d : a + (t - mem_n_) * d; };
    for (int64_t k = 0; k < count; ++k)
      for (int64_t t = 0; t < rate; ++t)
        std::memcpy(groups + (k * rate + t) * d, row((g0 + k) * rate + t), size_t(d) * sizeof(float));
    if (c_.compression == fb::Compression::CONV) {
      TERN_RETURN_IF_ERROR(conv_.run(pool, threads, groups, count, compressed, quant, node_.label()));
    } else {
      for (int64_t k = 0; k < count; ++k) {
        const float* gk = groups + k * rate * d;
        float* o = compressed + k * d;
        for (int64_t x = 0; x < d; ++x) {
          float v = gk[x];
          if (c_.compression == fb::Compression::MAX_POOL) {
            for (int64_t t = 1; t < rate; ++t) v = std::max(v, gk[t * d + x]);
          } else {
            double sum = 0;
            for (int64_t t = 0; t < rate; ++t) sum += double(gk[t * d + x]);
            v = float(sum / double(rate));
          }
          o[x] = v;
        }
      }
    }
    // cmem <- last C rows of cmem ++ compressed
    const int64_t drop = std::max<int64_t>(0, cmem_n_ + count - C);
    if (drop > 0) {
      std::memmove(cmem_.data(), cmem_.data() + drop * d, size_t((cmem_n_ - drop) * d) * sizeof(float));
      cmem_n_ -= drop;
    }
    std::memcpy(cmem_.data() + cmem_n_ * d, compressed, size_t(count * d) * sizeof(float));
    cmem_n_ += count;
    // mem <- rows [e, total) of mem ++ a
    if (e < mem_n_) {
      std::memmove(mem_.data(), mem_.data() + e * d, size_t((mem_n_ - e) * d) * sizeof(float));
      std::memcpy(mem_.data() + (mem_n_ - e) * d, a, size_t(n * d) * sizeof(float));
    } else {
      std::memcpy(mem_.data(), a + (e - mem_n_) * d, size_t((total - e) * d) * sizeof(float));
    }
    mem_n_ = total - e;
    return Status::Ok();
  }

  const Node& node_;
  Compressive c_;
  int threads_;
  int64_t max_batch_;
  Matrix q_, kv_, conv_;  // rows [0, inner) and [inner, 3*inner) of qkv; conv_weight
  LargeVector<float> mem_;   // [M + rate - 1, d], the first mem_n_ rows in use
  LargeVector<float> cmem_;  // [C, d], the first cmem_n_ rows in use
  int64_t mem_n_ = 0, cmem_n_ = 0;
};

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_compressive_attention(const Node& node, const Model& model,
                                                              const KernelConfig& cfg) {
  TERN_ASSIGN_OR_RETURN(auto c, Compressive::from(node));
  std::unique_ptr<CompressiveKernel> k(new CompressiveKernel(node, c, cfg));
  TERN_RETURN_IF_ERROR(k->init(model));
  return std::unique_ptr<CpuKernel>(std::move(k));
}

}  // namespace tern::cpu
