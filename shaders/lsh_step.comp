#version 450
// LSH attention, a call after the first (runtime/src/ops/lsh.h, "Continuing a sequence"): Hugging Face's cached
// step for each of the call's positions in order, as the CPU's LshCache::step (cpu/lsh_cache.cpp) computes it. One
// invocation per head; position p = pos0 + i, L = p + 1 positions so far:
//   - its qk | v joins the cache;
//   - not hashed yet (the first call was unchunked): the query attends every position so far (itself scored
//     self_mask_value); once L reaches a chunk, every position of the head is hashed (offsets r * buckets);
//   - hashed: per round, the query's bucket (offset r * stride, stride = buckets + 1 when the cached buckets show
//     HF's padding bucket), a stable counting sort of positions 0..p by bucket, and the window of
//     chunk * (1 + before + after) sorted slots from the start of the chunk `before` chunks before p's, modulo L;
//     softmax with HF's float32 log-sum-exp; rounds combined by a softmax over their log-sum-exps.
// Keys: qk * rsqrt(mean(qk^2) + eps) * scale; queries: the raw qk.
//   qkv [n, 2*inner]; rotations, factors as lsh_hash; state: lsh_store's layout (uint words); out [n, inner];
//   scratch (uint words) per head: counts [hashes + buckets], order [capacity], scores [slots], positions [slots],
//   round outputs [hashes, HEAD_DIM], log-sum-exps [hashes]; slots = max(window, chunk + 1).
// The hashed flag (state[0]) is the call's start; lsh_hashed.comp moves it after this dispatch, so no head reads
// a flag another head has changed. Hashed at position p: flag || (p > pos0 && p >= chunk).
// Push constants: common/lsh.glsl.
#include "common/interface.glsl"
#include "common/lsh.glsl"
layout(local_size_x = 1) in;
layout(constant_id = 0) const uint HEAD_DIM = 64;
layout(constant_id = 1) const bool USE_FMA = true;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) readonly buffer Rot { float rot[]; };
layout(std430, binding = 3) readonly buffer Factors { float factors[]; };
layout(std430, binding = 4) buffer State { uint st[]; };
layout(std430, binding = 5) writeonly buffer Out { float outv[]; };
layout(std430, binding = 6) buffer Scratch { uint sc[]; };
float lsh_x[HEAD_DIM];
#include "common/lsh_bucket.glsl"

float q[HEAD_DIM];  // the step's query (its raw qk)
float o[HEAD_DIM];  // one softmax's output
uint h, cap, b0, r0;
uint s_off, pos_off;  // scratch: scores (float bits) and their positions

uint bucket_index(uint head, uint r, uint j) { return b0 + (head * pc.hashes + r) * cap + j; }
float row_at(uint j, uint c) { return uintBitsToFloat(st[r0 + (h * cap + j) * 2u * HEAD_DIM + c]); }

// The query against key position j; its own position scores self_mask_value (HF: seen only if nothing else is).
float score(uint j, uint self) {
  if (j == self) return pc.self_mask_value;
  float ms = 0.0;
  for (uint c = 0; c < HEAD_DIM; ++c) ms += row_at(j, c) * row_at(j, c);
  float r = 1.0 / sqrt(ms / float(HEAD_DIM) + pc.key_norm_eps);
  float s = 0.0;
  for (uint c = 0; c < HEAD_DIM; ++c) s += q[c] * (row_at(j, c) * r * pc.scale);
  return s;
}

// Softmax of the first `count` scores over their positions' values into o; returns HF's float32 log-sum-exp.
float attend(uint count) {
  float m = uintBitsToFloat(sc[s_off]);
  for (uint w = 1; w < count; ++w) m = max(m, uintBitsToFloat(sc[s_off + w]));
  float sum = 0.0;
  for (uint w = 0; w < count; ++w) sum += exp(uintBitsToFloat(sc[s_off + w]) - m);
  float lse = log(sum) + m;
  float to_lse = exp(m - lse);
  for (uint c = 0; c < HEAD_DIM; ++c) o[c] = 0.0;
  for (uint w = 0; w < count; ++w) {
    float p = exp(uintBitsToFloat(sc[s_off + w]) - m) * to_lse;
    uint j = sc[pos_off + w];
    for (uint c = 0; c < HEAD_DIM; ++c) o[c] += p * row_at(j, HEAD_DIM + c);
  }
  return lse;
}

