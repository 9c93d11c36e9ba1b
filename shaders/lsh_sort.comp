// SPDX-License-Identifier: MIT
#version 450
// LSH attention, step 2 (runtime/src/ops/lsh.h): per head and round, the positions sorted by bucket, stably (ties in
// position order), pads (positions n..n_pad-1) after every bucket: a counting sort in one workgroup per (round, head).
//   buckets [heads, hashes, n]; counts [heads, hashes, n_buckets] (scratch);
//   order [heads, hashes * n_pad]: round r's positions at r * n_pad.., in sorted order.
// Histogram with atomics, an exclusive scan of the counts, then tiles of WG positions in position order: each
// position's slot is its bucket's next free slot plus the number of equal buckets before it in the tile.
// Work O(n * WG + n_buckets) per round; nothing is n x n. Does nothing when the call is not chunked.
// Push constants: common/lsh.glsl.
#include "common/interface.glsl"
#include "common/lsh.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 1) readonly buffer Buckets { uint buckets[]; };
layout(std430, binding = 2) coherent buffer Counts { uint counts[]; };
layout(std430, binding = 3) writeonly buffer Order { uint order[]; };
shared uint part[WG];
shared uint tile_b[WG];

void sync() {
  memoryBarrierBuffer();
  memoryBarrierShared();
  barrier();
}

void main() {
  uint hashes = pc.hashes, n_buckets = pc.n_buckets;
  uint n = call.n;
  if (!lsh_chunked(n)) return;  // uniform across the workgroup
  uint n_pad = lsh_padded(n);
  uint lid = gl_LocalInvocationID.x;
  uint rnd = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
  uint cb = pc.off[2] + (h * hashes + rnd) * n_buckets;
  uint bb = pc.off[1] + (h * hashes + rnd) * n;
  uint ob = pc.off[3] + h * hashes * n_pad + rnd * n_pad;

  for (uint k = lid; k < n_buckets; k += WG) counts[cb + k] = 0u;
  sync();
  for (uint j = lid; j < n; j += WG) atomicAdd(counts[cb + buckets[bb + j]], 1u);
  sync();
  // Exclusive scan: each invocation a contiguous run of buckets; the runs' sums scanned in shared memory.
  uint per = (n_buckets + WG - 1u) / WG;
  uint lo = min(n_buckets, lid * per), hi = min(n_buckets, lo + per);
  uint sum = 0u;
  for (uint k = lo; k < hi; ++k) sum += counts[cb + k];
  part[lid] = sum;
  sync();
  for (uint s = 1u; s < WG; s <<= 1) {
    uint add = lid >= s ? part[lid - s] : 0u;
    barrier();
    part[lid] += add;
    barrier();
  }
  uint running = part[lid] - sum;  // exclusive
  for (uint k = lo; k < hi; ++k) {
    uint c = counts[cb + k];
    counts[cb + k] = running;
    running += c;
  }
  sync();
  for (uint t0 = 0u; t0 < n; t0 += WG) {
    uint j = t0 + lid;
    bool live = j < n;
    uint b = live ? buckets[bb + j] : 0xFFFFFFFFu;
    tile_b[lid] = b;
    sync();
    uint before = 0u, same = 0u;
    for (uint t = 0u; t < WG; ++t) {
      if (tile_b[t] == b) {
        ++same;
        if (t < lid) ++before;
      }
    }
    uint start = live ? counts[cb + b] : 0u;
    sync();
    if (live) {
      order[ob + start + before] = j;
      if (before + 1u == same) counts[cb + b] = start + same;  // the tile's last of its bucket moves the bucket on
    }
    sync();
  }
  for (uint j = n + lid; j < n_pad; j += WG) order[ob + j] = j;
}
