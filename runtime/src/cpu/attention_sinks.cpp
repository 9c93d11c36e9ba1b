// SPDX-License-Identifier: MIT
// Dense attention of a session with attention sinks (ops/sink_cache.h). The ROTARY op before it passes its rows
// unrotated (cpu/decoder_ops.cpp); each call this kernel
//   1. lays out every key and value the call sees in scratch, kv [held + n, 2 * kv_inner] (k | v per row, in cache
//      order, then the call's rows), each key rotated by its index in that order;
//   2. rotates the call's queries by their own index (held + r) into scratch q [n, heads*dh];
//   3. runs the blockwise dense attention over that buffer (cpu/attention.cpp, attend_contiguous);
//   4. writes the call's unrotated keys and values that survive the cut into the cache (S sinks, a ring of W).
// Under kv_storage F16 the cache holds float16 keys and values, and the call's own are rounded the same way before
// any query reads them, as the plain dense kernel does.
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/huge_pages.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/kv_store.h"
#include "cpu/parallel.h"
#include "format/half.h"
#include "ops/attention_kinds.h"
#include "ops/rotary.h"

namespace tern::cpu {
namespace {

template <typename T>
class SinkAttentionKernel : public CpuKernel {
 public:
  SinkAttentionKernel(const Node& node, const AttentionPattern& pattern, const Node& rotary, const KernelConfig& cfg)
      : node_(node), pattern_(pattern), sinks_(cfg.sinks), threads_(cfg.threads), max_batch_(cfg.max_batch),
        heads_(head_layout(node)), rotary_(Rotary::of(rotary)), k_(large_vector<T>(cfg.buffers)),
        v_(large_vector<T>(cfg.buffers)), table_(large_vector<float>(cfg.buffers)) {
    const auto* p = node.fb_op->params_as_AttentionParams();
    scale_ = p->scale();
    softcap_ = p->logit_softcap();
    const size_t run = size_t(sinks_.capacity()) * size_t(heads_.head_dim);
    k_.assign(size_t(heads_.kv_heads) * run, T(0));
    v_.assign(size_t(heads_.kv_heads) * run, T(0));
    if (!rotary_.per_call()) {  // static frequencies: every index's cos | sin once, at creation
      const int64_t rows = sinks_.capacity() + max_batch_;
      std::vector<float> f(size_t(rotary_.pairs()));
      table_.resize(size_t(rows) * 2 * size_t(rotary_.pairs()));
      rotary_.cos_sin_table(0, rows, rows, f.data(), table_.data());
    }
  }

