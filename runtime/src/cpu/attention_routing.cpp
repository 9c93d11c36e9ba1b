// SPDX-License-Identifier: MIT
// ATTENTION of kind Routing on the CPU (semantics: ops/routing.h). One head at a time, each phase spread over the
// threads:
//   local head:   per chunk, gather the chunk's and the previous chunk's keys and attend each query of the chunk;
//   routing head: 1. per position, the normalised query and key;
//                 2. per cluster, its w queries and w keys (ops/routing.h's routing_scores / routing_top, so the
//                    reference kernel picks the same members), then every member query attends the cluster's keys at
//                    positions <= its own, into the cluster's output rows;
//                 3. the cluster outputs summed at their query positions (one thread: clusters share positions),
//                    then each row divided by its cluster count + count_eps.
// Scratch: the normalised queries and keys [n, dh] each, the cluster outputs [K, w, dh], the member lists and per
// thread one tile (scores [n], sort order [n], a transposed key block and a value block). Nothing is n x n.
// A first call also fills the cache a later call continues from (cpu/routing_cache.h), whose positions then run one
// at a time (ops/routing.h, "Continuing a sequence"); a forward_only session keeps none.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "cpu/continuation_kernel.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/online_softmax.h"
#include "cpu/parallel.h"
#include "cpu/routing_cache.h"
#include "ops/routing.h"

namespace tern::cpu {
namespace {

constexpr int64_t kRowBlock = 64;  // positions per work item when normalising

// One thread's working memory: the shared tile's key block (cpu/online_softmax.h) holds a cluster's keys or a local
// chunk's window, kt [dh, tile_keys] with column t key t of the block, and s [tile_keys] one query's scores, then
// their exponentials; no query rows (a query's softmax is one block, not online). Routing adds:
struct RoutingTile : Tile {
  float* scores = nullptr;   // [n]
  int32_t* order = nullptr;  // [n]
  float* values = nullptr;   // [tile_keys, dh]
};

RoutingTile take_tile(ScratchCarver& scratch, int64_t n, int64_t tile_keys, int dh) {
  RoutingTile t;
  t.scores = scratch.take(n);
  t.order = scratch.take<int32_t>(n);
  static_cast<Tile&>(t) = Tile::take(scratch, TileShape{0, tile_keys, /*key_block=*/true}, dh);
  t.values = scratch.take(tile_keys * dh);
  return t;
}

// Sizes of one call's scratch, in 4-byte words.
struct Layout {
  int64_t n = 0, w = 0, tile_keys = 0;
  int64_t normalised = 0, counts = 0, members = 0, outputs = 0, tile = 0;
  Layout(const RoutingAttention& a, int64_t n_tokens) : n(n_tokens), w(a.members(n_tokens)) {
    const int64_t dh = a.head_dim;
    // A tile holds a cluster's keys or a local chunk's window (its chunk and the one before).
    tile_keys = std::max(w, a.local_heads > 0 ? std::min(n, 2 * a.local_chunk) : int64_t(0));
    normalised = 2 * n * dh;
    counts = n;
    members = 2 * a.clusters * w;
    outputs = a.clusters * w * dh;
    ScratchCarver count;
    take_tile(count, n, tile_keys, int(dh));
    tile = count.words();
  }
  int64_t total(int threads) const { return normalised + counts + members + outputs + tile * std::max(threads, 1); }
};

class RoutingKernel : public ContinuationKernel<RoutingCache> {
 public:
  RoutingKernel(const Node& node, const RoutingAttention& spec, const KernelConfig& cfg)
      : ContinuationKernel(node, spec, cfg, "routing"), a_(spec), heads_(spec.layout()), threads_(cfg.threads),
        max_batch_(cfg.max_batch) {}

