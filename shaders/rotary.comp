// SPDX-License-Identifier: MIT
#version 450
// ROTARY: x, y [n, width]; the first `heads` blocks of head_dim columns rotate their first rotary_dim columns in
// pairs (a, b) = (x[first], x[second]):  a' = a cos - b sin,  b' = b cos + a sin;  every other column is copied.
// HALF_SPLIT pairs column k with k + pairs, INTERLEAVED 2k with 2k + 1 (ops/rotary.h: Rotary::first, second).
// cos_sin [n, 2, pairs]: row i's cos then sin per pair, attention_factor included, written by the host for each
// call (ops_decoder.cpp: rotary_cos_sin of the call's positions and frequencies), so the angles are the CPU path's
// exactly, whatever the device's sin and cos of large arguments.
#include "common/interface.glsl"
// Push constants: RotaryPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform RotaryPush {
  uint off[8];
  uint width;  // columns of a row
  uint heads;  // head blocks rotated, from column 0
  uint head_dim;
  uint pairs;  // rotary_dim / 2
  uint interleaved;
} pc;
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer CosSin { float cos_sin[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

void main() {
  uint width = pc.width, head_dim = pc.head_dim, pairs = pc.pairs;
  bool interleaved = pc.interleaved != 0u;
  GRID_STRIDE(idx, call.n * width, 256) {
    uint i = idx / width, col = idx % width;
    uint h = col / head_dim, c = col % head_dim;
    uint at = pc.off[1] + idx;
    if (h >= pc.heads || c >= 2 * pairs) {
      y[pc.off[3] + idx] = x[at];
      continue;
    }
    uint k = interleaved ? c / 2 : c % pairs;
    bool is_first = interleaved ? (c % 2 == 0) : (c < pairs);
    uint first = interleaved ? 2 * k : k, second = interleaved ? 2 * k + 1 : k + pairs;
    float a = x[at - c + first], b = x[at - c + second];
    float cs = cos_sin[pc.off[2] + 2 * i * pairs + k], sn = cos_sin[pc.off[2] + (2 * i + 1) * pairs + k];
    // Each product rounded before the sum, as the CPU path computes it (no fused multiply-add).
    precise float r = is_first ? a * cs - b * sn : b * cs + a * sn;
    y[pc.off[3] + idx] = r;
  }
}
