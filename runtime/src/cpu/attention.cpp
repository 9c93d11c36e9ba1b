// Causal attention on the CPU for every pattern, blockwise with online softmax (Flash-style): per thread only a
// [kQueryBlock, kKeyBlock] score tile exists, never an [n, T] matrix, and keys a pattern hides are never read.
// Keys of this call come from the qkv input; older ones from the op's KvStore.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/kv_store.h"
#include "cpu/parallel.h"
#include "ops/op.h"

namespace tern::cpu {
namespace {

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = kAttentionKeyBlock;  // keys per transposed block (cpu/isa/table.h)

// Per-slot scratch layout, in floats.
struct Tile {
  float* q;    // [kQueryBlock, dh], scaled queries
  float* acc;  // [kQueryBlock, dh], running sum of p * v
  float* kt;   // [dh, kKeyBlock], one key block transposed, so scores vectorise across keys
  float* s;    // [kKeyBlock], scores of one row against one key block
  float* m;    // [kQueryBlock], running max
  float* l;    // [kQueryBlock], running sum of p
};

int64_t tile_floats(int head_dim) {
  return 2 * kQueryBlock * head_dim + int64_t(head_dim) * kKeyBlock + kKeyBlock + 2 * kQueryBlock;
}

Tile tile_at(float* base, int head_dim) {
  Tile t;
  t.q = base;
  t.acc = t.q + kQueryBlock * head_dim;
  t.kt = t.acc + kQueryBlock * head_dim;
  t.s = t.kt + int64_t(head_dim) * kKeyBlock;
  t.m = t.s + kKeyBlock;
  t.l = t.m + kQueryBlock;
  return t;
}

// Where head h's key and value rows for a position live during one call.
struct KeySource {
  const float* qkv;  // [n, 3*inner]
  int64_t inner, pos0;
  const KvStore* store;
  const float* key(int h, int64_t j, int dh) const {
    return j >= pos0 ? qkv + (j - pos0) * 3 * inner + inner + int64_t(h) * dh : store->key(h, j);
  }
  const float* value(int h, int64_t j, int dh) const {
    return j >= pos0 ? qkv + (j - pos0) * 3 * inner + 2 * inner + int64_t(h) * dh : store->value(h, j);
  }
};

struct AttentionCall {
  const AttentionPattern* pattern;
  KeySource src;
  const float* q;  // [n, q_stride]
  int64_t q_stride, n;
  int heads, dh;
  float scale;
  float* out;  // [n, heads*dh]
  const IsaKernels* kernels;  // the score and softmax loops (cpu/isa.h)
};

// A single query row's keys split across threads (split-K): part `index` of `count` of its contiguous run, in
// whole key blocks; part 0 also takes the scattered keys.
struct KeyPart {
  int index = 0, count = 1;
};
// Generation splits a head's keys only where each part gets at least this many key blocks: below it, waking a
// thread and merging cost more than the part saves.
constexpr int64_t kMinBlocksPerPart = 4;

// One head, query rows [r0, r1) of the call, normalised into the output; or, with `partial` (one row, a part of
// its keys), that part's softmax sums {m, l, acc [dh]} into partial [dh + 2], for merge_parts.
void attend_block(const AttentionCall& a, int h, int64_t r0, int64_t r1, const Tile& t, KeyPart part = {},
                  float* partial = nullptr) {
  const int dh = a.dh;
  const int64_t rows = r1 - r0, pos0 = a.src.pos0;
  const float* kp[kKeyBlock];
  const float* vp[kKeyBlock];
  int64_t lo[kQueryBlock], hi[kQueryBlock];  // per row, the keys of a block it sees
  for (int64_t r = 0; r < rows; ++r) {
    const float* qi = a.q + (r0 + r) * a.q_stride + int64_t(h) * dh;
    for (int c = 0; c < dh; ++c) t.q[r * dh + c] = qi[c] * a.scale;
    std::fill(t.acc + r * dh, t.acc + (r + 1) * dh, 0.0f);
    t.m[r] = -INFINITY;
    t.l[r] = 0.0f;
  }
  // Fixed's summaries below the block's first local run are the same for every row: tile them like a contiguous run.
  int64_t shared_below = 0;
  const bool scattered = part.index == 0 && a.pattern->has_scattered(h);
  if (a.pattern->kind == PatternKind::kFixed && scattered) {
    shared_below = a.pattern->local_lo(h, pos0 + r0);  // local_lo never decreases with i
    int64_t width = 0;
    auto flush = [&] {
      for (int64_t r = 0; r < rows; ++r) lo[r] = 0, hi[r] = width;
      a.kernels->attend_tile(t.q, rows, t.kt, vp, lo, hi, dh, t.m, t.l, t.acc);
      width = 0;
    };
    a.pattern->scattered(h, pos0 + r0, shared_below, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        const float* k = a.src.key(h, j, dh);
        for (int c = 0; c < dh; ++c) t.kt[c * kKeyBlock + width] = k[c];
        vp[width] = a.src.value(h, j, dh);
        if (++width == kKeyBlock) flush();
      }
    });
    if (width > 0) flush();
  }
  // Other scattered keys (strided's every l-th, the rest of fixed's summaries), row by row, in batches of kKeyBlock.
  if (scattered) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = pos0 + r0 + r;
      int64_t count = 0;
      auto flush = [&] {
        a.kernels->attend_keys(t.q + r * dh, kp, vp, count, dh, t.s, &t.m[r], &t.l[r], t.acc + r * dh);
        count = 0;
      };
      a.pattern->scattered(h, i, a.pattern->local_lo(h, i), [&](int64_t begin, int64_t end) {
        for (int64_t j = std::max(begin, shared_below); j < end; ++j) {
          kp[count] = a.src.key(h, j, dh);
          vp[count] = a.src.value(h, j, dh);
          if (++count == kKeyBlock) flush();
        }
      });
      if (count > 0) flush();
    }
  }
  // The contiguous run [local_lo(i), i] of every row, over the union of the block's runs.
  const int64_t first = a.pattern->local_lo(h, pos0 + r0), last = pos0 + r1 - 1;
  const int64_t blocks = (last - first) / kKeyBlock + 1;
  const int64_t part_end = std::min(last + 1, first + blocks * (part.index + 1) / part.count * kKeyBlock);
  for (int64_t j0 = first + blocks * part.index / part.count * kKeyBlock; j0 < part_end; j0 += kKeyBlock) {
    const int64_t j1 = std::min(j0 + kKeyBlock, last + 1);  // exclusive
    const int64_t width = j1 - j0;
    if (rows == 1) {  // one query (generation) reads the keys in place: a transposed block would cost as much
      for (int64_t j = j0; j < j1; ++j) {
        kp[j - j0] = a.src.key(h, j, dh);
        vp[j - j0] = a.src.value(h, j, dh);
      }
      a.kernels->attend_keys(t.q, kp, vp, width, dh, t.s, t.m, t.l, t.acc);
      continue;
    }
    for (int64_t j = j0; j < j1; ++j) {
      const float* k = a.src.key(h, j, dh);
      for (int c = 0; c < dh; ++c) t.kt[c * kKeyBlock + (j - j0)] = k[c];
      vp[j - j0] = a.src.value(h, j, dh);
    }
    if (width < kKeyBlock) {  // a short last block: the tile scores the unused columns too (no row uses them)
      for (int c = 0; c < dh; ++c) std::fill(t.kt + c * kKeyBlock + width, t.kt + (c + 1) * kKeyBlock, 0.0f);
    }
    for (int64_t r = 0; r < rows; ++r) {  // the keys of the block row r sees (none when lo >= hi)
      const int64_t i = pos0 + r0 + r;
      lo[r] = std::max(j0, a.pattern->local_lo(h, i)) - j0;
      hi[r] = std::min(j1, i + 1) - j0;
    }
    a.kernels->attend_tile(t.q, rows, t.kt, vp, lo, hi, dh, t.m, t.l, t.acc);
  }
  if (partial) {
    partial[0] = t.m[0];
    partial[1] = t.l[0];
    std::copy(t.acc, t.acc + dh, partial + 2);
    return;
  }
  const int64_t out_stride = int64_t(a.heads) * dh;
  for (int64_t r = 0; r < rows; ++r) {
    float* o = a.out + (r0 + r) * out_stride + int64_t(h) * dh;
    const float inv = 1.0f / t.l[r];  // every row sees at least itself
    for (int c = 0; c < dh; ++c) o[c] = t.acc[r * dh + c] * inv;
  }
}

