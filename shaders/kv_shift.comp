// SPDX-License-Identifier: MIT
#version 450
// A context shift of a dense attention op's state (VulkanBackend::shift; the CPU's AttentionKernel::shift): the
// n = keep entries of positions d.. (d = pos0 - n, pos0 the positions held) move to slots 0..n-1, each key rotated
// by -d positions, R(p - d) k = R(-d) R(p) k; values just move.
// state [slots, 2*kv_inner] (k | v, slot j = position j), in place; cos_sin [2, pairs]: the cos then sin of
// float32(-d) * inv_freq, attention_factor not applied again (written by the host before the shift).
// One invocation a value column, a key column past rotary_dim, or a key pair (its first column; the second does
// nothing): it walks the slots upward, so slot d + e is read before anything writes it (d + e > e).
#include "common/interface.glsl"
#include "common/rotate_pair.glsl"
// Push constants: KvShiftPush, mirrored field for field in runtime/src/vulkan/push_constants_attention.h.
layout(push_constant) uniform KvShiftPush {
  uint off[8];
  uint kv_inner;  // kv_heads * head_dim
  uint head_dim;
  uint pairs;  // rotary_dim / 2
  uint interleaved;
} pc;
layout(local_size_x = 64) in;
layout(std430, binding = 1) buffer State { float state[]; };
layout(std430, binding = 2) readonly buffer CosSin { float cos_sin[]; };

void main() {
  uint kv_inner = pc.kv_inner, width = 2 * kv_inner, head_dim = pc.head_dim, pairs = pc.pairs;
  uint keep = call.n, d = call.pos0 - call.n;
  GRID_STRIDE(c, width, 64) {
    uint hc = c % head_dim;
    uint base = pc.off[1];
    if (c >= kv_inner || hc >= 2 * pairs) {
      for (uint e = 0; e < keep; ++e) state[base + e * width + c] = state[base + (d + e) * width + c];
      continue;
    }
    uint k, partner;
    bool is_first;
    rotary_pair(hc, pairs, pc.interleaved != 0u, k, is_first, partner);
    if (!is_first) continue;
    uint other = c - hc + partner;
    float cs = cos_sin[pc.off[2] + k], sn = cos_sin[pc.off[2] + pairs + k];
    for (uint e = 0; e < keep; ++e) {
      float a = state[base + (d + e) * width + c], b = state[base + (d + e) * width + other];
      state[base + e * width + c] = rotated(a, b, cs, sn, true);
      state[base + e * width + other] = rotated(b, a, cs, sn, false);
    }
  }
}
