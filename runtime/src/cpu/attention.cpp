// SPDX-License-Identifier: MIT
// Causal attention on the CPU for every pattern, blockwise with online softmax (Flash-style): per thread only a
// [kQueryBlock, kKeyBlock] score tile exists, never an [n, T] matrix, and keys a pattern hides are never read.
// Keys of this call come from the qkv input; older ones from the op's KvStore. Under tern_kv_storage F16 every key
// and value is float16: the call's own are rounded from qkv into scratch before any query reads them (then copied
// into the store), so a query sees the same rounded keys and values however the sequence was cut into calls.
#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/kv_store.h"
#include "cpu/online_softmax.h"
#include "cpu/parallel.h"
#include "ops/attention_kinds.h"
#include "ops/op.h"
#include "ops/rotary.h"

namespace tern::cpu {
namespace {

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = kAttentionKeyBlock;  // keys per transposed block (cpu/isa/table.h)

// Per-slot scratch: every part of the tile (cpu/online_softmax.h), one transposed key block at a time.
constexpr TileShape kTile{kQueryBlock, kKeyBlock, /*key_block=*/true};
// The tile of a group of query heads attended together (attend_group): head g's rows at g * kQueryBlock.
constexpr TileShape group_tile(int group) { return TileShape{kQueryBlock * group, kKeyBlock, true}; }

// Where query head h's key and value rows for a position live during one call: float32 (T = float), this call's in
// the projected rows; or float16 (T = uint16_t), this call's rounded into a [n, 2*kv_inner] (k | v) scratch buffer.
template <typename T>
struct KeySource {
  const T* call;       // this call's rows: qkv [n, heads.row] (float) or k | v [n, 2*kv_inner] (float16)
  int64_t stride;      // heads.row or 2*kv_inner
  int64_t k_offset;    // heads.k or 0: where a row's keys start
  int64_t v_offset;    // heads.v or kv_inner: where a row's values start
  int64_t pos0;
  const KvStore<T>* store;  // null: the rows of positions before pos0 sit before `call` in the same buffer
  const HeadLayout* heads;
  const T* key(int h, int64_t j, int dh) const {
    const int kv = heads->kv_head(h);
    return j >= pos0 || !store ? in_call(j, k_offset, kv, dh) : store->key(kv, j);
  }
  const T* value(int h, int64_t j, int dh) const {
    const int kv = heads->kv_head(h);
    return j >= pos0 || !store ? in_call(j, v_offset, kv, dh) : store->value(kv, j);
  }
  // key() and value() of positions [j0, j1) into kp, vp [j1 - j0]: one slot lookup per run of consecutive slots,
  // then a row's step, instead of a lookup per position (a block's lookups cost a sizeable part of generation's
  // attention, which has a single query row to spend each block's keys on).
  void rows(int h, int64_t j0, int64_t j1, int dh, const T** kp, const T** vp) const {
    const int kv = heads->kv_head(h);
    int64_t j = j0;
    if (store) {
      const int64_t stored_end = std::min(j1, pos0);
      while (j < stored_end) {
        const int64_t run = store->consecutive(j, stored_end);
        const T* k = store->key(kv, j);
        const T* v = store->value(kv, j);
        for (int64_t e = 0; e < run; ++e) kp[j - j0 + e] = k + e * dh, vp[j - j0 + e] = v + e * dh;
        j += run;
      }
    }
    for (; j < j1; ++j) {  // this call's rows (and, without a store, the rows before them in the same buffer)
      kp[j - j0] = in_call(j, k_offset, kv, dh);
      vp[j - j0] = in_call(j, v_offset, kv, dh);
    }
  }
  // KV head kv's key (offset k_offset) or value (v_offset) of position j, in `call`'s rows.
  const T* in_call(int64_t j, int64_t offset, int kv, int dh) const {
    return call + (j - pos0) * stride + offset + int64_t(kv) * dh;
  }
};

// The ISA kernels for float32 or float16 key and value rows.
void attend_tile(const IsaKernels& k, const float* q, int64_t rows, const float* kt, const float* const* values,
                 const int64_t* lo, const int64_t* hi, int dh, float* m, float* l, float* acc, float softcap) {
  k.attend_tile(q, rows, kt, values, lo, hi, dh, m, l, acc, softcap);
}
void attend_tile(const IsaKernels& k, const float* q, int64_t rows, const float* kt, const uint16_t* const* values,
                 const int64_t* lo, const int64_t* hi, int dh, float* m, float* l, float* acc, float softcap) {
  k.attend_tile_f16(q, rows, kt, values, lo, hi, dh, m, l, acc, softcap);
}
void attend_keys(const IsaKernels& k, const float* q, int64_t rows, int64_t row_stride, const float* const* keys,
                 const float* const* values, int64_t count, int dh, float* m, float* l, float* acc, float softcap) {
  k.attend_keys(q, rows, row_stride, keys, values, count, dh, m, l, acc, softcap);
}
void attend_keys(const IsaKernels& k, const float* q, int64_t rows, int64_t row_stride, const uint16_t* const* keys,
                 const uint16_t* const* values, int64_t count, int dh, float* m, float* l, float* acc, float softcap) {
  k.attend_keys_f16(q, rows, row_stride, keys, values, count, dh, m, l, acc, softcap);
}

// Key row k [dh] into column w of a transposed key block kt [dh, kKeyBlock]; a float16 row is widened through
// row [kKeyBlock] (scratch), kKeyBlock elements at a time.
void put_key_column(const IsaKernels&, const float* k, int dh, float* kt, int64_t w, float* /*row*/) {
  for (int c = 0; c < dh; ++c) kt[c * kKeyBlock + w] = k[c];
}
void put_key_column(const IsaKernels& isa_kernels, const uint16_t* k, int dh, float* kt, int64_t w, float* row) {
  for (int c0 = 0; c0 < dh; c0 += int(kKeyBlock)) {
    const int width = std::min(int(kKeyBlock), dh - c0);
    isa_kernels.halves_to_floats(k + c0, width, row);
    for (int c = 0; c < width; ++c) kt[(c0 + c) * kKeyBlock + w] = row[c];
  }
}

template <typename T>
struct AttentionCall {
  const AttentionPattern* pattern;
  KeySource<T> src;
  const float* q;  // [n, q_stride]
  int64_t q_stride, n;
  int heads, dh;
  float scale;
  float softcap;  // AttentionParams.logit_softcap; 0: none
  float* out;     // [n, heads*dh]
  const IsaKernels* kernels;  // the score and softmax loops (cpu/isa.h)
  int group = 1;  // query heads attended together (attend_group); the scratch holds group_tile(group) per slot
};

// A single query row's keys split across threads (split-K): part `index` of `count` of its contiguous run, in
// whole key blocks; part 0 also takes the scattered keys.
struct KeyPart {
  int index = 0, count = 1;
};
// Generation splits a head's keys only where each part gets at least this many key blocks: below it, waking a
// thread and merging cost more than the part saves.
constexpr int64_t kMinBlocksPerPart = 4;

// One key block [j0, j1) of head h's contiguous run against query rows [r0, r0 + rows) of the call, for `count` heads
// that see the same keys, head g's rows at g * kQueryBlock of the tile. The block is gathered once for them: one row
// (generation) reads the keys in place (a transposed block would cost as much), more rows read them transposed.
template <typename T>
void attend_key_block(const AttentionCall<T>& a, int h, int64_t r0, int64_t rows, int64_t j0, int64_t j1, int count,
                      const Tile& t) {
  const int dh = a.dh;
  const int64_t width = j1 - j0;
  const T* kp[kKeyBlock];
  const T* vp[kKeyBlock];
  a.src.rows(h, j0, j1, dh, kp, vp);
  if (rows == 1) {
    attend_keys(*a.kernels, t.q, count, kQueryBlock, kp, vp, width, dh, t.m, t.l, t.acc, a.softcap);
    return;
  }
  for (int64_t j = j0; j < j1; ++j) put_key_column(*a.kernels, kp[j - j0], dh, t.kt, j - j0, t.s);
  if (width < kKeyBlock) {  // a short last block: the tile scores the unused columns too (no row uses them)
    for (int c = 0; c < dh; ++c) std::fill(t.kt + c * kKeyBlock + width, t.kt + (c + 1) * kKeyBlock, 0.0f);
  }
  int64_t lo[kQueryBlock], hi[kQueryBlock];
  for (int64_t r = 0; r < rows; ++r) {  // the keys of the block row r sees (none when lo >= hi)
    const int64_t i = a.src.pos0 + r0 + r;
    lo[r] = std::max(j0, a.pattern->local_lo(h, i)) - j0;
    hi[r] = std::min(j1, i + 1) - j0;
  }
  for (int g = 0; g < count; ++g) {
    const int64_t o = int64_t(g) * kQueryBlock;
    attend_tile(*a.kernels, t.q + o * dh, rows, t.kt, vp, lo, hi, dh, t.m + o, t.l + o, t.acc + o * dh, a.softcap);
  }
}

// One head, query rows [r0, r1) of the call, normalised into the output; or, with `partial` (one row, a part of
// its keys), that part's softmax sums {m, l, acc [dh]} into partial [dh + 2], for merge_parts.
template <typename T>
void attend_block(const AttentionCall<T>& a, int h, int64_t r0, int64_t r1, const Tile& t, KeyPart part = {},
                  float* partial = nullptr) {
  const int dh = a.dh;
  const int64_t rows = r1 - r0, pos0 = a.src.pos0;
  const T* kp[kKeyBlock];
  const T* vp[kKeyBlock];
  int64_t lo[kQueryBlock], hi[kQueryBlock];  // per row, the keys of a block it sees
  for (int64_t r = 0; r < rows; ++r) t.start_row(r, a.q + (r0 + r) * a.q_stride + int64_t(h) * dh, a.scale, dh);
  // Fixed's summaries below the block's first local run are the same for every row: tile them like a contiguous run.
  int64_t shared_below = 0;
  const bool scattered = part.index == 0 && a.pattern->has_scattered(h);
  if (a.pattern->kind == PatternKind::kFixed && scattered) {
    shared_below = a.pattern->local_lo(h, pos0 + r0);  // local_lo never decreases with i
    int64_t width = 0;
    auto flush = [&] {
      for (int64_t r = 0; r < rows; ++r) lo[r] = 0, hi[r] = width;
      attend_tile(*a.kernels, t.q, rows, t.kt, vp, lo, hi, dh, t.m, t.l, t.acc, a.softcap);
      width = 0;
    };
    a.pattern->scattered(h, pos0 + r0, shared_below, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        put_key_column(*a.kernels, a.src.key(h, j, dh), dh, t.kt, width, t.s);
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
        attend_keys(*a.kernels, t.q + r * dh, 1, 1, kp, vp, count, dh, &t.m[r], &t.l[r], t.acc + r * dh, a.softcap);
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
    attend_key_block(a, h, r0, rows, j0, std::min(j0 + kKeyBlock, last + 1), 1, t);
  }
  if (partial) {
    partial[0] = t.m[0];
    partial[1] = t.l[0];
    std::copy(t.acc, t.acc + dh, partial + 2);
    return;
  }
  const int64_t out_stride = int64_t(a.heads) * dh;
  for (int64_t r = 0; r < rows; ++r) {  // every row sees at least itself: l > 0
    t.write_row(r, 1.0f / t.l[r], dh, a.out + (r0 + r) * out_stride + int64_t(h) * dh);
  }
}

// Query heads [kv * group, (kv + 1) * group), the heads of one KV head, for query rows [r0, r1) of the call,
// normalised into the output. Only for patterns whose keys do not depend on the head (dense, sliding, chunked):
// attend_key_block gathers each key block once for the group, where attend_block would per head (a transposed block
// built once; in generation, a block read from the cache once and from L1 after). Each head's rows run exactly as
// attend_block runs them.
template <typename T>
void attend_group(const AttentionCall<T>& a, int kv, int64_t r0, int64_t r1, const Tile& t) {
  const int dh = a.dh, group = a.group, h0 = kv * group;
  const int64_t rows = r1 - r0, pos0 = a.src.pos0;
  for (int g = 0; g < group; ++g) {
    for (int64_t r = 0; r < rows; ++r) {
      t.start_row(g * kQueryBlock + r, a.q + (r0 + r) * a.q_stride + int64_t(h0 + g) * dh, a.scale, dh);
    }
  }
  const int64_t first = a.pattern->local_lo(h0, pos0 + r0), last = pos0 + r1 - 1;
  for (int64_t j0 = first; j0 <= last; j0 += kKeyBlock) {
    attend_key_block(a, h0, r0, rows, j0, std::min(j0 + kKeyBlock, last + 1), group, t);
  }
  const int64_t out_stride = int64_t(a.heads) * dh;
  for (int g = 0; g < group; ++g) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t tr = g * kQueryBlock + r;
      t.write_row(tr, 1.0f / t.l[tr], dh, a.out + (r0 + r) * out_stride + int64_t(h0 + g) * dh);
    }
  }
}

// Query heads per KV head that prefill attends together (attend_group): grouped-query attention's group where the
// pattern's keys do not depend on the head, else 1.
int attention_group(const AttentionPattern& pattern, const HeadLayout& heads) {
  const bool same_keys = pattern.kind == PatternKind::kDense || pattern.kind == PatternKind::kSliding ||
                         pattern.kind == PatternKind::kChunked;
  return same_keys && heads.kv_heads < heads.heads ? heads.heads / heads.kv_heads : 1;
}

// Into how many parts generation splits each head's keys: one, unless a single query row has fewer heads than
// threads and a cache long enough for kMinBlocksPerPart blocks a part (heads * parts < 2 * threads).
template <typename T>
int key_parts(const AttentionCall<T>& call, int threads) {
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

template <typename T>
void run_attention(pthreadpool_t pool, int threads, const AttentionCall<T>& call, float* scratch) {
  const int parts = key_parts(call, threads);
  if (parts > 1) {  // split-K: (head, part) items, then each head's merge
    float* partials = scratch + int64_t(std::max(threads, 1)) * tile_floats(kTile, call.dh);
    const int64_t stride = int64_t(call.dh) + 2;
    run_slots(pool, threads, int64_t(call.heads) * parts, [&](int slot, int64_t item) {
      Tile tile = tile_at(scratch + int64_t(slot) * tile_floats(kTile, call.dh), kTile, call.dh);
      attend_block(call, int(item / parts), 0, 1, tile, KeyPart{int(item % parts), parts}, partials + item * stride);
    });
    for (int h = 0; h < call.heads; ++h) {
      merge_parts(partials + int64_t(h) * parts * stride, parts, call.dh, call.out + int64_t(h) * call.dh);
    }
    return;
  }
  const int64_t q_blocks = (call.n + kQueryBlock - 1) / kQueryBlock;
  // An item: a query block of `group` heads of one KV head (attend_group), or of one head. One row (generation) on
  // more threads takes a head per item: a KV head's group per item would leave threads idle.
  const bool grouped = call.group > 1 && (call.n > 1 || threads <= 1);
  const int units = grouped ? call.heads / call.group : call.heads;
  const TileShape shape = group_tile(call.group);
  const int64_t items = q_blocks * units;
  // Each thread's slot owns a scratch tile and pulls (unit, query block) items until none are left.
  run_slots(pool, threads, items, [&](int slot, int64_t item) {
    Tile tile = tile_at(scratch + int64_t(slot) * tile_floats(shape, call.dh), shape, call.dh);
    // Later query blocks cost more under causal patterns: hand them out first.
    const int64_t qb = q_blocks - 1 - item / units;
    const int unit = int(item % units);
    const int64_t r0 = qb * kQueryBlock, r1 = std::min(call.n, (qb + 1) * kQueryBlock);
    if (grouped) return attend_group(call, unit, r0, r1, tile);
    attend_block(call, unit, r0, r1, tile);
  });
}

// T: the element of keys and values, float (kv_storage F32) or uint16_t (float16 bits, kv_storage F16).
template <typename T>
class AttentionKernel : public CpuKernel {
 public:
  // rotary: the ROTARY node feeding a dense op, for a context shift; null otherwise.
  AttentionKernel(const Node& node, const AttentionPattern& pattern, const KernelConfig& cfg, const Node* rotary)
      : node_(node), pattern_(pattern), capacity_(max_sequence(node, cfg.max_tokens)), threads_(cfg.threads),
        max_batch_(cfg.max_batch), heads_(head_layout(node)), group_(attention_group(pattern, heads_)),
        store_(pattern, heads_, cfg.max_tokens, cfg.buffers) {
    if (rotary && pattern.kind == PatternKind::kDense) rotary_ = Rotary::of(*rotary);
    scale_ = node.fb_op->params_as_AttentionParams()->scale();
    softcap_ = node.fb_op->params_as_AttentionParams()->logit_softcap();
  }

  Status run(const RunContext& ctx) override {
    if (ctx.pos0 + ctx.n > capacity_) {
      return InvalidArgument(node_.label() + ": " + std::to_string(ctx.pos0 + ctx.n) + " tokens exceed the session's " +
                             std::to_string(capacity_));
    }
    const float* qkv = ctx.in(node_, 0);  // [n, heads_.row]
    const int64_t kv_inner = heads_.kv_inner();
    KeySource<T> src{};
    if constexpr (std::is_same_v<T, float>) {
      src = KeySource<T>{qkv, heads_.row, heads_.k, heads_.v, ctx.pos0, &store_, &heads_};
    } else {
      // This call's keys and values, k | v [n, 2*kv_inner] as float16, after the tiles and partial sums.
      uint16_t* halves =
          reinterpret_cast<uint16_t*>(ctx.scratch + attention_scratch_floats(heads_.head_dim, threads_, group_));
      for (int64_t r = 0; r < ctx.n; ++r) {
        isa().floats_to_halves(qkv + r * heads_.row + heads_.k, kv_inner, halves + r * 2 * kv_inner);
        isa().floats_to_halves(qkv + r * heads_.row + heads_.v, kv_inner, halves + r * 2 * kv_inner + kv_inner);
      }
      src = KeySource<T>{halves, 2 * kv_inner, 0, kv_inner, ctx.pos0, &store_, &heads_};
    }
    AttentionCall<T> call{&pattern_, src, qkv + heads_.q, heads_.row, ctx.n, heads_.heads, heads_.head_dim, scale_,
                          softcap_, ctx.out(node_, 0), &isa(), group_};
    run_attention(ctx.pool, ctx.threads, call, ctx.scratch);
    store_.append(src.call, src.stride, src.k_offset, src.v_offset, ctx.pos0, ctx.n);
    return Status::Ok();
  }

  bool has_state() const override { return true; }
  bool saves_halves() const override { return std::is_same_v<T, uint16_t>; }
  uint64_t state_bytes() const override { return store_.bytes(); }
  uint64_t scratch_bytes() const override { return scratch_bytes_for(max_batch_); }
  // Tiles and partial sums; under float16, also the call's keys and values as halves (2 * kv_inner per row).
  uint64_t scratch_bytes_for(int64_t n) const override {
    const uint64_t call_halves = std::is_same_v<T, float> ? 0 : 2 * uint64_t(n) * uint64_t(heads_.kv_inner());
    return uint64_t(attention_scratch_floats(heads_.head_dim, threads_, group_)) * sizeof(float) +
           call_halves * sizeof(uint16_t);
  }
  uint64_t saved_state_bytes(int64_t position) const override { return store_.saved_bytes(position); }
  void save_state(int64_t position, uint8_t* out) const override { store_.save(position, out); }
  void load_state(int64_t position, const uint8_t* in) override { store_.load(position, in); }

  // Dense only (slot j holds position j; the session checks): positions position-keep.. move to 0.., their keys
  // rotated back by d = position - keep positions: R(p - d) k = R(-d) R(p) k.
  Status shift(int64_t keep, int64_t position) override {
    if (!rotary_) return Unsupported(node_.label() + ": a context shift needs the rotary op that feeds it");
    const int64_t d = position - keep;
    const int pairs = rotary_->pairs();
    float cos_sin[2 * 2048];  // rotary_dim <= head_dim <= 4096 (ops/rotary.cpp)
    for (int k = 0; k < pairs; ++k) rotary_cos_sin(-d, rotary_->inv_freq[k], 1.0f, &cos_sin[k], &cos_sin[pairs + k]);
    float row[4096];
    for (int h = 0; h < heads_.kv_heads; ++h) {
      for (int64_t e = 0; e < keep; ++e) {
        store_.read_key(h, d + e, row);
        rotary_->rotate(cos_sin, cos_sin + pairs, row, row, 1);
        store_.write_key(h, e, row);
        store_.move_value(h, d + e, e);
      }
    }
    return Status::Ok();
  }

 private:
  const Node& node_;
  AttentionPattern pattern_;
  int64_t capacity_;
  int threads_;
  int64_t max_batch_;
  HeadLayout heads_;
  int group_;  // query heads prefill attends together (attention_group)
  KvStore<T> store_;
  float scale_ = 1.0f;
  float softcap_ = 0.0f;
  std::optional<Rotary> rotary_;
};

}  // namespace

// A tile per thread (of `group` heads' rows), then split-K's partial sums: heads * parts < 2 * threads rows of dh + 2
// (key_parts; split-K's slots take kTile each, no more than a group's).
int64_t attention_scratch_floats(int head_dim, int threads, int group) {
  const int64_t slots = std::max(threads, 1);
  return tile_floats(group_tile(group), head_dim) * slots + 2 * slots * (int64_t(head_dim) + 2);
}

void attend_contiguous(pthreadpool_t pool, int threads, const ContiguousAttention& a) {
  const int64_t stride = 2 * a.heads->kv_inner();
  const KeySource<float> src{a.kv + a.held * stride, stride, 0, a.heads->kv_inner(), a.held, nullptr, a.heads};
  AttentionCall<float> call{a.pattern, src, a.q, int64_t(a.heads->heads) * a.heads->head_dim, a.n, a.heads->heads,
                            a.heads->head_dim, a.scale, a.softcap, a.out, &isa()};
  run_attention(pool, threads, call, a.scratch);
}

void attention(pthreadpool_t pool, int threads, const AttentionArgs& args) {
  const HeadLayout heads = HeadLayout::of(Projection::kQkv, args.heads, args.head_dim);
  KvStore<float> empty(*args.pattern, heads, 0, nullptr);
  AttentionCall<float> call{args.pattern, KeySource<float>{args.qkv, heads.row, heads.k, heads.v, 0, &empty, &heads},
                            args.qkv + heads.q, heads.row, args.n, args.heads, args.head_dim, args.scale, 0.0f,
                            args.out, &isa()};
  run_attention(pool, threads, call, args.scratch);
}

Result<std::unique_ptr<CpuKernel>> make_windowed_attention(const Node& node, const Model& model,
                                                           const KernelConfig& cfg) {
  if (cfg.sinks.on()) return make_sink_attention(node, model, cfg);
  const auto* p = node.fb_op->params_as_AttentionParams();
  TERN_ASSIGN_OR_RETURN(auto pattern, AttentionPattern::from(*p, node.label()));
  const Node* rotary = rotary_feeding(model, node);
  const uint64_t state =
      KvStateLayout(pattern, head_layout(node), cfg.max_tokens, cfg.half_kv ? sizeof(uint16_t) : sizeof(float)).bytes();
  if (state > (uint64_t(1) << 40)) return OutOfMemory(node.label() + ": attention state of " + std::to_string(state) + " bytes is too large");
  try {
    if (cfg.half_kv) return std::unique_ptr<CpuKernel>(new AttentionKernel<uint16_t>(node, pattern, cfg, rotary));
    return std::unique_ptr<CpuKernel>(new AttentionKernel<float>(node, pattern, cfg, rotary));
  } catch (const std::bad_alloc&) {
    return OutOfMemory(node.label() + ": cannot allocate attention state of " + std::to_string(state) + " bytes" +
                       refusal_note(cfg.buffers));
  }
}

}  // namespace tern::cpu