// Into how many parts generation splits each head's keys: one, unless a single query row has fewer heads than
// threads and a cache long enough for kMinBlocksPerPart blocks a part (heads * parts < 2 * threads).
int key_parts(const AttentionCall& call, int threads) {
  if (call.n != 1 || threads <= call.heads) return 1;
  const int64_t i = call.src.pos0;
  const int64_t blocks = (i - call.pattern->local_lo(0, i)) / kKeyBlock + 1;
  const int64_t wanted = (threads + call.heads - 1) / call.heads;
  return int(std::max<int64_t>(1, std::min(wanted, blocks / kMinBlocksPerPart)));
}

// One row's output [dh] from its key parts' softmax sums {m, l, acc [dh]}, each rescaled to the largest m.
void merge_parts(const float* partials, int parts, int dh, float* out) {
  const int64_t stride = int64_t(dh) + 2;
  float m = -INFINITY;
  for (int p = 0; p < parts; ++p) m = std::max(m, partials[p * stride]);
  float l = 0.0f;
  std::fill(out, out + dh, 0.0f);
  for (int p = 0; p < parts; ++p) {
    const float* part = partials + p * stride;
    const float w = part[0] == -INFINITY ? 0.0f : std::exp(part[0] - m);  // a part with no keys adds nothing
    l += w * part[1];
    for (int c = 0; c < dh; ++c) out[c] += w * part[2 + c];
  }
  const float inv = 1.0f / l;  // the row sees at least itself, in the last part
  for (int c = 0; c < dh; ++c) out[c] *= inv;
}

