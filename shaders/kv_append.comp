#version 450
// The streaming state of an attention op, after its call: the keys and values of positions pos0..pos0+n-1 go to
// slot j % slots, except those a later position of the same call would overwrite (j < pos0 + n - slots).
// qkv [n, 3*inner]; state [slots, 2*inner] (k | v). arg: inner, slots.
#include "common/interface.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) writeonly buffer State { float state[]; };

void main() {
  uint inner = uint(pc.arg[0]), slots = uint(pc.arg[1]);
  uint width = 2 * inner;
  GRID_STRIDE(idx, call.n * width, 256) {
    uint r = idx / width, c = idx % width;
    uint j = call.pos0 + r;
    if (j + slots < call.pos0 + call.n) continue;
    state[pc.off[2] + (j % slots) * width + c] = qkv[pc.off[1] + r * 3 * inner + inner + c];
  }
}