  Status run(const RunContext& ctx) override {
    if (ctx.n > max_batch_) return InvalidArgument(node_.label() + ": more tokens than the session's max_batch");
    TERN_RETURN_IF_ERROR(check_fits(ctx.pos0, ctx.n));
    if (ctx.pos0 > 0) {  // each position alone against the cache
      const IsaKernels& k = isa();
      for (int64_t i = 0; i < ctx.n; ++i) {
        cache_.step(k, ctx.in(node_, 0) + i * heads_.row, ctx.scratch, ctx.out(node_, 0) + i * heads_.inner());
      }
      return Status::Ok();
    }
    if (caching()) cache_.reset();
    lay_ = Layout(a_, ctx.n);
    qn_ = ctx.scratch;
    kn_ = qn_ + lay_.n * a_.head_dim;
    counts_ = kn_ + lay_.n * a_.head_dim;
    q_members_ = reinterpret_cast<int32_t*>(counts_ + lay_.counts);
    k_members_ = q_members_ + a_.clusters * lay_.w;
    outputs_ = reinterpret_cast<float*>(k_members_ + a_.clusters * lay_.w);
    tiles_ = outputs_ + lay_.outputs;
    qkv_ = ctx.in(node_, 0);
    out_ = ctx.out(node_, 0);
    slots_ = std::min(std::max(ctx.threads, 1), std::max(threads_, 1));  // the tiles the scratch holds
    k_ = &isa();
    for (int h = 0; h < a_.local_heads; ++h) run_local_head(ctx, h);
    for (int h = a_.local_heads; h < a_.heads; ++h) run_routing_head(ctx, h);
    if (caching()) cache_.finish_first_call(ctx.n);
    return Status::Ok();
  }

  uint64_t scratch_bytes() const override { return scratch_bytes_for(max_batch_); }
  // Linear in n: the normalised queries and keys and the per-thread score rows; the rest depends on K and w only.
  // A later call's steps reuse it (at least step_floats).
  uint64_t scratch_bytes_for(int64_t n) const override {
    const int64_t step = caching() ? cache_.step_floats() : 0;
    return uint64_t(std::max(Layout(a_, n).total(threads_), step)) * 4;
  }

 private:
  const float* query(int h, int64_t i) const { return qkv_ + i * heads_.row + heads_.q_column(h); }
  const float* key(int h, int64_t j) const { return qkv_ + j * heads_.row + heads_.k_column(h); }
  const float* value(int h, int64_t j) const { return qkv_ + j * heads_.row + heads_.v_column(h); }
  float* out_row(int h, int64_t i) const { return out_ + i * heads_.inner() + heads_.out_column(h); }

  RoutingTile tile(int slot) const {
    ScratchCarver scratch(tiles_ + int64_t(slot) * lay_.tile);
    return take_tile(scratch, lay_.n, lay_.tile_keys, a_.head_dim);
  }

  // Block `t` of keys (positions pos[0..count), ascending) into the tile: keys transposed, values as rows.
  void load_block(const RoutingTile& t, int64_t count, const int32_t* pos, int h, const float* keys_or_null) const {
    const int dh = a_.head_dim;
    const int64_t K = lay_.tile_keys;
    for (int64_t b = 0; b < count; ++b) {
      const float* k = keys_or_null ? keys_or_null + int64_t(pos[b]) * dh : key(h, pos[b]);
      for (int c = 0; c < dh; ++c) t.kt[c * K + b] = k[c];
      std::memcpy(t.values + b * dh, value(h, pos[b]), size_t(dh) * sizeof(float));
    }
  }

  // Softmax of query q over the first `visible` keys of the tile, into o [dh]; zeros when none is visible.
  void attend(const RoutingTile& t, const float* q, int64_t visible, float* o) const {
    k_->routing_attend(t.kt, lay_.tile_keys, t.values, a_.head_dim, q, a_.scale, visible, t.s, o);
  }

  void run_local_head(const RunContext& ctx, int h) {
    const int64_t n = lay_.n, C = a_.local_chunk, chunks = (n + C - 1) / C;
    run_slots(ctx.pool, slots_, chunks, [&](int slot, int64_t chunk) {
      RoutingTile t = tile(slot);
      const int64_t lo = std::max<int64_t>(0, (chunk - 1) * C), q0 = chunk * C, q1 = std::min(n, q0 + C);
      for (int64_t j = lo; j < q1; ++j) t.order[j - lo] = int32_t(j);
      load_block(t, q1 - lo, t.order, h, nullptr);
      for (int64_t i = q0; i < q1; ++i) attend(t, query(h, i), i - lo + 1, out_row(h, i));
    });
    if (caching()) cache_.store_local(h, n, key(h, 0), value(h, 0), heads_.row);
  }