void run_attention(pthreadpool_t pool, int threads, const AttentionCall& call, float* scratch) {
  const int parts = key_parts(call, threads);
  if (parts > 1) {  // split-K: (head, part) items, then each head's merge
    float* partials = scratch + int64_t(std::max(threads, 1)) * tile_floats(call.dh);
    const int64_t stride = int64_t(call.dh) + 2;
    run_slots(pool, threads, int64_t(call.heads) * parts, [&](int slot, int64_t item) {
      Tile tile = tile_at(scratch + int64_t(slot) * tile_floats(call.dh), call.dh);
      attend_block(call, int(item / parts), 0, 1, tile, KeyPart{int(item % parts), parts}, partials + item * stride);
    });
    for (int h = 0; h < call.heads; ++h) {
      merge_parts(partials + int64_t(h) * parts * stride, parts, call.dh, call.out + int64_t(h) * call.dh);
    }
    return;
  }
  const int64_t q_blocks = (call.n + kQueryBlock - 1) / kQueryBlock;
  const int64_t items = q_blocks * call.heads;
  // Each thread's slot owns a scratch tile and pulls (head, query block) items until none are left.
  run_slots(pool, threads, items, [&](int slot, int64_t item) {
    Tile tile = tile_at(scratch + int64_t(slot) * tile_floats(call.dh), call.dh);
    // Later query blocks cost more under causal patterns: hand them out first.
    const int64_t qb = q_blocks - 1 - item / call.heads;
    const int h = int(item % call.heads);
    attend_block(call, h, qb * kQueryBlock, std::min(call.n, (qb + 1) * kQueryBlock), tile);
  });
}

