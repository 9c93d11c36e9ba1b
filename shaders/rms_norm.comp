// SPDX-License-Identifier: MIT
#version 450
// RMS_NORM: x, y [n, width]; gain [columns]. Each group of `group` columns among the first `columns` of a row:
//   y = x / sqrt(mean(x^2 over the group) + eps) * (weight_offset + gain),
// columns columns..width-1 copied. One workgroup per (row, group) item, items row-major (rows * groups of them,
// striding by the workgroup count); the item of a row's last group also copies the row's tail.
#include "common/interface.glsl"
// Push constants: RmsNormPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform RmsNormPush {
  uint off[8];
  uint width;    // columns of a row
  uint columns;  // normalised columns (the gain's length), a multiple of group
  uint group;    // columns per group (columns: one group a row)
  float eps;
  float weight_offset;  // Gemma: 1 (the checkpoint stores gain - 1)
} pc;
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer Gain { float gain[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };
shared float red[WG];
#include "common/reduce.glsl"

void main() {
  uint width = pc.width, columns = pc.columns, group = pc.group;
  uint groups = columns / group;
  uint lid = gl_LocalInvocationID.x;
  for (uint item = gl_WorkGroupID.x; item < call.n * groups; item += gl_NumWorkGroups.x) {
    uint row = item / groups, g0 = (item % groups) * group;
    uint in_row = pc.off[1] + row * width, out_row = pc.off[3] + row * width;
    float squares = 0.0;
    for (uint j = lid; j < group; j += WG) {
      float v = x[in_row + g0 + j];
      squares += v * v;
    }
    float inv = 1.0 / sqrt(reduce_sum(squares) / float(group) + pc.eps);
    for (uint j = lid; j < group; j += WG) {
      uint c = g0 + j;
      precise float scale = pc.weight_offset + gain[pc.off[2] + c];  // in float32, as the CPU path adds them
      precise float r = x[in_row + c] * inv * scale;
      y[out_row + c] = r;
    }
    if (g0 + group == columns) {
      for (uint c = columns + lid; c < width; c += WG) y[out_row + c] = x[in_row + c];
    }
  }
}
