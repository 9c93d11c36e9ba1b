// SPDX-License-Identifier: MIT
// ATTENTION of kind Lsh on the CPU (semantics: ops/lsh.h). One head at a time, every phase spread over the threads:
//   1. per position: the key's norm factor rsqrt(mean(qk^2) + eps) and the bucket of every round;
//   2. per round: a counting sort by bucket (stable, so ties stay in position order) into the sorted axis;
//   3. per chunk: gather the window's keys, normalised as they go in (transposed, so scores vectorise across keys),
//      and take each query's float32 log-sum-exp for its round (scores only);
//   4. per position: the rounds' weights, a softmax over their log-sum-exps;
//   5. round by round (each position once per pass, so no two threads share an output row): per chunk, gather
//      again, recompute each query's scores and its round output, and add that times the round's weight into o.
// With one round, 3-5 are one pass that writes each query's output into o. No round's output is kept, so scratch
// is O(n * dh) only for a folded head's qk | v and output, plus O(hashes * n) ints and floats and one
// [dh, window] tile per thread; nothing is n x n.
// With the layer folded in (cpu/lsh_fold.h), each head first gets its qk | v [n, 2*dh] from the layer input x2
// (layer norm and the head's rows of the projection, in blocks of kProjectRows rows), and with the output fold its
// output [n, dh] goes through the head's columns of the output projection and is added into x1's rows.
// A call at position 0 also leaves every head's rows and buckets in the cache (cpu/lsh_cache.h); a later call runs
// its positions one at a time against it, as Hugging Face's cached generation does (ops/lsh.h).
#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <optional>
#include <vector>

#include "cpu/continuation_kernel.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"
#include "cpu/lsh_cache.h"
#include "cpu/lsh_folded_layer.h"
#include "cpu/online_softmax.h"
#include "ops/lsh.h"

namespace tern::cpu {
namespace {

constexpr int64_t kQueryBlock = 32;  // queries per work item on the unchunked path
constexpr int64_t kKeys = kLshKeyBlock;  // keys per register block of scores (cpu/isa/table.h)

// Keys a tile holds: the window, rounded up to whole register blocks.
int64_t tile_width(const LshAttention& a) { return (a.window() + kKeys - 1) / kKeys * kKeys; }

// One thread's tile: the shared tile's key block (cpu/online_softmax.h) holds a window of keys, kt [dh, width]
// with column w the key at wpos[w] (width: the window in whole register blocks), and s [width] one row's scores,
// then exp(s - max); no query rows (a row's softmax is one block, not online). LSH adds:
struct LshTile : Tile {
  int32_t* wpos = nullptr;   // [width]
  float* rotated = nullptr;  // [rot_half]
  float* row = nullptr;      // [dh], one query's output for one round
};

LshTile take_tile(ScratchCarver& scratch, const LshAttention& a) {
  const int64_t W = tile_width(a);
  LshTile t;
  static_cast<Tile&>(t) = Tile::take(scratch, TileShape{0, W, /*key_block=*/true}, a.head_dim);
  t.wpos = scratch.take<int32_t>(W);
  t.rotated = scratch.take(a.rot_half);
  t.row = scratch.take(a.head_dim);
  return t;
}

int64_t tile_words(const LshAttention& a) {
  ScratchCarver count;
  take_tile(count, a);
  return count.words();
}

// Sizes of one call's scratch, in 4-byte words.
struct Layout {
  int64_t n = 0, n_pad = 0, window = 0;
  int64_t key_norm = 0, buckets = 0, order = 0, count = 0, lses = 0;
  int64_t head_qkv = 0, head_out = 0, fold_block = 0;
  int64_t tile = 0;
  Layout(const LshAttention& a, int64_t n_tokens, const LshFoldedLayer* folded)
      : n(n_tokens), n_pad(a.padded_length(n_tokens)), window(tile_width(a)) {
    const int64_t dh = a.head_dim, nh = a.hashes;
    key_norm = n;
    buckets = nh * n;
    order = nh * n_pad;
    count = a.buckets + 1;
    lses = nh * n;
    head_qkv = folded ? n * 2 * dh : 0;
    head_out = folded && folded->folds_output() ? n * dh : 0;
    fold_block = folded ? folded->block_floats(n) : 0;
    tile = tile_words(a);
  }
  int64_t shared() const { return key_norm + buckets + order + count + lses + head_qkv + head_out + fold_block; }
  // Where a folded head's qk | v and the folded layer's block of rows start.
  int64_t head_qkv_at() const { return key_norm + buckets + order + count + lses; }
  int64_t fold_block_at() const { return head_qkv_at() + head_qkv + head_out; }
  int64_t total(int threads) const { return shared() + tile * std::max(threads, 1); }
};

class LshKernel : public ContinuationKernel<LshCache> {
 public:
  LshKernel(const Node& node, const LshAttention& spec, const KernelConfig& cfg,
            std::optional<LshFoldedLayer> folded = std::nullopt)
      : ContinuationKernel(node, spec, cfg, "LSH"),
        a_(spec),
        threads_(cfg.threads),
        max_batch_(cfg.max_batch),
        folded_(std::move(folded)) {}

