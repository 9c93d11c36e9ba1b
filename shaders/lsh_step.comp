// SPDX-License-Identifier: MIT
#version 450
// LSH attention, a call after the first (runtime/src/ops/lsh.h, "Continuing a sequence"): Hugging Face's cached
// step, as the CPU's LshCache::step (cpu/lsh_cache.cpp) computes it, one workgroup per (head, call position).
// lsh_step_store has put every call position's qk | v and buckets into the cache, so the positions step
// independently. Position p = pos0 + i, L = p + 1 positions so far:
//   - not hashed (the first call was unchunked, and p is the call's first or p < chunk): the query attends every
//     position 0..p, itself scored self_mask_value; one softmax;
//   - hashed: per round r, p's rank in the stable sort of positions 0..p by bucket (p is the last of its bucket), the
//     window of W = chunk * (1 + before + after) sorted slots from the start of the chunk `before` chunks before
//     p's, modulo L (repeating when W > L), a softmax over it with HF's float32 log-sum-exp; the rounds combined by
//     a softmax over their log-sum-exps.
// The sort is never written out. Bucket counts give each bucket's first slot S_v; a position's slot is S_v plus its
// rank among its bucket's positions, which only the (at most two) buckets cut by the window's ends need in full: a
// scan over contiguous position tiles gives theirs. A bucket wholly inside the window lists its positions, and each
// one's rank is counted within that list (at most min(W, L) entries). So no invocation loops more than about
// L / WG + W^2 / WG + W * HEAD_DIM / WG times per round (lavapipe cuts an invocation off after 65,535 iterations).
// Keys: qk * rsqrt(mean(qk^2) + eps) * scale; queries: the raw qk.
//   qkv [n, row] (qk | v, qk at k_col); state (uint words) as lsh_store; out [n, inner];
//   scratch (uint words): [0] the stride (lsh_stride), then per (head, workgroup row) counts [buckets + hashes + 1],
//   pos [slots], score [slots], list [slots], outs [hashes, HEAD_DIM], lses [hashes]; slots = max(W, chunk + 1).
// Push constants: common/lsh.glsl; step_first: the call position of workgroup row 0 (a dispatch covers
// gl_NumWorkGroups.y positions).
#include "common/interface.glsl"
#include "common/lsh.glsl"
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const uint HEAD_DIM = 64;
layout(constant_id = 1) const uint WG = 256;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) readonly buffer State { uint st[]; };
layout(std430, binding = 3) writeonly buffer Out { float outv[]; };
layout(std430, binding = 4) coherent buffer Scratch { uint sc[]; };
shared uint red[WG];     // reductions
shared uint tile_a[WG];  // per tile: positions of the window's first bucket, then their exclusive prefix
shared uint tile_b[WG];  // the same for the window's last bucket
shared float q[HEAD_DIM];
shared uint rank_s, start_s, va_s, vb_s, listed_s;

uint h, t, p, L, b0, r0, cnt_at, pos_at, score_at, list_at;

void sync() {
  memoryBarrierBuffer();
  memoryBarrierShared();
  barrier();
}

float row_at(uint j, uint c) { return uintBitsToFloat(st[r0 + (h * pc.capacity + j) * 2u * HEAD_DIM + c]); }

// The query against key position j; its own position scores self_mask_value (HF: seen only if nothing else is).
float score(uint j) {
  if (j == p) return pc.self_mask_value;
  float ms = 0.0;
  for (uint c = 0; c < HEAD_DIM; ++c) ms += row_at(j, c) * row_at(j, c);
  float r = 1.0 / sqrt(ms / float(HEAD_DIM) + pc.key_norm_eps);
  float s = 0.0;
  for (uint c = 0; c < HEAD_DIM; ++c) s += q[c] * (row_at(j, c) * r * pc.scale);
  return s;
}

// A tree reduction over the workgroup, the maximum or the sum (every invocation calls it).
float reduce(float v, bool maximum) {
  red[t] = floatBitsToUint(v);
  sync();
  for (uint s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) {
      float a = uintBitsToFloat(red[t]), b = uintBitsToFloat(red[t + s]);
      red[t] = floatBitsToUint(maximum ? max(a, b) : a + b);
    }
    sync();
  }
  float m = uintBitsToFloat(red[0]);
  sync();
  return m;
}