void main() {
  h = gl_WorkGroupID.x;
  uint n = call.n, pos0 = call.pos0;
  if (pos0 == 0u || h >= pc.heads) return;
  uint heads = pc.heads, nh = pc.hashes, B = pc.n_buckets, C = pc.chunk, inner = heads * HEAD_DIM;
  uint W = C * (1u + pc.chunks_before + pc.chunks_after), slots = max(W, C + 1u);
  cap = pc.capacity;
  uint s0 = pc.off[4];
  b0 = s0 + 2u;
  r0 = b0 + heads * nh * cap;
  uint per_head = nh + B + cap + 2u * slots + nh * HEAD_DIM + nh;
  uint count_off = pc.off[6] + h * per_head, order_off = count_off + nh + B;
  s_off = order_off + cap;
  pos_off = s_off + slots;
  uint outs_off = pos_off + slots, lses_off = outs_off + nh * HEAD_DIM;
  bool hashed_at_start = st[s0] != 0u;
  // HF's padding bucket shows in the cached buckets (only the last round's can pass hashes * buckets - 1).
  uint stride = B;
  if (hashed_at_start) {
    uint most = 0u;
    for (uint hh = 0; hh < heads; ++hh)
      for (uint j = 0; j < pos0; ++j) most = max(most, st[bucket_index(hh, nh - 1u, j)]);
    if (most > nh * B - 1u) stride = B + 1u;
  }
  for (uint i = 0; i < n; ++i) {
    uint p = pos0 + i, L = p + 1u;
    uint src = pc.off[1] + i * 2u * inner + h * HEAD_DIM, dst = r0 + (h * cap + p) * 2u * HEAD_DIM;
    for (uint c = 0; c < HEAD_DIM; ++c) {
      q[c] = qkv[src + c];
      st[dst + c] = floatBitsToUint(q[c]);
      st[dst + HEAD_DIM + c] = floatBitsToUint(qkv[src + inner + c]);
    }
    uint out_at = pc.off[5] + i * inner + h * HEAD_DIM;
    if (!(hashed_at_start || (p > pos0 && p >= C))) {
      for (uint j = 0; j < L; ++j) {
        sc[s_off + j] = floatBitsToUint(score(j, p));
        sc[pos_off + j] = j;
      }
      attend(L);
      for (uint c = 0; c < HEAD_DIM; ++c) outv[out_at + c] = o[c];
      for (uint r = 0; r < nh; ++r) st[bucket_index(h, r, p)] = 0u;
      if (L >= C) {  // HF hashes every position the first time a step's sequence reaches a chunk
        for (uint j = 0; j < L; ++j) {
          for (uint c = 0; c < HEAD_DIM; ++c) lsh_x[c] = row_at(j, c);
          for (uint r = 0; r < nh; ++r) st[bucket_index(h, r, j)] = lsh_bucket(h, r, pc.off[2], pc.off[3]) + r * B;
        }
      }
      continue;
    }
    for (uint r = 0; r < nh; ++r) {
      for (uint c = 0; c < HEAD_DIM; ++c) lsh_x[c] = q[c];
      st[bucket_index(h, r, p)] = lsh_bucket(h, r, pc.off[2], pc.off[3]) + r * stride;
      // Stable counting sort of positions 0..p by bucket; round r's values lie in [r * B, r * (B + 1) + B - 1].
      uint lo = r * B, range = r + B;
      for (uint v = 0; v <= range; ++v) sc[count_off + v] = 0u;
      for (uint j = 0; j < L; ++j) sc[count_off + st[bucket_index(h, r, j)] - lo + 1u] += 1u;
      for (uint v = 0; v < range; ++v) sc[count_off + v + 1u] += sc[count_off + v];
      uint rank = 0u;
      for (uint j = 0; j < L; ++j) {
        uint k = count_off + st[bucket_index(h, r, j)] - lo;
        uint at = sc[k];
        sc[k] = at + 1u;
        sc[order_off + at] = j;
        if (j == p) rank = at;
      }
      int start = (int(rank / C) - int(pc.chunks_before)) * int(C);
      for (uint w = 0; w < W; ++w) {
        int t = (start + int(w)) % int(L);
        uint j = sc[order_off + uint(t < 0 ? t + int(L) : t)];
        sc[pos_off + w] = j;
        sc[s_off + w] = floatBitsToUint(score(j, p));
      }
      float lse = attend(W);
      if (nh == 1u) {
        for (uint c = 0; c < HEAD_DIM; ++c) outv[out_at + c] = o[c];
      } else {
        for (uint c = 0; c < HEAD_DIM; ++c) sc[outs_off + r * HEAD_DIM + c] = floatBitsToUint(o[c]);
        sc[lses_off + r] = floatBitsToUint(lse);
      }
    }
    if (nh == 1u) continue;
    // The rounds' weights exp(lse_r - logsumexp_r(lse_r)) (cpu/lsh_cache.h, lsh_round_weights).
    float mx = uintBitsToFloat(sc[lses_off]);
    for (uint r = 1; r < nh; ++r) mx = max(mx, uintBitsToFloat(sc[lses_off + r]));
    float sum = 0.0;
    for (uint r = 0; r < nh; ++r) sum += exp(uintBitsToFloat(sc[lses_off + r]) - mx);
    float total = log(sum) + mx;
    for (uint c = 0; c < HEAD_DIM; ++c) o[c] = 0.0;
    for (uint r = 0; r < nh; ++r) {
      float wr = exp(uintBitsToFloat(sc[lses_off + r]) - total);
      for (uint c = 0; c < HEAD_DIM; ++c) o[c] += uintBitsToFloat(sc[outs_off + r * HEAD_DIM + c]) * wr;
    }
    for (uint c = 0; c < HEAD_DIM; ++c) outv[out_at + c] = o[c];
  }
}