  Status run(const RunContext& ctx) override {
    const int64_t held = sinks_.held(ctx.pos0), n = ctx.n, total = held + n;
    const int dh = heads_.head_dim, pairs = rotary_.pairs();
    const int64_t kv_inner = heads_.kv_inner(), stride = 2 * kv_inner, q_width = heads_.inner();
    const float* qkv = ctx.in(node_, 0);  // [n, heads_.row], unrotated
    float* kv = ctx.scratch + attention_scratch_floats(dh, threads_);  // [total, 2 * kv_inner]
    float* q = kv + total * stride;                                      // [n, heads*dh]
    const float* cos_sin = table_.data();                                // [total, 2, pairs]
    if (rotary_.per_call()) {  // frequencies of a call whose keys end at index total
      float* table = q + n * q_width;
      float* f = table + total * 2 * pairs;
      rotary_.cos_sin_table(0, total, total, f, table);
      cos_sin = table;
    }
    // 1. The cache, in cache order, keys rotated by their index.
    parallel_for(ctx.pool, size_t(held), 16, [&](size_t b, size_t e) {
      for (size_t entry = b; entry < e; ++entry) {
        const int64_t slot = sinks_.slot(sinks_.position_of(int64_t(entry), ctx.pos0));
        float* row = kv + int64_t(entry) * stride;
        const float* c = cos_sin + 2 * int64_t(entry) * pairs;
        for (int h = 0; h < heads_.kv_heads; ++h) {
          widen(cached(k_, h, slot), row + int64_t(h) * dh);
          widen(cached(v_, h, slot), row + kv_inner + int64_t(h) * dh);
          rotary_.rotate(c, c + pairs, row + int64_t(h) * dh, row + int64_t(h) * dh, 1);
        }
      }
    });
    // 2. The call's rows: keys and values (rounded as the cache will hold them), keys and queries rotated.
    parallel_for(ctx.pool, size_t(n), 16, [&](size_t b, size_t e) {
      for (size_t r = b; r < e; ++r) {
        const float* in = qkv + int64_t(r) * heads_.row;
        float* row = kv + (held + int64_t(r)) * stride;
        round_as_stored(in + heads_.k, kv_inner, row);
        round_as_stored(in + heads_.v, kv_inner, row + kv_inner);
        const float* c = cos_sin + 2 * (held + int64_t(r)) * pairs;
        rotary_.rotate(c, c + pairs, row, row, heads_.kv_heads);
        rotary_.rotate(c, c + pairs, in + heads_.q, q + int64_t(r) * q_width, heads_.heads);
      }
    });
    // 3. Dense causal attention over the call's view.
    attend_contiguous(ctx.pool, ctx.threads,
                      ContiguousAttention{&pattern_, &heads_, q, kv, held, n, scale_, softcap_, ctx.out(node_, 0),
                                          ctx.scratch});
    // 4. The cut: the first S positions and the W most recent stay, unrotated.
    const int64_t end = ctx.pos0 + n;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t p = ctx.pos0 + r;
      if (!sinks_.kept(p, end)) continue;
      const float* in = qkv + r * heads_.row;
      const float* rounded = kv + (held + r) * stride;  // unrotated values; keys are rotated there
      for (int h = 0; h < heads_.kv_heads; ++h) {
        narrow(in + heads_.k + int64_t(h) * dh, cached(k_, h, sinks_.slot(p)));
        narrow(rounded + kv_inner + int64_t(h) * dh, cached(v_, h, sinks_.slot(p)));
      }
    }
    return Status::Ok();
  }

  bool has_state() const override { return true; }
  bool saves_halves() const override { return std::is_same_v<T, uint16_t>; }
  uint64_t state_bytes() const override { return (k_.size() + v_.size()) * sizeof(T); }
  uint64_t packed_weight_bytes() const override { return table_.size() * sizeof(float); }
  uint64_t scratch_bytes() const override { return scratch_bytes_for(max_batch_); }
  // Tiles, then the call's view kv [held + n, 2 * kv_inner] and queries [n, heads*dh]; with per-call frequencies
  // also their table [held + n, 2, pairs] and the frequencies [pairs].
  uint64_t scratch_bytes_for(int64_t n) const override {
    const int64_t total = sinks_.capacity() + n;
    int64_t floats = attention_scratch_floats(heads_.head_dim, threads_) + total * 2 * heads_.kv_inner() + n * heads_.inner();
    if (rotary_.per_call()) floats += total * 2 * rotary_.pairs() + rotary_.pairs();
    return uint64_t(floats) * sizeof(float);
  }

  // Saved: S and W, then keys and values in cache order (SinkCache::saved_bytes).
  uint64_t saved_count_bytes(int64_t) const override { return SinkCache::kCountBytes; }
  uint64_t saved_state_bytes(int64_t position) const override {
    return sinks_.saved_bytes(position, heads_.kv_heads, heads_.head_dim, sizeof(T));
  }
  Status check_saved_counts(int64_t, const uint8_t* in) const override {
    int64_t counts[2];
    std::memcpy(counts, in, sizeof counts);
    if (counts[0] == sinks_.sinks && counts[1] == sinks_.window) return Status::Ok();
    return InvalidArgument(node_.label() + ": the state was saved with sink_tokens " + std::to_string(counts[0]) +
                           " and sink_window " + std::to_string(counts[1]) + "; this session has " +
                           std::to_string(sinks_.sinks) + " and " + std::to_string(sinks_.window));
  }
  void save_state(int64_t position, uint8_t* out) const override {
    const int64_t counts[2] = {sinks_.sinks, sinks_.window};
    std::memcpy(out, counts, sizeof counts);
    for_each_entry(position, [&](int part, int h, int64_t slot, uint64_t offset) {
      std::memcpy(out + offset, cached(part == 0 ? k_ : v_, h, slot), size_t(heads_.head_dim) * sizeof(T));
    });
  }
  void load_state(int64_t position, const uint8_t* in) override {
    for_each_entry(position, [&](int part, int h, int64_t slot, uint64_t offset) {
      std::memcpy(cached(part == 0 ? k_ : v_, h, slot), in + offset, size_t(heads_.head_dim) * sizeof(T));
    });
  }