  void run_routing_head(const RunContext& ctx, int h) {
    const int dh = a_.head_dim;
    const int64_t n = lay_.n, w = lay_.w;
    const int r = h - a_.local_heads;
    // 1. Normalised queries and keys.
    run_slots(ctx.pool, slots_, (n + kRowBlock - 1) / kRowBlock, [&](int, int64_t item) {
      for (int64_t i = item * kRowBlock; i < std::min(n, (item + 1) * kRowBlock); ++i) {
        routing_normalize(query(h, i), dh, a_.norm_eps, qn_ + i * dh);
        routing_normalize(key(h, i), dh, a_.norm_eps, kn_ + i * dh);
      }
    });
    // 2. Members and outputs of each cluster.
    run_slots(ctx.pool, slots_, a_.clusters, [&](int slot, int64_t c) {
      RoutingTile t = tile(slot);
      const float* mu = a_.centroid(r, c);
      int32_t* qm = q_members_ + c * w;
      int32_t* km = k_members_ + c * w;
      routing_scores(qn_, n, dh, mu, t.scores);
      routing_top(t.scores, n, w, t.order, qm);
      if (caching()) cache_.store_queries(r, c, w, qm, t.scores);
      routing_scores(kn_, n, dh, mu, t.scores);
      routing_top(t.scores, n, w, t.order, km);
      if (caching()) cache_.store_keys(r, c, w, km, t.scores, kn_, value(h, 0), heads_.row);
      load_block(t, w, km, h, kn_);
      int64_t visible = 0;  // keys at positions <= the query's: a prefix, as both lists ascend
      for (int64_t m = 0; m < w; ++m) {
        while (visible < w && km[visible] <= qm[m]) ++visible;
        attend(t, qn_ + int64_t(qm[m]) * dh, visible, outputs_ + (c * w + m) * dh);
      }
    });
    // 3. Sum at the query positions, then divide by count + count_eps.
    for (int64_t i = 0; i < n; ++i) std::fill(out_row(h, i), out_row(h, i) + dh, 0.0f);
    std::fill(counts_, counts_ + n, 0.0f);
    for (int64_t c = 0; c < a_.clusters; ++c) {
      for (int64_t m = 0; m < w; ++m) {
        const int32_t i = q_members_[c * w + m];
        const float* o = outputs_ + (c * w + m) * dh;
        float* dst = out_row(h, i);
        for (int d = 0; d < dh; ++d) dst[d] += o[d];
        counts_[i] += 1.0f;
      }
    }
    parallel_for(ctx.pool, size_t(n), size_t(kRowBlock), [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        const float inv = 1.0f / (counts_[i] + a_.count_eps);
        float* dst = out_row(h, int64_t(i));
        for (int d = 0; d < dh; ++d) dst[d] *= inv;
      }
    });
  }

  RoutingAttention a_;
  HeadLayout heads_;  // where qkv rows hold each head
  int threads_ = 1;
  int64_t max_batch_ = 0;
  Layout lay_{a_, 0};
  const float* qkv_ = nullptr;  // [n, heads_.row]
  float* out_ = nullptr;        // [n, heads_.inner()]
  int slots_ = 1;
  const IsaKernels* k_ = nullptr;  // the score and softmax loops (cpu/isa.h)
  float* qn_ = nullptr;            // [n, dh], normalised queries of the head
  float* kn_ = nullptr;            // [n, dh], normalised keys
  float* counts_ = nullptr;        // [n], clusters each query joined
  int32_t* q_members_ = nullptr;   // [K, w], positions ascending
  int32_t* k_members_ = nullptr;   // [K, w]
  float* outputs_ = nullptr;       // [K, w, dh], one row per member query
  float* tiles_ = nullptr;         // per thread
};

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_routing_attention(const Node& node, const Model&, const KernelConfig& cfg) {
  TERN_ASSIGN_OR_RETURN(auto spec, RoutingAttention::from(node));
  const uint64_t bytes = uint64_t(Layout(spec, cfg.max_batch).total(cfg.threads)) * 4;
  if (bytes > (uint64_t(1) << 40)) {
    return OutOfMemory(node.label() + ": routing scratch of " + std::to_string(bytes) + " bytes is too large");
  }
  const uint64_t cache = cfg.forward_only ? 0 : spec.cache_bytes(cfg.max_tokens);
  if (cache > (uint64_t(1) << 40)) {
    return OutOfMemory(node.label() + ": a routing cache of " + std::to_string(cache) + " bytes for " +
                       std::to_string(cfg.max_tokens) + " positions is too large");
  }
  return std::unique_ptr<CpuKernel>(new RoutingKernel(node, spec, cfg));
}

}  // namespace tern::cpu
