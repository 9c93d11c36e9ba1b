// SPDX-License-Identifier: MIT
#version 450
// LINEAR for calls of a few rows (n <= ROWS, generation): y = x W^T + b. x [n, in], W [out, in], b [out] (HAS_BIAS),
// y [n, y_stride]; bindings, push constants and the parts of a split weight as shaders/linear.comp (ops_linear.cpp
// records both and runs this one when n <= ROWS).
// A matrix-vector product: a workgroup of WG invocations computes OUTS consecutive columns of y for all n rows. Its
// invocations walk k together, consecutive invocations on consecutive units of W (VEC16 below), so every W element is
// loaded once, by one invocation, for all n rows of x; each invocation keeps ROWS * OUTS partial sums, which the
// workgroup then adds up: with subgroupAdd (SUBGROUP_ADD, where the device has subgroup arithmetic in compute) and
// one shared-memory step between subgroups, or a shared-memory tree. The host specialises ROWS per tier of n
// (ops_linear.cpp): rows past n are computed on row 0 and not written, so the work follows ROWS, not n.
// Fusions (vulkan/fusion.h; the ops they stand for are not run in these calls): NORM applies a LAYER_NORM (1) or a
// whole-row RMS_NORM (2) to x on the way in, x's binding then being the norm's input, its statistics computed by every
// workgroup for its rows (the formulas of shaders/layer_norm.comp and rms_norm.comp); ACT (a kind of
// common/activation.glsl, or -1) and RESIDUAL (y's ADD: its other input, added last) apply to y + b on the way out.
// A norm's weights and the residual share bindings 6 (7: beta), so a dispatch has one or the other.
// Built eight times (cmake/EmbedShaders.cmake): the four weight forms of linear.comp (none, WEIGHT_F16, WEIGHT_I8,
// WEIGHT_I4: W as quant_weight.glsl lays it out, widened as core/dequantize.cpp does), each with and without
// SUBGROUP_ADD.
#if defined(WEIGHT_I8) || defined(WEIGHT_I4)
#define WEIGHT_QUANT
#endif
#ifdef WEIGHT_F16
#extension GL_EXT_shader_16bit_storage : require
#define WEIGHT_T float16_t
#else
#define WEIGHT_T float
#endif
#ifdef SUBGROUP_ADD
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#extension GL_EXT_control_flow_attributes : require
#include "common/interface.glsl"
// Push constants: LinearPush (runtime/src/vulkan/push_constants.h), as linear.comp declares it.
layout(push_constant) uniform LinearPush {
  uint off[8];
  uint in_dim;
  uint out_dim;
  uint y_stride;
  uint group;  // WEIGHT_QUANT: inputs per scale (in_dim: one scale per row)
  float norm_eps;
  float norm_offset;  // RMS_NORM's weight_offset
  uint norm_beta;     // LAYER_NORM with beta
  float cap;          // ACT SOFTCAP's cap
} pc;
#include "common/math.glsl"
#include "common/activation.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;         // SUBGROUP_ADD: a multiple of the subgroup size; else a power of 2
layout(constant_id = 1) const bool HAS_BIAS = false;
layout(constant_id = 2) const uint ROWS = 8;        // the most rows of x a call may have here (its tier)
layout(constant_id = 3) const uint OUTS = 4;        // columns of y a workgroup computes
layout(std430, binding = 1) readonly buffer X { float x[]; };
#ifdef WEIGHT_QUANT
layout(std430, binding = 2) readonly buffer W { uint wq[]; };
#ifdef WEIGHT_I8
layout(std430, binding = 5) readonly buffer Scales { float wscale[]; };
#else
layout(std430, binding = 5) readonly buffer Scales { uint wscale[]; };
#endif
#else
layout(std430, binding = 2) readonly buffer W { WEIGHT_T w[]; };
#endif
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(std430, binding = 4) writeonly buffer Out { float y[]; };
layout(constant_id = 5) const uint NORM = 0;      // 0 none, 1 LAYER_NORM, 2 RMS_NORM
layout(constant_id = 6) const int ACT = -1;       // the activation's kind, -1 none
layout(constant_id = 7) const bool RESIDUAL = false;
layout(std430, binding = 6) readonly buffer NormGain { float norm_gain[]; };  // NORM: gamma / gain [in_dim]
layout(std430, binding = 7) readonly buffer NormBeta { float norm_beta[]; };  // LAYER_NORM with beta [in_dim]
layout(std430, binding = 6) readonly buffer Residual { float residual[]; };   // RESIDUAL: [n, y_stride] like y
// NORM_VEC16 (with VEC16, where the norm's weights start on 16 bytes): their units read as vec4s.
layout(constant_id = 8) const bool NORM_VEC16 = false;
layout(std430, binding = 6) readonly buffer NormGain16 { vec4 norm_gain16[]; };
layout(std430, binding = 7) readonly buffer NormBeta16 { vec4 norm_beta16[]; };

