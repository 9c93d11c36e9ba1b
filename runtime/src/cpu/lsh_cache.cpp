// SPDX-License-Identifier: MIT
// The LSH layer's cache and its one-position step (cpu/lsh_cache.h; semantics: ops/lsh.h, "Continuing a sequence").
#include "cpu/lsh_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tern::cpu {
namespace {

// Scratch of one step, in floats (ints take a float's 4 bytes).
struct StepScratch {
  float* s;          // [slots] scores, then exp(s - m)
  int32_t* pos;      // [slots] the position each score is for
  float* key;        // [dh] one normalised key
  float* rotated;    // [rot_half]
  float* outs;       // [hashes, dh] each round's output
  float* lses;       // [hashes]
  int32_t* order;    // [capacity] one round's positions, sorted by bucket
  int32_t* count;    // [buckets + hashes + 1] the counting sort's counts
};

int64_t slots(const LshAttention& a) { return std::max(a.window(), a.chunk + 1); }

StepScratch carve(const LshAttention& a, int64_t capacity, float* base) {
  StepScratch t;
  const int64_t S = slots(a);
  t.s = base;
  t.pos = reinterpret_cast<int32_t*>(t.s + S);
  t.key = reinterpret_cast<float*>(t.pos + S);
  t.rotated = t.key + a.head_dim;
  t.outs = t.rotated + a.rot_half;
  t.lses = t.outs + a.hashes * a.head_dim;
  t.order = reinterpret_cast<int32_t*>(t.lses + a.hashes);
  t.count = t.order + capacity;
  return t;
}

// Python's a % b for b > 0.
int64_t floor_mod(int64_t a, int64_t b) { return ((a % b) + b) % b; }

}  // namespace

void lsh_round_weights(float* lse, int64_t hashes, int64_t stride) {
  float mx = -INFINITY;
  for (int64_t r = 0; r < hashes; ++r) mx = std::max(mx, lse[r * stride]);
  float sum = 0.0f;
  for (int64_t r = 0; r < hashes; ++r) sum += std::exp(lse[r * stride] - mx);
  const float total = std::log(sum) + mx;
  for (int64_t r = 0; r < hashes; ++r) lse[r * stride] = std::exp(lse[r * stride] - total);
}

LshCache::LshCache(const LshAttention& a, int64_t capacity, BufferSource* buffers)
    : a_(a),
      capacity_(capacity),
      rows_(size_t(a.heads) * size_t(capacity) * size_t(2 * a.head_dim), 0.0f, LargeAllocator<float>(buffers)),
      buckets_(size_t(a.heads) * size_t(a.hashes) * size_t(capacity), 0, LargeAllocator<int32_t>(buffers)) {}

void LshCache::reset() {
  size_ = 0;
  hashed_ = false;
  max_bucket_ = -1;
}

void LshCache::store_rows(int h, int64_t p0, int64_t n, const float* qkv, int64_t stride, int64_t v_offset) {
  const int dh = a_.head_dim;
  for (int64_t t = 0; t < n; ++t) {
    float* dst = rows_.data() + (int64_t(h) * capacity_ + p0 + t) * 2 * dh;
    std::memcpy(dst, qkv + t * stride, size_t(dh) * sizeof(float));
    std::memcpy(dst + dh, qkv + t * stride + v_offset, size_t(dh) * sizeof(float));
  }
}

void LshCache::store_first_buckets(int h, int64_t n, const int32_t* raw, bool padded) {
  const int64_t stride = a_.buckets + (padded ? 1 : 0);
  for (int64_t r = 0; r < a_.hashes; ++r) {
    int32_t* b = round_buckets(h, r);
    for (int64_t j = 0; j < n; ++j) {
      b[j] = int32_t(raw[r * n + j] + r * stride);
      max_bucket_ = std::max(max_bucket_, b[j]);
    }
  }
}

void LshCache::finish_first_call(int64_t n, bool hashed) {
  size_ = n;
  hashed_ = hashed;
  if (!hashed) max_bucket_ = -1;
}

int64_t LshCache::step_floats() const {
  return 2 * slots(a_) + a_.head_dim + a_.rot_half + a_.hashes * a_.head_dim + a_.hashes + capacity_ + a_.buckets +
         a_.hashes + 1;
}

float LshCache::score(const IsaKernels& k, const float* q, int h, int64_t j, int64_t self, float* key) const {
  if (j == self) return a_.self_mask_value;  // HF replaces the score: the query sees itself only if nothing else
  const int dh = a_.head_dim;
  const float* x = row(h, j);
  const float r = 1.0f / std::sqrt(k.dot(x, x, dh) / float(dh) + a_.key_norm_eps);
  for (int c = 0; c < dh; ++c) key[c] = x[c] * r * a_.scale;
  return k.dot(q, key, dh);
}

float LshCache::attend(const float* s_in, const int32_t* pos, int64_t count, int h, float* o) const {
  const int dh = a_.head_dim;
  float m = -INFINITY;
  for (int64_t w = 0; w < count; ++w) m = std::max(m, s_in[w]);
  float sum = 0.0f;
  for (int64_t w = 0; w < count; ++w) sum += std::exp(s_in[w] - m);
  const float lse = std::log(sum) + m;  // float32, as HF's logsumexp
  const float to_lse = std::exp(m - lse);
  std::fill(o, o + dh, 0.0f);
  for (int64_t w = 0; w < count; ++w) {
    const float p = std::exp(s_in[w] - m) * to_lse;
    const float* v = row(h, pos[w]) + dh;
    for (int c = 0; c < dh; ++c) o[c] += p * v[c];
  }
  return lse;
}

