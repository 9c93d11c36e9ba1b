// SPDX-License-Identifier: MIT
#version 450
// CONCAT: y = [a | b] row by row. a [n, da], b [n, db], y [n, da + db].
#include "common/interface.glsl"
// Push constants: ConcatPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform ConcatPush {
  uint off[8];
  uint da;
  uint db;
} pc;
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

void main() {
  uint da = pc.da, db = pc.db, d = da + db;
  GRID_STRIDE(idx, call.n * d, 256) {
    uint i = idx / d, j = idx % d;
    y[pc.off[3] + idx] = j < da ? a[pc.off[1] + i * da + j] : b[pc.off[2] + i * db + (j - da)];
  }
}