// Softmax of the scratch's first `count` scores over their positions' values: invocation t < HEAD_DIM returns
// channel t of the output; lse: HF's float32 log-sum-exp.
float attend(uint count, out float lse) {
  float m = uintBitsToFloat(0xff800000u);  // -inf
  for (uint w = t; w < count; w += WG) m = max(m, uintBitsToFloat(sc[score_at + w]));
  m = reduce(m, true);
  float part = 0.0;
  for (uint w = t; w < count; w += WG) part += exp(uintBitsToFloat(sc[score_at + w]) - m);
  lse = log(reduce(part, false)) + m;
  float to_lse = exp(m - lse);
  for (uint w = t; w < count; w += WG) {
    sc[score_at + w] = floatBitsToUint(exp(uintBitsToFloat(sc[score_at + w]) - m) * to_lse);
  }
  sync();
  float o = 0.0;
  if (t < HEAD_DIM) {
    for (uint w = 0; w < count; ++w) o += uintBitsToFloat(sc[score_at + w]) * row_at(sc[pos_at + w], HEAD_DIM + t);
  }
  sync();
  return o;
}

uint floor_mod(int a, uint b) {
  int r = a % int(b);
  return uint(r < 0 ? r + int(b) : r);
}

// Round r's bucket of position j, less the round's lowest value r * buckets: in [0, range) (clamped, so a count
// index stays inside the scratch whatever the cache holds).
uint bucket(uint r, uint j, uint range) {
  return min(st[b0 + (h * pc.hashes + r) * pc.capacity + j] - r * pc.n_buckets, range - 1u);
}

// The bucket holding sorted slot x: the last v with S_v <= x (S_0 = 0; an empty bucket's S_v is its successor's).
uint bucket_of_slot(uint x, uint range) {
  uint lo = 0u, hi = range - 1u;
  while (lo < hi) {
    uint mid = (lo + hi + 1u) / 2u;
    if (sc[cnt_at + mid] <= x) lo = mid; else hi = mid - 1u;
  }
  return lo;
}

// Position j at sorted slot s: every window slot w with (start + w) mod L == s.
void place(uint j, uint s, uint start, uint W) {
  for (uint w = floor_mod(int(s) - int(start), L); w < W; w += L) sc[pos_at + w] = j;
}