class AttentionKernel : public CpuKernel {
 public:
  AttentionKernel(const Node& node, const AttentionPattern& pattern, const KernelConfig& cfg)
      : node_(node), pattern_(pattern), capacity_(max_sequence(node, cfg.max_tokens)), threads_(cfg.threads),
        store_(pattern, node.fb_op->params_as_AttentionParams()->heads(),
               node.fb_op->params_as_AttentionParams()->head_dim(), cfg.max_tokens) {
    const auto* p = node.fb_op->params_as_AttentionParams();
    heads_ = p->heads();
    head_dim_ = p->head_dim();
    scale_ = p->scale();
  }

  Status run(const RunContext& ctx) override {
    if (ctx.pos0 + ctx.n > capacity_) {
      return InvalidArgument(node_.label() + ": " + std::to_string(ctx.pos0 + ctx.n) + " tokens exceed the session's " +
                             std::to_string(capacity_));
    }
    const float* qkv = ctx.in(node_, 0);  // [n, 3*H*dh]
    const int64_t inner = int64_t(heads_) * head_dim_;
    AttentionCall call{&pattern_, KeySource{qkv, inner, ctx.pos0, &store_}, qkv, 3 * inner, ctx.n, heads_, head_dim_,
                       scale_, ctx.out(node_, 0), &isa()};
    run_attention(ctx.pool, ctx.threads, call, ctx.scratch);
    store_.append(qkv, ctx.pos0, ctx.n);
    return Status::Ok();
  }

  bool has_state() const override { return true; }
  uint64_t state_bytes() const override { return store_.bytes(); }
  uint64_t scratch_bytes() const override { return uint64_t(attention_scratch_floats(head_dim_, threads_)) * sizeof(float); }
  uint64_t saved_state_bytes(int64_t position) const override { return store_.saved_bytes(position); }
  void save_state(int64_t position, uint8_t* out) const override { store_.save(position, out); }
  void load_state(int64_t position, const uint8_t* in) override { store_.load(position, in); }

 private:
  const Node& node_;
  AttentionPattern pattern_;
  int64_t capacity_;
  int threads_;
  KvStore store_;
  int heads_ = 1, head_dim_ = 1;
  float scale_ = 1.0f;
};

}  // namespace

// A tile per thread, then split-K's partial sums: heads * parts < 2 * threads rows of dh + 2 (key_parts).
int64_t attention_scratch_floats(int head_dim, int threads) {
  const int64_t slots = std::max(threads, 1);
  return tile_floats(head_dim) * slots + 2 * slots * (int64_t(head_dim) + 2);
}

void attention(pthreadpool_t pool, int threads, const AttentionArgs& args) {
  KvStore empty(*args.pattern, args.heads, args.head_dim, 0);
  AttentionCall call{args.pattern, KeySource{args.qkv, int64_t(args.heads) * args.head_dim, 0, &empty}, args.qkv,
                     3 * int64_t(args.heads) * args.head_dim, args.n, args.heads, args.head_dim, args.scale, args.out,
                     &isa()};
  run_attention(pool, threads, call, args.scratch);
}

Result<std::unique_ptr<CpuKernel>> make_windowed_attention(const Node& node, const Model& /*model*/,
                                                           const KernelConfig& cfg) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  TERN_ASSIGN_OR_RETURN(auto pattern, AttentionPattern::from(*p, node.label()));
  const uint64_t state = 2ull * uint64_t(p->heads()) * uint64_t(p->head_dim()) * sizeof(float) *
                         uint64_t(pattern.cache_slots(cfg.max_tokens));
  if (state > (uint64_t(1) << 40)) return OutOfMemory(node.label() + ": attention state of " + std::to_string(state) + " bytes is too large");
  try {
    return std::unique_ptr<CpuKernel>(new AttentionKernel(node, pattern, cfg));
  } catch (const std::bad_alloc&) {
    return OutOfMemory(node.label() + ": cannot allocate attention state of " + std::to_string(state) + " bytes");
  }
}

}  // namespace tern::cpu
