// Dense causal attention on the CPU, blockwise with online softmax (Flash-style): per thread only a
// [kQueryBlock, kKeyBlock] score tile exists, never an [n, T] matrix.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/parallel.h"

namespace tern::cpu {
namespace {

constexpr int64_t kQueryBlock = 16;
constexpr int64_t kKeyBlock = 64;

// Per-slot scratch layout, in floats.
struct Tile {
  float* q;    // [kQueryBlock, dh], scaled queries
  float* acc;  // [kQueryBlock, dh], running sum of p * v
  float* s;    // [kQueryBlock, kKeyBlock], scores of one key block
  float* m;    // [kQueryBlock], running max
  float* l;    // [kQueryBlock], running sum of p
};

int64_t tile_floats(int head_dim) { return 2 * kQueryBlock * head_dim + kQueryBlock * kKeyBlock + 2 * kQueryBlock; }

Tile tile_at(float* base, int head_dim) {
  Tile t;
  t.q = base;
  t.acc = t.q + kQueryBlock * head_dim;
  t.s = t.acc + kQueryBlock * head_dim;
  t.m = t.s + kQueryBlock * kKeyBlock;
  t.l = t.m + kQueryBlock;
  return t;
}

// One head, queries [i0, i1).
void attend_block(const DenseAttentionArgs& a, int h, int64_t i0, int64_t i1, const Tile& t) {
  const int dh = a.head_dim;
  const int64_t rows = i1 - i0;
  const float* kh = a.k_cache + int64_t(h) * a.capacity * dh;  // [capacity, dh]
  const float* vh = a.v_cache + int64_t(h) * a.capacity * dh;
  for (int64_t r = 0; r < rows; ++r) {
    const float* qi = a.q + (i0 + r) * a.q_stride + int64_t(h) * dh;
    for (int c = 0; c < dh; ++c) t.q[r * dh + c] = qi[c] * a.scale;
    std::fill(t.acc + r * dh, t.acc + (r + 1) * dh, 0.0f);
    t.m[r] = -INFINITY;
    t.l[r] = 0.0f;
  }
  const int64_t key_end = a.causal ? a.pos0 + i1 : a.T;  // exclusive
  for (int64_t j0 = 0; j0 < key_end; j0 += kKeyBlock) {
    const int64_t j1 = std::min(j0 + kKeyBlock, key_end);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t visible_end = a.causal ? std::min(j1, a.pos0 + i0 + r + 1) : j1;  // exclusive
      float* s = t.s + r * kKeyBlock;
      const float* q = t.q + r * dh;
      float block_max = -INFINITY;
      int64_t j = j0;
      for (; j < visible_end; ++j) {
        const float* k = kh + j * dh;
        float dot = 0.0f;
        for (int c = 0; c < dh; ++c) dot += q[c] * k[c];
        s[j - j0] = dot;
        block_max = std::max(block_max, dot);
      }
      if (visible_end <= j0) continue;  // this row sees nothing in the block
      const float m_new = std::max(t.m[r], block_max);
      const float correction = std::exp(t.m[r] - m_new);  // exp(-inf) = 0 on the first block
      float* acc = t.acc + r * dh;
      if (correction != 1.0f) {
        for (int c = 0; c < dh; ++c) acc[c] *= correction;
      }
      float sum = 0.0f;
      for (j = j0; j < visible_end; ++j) {
        const float p = std::exp(s[j - j0] - m_new);
        sum += p;
        const float* v = vh + j * dh;
        for (int c = 0; c < dh; ++c) acc[c] += p * v[c];
      }
      t.l[r] = t.l[r] * correction + sum;
      t.m[r] = m_new;
    }
  }
  const int64_t out_stride = int64_t(a.heads) * dh;
  for (int64_t r = 0; r < rows; ++r) {
    float* o = a.out + (i0 + r) * out_stride + int64_t(h) * dh;
    const float inv = 1.0f / t.l[r];
    for (int c = 0; c < dh; ++c) o[c] = t.acc[r * dh + c] * inv;
  }
}

class AttentionKernel : public CpuKernel {
 public:
  AttentionKernel(const Node& node, const KernelConfig& cfg) : node_(node), capacity_(cfg.max_tokens) {
    const auto* p = node.fb_op->params_as_AttentionParams();
    heads_ = p->heads();
    head_dim_ = p->head_dim();
    scale_ = p->scale();
    causal_ = p->causal();
    threads_ = cfg.threads;
    const size_t cache = size_t(heads_) * size_t(capacity_) * size_t(head_dim_);  // [H, capacity, dh]
    k_cache_.assign(cache, 0.0f);
    v_cache_.assign(cache, 0.0f);
  }