 private:
  // Head h's row at `slot` of the keys or values, [dh].
  T* cached(LargeVector<T>& part, int h, int64_t slot) {
    return part.data() + (size_t(h) * size_t(sinks_.capacity()) + size_t(slot)) * size_t(heads_.head_dim);
  }
  const T* cached(const LargeVector<T>& part, int h, int64_t slot) const {
    return part.data() + (size_t(h) * size_t(sinks_.capacity()) + size_t(slot)) * size_t(heads_.head_dim);
  }
  // visit(part, head, slot, offset in the saved bytes) for every held entry, keys (part 0) then values, in cache order.
  template <typename Visit>
  void for_each_entry(int64_t position, Visit visit) const {
    for (int part = 0; part < 2; ++part)
      for (int h = 0; h < heads_.kv_heads; ++h)
        for (int64_t e = 0; e < sinks_.held(position); ++e) {
          visit(part, h, sinks_.slot(sinks_.position_of(e, position)),
                sinks_.saved_offset(part, h, e, position, heads_.kv_heads, heads_.head_dim, sizeof(T)));
        }
  }
  void widen(const T* in, float* out) const { widen_row(in, heads_.head_dim, out); }
  void narrow(const float* in, T* out) const { narrow_row(in, heads_.head_dim, out); }
  // in [count] as the cache holds it, back in float32: a copy, or the float16 rounding.
  void round_as_stored(const float* in, int64_t count, float* out) const {
    if constexpr (std::is_same_v<T, float>) {
      std::memcpy(out, in, size_t(count) * sizeof(float));
    } else {
      for (int64_t i = 0; i < count; ++i) out[i] = half_to_float(float_to_half(in[i]));
    }
  }

  const Node& node_;
  AttentionPattern pattern_;
  SinkCache sinks_;
  int threads_;
  int64_t max_batch_;
  HeadLayout heads_;
  Rotary rotary_;
  float scale_ = 1.0f, softcap_ = 0.0f;
  LargeVector<T> k_, v_;       // [kv_heads, S + W, dh], unrotated: slots of ops/sink_cache.h
  LargeVector<float> table_;   // static frequencies: cos | sin [S + W + max_batch, 2, pairs] of every index
};

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_sink_attention(const Node& node, const Model& model, const KernelConfig& cfg) {
  const Node* rotary = rotary_feeding(model, node);
  if (!rotary) return Unsupported(node.label() + ": attention sinks need the rotary op that feeds it");
  TERN_ASSIGN_OR_RETURN(auto pattern, AttentionPattern::from(*node.fb_op->params_as_AttentionParams(), node.label()));
  const HeadLayout heads = head_layout(node);
  const uint64_t state = 2ull * uint64_t(heads.kv_inner()) * uint64_t(cfg.sinks.capacity()) *
                         (cfg.half_kv ? sizeof(uint16_t) : sizeof(float));
  try {
    if (cfg.half_kv) return std::unique_ptr<CpuKernel>(new SinkAttentionKernel<uint16_t>(node, pattern, *rotary, cfg));
    return std::unique_ptr<CpuKernel>(new SinkAttentionKernel<float>(node, pattern, *rotary, cfg));
  } catch (const std::bad_alloc&) {
    return OutOfMemory(node.label() + ": cannot allocate an attention-sink cache of " + std::to_string(state) +
                       " bytes" + refusal_note(cfg.buffers));
  }
}

}  // namespace tern::cpu
