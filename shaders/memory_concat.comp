// SPDX-License-Identifier: MIT
#version 450
// ATTENTION with a memory, step 1: ctx = [memory; h], the rows the keys and values come from (the raw rows: the
// memory update reads them too, after the state they came from has been read).
//   RelativeXL: state [M, d], zeros before the first call (HF's init_mems), ctx [M + n, d]
//   Compressive: state [C + M + rate - 1, d] (cmem rows 0.., mem rows C..), ctx [|cmem| + |mem| + n, d]
// h [n, d]. Push constants: common/memory_rows.glsl.
#include "common/interface.glsl"
#include "common/memory_rows.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer H { float h[]; };
layout(std430, binding = 2) readonly buffer State { float state[]; };
layout(std430, binding = 3) writeonly buffer Ctx { float ctx[]; };

void main() {
  uint d = pc.d;
  uint prefix = prefix_rows();
  uint cn = pc.family == 0u ? prefix : cmem_rows(call.pos0);
  uint c_cap = pc.cmem_len;
  GRID_STRIDE(idx, (prefix + call.n) * d, 256) {
    uint r = idx / d, c = idx % d;
    float v;
    if (r >= prefix) {
      v = h[pc.off[1] + (r - prefix) * d + c];
    } else if (pc.family == 0u) {
      v = call.pos0 == 0 ? 0.0 : state[pc.off[2] + r * d + c];
    } else {
      v = r < cn ? state[pc.off[2] + r * d + c] : state[pc.off[2] + (c_cap + r - cn) * d + c];
    }
    ctx[pc.off[3] + idx] = v;
  }
}