  Status run(const RunContext& ctx) override {
    if (ctx.n > max_batch_) return InvalidArgument(node_.label() + ": more tokens than the session's max_batch");
    TERN_RETURN_IF_ERROR(check_fits(ctx.pos0, ctx.n));
    if (ctx.pos0 > 0) return run_steps(ctx);
    const Layout lay(a_, ctx.n, folded());
    float* base = ctx.scratch;
    key_norm_ = base;
    bucket_ = reinterpret_cast<int32_t*>(key_norm_ + lay.key_norm);
    order_ = bucket_ + lay.buckets;
    count_ = order_ + lay.order;
    lses_ = reinterpret_cast<float*>(count_ + lay.count);
    float* head_qkv = lses_ + lay.lses;
    float* head_out = head_qkv + lay.head_qkv;
    fold_block_ = head_out + lay.head_out;
    tiles_ = fold_block_ + lay.fold_block;
    tile_words_ = lay.tile;
    if (!folded_ || !folded_->folds_output()) {
      out_ = ctx.out(node_, 0);  // [n, inner]: head h in columns h*dh ..
      out_stride_ = inner();
      out_head_stride_ = a_.head_dim;
    } else {
      out_ = head_out;  // [n, dh]: this head's output, projected and added into x1 after the head runs
      out_stride_ = a_.head_dim;
      out_head_stride_ = 0;
    }
    n_ = ctx.n;
    n_pad_ = lay.n_pad;
    k_ = &isa();
    slots_ = std::min(std::max(ctx.threads, 1), std::max(threads_, 1));  // the tiles the scratch holds
    if (!folded_) {
      const HeadLayout heads = a_.layout();
      qkv_ = ctx.in(node_, 0) + heads.k;  // [n, heads.row]: every head's qk, then every head's v
      row_stride_ = heads.row;
      head_stride_ = a_.head_dim;
      v_offset_ = heads.v - heads.k;
    } else {
      qkv_ = head_qkv;  // [n, 2*dh]: this head's qk | v, made before the head runs
      row_stride_ = 2 * int64_t(a_.head_dim);
      head_stride_ = 0;
      v_offset_ = a_.head_dim;
    }
    const bool chunked = a_.chunked(n_);
    for (int h = 0; h < a_.heads; ++h) {
      if (folded_) TERN_RETURN_IF_ERROR(folded_->project(ctx, h, n_, head_qkv, fold_block_, node_.label()));
      run_head(ctx, h);
      if (caching()) cache_.store_rows(h, 0, n_, qk(h, 0), row_stride_, v_offset_);
      if (caching() && chunked) cache_.store_first_buckets(h, n_, bucket_, n_pad_ > n_);
      if (folded_ && folded_->folds_output()) TERN_RETURN_IF_ERROR(folded_->add_output(ctx, h, n_, out_, fold_block_, node_.label()));
    }
    if (caching()) cache_.finish_first_call(n_, chunked);
    return Status::Ok();
  }

  uint64_t scratch_bytes() const override { return scratch_bytes_for(max_batch_); }
  // Linear in n: one head's key norms, buckets, sort and per-round log-sum-exps (O(hashes * n) words; with a folded
  // input, also its qk | v [n, 2*dh] and a block of normalised rows; with a folded output, its output [n, dh]), plus
  // one tile per thread; and what a later call's steps need (step_words; none in a forward_only session).
  uint64_t scratch_bytes_for(int64_t n) const override {
    return uint64_t(Layout(a_, n, folded()).total(threads_) + (caching() ? step_words(n) : 0)) * 4;
  }
  uint64_t packed_weight_bytes() const override {
    return folded_ ? folded_->packed_bytes() : 0;
  }

 private:
  int64_t inner() const { return int64_t(a_.heads) * a_.head_dim; }
  const LshFoldedLayer* folded() const { return folded_ ? &*folded_ : nullptr; }
  const float* qk(int h, int64_t j) const { return qkv_ + j * row_stride_ + int64_t(h) * head_stride_; }
  const float* value(int h, int64_t j) const { return qk(h, j) + v_offset_; }
  float* out_row(int h, int64_t i) const { return out_ + i * out_stride_ + int64_t(h) * out_head_stride_; }

