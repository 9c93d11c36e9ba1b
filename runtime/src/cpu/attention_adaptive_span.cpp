// SPDX-License-Identifier: MIT
// ATTENTION of kind AdaptiveSpan on the CPU (semantics and the parity note: ops/adaptive_span.h).
//
// Blockwise with online softmax: per thread one [kQueryBlock, dh] tile and the scores of one key block, never an
// [n, max_span] matrix. The span mask applies after the softmax, so besides its running max each row carries
// sum(e) and sum(e·m), and its accumulator holds sum(e·m·v); at the end out = acc / (sum(e·m) + 1e-8·sum(e)).
//
// Head h reads the keys at distances 1..reach[h] and no others; keys before position 0 are zero (only their position
// term counts). State: one ring per key/value head holding the longest reach of the query heads that read it (its own
// query head's without grouped key/value heads), so a head with a short learned span keeps a short ring.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/online_softmax.h"
#include "cpu/parallel.h"
#include "ops/adaptive_span.h"
#include "ops/op.h"

namespace tern::cpu {
namespace {

constexpr int64_t kQueryBlock = 16;
constexpr int64_t kKeyBlock = 64;

// Per-slot scratch: query rows with the masked sum, and one row's scores (cpu/online_softmax.h).
constexpr TileShape kTile{kQueryBlock, kKeyBlock, /*key_block=*/false, /*masked_sum=*/true};

// The span state (ops/adaptive_span.h, SpanStateLayout): key/value head g's last cap[g] keys and values, [slots, dh]
// each.
class SpanStore {
 public:
  SpanStore(const SpanStateLayout& layout, const HeadLayout& heads, BufferSource* buffers)
      : layout_(layout), heads_(heads), k_(large_vector<float>(buffers)), v_(large_vector<float>(buffers)) {
    k_.assign(size_t(layout.slots) * size_t(heads.head_dim), 0.0f);
    v_.assign(size_t(layout.slots) * size_t(heads.head_dim), 0.0f);
  }

  // Query head h's key and value at position j, which must be one of the last cap[g] positions appended to the
  // key/value head g that h reads.
  const float* key(int h, int64_t j) const { return &k_[index(layout_.kv_head(h), j)]; }
  const float* value(int h, int64_t j) const { return &v_[index(layout_.kv_head(h), j)]; }

  // Keeps the last cap[g] positions of this call for each key/value head g. qkv [n, heads.row], positions
  // pos0..pos0+n-1.
  void append(const float* qkv, int64_t pos0, int64_t n) {
    const int dh = heads_.head_dim;
    for (int g = 0; g < heads_.kv_heads; ++g) {
      const int64_t k_col = heads_.k + int64_t(g) * dh, v_col = heads_.v + int64_t(g) * dh;
      for (int64_t j = std::max(pos0, pos0 + n - layout_.cap[size_t(g)]); j < pos0 + n; ++j) {
        const float* row = qkv + (j - pos0) * heads_.row;
        std::memcpy(&k_[index(g, j)], row + k_col, size_t(dh) * sizeof(float));
        std::memcpy(&v_[index(g, j)], row + v_col, size_t(dh) * sizeof(float));
      }
    }
  }

  uint64_t bytes() const { return layout_.bytes(); }
  // Saved state: every ring whole, keys then values.
  void save(uint8_t* out) const {
    std::memcpy(out, k_.data(), k_.size() * sizeof(float));
    std::memcpy(out + layout_.values_at(), v_.data(), v_.size() * sizeof(float));
  }
  void load(const uint8_t* in) {
    std::memcpy(k_.data(), in, k_.size() * sizeof(float));
    std::memcpy(v_.data(), in + layout_.values_at(), v_.size() * sizeof(float));
  }

 private:
  size_t index(int g, int64_t j) const { return size_t(layout_.slot(g, j)) * size_t(heads_.head_dim); }