// W is read in units, each widened to UNIT floats (core/dequantize.cpp: value = float(q) * scale) for UNIT columns
// of x. With VEC16 (the host sets it where W's and x's rows start on 16 bytes and in_dim is a multiple of the unit)
// a unit is 16 bytes, one vec4 / uvec4 load: 4 floats, 8 halves, 16 int8 or a 32-value int4 block, at columns
// u * UNIT + i in order. Without it: one float or half, or one word of 4 int8 (columns 4u + i) or of 8 int4 (block
// b = u / 4, word j = u % 4: columns 32b + 4j + i and, in the high nibbles, 32b + 16 + 4j + i). Loads one vector
// wide are what lavapipe (a load per invocation and component in a loop) runs fastest; GPUs read 16 bytes per
// invocation as well as 4.
layout(constant_id = 4) const bool VEC16 = false;
#if defined(WEIGHT_QUANT)
layout(std430, binding = 2) readonly buffer W16 { uvec4 w16[]; };
#if defined(WEIGHT_I8)
const uint UNIT = VEC16 ? 16 : 4;
#else
const uint UNIT = VEC16 ? 32 : 8;
#endif
#elif defined(WEIGHT_F16)
layout(std430, binding = 2) readonly buffer W16 { uvec4 w16[]; };
const uint UNIT = VEC16 ? 8 : 1;
#else
layout(std430, binding = 2) readonly buffer W16 { vec4 w16[]; };
const uint UNIT = VEC16 ? 4 : 1;
#endif
layout(std430, binding = 1) readonly buffer X16 { vec4 x16[]; };

uint unit_column(uint u, uint i) {
#if defined(WEIGHT_I4)
  if (!VEC16) return (u >> 2) * 32u + (u & 3u) * 4u + (i & 3u) + (i >= 4u ? 16u : 0u);
#endif
  return u * UNIT + i;
}

#if defined(WEIGHT_QUANT)
// The scale of row r's columns from c (a unit never crosses a group: groups are multiples of 32 columns).
float scale_at(uint r, uint c, uint in_dim) {
  const uint s = pc.off[5] + r * (in_dim / pc.group) + c / pc.group;
#if defined(WEIGHT_I8)
  return wscale[s];
#else
  const vec2 pair = unpackHalf2x16(wscale[s >> 1]);  // .x: the half at the lower address
  return (s & 1u) == 0u ? pair.x : pair.y;
#endif
}
#endif

// W row r's unit u as floats, in unit_column order.
void load_unit(uint r, uint u, uint in_dim, out float v[UNIT]) {
#if defined(WEIGHT_QUANT)
  const float scale = scale_at(r, unit_column(u, 0), in_dim);
  uvec4 q;
  if (VEC16) {
    q = w16[pc.off[2] / 4 + r * (in_dim / UNIT) + u];  // a row is in_dim / UNIT units in either case
  } else {
    q = uvec4(wq[pc.off[2] + r * (in_dim / UNIT) + u], 0u, 0u, 0u);
  }
#if defined(WEIGHT_I8)
  [[unroll]] for (uint i = 0; i < UNIT; ++i) {
    v[i] = float(bitfieldExtract(int(q[i / 4]), int(i % 4) * 8, 8)) * scale;
  }
#else
  // Word j of the unit, byte b: low nibble column 4j + b, high nibble 16 + 4j + b (of a whole block: VEC16); for
  // one word (j = 0), i < 4 the low nibbles and i >= 4 the high ones, as unit_column counts them.
  [[unroll]] for (uint i = 0; i < UNIT; ++i) {
    const uint word = VEC16 ? (i & 15u) / 4 : 0u, byte = i & 3u, high = VEC16 ? i / 16 : i / 4;
    v[i] = float(int(bitfieldExtract(q[word], int(byte * 8 + high * 4), 4)) - 8) * scale;
  }
#endif
#elif defined(WEIGHT_F16)
  if (VEC16) {
    const uvec4 h = w16[(pc.off[2] + r * in_dim) / 8 + u];
    [[unroll]] for (uint j = 0; j < UNIT / 2; ++j) {
      const vec2 pair = unpackHalf2x16(h[j]);
      v[2 * j] = pair.x;
      v[2 * j + 1] = pair.y;
    }
  } else {
    v[0] = float(w[pc.off[2] + r * in_dim + u]);
  }
#else
  if (VEC16) {
    const vec4 f = w16[(pc.off[2] + r * in_dim) / 4 + u];
    [[unroll]] for (uint i = 0; i < UNIT; ++i) v[i] = f[i];
  } else {
    v[0] = w[pc.off[2] + r * in_dim + u];
  }
#endif
}

