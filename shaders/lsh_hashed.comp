// SPDX-License-Identifier: MIT
#version 450
// LSH attention, after lsh_step: the cache's hashed flag (state[0]) for the next call. A call's unhashed steps hash
// every position once the sequence reaches a chunk, so the flag is set when pos0 + n >= chunk (lsh_step.comp).
// One invocation. Push constants: common/lsh.glsl.
#include "common/interface.glsl"
#include "common/lsh.glsl"
layout(local_size_x = 1) in;
layout(std430, binding = 1) buffer State { uint st[]; };

void main() {
  if (call.pos0 > 0u && call.pos0 + call.n >= pc.chunk) st[pc.off[1]] = 1u;
}