  int64_t tile_width() const { return cpu::tile_width(a_); }

  // A call after the first: each of its n positions in turn against the cache (HF's cached step, one token at a
  // time; ops/lsh.h). Scratch: the folded projection's (Layout), then the step's, then with a folded output every
  // head's outputs [heads, n, dh].
  int64_t step_words(int64_t n) const {
    return cache_.step_floats() + (folded_ && folded_->folds_output() ? int64_t(a_.heads) * n * a_.head_dim : 0);
  }

  Status run_steps(const RunContext& ctx) {
    const int64_t n = ctx.n, dh = a_.head_dim;
    const Layout lay(a_, n, folded());
    float* head_qkv = ctx.scratch + lay.head_qkv_at();
    float* fold_block = ctx.scratch + lay.fold_block_at();
    float* step_scratch = ctx.scratch + lay.total(threads_);
    float* head_outs = step_scratch + cache_.step_floats();  // [heads, n, dh], with a folded output
    const bool fold_out = folded_ && folded_->folds_output();
    for (int h = 0; h < a_.heads; ++h) {
      if (folded_) {
        TERN_RETURN_IF_ERROR(folded_->project(ctx, h, n, head_qkv, fold_block, node_.label()));
        cache_.store_rows(h, ctx.pos0, n, head_qkv, 2 * dh, dh);
      } else {
        const HeadLayout heads = a_.layout();
        cache_.store_rows(h, ctx.pos0, n, ctx.in(node_, 0) + heads.k_column(h), heads.row, heads.v - heads.k);
      }
    }
    float* out = fold_out ? nullptr : ctx.out(node_, 0);  // [n, inner]
    const IsaKernels& k = isa();
    for (int64_t t = 0; t < n; ++t) {
      cache_.step(k, step_scratch, [&](int h) {
        return fold_out ? head_outs + (int64_t(h) * n + t) * dh : out + t * inner() + int64_t(h) * dh;
      });
    }
    for (int h = 0; fold_out && h < a_.heads; ++h) {
      TERN_RETURN_IF_ERROR(folded_->add_output(ctx, h, n, head_outs + int64_t(h) * n * dh, fold_block, node_.label()));
    }
    return Status::Ok();
  }

  LshTile tile(int slot) const {
    ScratchCarver scratch(tiles_ + int64_t(slot) * tile_words_);
    return take_tile(scratch, a_);
  }

  void run_head(const RunContext& ctx, int h) {
    const int dh = a_.head_dim;
    const int64_t n = n_, nh = a_.hashes;
    const bool chunked = a_.chunked(n);
    // 1. Key norm factors (HF: key = x * rsqrt(mean(x^2) + eps) * dh^-0.5, in float32) and buckets.
    run_slots(ctx.pool, slots_, (n + 63) / 64, [&](int slot, int64_t item) {
      LshTile t = tile(slot);
      for (int64_t j = item * 64; j < std::min(n, (item + 1) * 64); ++j) {
        const float* x = qk(h, j);
        const float ms = k_->dot(x, x, dh) / float(dh);
        key_norm_[j] = 1.0f / std::sqrt(ms + a_.key_norm_eps);
        if (chunked) {
          for (int64_t rnd = 0; rnd < nh; ++rnd) bucket_[rnd * n + j] = int32_t(a_.bucket(h, rnd, x, t.rotated));
        }
      }
    });
    if (!chunked) {
      // One causal softmax over the whole sequence, queries in blocks.
      run_slots(ctx.pool, slots_, (n + kQueryBlock - 1) / kQueryBlock, [&](int slot, int64_t item) {
        LshTile t = tile(slot);
        const int64_t q0 = item * kQueryBlock, q1 = std::min(n, q0 + kQueryBlock);
        for (int64_t j = 0; j < q1; ++j) put_key(h, j, t, j);
        for (int64_t i = q0; i < q1; ++i) attend_row(h, i, t, q1, out_row(h, i));
      });
      return;
    }
    sort_rounds();
    attend_chunks(ctx, h);
  }

  // 2. Counting sort per round: positions by bucket, ties in position order; pads after every bucket.
  void sort_rounds() {
    const int64_t n = n_, B = a_.buckets;
    for (int64_t r = 0; r < a_.hashes; ++r) {
      std::fill(count_, count_ + B + 1, 0);
      const int32_t* b = bucket_ + r * n;
      for (int64_t j = 0; j < n; ++j) ++count_[b[j] + 1];
      for (int64_t k = 0; k < B; ++k) count_[k + 1] += count_[k];
      int32_t* o = order_ + r * n_pad_;
      for (int64_t j = 0; j < n; ++j) o[count_[b[j]]++] = int32_t(j);
      for (int64_t j = n; j < n_pad_; ++j) o[j] = int32_t(j);  // pads: positions >= n
    }
  }