// SUBGROUP_ADD: [subgroup][row * OUTS + column] (at most WG subgroups); else [row * OUTS + column][invocation].
shared float partial[WG * ROWS * OUTS];

// v[t] summed over the workgroup's invocations, into every invocation's v[t] (t < ROWS); partial is free again after.
void workgroup_sums(inout float v[ROWS]) {
  const uint lid = gl_LocalInvocationID.x;
#ifdef SUBGROUP_ADD
  [[unroll]] for (uint t = 0; t < ROWS; ++t) v[t] = subgroupAdd(v[t]);
  if (gl_NumSubgroups > 1) {
    if (subgroupElect()) {
      [[unroll]] for (uint t = 0; t < ROWS; ++t) partial[gl_SubgroupID * ROWS + t] = v[t];
    }
    barrier();
    [[unroll]] for (uint t = 0; t < ROWS; ++t) {
      float sum = 0.0;
      for (uint s = 0; s < gl_NumSubgroups; ++s) sum += partial[s * ROWS + t];
      v[t] = sum;
    }
    barrier();
  }
#else
  [[unroll]] for (uint t = 0; t < ROWS; ++t) partial[t * WG + lid] = v[t];
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) {
      [[unroll]] for (uint t = 0; t < ROWS; ++t) partial[t * WG + lid] += partial[t * WG + lid + s];
    }
    barrier();
  }
  [[unroll]] for (uint t = 0; t < ROWS; ++t) v[t] = partial[t * WG];
  barrier();
#endif
}

