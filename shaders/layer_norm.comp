#version 450
// LAYER_NORM: y = (x - mean) / sqrt(var + eps) * gamma + beta, row by row. x, y [n, d]; gamma, beta [d].
// One workgroup per row (rows stride by the workgroup count); two passes, as the CPU path.
// arg: d, eps (float bits), has_beta.
#include "common/interface.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 3) readonly buffer Beta { float beta[]; };
layout(std430, binding = 4) writeonly buffer Out { float y[]; };
shared float red[WG];
#include "common/reduce.glsl"

void main() {
  uint d = uint(pc.arg[0]);
  float eps = intBitsToFloat(pc.arg[1]);
  bool has_beta = pc.arg[2] != 0;
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