  SpanStateLayout layout_;
  HeadLayout heads_;
  LargeVector<float> k_, v_;  // [slots, dh]
};

struct SpanCall {
  const float* qkv = nullptr;  // [n, heads.row]
  HeadLayout layout;
  int64_t n = 0, pos0 = 0;
  int heads = 1, dh = 1;
  float scale = 1.0f;
  float eps = 0.0f;                                  // 1e-8 with a learned span, 0 without
  const float* pe = nullptr;                         // [max_span, dh]: row d-1 is key_pe[:, max_span - d]
  const float* mask = nullptr;                       // [sum(reach)]: head h's m_h(1..reach[h]) from mask_offset[h]
  const std::vector<int64_t>* reach = nullptr;       // [heads]
  const std::vector<int64_t>* mask_offset = nullptr; // [heads]
  const SpanStore* store = nullptr;
  float* out = nullptr;  // [n, heads*dh]
  const IsaKernels* kernels = nullptr;  // the score and softmax loops (cpu/isa.h)

  // Key and value rows of head h at position j: this call's qkv, the ring, or null (a zero vector) before position 0.
  const float* key(int h, int64_t j) const {
    if (j < 0) return nullptr;
    return j >= pos0 ? qkv + (j - pos0) * layout.row + layout.k_column(h) : store->key(h, j);
  }
  const float* value(int h, int64_t j) const {
    if (j < 0) return nullptr;
    return j >= pos0 ? qkv + (j - pos0) * layout.row + layout.v_column(h) : store->value(h, j);
  }
};

// One head, query rows [r0, r1) of the call.
void attend_block(const SpanCall& a, int h, int64_t r0, int64_t r1, const Tile& t) {
  const int dh = a.dh;
  const int64_t rows = r1 - r0, i0 = a.pos0 + r0, reach = (*a.reach)[size_t(h)];
  const float* mask = a.mask + (*a.mask_offset)[size_t(h)];
  for (int64_t r = 0; r < rows; ++r) {
    t.start_row(r, a.qkv + (r0 + r) * a.layout.row + a.layout.q_column(h), a.scale, dh);
  }
  // Row i reads keys [i - reach, i - 1]; the block's rows together read [i0 - reach, i0 + rows - 2].
  const float* kp[kKeyBlock];
  const float* vp[kKeyBlock];
  const int64_t first = i0 - reach, last = i0 + rows - 2;
  for (int64_t j0 = first; reach > 0 && j0 <= last; j0 += kKeyBlock) {
    const int64_t j1 = std::min(j0 + kKeyBlock, last + 1);  // exclusive
    for (int64_t j = j0; j < j1; ++j) {
      kp[j - j0] = a.key(h, j);
      vp[j - j0] = a.value(h, j);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      const int64_t lo = std::max(j0, i - reach), hi = std::min(j1, i);
      if (lo >= hi) continue;
      // Online update with the keys [lo, hi), the first at distance i - lo.
      a.kernels->span_update_row(t.q + r * dh, dh, kp + (lo - j0), vp + (lo - j0), hi - lo, i - lo, a.pe, mask, t.s,
                                 &t.m[r], &t.l[r], &t.l_masked[r], t.acc + r * dh);
    }
  }
  const int64_t out_stride = int64_t(a.heads) * dh;
  for (int64_t r = 0; r < rows; ++r) {
    const float denom = t.l_masked[r] + a.eps * t.l[r];
    // A head whose mask is zero at every distance attends to nothing: 0 / (0 + 1e-8) in the reference codebase.
    t.write_row(r, denom > 0.0f ? 1.0f / denom : 0.0f, dh, a.out + (r0 + r) * out_stride + int64_t(h) * dh);
  }
}

void run_span_attention(pthreadpool_t pool, int threads, const SpanCall& call, float* scratch) {
  const int64_t q_blocks = (call.n + kQueryBlock - 1) / kQueryBlock;
  const int64_t items = q_blocks * call.heads;
  // Each thread's slot owns a scratch tile and pulls (head, query block) items until none are left.
  run_slots(pool, threads, items, [&](int slot, int64_t item) {
    Tile tile = tile_at(scratch + int64_t(slot) * tile_floats(kTile, call.dh), kTile, call.dh);
    const int64_t qb = item / call.heads;
    const int h = int(item % call.heads);
    attend_block(call, h, qb * kQueryBlock, std::min(call.n, (qb + 1) * kQueryBlock), tile);
  });
}

class AdaptiveSpanKernel : public CpuKernel {
 public:
  AdaptiveSpanKernel(const Node& node, const AdaptiveSpan& span, const KernelConfig& cfg,
                     const SpanStateLayout& state)
      : node_(node), span_(span), capacity_(max_sequence(node, cfg.max_tokens)), threads_(cfg.threads),
        store_(state, span.layout(), cfg.buffers),
        pe_(large_vector<float>(cfg.buffers)),
        mask_(large_vector<float>(cfg.buffers)) {
    const int dh = span.head_dim;
    const int64_t L = span.max_span;
    // key_pe [dh, L] -> rows by distance: pe_[(d-1)*dh + c] = key_pe[c, L - d].
    pe_.resize(size_t(L) * size_t(dh));
    for (int64_t d = 1; d <= L; ++d)
      for (int c = 0; c < dh; ++c) pe_[size_t((d - 1) * dh + c)] = span.key_pe[int64_t(c) * L + (L - d)];
    int64_t mask_floats = 0;
    for (int h = 0; h < span.heads; ++h) mask_floats += span.reach[size_t(h)];
    mask_.reserve(size_t(mask_floats));  // one block of the size counted (packed_weight_bytes)
    for (int h = 0; h < span.heads; ++h) {
      mask_offset_.push_back(int64_t(mask_.size()));
      for (int64_t d = 1; d <= span.reach[size_t(h)]; ++d) mask_.push_back(span.mask(h, d));
    }
  }