void main() {
  const uint in_dim = pc.in_dim, out_dim = pc.out_dim, n = min(call.n, ROWS);
  const uint lid = gl_LocalInvocationID.x;
  // Workgroups over (x, y) when out_dim / OUTS is over maxComputeWorkGroupCount[0]; the last ones may have no columns.
  const uint col0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * OUTS;
  if (col0 >= out_dim) return;  // the whole workgroup, before any barrier

  // NORM: each row's mean (LAYER_NORM) and 1 / sqrt(variance + eps), in two passes as layer_norm.comp.
  float norm_mean[ROWS], norm_inv[ROWS];
  if (NORM != 0u) {
    float s[ROWS];
    [[unroll]] for (uint t = 0; t < ROWS; ++t) {
      const uint xrow = pc.off[1] + (t < n ? t : 0u) * in_dim;
      s[t] = 0.0;
      if (NORM == 1u) {
        for (uint k = lid; k < in_dim; k += WG) s[t] += x[xrow + k];
      } else {
        for (uint k = lid; k < in_dim; k += WG) s[t] += x[xrow + k] * x[xrow + k];
      }
    }
    workgroup_sums(s);
    if (NORM == 1u) {
      [[unroll]] for (uint t = 0; t < ROWS; ++t) {
        const uint xrow = pc.off[1] + (t < n ? t : 0u) * in_dim;
        norm_mean[t] = s[t] / float(in_dim);
        s[t] = 0.0;
        for (uint k = lid; k < in_dim; k += WG) {
          const float c = x[xrow + k] - norm_mean[t];
          s[t] += c * c;
        }
      }
      workgroup_sums(s);
      [[unroll]] for (uint t = 0; t < ROWS; ++t) norm_inv[t] = inversesqrt(s[t] / float(in_dim) + pc.norm_eps);
    } else {
      [[unroll]] for (uint t = 0; t < ROWS; ++t) {
        norm_mean[t] = 0.0;
        norm_inv[t] = 1.0 / sqrt(s[t] / float(in_dim) + pc.norm_eps);
      }
    }
  }
  float acc[ROWS * OUTS];
  [[unroll]] for (uint j = 0; j < ROWS * OUTS; ++j) acc[j] = 0.0;
  const uint units = in_dim / UNIT;
  for (uint u = lid; u < units; u += WG) {
    // x's columns of the unit for every row (rows past n read row 0 again and are never written: no branch, so the
    // loops unroll and the sums stay in registers).
    // NORM: the unit's gain (gamma) and beta, read once for every row.
    float gain[UNIT], beta[UNIT];
    if (NORM != 0u) {
      [[unroll]] for (uint q = 0; q < UNIT / 4; ++q) {
        if (NORM_VEC16) {
          const vec4 g = norm_gain16[pc.off[6] / 4 + u * (UNIT / 4) + q];
          const vec4 b = NORM == 1u && pc.norm_beta != 0u ? norm_beta16[pc.off[7] / 4 + u * (UNIT / 4) + q] : vec4(0.0);
          [[unroll]] for (uint i = 0; i < 4u; ++i) {
            gain[q * 4 + i] = g[i];
            beta[q * 4 + i] = b[i];
          }
        }
      }
      if (!NORM_VEC16) {
        [[unroll]] for (uint i = 0; i < UNIT; ++i) {
          const uint c = unit_column(u, i);
          gain[i] = norm_gain[pc.off[6] + c];
          beta[i] = NORM == 1u && pc.norm_beta != 0u ? norm_beta[pc.off[7] + c] : 0.0;
        }
      }
    }
    float xv[ROWS * UNIT];
    [[unroll]] for (uint t = 0; t < ROWS; ++t) {
      const uint xrow = pc.off[1] + (t < n ? t : 0u) * in_dim;
      if (VEC16) {
        [[unroll]] for (uint q = 0; q < UNIT / 4; ++q) {
          const vec4 f = x16[xrow / 4 + u * (UNIT / 4) + q];
          [[unroll]] for (uint i = 0; i < 4u; ++i) xv[t * UNIT + q * 4 + i] = f[i];
        }
      } else {
        [[unroll]] for (uint i = 0; i < UNIT; ++i) xv[t * UNIT + i] = x[xrow + unit_column(u, i)];
      }
      if (NORM == 1u) {
        [[unroll]] for (uint i = 0; i < UNIT; ++i) {
          float r = (xv[t * UNIT + i] - norm_mean[t]) * norm_inv[t] * gain[i];
          if (pc.norm_beta != 0u) r += beta[i];
          xv[t * UNIT + i] = r;
        }
      } else if (NORM == 2u) {
        [[unroll]] for (uint i = 0; i < UNIT; ++i) {
          precise float scale = pc.norm_offset + gain[i];
          precise float r = xv[t * UNIT + i] * norm_inv[t] * scale;
          xv[t * UNIT + i] = r;
        }
      }
    }
    [[unroll]] for (uint o = 0; o < OUTS; ++o) {
      float v[UNIT];
      // A column past out_dim (the last workgroup) reads row out_dim - 1 again and is never written.
      load_unit(min(col0 + o, out_dim - 1), u, in_dim, v);
      [[unroll]] for (uint t = 0; t < ROWS; ++t) {
        float sum = 0.0;
        [[unroll]] for (uint i = 0; i < UNIT; ++i) sum += xv[t * UNIT + i] * v[i];
        acc[t * OUTS + o] += sum;
      }
    }
  }

  // The workgroup's sums: acc[j] of every invocation added up, for j < n * OUTS.
#ifdef SUBGROUP_ADD
  [[unroll]] for (uint j = 0; j < ROWS * OUTS; ++j) acc[j] = subgroupAdd(acc[j]);
  if (gl_NumSubgroups > 1) {  // uniform: the barriers below are reached by every invocation or none
    if (subgroupElect()) {
      [[unroll]] for (uint j = 0; j < ROWS * OUTS; ++j) partial[gl_SubgroupID * ROWS * OUTS + j] = acc[j];
    }
    barrier();
    [[unroll]] for (uint j = 0; j < ROWS * OUTS; ++j) {
      float sum = 0.0;
      for (uint s = 0; s < gl_NumSubgroups; ++s) sum += partial[s * ROWS * OUTS + j];
      acc[j] = sum;
    }
  }
#else
  [[unroll]] for (uint j = 0; j < ROWS * OUTS; ++j) partial[j * WG + lid] = acc[j];
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) {
      [[unroll]] for (uint j = 0; j < ROWS * OUTS; ++j) partial[j * WG + lid] += partial[j * WG + lid + s];
    }
    barrier();
  }
  [[unroll]] for (uint j = 0; j < ROWS * OUTS; ++j) acc[j] = partial[j * WG];
#endif
  if (lid != 0) return;
  [[unroll]] for (uint o = 0; o < OUTS; ++o) {
    const uint col = col0 + o;
    if (col >= out_dim) break;
    const float b = HAS_BIAS ? bias[pc.off[3] + col] : 0.0;
    for (uint t = 0; t < n; ++t) {
      float v = acc[t * OUTS + o] + b;
      if (ACT >= 0) v = activate(ACT, v, pc.cap);
      if (RESIDUAL) v = v + residual[pc.off[6] + t * pc.y_stride + col];
      y[pc.off[4] + t * pc.y_stride + col] = v;
    }
  }
}