void LshCache::hash_all(float* rotated) {
  // HF hashes every position (no padding bucket) the first time a step's sequence reaches a chunk.
  for (int h = 0; h < a_.heads; ++h) {
    for (int64_t r = 0; r < a_.hashes; ++r) {
      int32_t* b = round_buckets(h, r);
      for (int64_t j = 0; j < size_; ++j) {
        b[j] = int32_t(a_.bucket(h, r, row(h, j), rotated) + r * a_.buckets);
        max_bucket_ = std::max(max_bucket_, b[j]);
      }
    }
  }
  hashed_ = true;
}

void LshCache::step(const IsaKernels& k, float* scratch, const std::function<float*(int)>& out) {
  const int dh = a_.head_dim;
  const int64_t p = size_, L = p + 1, nh = a_.hashes, C = a_.chunk, W = a_.window();
  StepScratch t = carve(a_, capacity_, scratch);
  if (!hashed_) {
    // Nothing hashed yet (the first call was unchunked): every position so far and itself, self-masked.
    for (int h = 0; h < a_.heads; ++h) {
      const float* q = row(h, p);
      for (int64_t j = 0; j < L; ++j) {
        t.pos[j] = int32_t(j);
        t.s[j] = score(k, q, h, j, p, t.key);
      }
      attend(t.s, t.pos, L, h, out(h));
    }
    size_ = L;
    if (L >= C) hash_all(t.rotated);
    return;
  }
  // The padding bucket of a padded first call shows in the cached buckets: HF then offsets the new rounds the same.
  const int64_t stride = a_.buckets + (max_bucket_ > nh * a_.buckets - 1 ? 1 : 0);
  int32_t step_max = max_bucket_;
  for (int h = 0; h < a_.heads; ++h) {
    const float* q = row(h, p);
    for (int64_t r = 0; r < nh; ++r) {
      int32_t* b = round_buckets(h, r);
      b[p] = int32_t(a_.bucket(h, r, q, t.rotated) + r * stride);
      step_max = std::max(step_max, b[p]);
      // Stable counting sort of positions 0..p by bucket (ties in position order, so p is the last of its bucket).
      const int32_t lo = int32_t(r * a_.buckets);
      const int64_t range = bucket_limit(r) - lo + 1;
      std::fill(t.count, t.count + range + 1, 0);
      for (int64_t j = 0; j < L; ++j) ++t.count[b[j] - lo + 1];
      for (int64_t v = 0; v < range; ++v) t.count[v + 1] += t.count[v];
      int64_t rank = 0;
      for (int64_t j = 0; j < L; ++j) {
        const int32_t at = t.count[b[j] - lo]++;
        t.order[at] = int32_t(j);
        if (j == p) rank = at;
      }
      // The window: W sorted slots from the start of the chunk `before` chunks back, modulo the sequence.
      const int64_t start = (rank / C - a_.before) * C;
      for (int64_t w = 0; w < W; ++w) {
        t.pos[w] = t.order[floor_mod(start + w, L)];
        t.s[w] = score(k, q, h, t.pos[w], p, t.key);
      }
      t.lses[r] = attend(t.s, t.pos, W, h, nh == 1 ? out(h) : t.outs + r * dh);
    }
    if (nh == 1) continue;
    lsh_round_weights(t.lses, nh, 1);
    float* o = out(h);
    std::fill(o, o + dh, 0.0f);
    for (int64_t r = 0; r < nh; ++r) {
      for (int c = 0; c < dh; ++c) o[c] += t.outs[r * dh + c] * t.lses[r];
    }
  }
  max_bucket_ = step_max;
  size_ = L;
}

uint64_t LshCache::saved_count_bytes(int64_t position) const { return a_.saved_cache(position).count_bytes(); }

uint64_t LshCache::saved_bytes(int64_t position) const { return a_.saved_cache(position).bytes(); }

void LshCache::save(int64_t position, uint8_t* out) const {
  const LshSavedCache saved = a_.saved_cache(position);
  const int32_t head[2] = {hashed_ ? 1 : 0, 0};
  std::memcpy(out, head, LshSavedCache::kHeaderBytes);
  for (int h = 0; h < a_.heads; ++h) {
    for (int64_t r = 0; r < a_.hashes; ++r) {
      uint8_t* b = out + saved.buckets_at(h, r);
      if (hashed_) std::memcpy(b, round_buckets(h, r), saved.round_bytes());
      else std::memset(b, 0, saved.round_bytes());
    }
  }
  for (int h = 0; h < a_.heads; ++h) std::memcpy(out + saved.rows_at(h), row(h, 0), saved.head_rows_bytes());
}

Status LshCache::check(int64_t position, const uint8_t* in, const std::string& label) const {
  return a_.check_saved_cache(capacity_, position, in, label);
}

void LshCache::load(int64_t position, const uint8_t* in) {
  const LshSavedCache saved = a_.saved_cache(position);
  int32_t head[2];
  std::memcpy(head, in, LshSavedCache::kHeaderBytes);
  hashed_ = head[0] == 1;
  size_ = position;
  max_bucket_ = -1;
  for (int h = 0; h < a_.heads; ++h) {
    for (int64_t r = 0; r < a_.hashes; ++r) {
      int32_t* dst = round_buckets(h, r);
      std::memcpy(dst, in + saved.buckets_at(h, r), saved.round_bytes());
      for (int64_t j = 0; hashed_ && j < position; ++j) max_bucket_ = std::max(max_bucket_, dst[j]);
    }
  }
  for (int h = 0; h < a_.heads; ++h) {
    std::memcpy(rows_.data() + int64_t(h) * capacity_ * 2 * a_.head_dim, in + saved.rows_at(h), saved.head_rows_bytes());
  }
}

}  // namespace tern::cpu
