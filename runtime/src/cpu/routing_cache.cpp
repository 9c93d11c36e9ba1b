// SPDX-License-Identifier: MIT
#include "cpu/routing_cache.h"

#include <algorithm>
#include <cstring>

namespace tern::cpu {
namespace {

// The weakest of `count` ranked entries: the lowest score, and among equal scores the later position (a stable sort
// by score, descending, ranks it last). Positions null: the entries are query scores, whose order is irrelevant.
int64_t weakest(const float* scores, const int32_t* positions, int64_t count) {
  int64_t m = 0;
  for (int64_t i = 1; i < count; ++i) {
    if (scores[i] < scores[m] || (positions && scores[i] == scores[m] && positions[i] > positions[m])) m = i;
  }
  return m;
}

// Copies `count` elements of `from` to `to` and returns the end of what was written; nothing when there are none
// (a model without local heads has no ring: its vector's data() may be null, which memcpy must not see).
template <typename T, typename A>
uint8_t* put(uint8_t* to, const std::vector<T, A>& from) {
  if (!from.empty()) std::memcpy(to, from.data(), from.size() * sizeof(T));
  return to + from.size() * sizeof(T);
}

template <typename T, typename A>
const uint8_t* take(const uint8_t* from, std::vector<T, A>* to) {
  if (!to->empty()) std::memcpy(to->data(), from, to->size() * sizeof(T));
  return from + to->size() * sizeof(T);
}

}  // namespace

RoutingCache::RoutingCache(const RoutingAttention& a, int64_t capacity, BufferSource* buffers)
    : a_(a),
      capacity_(capacity),
      ring_slots_(a.ring_slots(capacity)),
      slots_(a.cluster_slots(capacity)),
      cluster_floats_(int64_t(a.routing_heads()) * a.clusters * slots_),
      ring_(large_vector<float>(buffers)),
      key_pos_(large_vector<int32_t>(buffers)),
      floats_(large_vector<float>(buffers)) {
  ring_.assign(size_t(int64_t(a.local_heads) * ring_slots_ * 2 * a.head_dim), 0.0f);
  key_pos_.assign(size_t(cluster_floats_), -1);
  floats_.assign(size_t(cluster_floats_ * (2 + 2 * int64_t(a.head_dim))), 0.0f);
}

void RoutingCache::reset() {
  size_ = 0;
  std::fill(ring_.begin(), ring_.end(), 0.0f);
  std::fill(key_pos_.begin(), key_pos_.end(), -1);
  std::fill(floats_.begin(), floats_.end(), 0.0f);
}

void RoutingCache::store_local(int h, int64_t n, const float* key0, const float* value0, int64_t stride) {
  const int dh = a_.head_dim;
  for (int64_t p = std::max<int64_t>(0, n - ring_slots_); p < n; ++p) {
    float* row = ring_row(h, p);
    std::memcpy(row, key0 + p * stride, size_t(dh) * sizeof(float));
    std::memcpy(row + dh, value0 + p * stride, size_t(dh) * sizeof(float));
  }
}

void RoutingCache::put_key(int r, int64_t c, int64_t m, int64_t p, float s, const float* kn, const float* v) {
  const int dh = a_.head_dim;
  key_pos_[size_t(slot(r, c) + m)] = int32_t(p);
  key_score(r, c)[m] = s;
  float* kt = keys_t(r, c);
  for (int d = 0; d < dh; ++d) kt[d * slots_ + m] = kn[d];
  std::memcpy(values(r, c) + m * dh, v, size_t(dh) * sizeof(float));
}

void RoutingCache::store_queries(int r, int64_t c, int64_t count, const int32_t* members, const float* scores) {
  float* held = query_score(r, c);
  for (int64_t m = 0; m < count; ++m) held[m] = scores[members[m]];
}

void RoutingCache::store_keys(int r, int64_t c, int64_t count, const int32_t* members, const float* scores,
                              const float* normalised, const float* value0, int64_t stride) {
  for (int64_t m = 0; m < count; ++m) {
    const int64_t p = members[m];
    put_key(r, c, m, p, scores[p], normalised + p * a_.head_dim, value0 + p * stride);
  }
}

int64_t RoutingCache::step_floats() const {
  const int64_t dh = a_.head_dim;
  // normalised query and key, one cluster's output and the sum, scores; a local head's window transposed and its values
  return 4 * dh + std::max(slots_, ring_slots_) + 2 * ring_slots_ * dh;
}

void RoutingCache::step(const IsaKernels& k, const float* qkv, float* scratch, float* out) {
  const int dh = a_.head_dim;
  const HeadLayout heads = a_.layout();  // qkv: one row of the op's input
  const int64_t p = size_, R = ring_slots_, W = slots_;
  float* qn = scratch;
  float* kn = qn + dh;
  float* o = kn + dh;
  float* acc = o + dh;
  float* s = acc + dh;
  float* kt = s + std::max(W, R);  // [dh, R]
  float* vt = kt + R * dh;         // [R, dh]
  // Local heads: the keys of p's chunk and of the chunk before, ascending, from the ring.
  for (int h = 0; h < a_.local_heads; ++h) {
    float* row = ring_row(h, p);
    std::memcpy(row, qkv + heads.k_column(h), size_t(dh) * sizeof(float));
    std::memcpy(row + dh, qkv + heads.v_column(h), size_t(dh) * sizeof(float));
    const int64_t lo = std::max<int64_t>(0, (p / a_.local_chunk - 1) * a_.local_chunk);
    for (int64_t j = lo; j <= p; ++j) {
      const float* kv = ring_row(h, j);
      for (int d = 0; d < dh; ++d) kt[d * R + (j - lo)] = kv[d];
      std::memcpy(vt + (j - lo) * dh, kv + dh, size_t(dh) * sizeof(float));
    }
    k.routing_attend(kt, R, vt, dh, qkv + heads.q_column(h), a_.scale, p - lo + 1, s, out + heads.out_column(h));
  }
  // Routing heads: per cluster, p's key competes for a slot and p's query for membership.
  for (int h = a_.local_heads; h < a_.heads; ++h) {
    const int r = h - a_.local_heads;
    const float* v = qkv + heads.v_column(h);
    routing_normalize(qkv + heads.q_column(h), dh, a_.norm_eps, qn);
    routing_normalize(qkv + heads.k_column(h), dh, a_.norm_eps, kn);
    std::fill(acc, acc + dh, 0.0f);
    float count = 0.0f;
    for (int64_t c = 0; c < a_.clusters; ++c) {
      const float* mu = a_.centroid(r, c);
      float sq = 0.0f, sk = 0.0f;  // as the first call scored them
      routing_scores(qn, 1, dh, mu, &sq);
      routing_scores(kn, 1, dh, mu, &sk);
      bool joins = true;
      if (p < W) {  // fewer positions than the window: every one is a member
        put_key(r, c, p, p, sk, kn, v);
        query_score(r, c)[p] = sq;
      } else {
        const int32_t* pos = key_pos_.data() + slot(r, c);
        const int64_t weak = weakest(key_score(r, c), pos, W);
        if (sk > key_score(r, c)[weak]) put_key(r, c, weak, p, sk, kn, v);
        float* held = query_score(r, c);
        const int64_t q_weak = weakest(held, nullptr, W);
        joins = sq > held[q_weak];
        if (joins) held[q_weak] = sq;
      }
      if (!joins) continue;
      k.routing_attend(keys_t(r, c), W, values(r, c), dh, qn, a_.scale, std::min(W, p + 1), s, o);
      for (int d = 0; d < dh; ++d) acc[d] += o[d];
      count += 1.0f;
    }
    const float inv = 1.0f / (count + a_.count_eps);
    float* dst = out + heads.out_column(h);
    for (int d = 0; d < dh; ++d) dst[d] = acc[d] * inv;
  }
  ++size_;
}

uint64_t RoutingCache::saved_count_bytes(int64_t) const { return key_pos_.size() * sizeof(int32_t); }

void RoutingCache::save(int64_t, uint8_t* out) const { put(put(put(out, key_pos_), ring_), floats_); }

Status RoutingCache::check(int64_t position, const uint8_t* in, const std::string& label) const {
  const int64_t held = std::min(slots_, position);
  for (int64_t cluster = 0; cluster < int64_t(a_.routing_heads()) * a_.clusters; ++cluster) {
    for (int64_t m = 0; m < slots_; ++m) {
      int32_t p = 0;
      std::memcpy(&p, in + size_t(cluster * slots_ + m) * sizeof(int32_t), sizeof p);
      const bool ok = m < held ? p >= 0 && p < position : p == -1;
      if (!ok) {
        return InvalidArgument(label + ": saved routing key position " + std::to_string(p) + " in slot " +
                               std::to_string(m) + " of cluster " + std::to_string(cluster) +
                               " cannot follow a sequence of " + std::to_string(position) + " positions");
      }
    }
  }
  return Status::Ok();
}

void RoutingCache::load(int64_t position, const uint8_t* in) {
  take(take(take(in, &key_pos_), &ring_), &floats_);
  size_ = position;
}

}  // namespace tern::cpu