void main() {
  h = gl_WorkGroupID.x;
  t = gl_LocalInvocationID.x;
  uint i = pc.step_first + gl_WorkGroupID.y, n = call.n, pos0 = call.pos0;
  if (pos0 == 0u || i >= n || h >= pc.heads) return;  // uniform across the workgroup
  uint heads = pc.heads, nh = pc.hashes, B = pc.n_buckets, C = pc.chunk, inner = heads * HEAD_DIM;
  uint W = C * (1u + pc.chunks_before + pc.chunks_after), slots = max(W, C + 1u);
  p = pos0 + i;
  L = p + 1u;
  uint s0 = pc.off[2];
  b0 = s0 + 2u;
  r0 = b0 + heads * nh * pc.capacity;
  uint per_row = B + nh + 1u + 3u * slots + nh * HEAD_DIM + nh;
  cnt_at = pc.off[4] + 1u + (h * gl_NumWorkGroups.y + gl_WorkGroupID.y) * per_row;
  pos_at = cnt_at + B + nh + 1u;
  score_at = pos_at + slots;
  list_at = score_at + slots;
  uint outs_at = list_at + slots, lses_at = outs_at + nh * HEAD_DIM;
  uint out_at = pc.off[3] + i * inner + h * HEAD_DIM;
  if (t < HEAD_DIM) q[t] = qkv[pc.off[1] + i * pc.row + pc.k_col + h * HEAD_DIM + t];
  sync();
  if (!(st[s0] != 0u || (p > pos0 && p >= C))) {
    // Not hashed: L <= chunk + 1 (the cache stays unhashed only while the sequence is within a chunk).
    uint count = min(L, slots);
    for (uint w = t; w < count; w += WG) {
      sc[pos_at + w] = w;
      sc[score_at + w] = floatBitsToUint(score(w));
    }
    sync();
    float lse;
    float o = attend(count, lse);
    if (t < HEAD_DIM) outv[out_at + t] = o;
    return;
  }
  for (uint r = 0; r < nh; ++r) {
    uint range = B + r;  // round r's values lie in [r * B, r * (B + 1) + B - 1]
    uint bp = bucket(r, p, range);
    // Bucket counts, and p's rank: the positions before it in a bucket up to its own.
    for (uint v = t; v <= range; v += WG) sc[cnt_at + v] = 0u;
    sync();
    uint before_p = 0u;
    for (uint j = t; j < L; j += WG) {
      uint v = bucket(r, j, range);
      atomicAdd(sc[cnt_at + v], 1u);
      if (j < p && v <= bp) ++before_p;
    }
    red[t] = before_p;
    sync();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
      if (t < s) red[t] += red[t + s];
      sync();
    }
    if (t == 0u) rank_s = red[0];
    // The counts to first slots S_v, by segments of the bucket axis: segment sums, their prefix, then each segment.
    uint seg = (range + WG - 1u) / WG, v0 = min(range, t * seg), v1 = min(range, v0 + seg);
    uint sum = 0u;
    for (uint v = v0; v < v1; ++v) sum += sc[cnt_at + v];
    tile_a[t] = sum;
    sync();
    if (t == 0u) {
      uint run = 0u;
      for (uint k = 0; k < WG; ++k) {
        uint c = tile_a[k];
        tile_a[k] = run;
        run += c;
      }
    }
    sync();
    uint run = tile_a[t];
    for (uint v = v0; v < v1; ++v) {
      uint c = sc[cnt_at + v];
      sc[cnt_at + v] = run;
      run += c;
    }
    sync();
    if (t == 0u) {
      uint start = floor_mod((int(rank_s / C) - int(pc.chunks_before)) * int(C), L);
      start_s = start;
      va_s = bucket_of_slot(start, range);
      vb_s = bucket_of_slot((start + W - 1u) % L, range);
      listed_s = 0u;
    }
    sync();
    uint start = start_s, va = va_s, vb = vb_s;
    // Ranks within the two end buckets: each tile's counts, their prefix, then each tile in position order.
    uint T = (L + WG - 1u) / WG, j0 = min(L, t * T), j1 = min(L, j0 + T);
    uint na = 0u, nb = 0u;
    for (uint j = j0; j < j1; ++j) {
      uint v = bucket(r, j, range);
      if (v == va) ++na; else if (v == vb) ++nb;
    }
    tile_a[t] = na;
    tile_b[t] = nb;
    sync();
    if (t == 0u) {
      uint ra = 0u, rb = 0u;
      for (uint k = 0; k < WG; ++k) {
        uint a = tile_a[k], b = tile_b[k];
        tile_a[k] = ra;
        tile_b[k] = rb;
        ra += a;
        rb += b;
      }
    }
    sync();
    uint ka = tile_a[t], kb = tile_b[t];
    for (uint j = j0; j < j1; ++j) {
      uint v = bucket(r, j, range);
      if (v == va) {
        place(j, sc[cnt_at + v] + ka++, start, W);
      } else if (v == vb) {
        place(j, sc[cnt_at + v] + kb++, start, W);
      } else if (floor_mod(int(sc[cnt_at + v]) - int(start), L) < W) {  // a bucket wholly inside the window
        uint e = atomicAdd(listed_s, 1u);
        if (e < slots) sc[list_at + e] = j;
      }
    }
    sync();
    uint listed = min(listed_s, slots);
    for (uint e = t; e < listed; e += WG) {
      uint j = sc[list_at + e], v = bucket(r, j, range), k = 0u;
      for (uint f = 0; f < listed; ++f) {
        uint jf = sc[list_at + f];
        if (jf < j && bucket(r, jf, range) == v) ++k;
      }
      place(j, sc[cnt_at + v] + k, start, W);
    }
    sync();
    for (uint w = t; w < W; w += WG) sc[score_at + w] = floatBitsToUint(score(sc[pos_at + w]));
    sync();
    float lse;
    float o = attend(W, lse);
    if (nh == 1u) {
      if (t < HEAD_DIM) outv[out_at + t] = o;
    } else {
      if (t < HEAD_DIM) sc[outs_at + r * HEAD_DIM + t] = floatBitsToUint(o);
      if (t == 0u) sc[lses_at + r] = floatBitsToUint(lse);
    }
    sync();
  }
  if (nh == 1u || t >= HEAD_DIM) return;
  // The rounds' weights exp(lse_r - logsumexp_r(lse_r)) (cpu/lsh_cache.h, lsh_round_weights).
  float mx = uintBitsToFloat(sc[lses_at]);
  for (uint r = 1; r < nh; ++r) mx = max(mx, uintBitsToFloat(sc[lses_at + r]));
  float total = 0.0;
  for (uint r = 0; r < nh; ++r) total += exp(uintBitsToFloat(sc[lses_at + r]) - mx);
  total = log(total) + mx;
  float o = 0.0;
  for (uint r = 0; r < nh; ++r) {
    o += uintBitsToFloat(sc[outs_at + r * HEAD_DIM + t]) * exp(uintBitsToFloat(sc[lses_at + r]) - total);
  }
  outv[out_at + t] = o;
}
