#version 450
// EMBEDDING: y[i, :] = table[ids[i], :]. ids [n] (checked by the host), table [V, d], y [n, d]. arg: d.
#include "common/interface.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
layout(std430, binding = 2) readonly buffer Table { float table[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

void main() {
  uint d = uint(pc.arg[0]);
  GRID_STRIDE(idx, call.n * d, 256) {
    uint i = idx / d, j = idx % d;
    y[pc.off[3] + idx] = table[pc.off[2] + uint(ids[pc.off[1] + i]) * d + j];
  }
}