  // 3-5. Chunks of the sorted axis, each against its circular window of neighbouring chunks. n_pad is a multiple of
  // the chunk (LshAttention::from checks pad_to % chunk == 0, and a chunked n is padded to pad_to or is a multiple
  // of it), so every chunk lies in one round and a pass over one round's chunks meets each position once.
  void attend_chunks(const RunContext& ctx, int h) {
    const int dh = a_.head_dim;
    const int64_t n = n_, nh = a_.hashes, C = a_.chunk, per_round = n_pad_ / C;
    assert(n_pad_ % C == 0);
    // Calls visit(tile, keys, i, round) for every query i of chunks [c0, c1), with the chunk's window in the tile.
    auto over_chunks = [&](int64_t c0, int64_t c1, const auto& visit) {
      run_slots(ctx.pool, slots_, c1 - c0, [&](int slot, int64_t item) {
        const int64_t c = c0 + item;
        LshTile t = tile(slot);
        const int64_t w = gather_window(h, c, nh * per_round, t);
        for (int64_t u = c * C; u < (c + 1) * C; ++u) {
          const int64_t i = order_[u];
          if (i < n) visit(t, w, i, u / n_pad_);
        }
      });
    };
    if (nh == 1) {
      over_chunks(0, per_round, [&](const LshTile& t, int64_t w, int64_t i, int64_t) { attend_row(h, i, t, w, out_row(h, i)); });
      return;
    }
    // 3. Each query's log-sum-exp for its round.
    over_chunks(0, nh * per_round, [&](const LshTile& t, int64_t w, int64_t i, int64_t r) {
      lses_[r * n + i] = softmax_row(h, i, t, w).lse;
    });
    // 4. The rounds' weights per position, in place of their lses (HF: exp(lse_r - logsumexp_r(lse_r)), in float32);
    // the head's output rows start at zero.
    run_slots(ctx.pool, slots_, (n + 63) / 64, [&](int, int64_t item) {
      for (int64_t i = item * 64; i < std::min(n, (item + 1) * 64); ++i) {
        lsh_round_weights(lses_ + i, nh, n);
        std::fill(out_row(h, i), out_row(h, i) + dh, 0.0f);
      }
    });
    // 5. Round by round, so that the sum runs over rounds in order: o += out_r * weight_r.
    for (int64_t r = 0; r < nh; ++r) {
      over_chunks(r * per_round, (r + 1) * per_round, [&](const LshTile& t, int64_t w, int64_t i, int64_t) {
        attend_row(h, i, t, w, t.row);
        const float wgt = lses_[r * n + i];
        float* o = out_row(h, i);
        for (int c = 0; c < dh; ++c) o[c] += t.row[c] * wgt;
      });
    }
  }

  // Column w of the tile: position j and its key (HF's float32 x * r * scale, r its norm factor).
  void put_key(int h, int64_t j, const LshTile& t, int64_t w) const {
    const int dh = a_.head_dim;
    const int64_t W = tile_width();
    const float* x = qk(h, j);
    const float r = key_norm_[j];
    t.wpos[w] = int32_t(j);
    for (int c = 0; c < dh; ++c) t.kt[c * W + w] = x[c] * r * a_.scale;
  }

  // The window of chunk c (chunks c - before .. c + after of n_chunks, circular) into the tile, pads left out;
  // returns how many keys it holds.
  int64_t gather_window(int h, int64_t c, int64_t n_chunks, const LshTile& t) const {
    const int64_t C = a_.chunk;
    int64_t w = 0;
    for (int64_t d = -a_.before; d <= a_.after; ++d) {
      const int64_t cc = ((c + d) % n_chunks + n_chunks) % n_chunks;
      for (int64_t u = cc * C; u < (cc + 1) * C; ++u) {
        const int32_t j = order_[u];
        if (j >= n_) continue;  // a pad: no query sees it
        put_key(h, j, t, w++);
      }
    }
    return w;
  }

  // Query position i against the tile's `count` keys; writes out [dh], returns HF's float32 log-sum-exp:
  // out = sum exp(s - lse) v, where exp(s - lse) is taken as exp(s - m) * exp(m - lse) (equal to float32
  // rounding; exactly equal where the row sees only itself, s = m).
  float attend_row(int h, int64_t i, const LshTile& t, int64_t count, float* out) const {
    const RowSoftmax sm = softmax_row(h, i, t, count);
    weigh_values(h, t, count, std::exp(sm.m - sm.lse), out);
    return sm.lse;
  }