  Status run(const RunContext& ctx) override {
    if (ctx.pos0 + ctx.n > capacity_) {
      return InvalidArgument(node_.label() + ": " + std::to_string(ctx.pos0 + ctx.n) + " tokens exceed the session's " +
                             std::to_string(capacity_));
    }
    const float* qkv = ctx.in(node_, 0);  // [n, heads.row]
    SpanCall call;
    call.qkv = qkv;
    call.layout = span_.layout();
    call.n = ctx.n;
    call.pos0 = ctx.pos0;
    call.heads = span_.heads;
    call.dh = span_.head_dim;
    call.scale = node_.fb_op->params_as_AttentionParams()->scale();
    call.eps = span_.masked() ? float(kAdaptiveSpanEps) : 0.0f;
    call.pe = pe_.data();
    call.mask = mask_.data();
    call.reach = &span_.reach;
    call.mask_offset = &mask_offset_;
    call.store = &store_;
    call.out = ctx.out(node_, 0);
    call.kernels = &isa();
    run_span_attention(ctx.pool, ctx.threads, call, ctx.scratch);
    store_.append(qkv, ctx.pos0, ctx.n);
    return Status::Ok();
  }

  bool has_state() const override { return true; }
  uint64_t state_bytes() const override { return store_.bytes(); }
  uint64_t packed_weight_bytes() const override { return (pe_.size() + mask_.size()) * sizeof(float); }
  uint64_t saved_state_bytes(int64_t) const override { return store_.bytes(); }
  void save_state(int64_t, uint8_t* out) const override { store_.save(out); }
  void load_state(int64_t, const uint8_t* in) override { store_.load(in); }
  uint64_t scratch_bytes() const override {
    return uint64_t(tile_floats(kTile, span_.head_dim)) * uint64_t(std::max(threads_, 1)) * sizeof(float);
  }

 private:
  const Node& node_;
  AdaptiveSpan span_;
  int64_t capacity_;
  int threads_;
  SpanStore store_;
  LargeVector<float> pe_;             // [max_span, dh], by distance
  LargeVector<float> mask_;           // [sum(reach)], m_h(d) for d = 1..reach[h], head after head
  std::vector<int64_t> mask_offset_;  // [heads]
};

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_adaptive_span_attention(const Node& node, const Model&, const KernelConfig& cfg) {
  TERN_ASSIGN_OR_RETURN(auto span, AdaptiveSpan::from(node));
  const SpanStateLayout layout(span, cfg.max_tokens);
  const uint64_t state = layout.bytes();
  if (state > (uint64_t(1) << 40)) return OutOfMemory(node.label() + ": attention state of " + std::to_string(state) + " bytes is too large");
  try {
    return std::unique_ptr<CpuKernel>(new AdaptiveSpanKernel(node, span, cfg, layout));
  } catch (const std::bad_alloc&) {
    return OutOfMemory(node.label() + ": cannot allocate attention state of " + std::to_string(state) + " bytes" +
                       refusal_note(cfg.buffers));
  }
}

}  // namespace tern::cpu