  Status run(const RunContext& ctx) override {
    if (ctx.pos0 + ctx.n > capacity_) {
      return InvalidArgument(node_.label() + ": " + std::to_string(ctx.pos0 + ctx.n) + " tokens exceed the session's " +
                             std::to_string(capacity_));
    }
    const float* qkv = ctx.in(node_, 0);  // [n, 3*H*dh]
    const int64_t inner = int64_t(heads_) * head_dim_;
    // Append this call's keys and values to the head-major caches.
    for (int h = 0; h < heads_; ++h) {
      for (int64_t i = 0; i < ctx.n; ++i) {
        const int64_t row = (int64_t(h) * capacity_ + ctx.pos0 + i) * head_dim_;
        std::memcpy(&k_cache_[row], qkv + i * 3 * inner + inner + h * head_dim_, size_t(head_dim_) * sizeof(float));
        std::memcpy(&v_cache_[row], qkv + i * 3 * inner + 2 * inner + h * head_dim_, size_t(head_dim_) * sizeof(float));
      }
    }
    DenseAttentionArgs args{qkv,      3 * inner, k_cache_.data(), v_cache_.data(), capacity_, ctx.n, ctx.pos0,
                            ctx.pos0 + ctx.n, heads_, head_dim_, scale_, causal_, ctx.out(node_, 0), ctx.scratch};
    attention_dense(ctx.pool, ctx.threads, args);
    return Status::Ok();
  }

  bool has_state() const override { return true; }
  uint64_t state_bytes() const override { return 2 * k_cache_.size() * sizeof(float); }
  uint64_t scratch_bytes() const override { return uint64_t(attention_scratch_floats(head_dim_, threads_)) * sizeof(float); }

 private:
  const Node& node_;
  int64_t capacity_;
  int heads_ = 1, head_dim_ = 1, threads_ = 1;
  float scale_ = 1.0f;
  bool causal_ = true;
  std::vector<float> k_cache_, v_cache_;  // [H, capacity, dh]; sized at creation, never grown
};

}  // namespace

int64_t attention_scratch_floats(int head_dim, int threads) { return tile_floats(head_dim) * std::max(threads, 1); }

void attention_dense(pthreadpool_t pool, int threads, const DenseAttentionArgs& args) {
  const int64_t q_blocks = (args.n + kQueryBlock - 1) / kQueryBlock;
  const int64_t items = q_blocks * args.heads;
  const int slots = std::max(1, threads);
  std::atomic<int64_t> next{0};
  // One task per slot; each slot owns its scratch tile and pulls (head, query block) items until none are left.
  parallel_for(pool, size_t(slots), 1, [&](size_t b, size_t e) {
    for (size_t slot = b; slot < e; ++slot) {
      Tile tile = tile_at(args.scratch + int64_t(slot) * tile_floats(args.head_dim), args.head_dim);
      for (int64_t item; (item = next.fetch_add(1)) < items;) {
        // Later query blocks cost more (causal): hand them out first.
        const int64_t qb = q_blocks - 1 - item / args.heads;
        const int h = int(item % args.heads);
        attend_block(args, h, qb * kQueryBlock, std::min(args.n, (qb + 1) * kQueryBlock), tile);
      }
    }
  });
}

Result<std::unique_ptr<CpuKernel>> make_attention(const Node& node, const Model&, const KernelConfig& cfg) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  const uint64_t cache = 2ull * uint64_t(p->heads()) * uint64_t(p->head_dim()) * uint64_t(cfg.max_tokens) * sizeof(float);
  if (cache > (uint64_t(1) << 40)) return OutOfMemory(node.label() + ": KV cache of " + std::to_string(cache) + " bytes is too large");
  try {
    return std::unique_ptr<CpuKernel>(new AttentionKernel(node, cfg));
  } catch (const std::bad_alloc&) {
    return OutOfMemory(node.label() + ": cannot allocate a KV cache of " + std::to_string(cache) + " bytes");
  }
}

}  // namespace tern::cpu
