// SPDX-License-Identifier: MIT
#version 450
// ATTENTION (Routing), step 2: the score of every normalised query and key against every centroid of its head,
// summed in float32 in column order as ops/routing.cpp's routing_scores (each product rounded before it is added:
// `precise` here, -ffp-contract=off there).
//   xn [Hr, 2, max_batch, HEAD_DIM]; centroids [Hr, K, HEAD_DIM]; scores [Hr, 2, K, max_batch].
// Push constants: common/routing.glsl.
#include "common/interface.glsl"
#include "common/routing.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint HEAD_DIM = 64;
layout(std430, binding = 1) readonly buffer Xn { float xn[]; };
layout(std430, binding = 2) readonly buffer Mu { float mu[]; };
layout(std430, binding = 3) writeonly buffer Scores { float scores[]; };

void main() {
  uint routing_heads = pc.routing_heads, clusters = pc.clusters, max_batch = pc.max_batch;
  uint n = call.n;
  // One invocation per (position, cluster, query or key, routing head); i fastest.
  GRID_STRIDE(idx, n * clusters * 2 * routing_heads, 64) {
    uint i = idx % n, rest = idx / n;
    uint c = rest % clusters;
    rest /= clusters;
    uint which = rest % 2, r = rest / 2;
    uint x = pc.off[1] + ((r * 2 + which) * max_batch + i) * HEAD_DIM;
    uint m = pc.off[2] + (r * clusters + c) * HEAD_DIM;
    precise float s = 0.0;
    for (uint d = 0; d < HEAD_DIM; ++d) s += xn[x + d] * mu[m + d];
    scores[pc.off[3] + ((r * 2 + which) * clusters + c) * max_batch + i] = s;
  }
}