  // Query position i's masked scores against the tile's `count` keys, left in t.s as exp(s - m) (0 where masked);
  // returns m and lse = log(sum exp(s - m)) + m.
  RowSoftmax softmax_row(int h, int64_t i, const LshTile& t, int64_t count) const {
    return k_->lsh_softmax_row(qk(h, i), t.kt, tile_width(), t.wpos, count, a_.head_dim, i, a_.self_mask_value, t.s);
  }

  // out [dh] = sum_w t.s[w] * scale * v(t.wpos[w]) over the tile's `count` keys.
  void weigh_values(int h, const LshTile& t, int64_t count, float scale, float* out) const {
    k_->lsh_weigh_values(t.s, t.wpos, count, scale, value(h, 0), row_stride_, a_.head_dim, out);
  }

  LshAttention a_;
  int threads_;
  int64_t max_batch_;
  std::optional<LshFoldedLayer> folded_;  // none: the op reads qk | v [n, 2*inner] and writes o [n, inner]
  // Per call.
  const float* qkv_ = nullptr;  // qk of head h, row j: qkv_ + j * row_stride_ + h * head_stride_; v: + v_offset_
  int64_t row_stride_ = 0, head_stride_ = 0, v_offset_ = 0;
  float* fold_block_ = nullptr;  // folded layer only: its block of rows (LshFoldedLayer::block_floats)
  float* out_ = nullptr;        // head h's output row i: out_ + i * out_stride_ + h * out_head_stride_
  int64_t out_stride_ = 0, out_head_stride_ = 0;
  int64_t n_ = 0, n_pad_ = 0;
  int slots_ = 1;
  const IsaKernels* k_ = nullptr;  // the score and softmax loops (cpu/isa.h)
  float* key_norm_ = nullptr;   // [n], rsqrt(mean(qk_j^2) + eps) of this head
  int32_t* bucket_ = nullptr;   // [hashes, n]
  int32_t* order_ = nullptr;    // [hashes * n_pad], positions along the sorted axis (>= n: pad)
  int32_t* count_ = nullptr;    // [buckets + 1]
  float* lses_ = nullptr;       // [hashes, n]: each round's log-sum-exp, then its weight
  float* tiles_ = nullptr;      // per thread
  int64_t tile_words_ = 0;
};

}  // namespace

namespace {

Result<std::unique_ptr<CpuKernel>> make_lsh(const Node& node, const KernelConfig& cfg, const LshFold* fold,
                                            const Model& model) {
  TERN_ASSIGN_OR_RETURN(auto spec, LshAttention::from(node));
  std::optional<LshFoldedLayer> folded;
  if (fold) {
    TERN_ASSIGN_OR_RETURN(folded, LshFoldedLayer::create(*fold, model, spec.heads, spec.head_dim));
  }
  const uint64_t bytes = uint64_t(Layout(spec, cfg.max_batch, folded ? &*folded : nullptr).total(cfg.threads)) * 4;
  if (bytes > (uint64_t(1) << 40)) return OutOfMemory(node.label() + ": LSH scratch of " + std::to_string(bytes) + " bytes is too large");
  return std::unique_ptr<CpuKernel>(new LshKernel(node, spec, cfg, std::move(folded)));
}

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_lsh_attention(const Node& node, const Model& model, const KernelConfig& cfg) {
  return make_lsh(node, cfg, nullptr, model);
}

Result<std::unique_ptr<CpuKernel>> make_lsh_attention_folded(const Node& node, const LshFold& fold, const Model& model,
                                                             const KernelConfig& cfg) {
  return make_lsh(node, cfg, &fold, model);
}

Result<std::unique_ptr<CpuKernel>> make_folded_away(bool weights_packed) {
  // A node whose work another op's kernel does (cpu/lsh_fold.h): never run. weights_packed: that kernel
  // packed this node's weights (cpu/packed_weights.h), so the session may drop their pages of the file.
  class FoldedAway : public CpuKernel {
   public:
    explicit FoldedAway(bool packed) : packed_(packed) {}
    Status run(const RunContext&) override { return Status(TERN_DEVICE_ERROR, "a folded op was run on its own"); }
    bool weights_packed() const override { return packed_; }

   private:
    bool packed_;
  };
  return std::unique_ptr<CpuKernel>(new FoldedAway(weights_packed));
}

}  // namespace tern::cpu
