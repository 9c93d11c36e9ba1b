// SPDX-License-Identifier: MIT
#version 450
// LAYER_NORM: y = (x - mean) / sqrt(var + eps) * gamma + beta, row by row. x, y [n, d]; gamma, beta [d].
// One workgroup per row (rows stride by the workgroup count); two passes, as the CPU path.
#include "common/interface.glsl"
// Push constants: LayerNormPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform LayerNormPush {
  uint off[8];
  uint d;
  float eps;
  uint has_beta;
} pc;
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 3) readonly buffer Beta { float beta[]; };
layout(std430, binding = 4) writeonly buffer Out { float y[]; };
shared float red[WG];
#include "common/reduce.glsl"

void main() {
  uint d = pc.d;
  float eps = pc.eps;
  bool has_beta = pc.has_beta != 0u;
  uint lid = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < call.n; row += gl_NumWorkGroups.x) {
    uint base = pc.off[1] + row * d;
    float s = 0.0;
    for (uint j = lid; j < d; j += WG) s += x[base + j];
    float mean = reduce_sum(s) / float(d);
    float v = 0.0;
    for (uint j = lid; j < d; j += WG) {
      float c = x[base + j] - mean;
      v += c * c;
    }
    float inv = inversesqrt(reduce_sum(v) / float(d) + eps);
    for (uint j = lid; j < d; j += WG) {
      float r = (x[base + j] - mean) * inv * gamma[pc.off[2] + j];
      if (has_beta) r += beta[pc.off[3] + j];
      y[pc.off[4] + row * d + j] = r;
    }
  }
}
