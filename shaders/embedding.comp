// SPDX-License-Identifier: MIT
#version 450
// EMBEDDING: y[i, :] = table[ids[i], :] * scale. ids [n] (checked by the host), table [V, d], y [n, d].
// The table bound is rows [first_row, first_row + rows): the whole table, or one part of one over
// maxStorageBufferRange (ops_rowwise.cpp: one dispatch per part); each writes the rows of y whose ids it holds.
// Built four times (cmake/EmbedShaders.cmake): "embedding"; "embedding_f16" with WEIGHT_F16, where the table is
// float16 (weight_storage F16, or float16 in the file), widened to float, its off[2] counting halves; "embedding_i8"
// and "embedding_i4" with WEIGHT_I8 / WEIGHT_I4, where the table is the file's int8 / int4 bytes read as words
// (off[2] counts words) with its scales at binding 4 (common/quant_weight.glsl), dequantised as each element is read.
#if defined(WEIGHT_I8) || defined(WEIGHT_I4)
#define WEIGHT_QUANT
#endif
#ifdef WEIGHT_F16
#extension GL_EXT_shader_16bit_storage : require
#define WEIGHT_T float16_t
#else
#define WEIGHT_T float
#endif
#include "common/interface.glsl"
// Push constants: EmbeddingPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform EmbeddingPush {
  uint off[8];
  uint d;
  int first_row;
  int rows;
  uint group;  // WEIGHT_QUANT: columns per scale (d: one scale per row)
  float scale;  // EmbeddingParams.scale (Gemma: sqrt(d)); 1: the row itself
} pc;
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };
#ifdef WEIGHT_QUANT
layout(std430, binding = 2) readonly buffer Table { uint wq[]; };
#ifdef WEIGHT_I8
layout(std430, binding = 4) readonly buffer Scales { float wscale[]; };
#else
layout(std430, binding = 4) readonly buffer Scales { uint wscale[]; };
#endif
#include "common/quant_weight.glsl"
#define TABLE_AT(r, j) quant_weight(pc.off[2], pc.off[4], r, j, d, pc.group)
#else
layout(std430, binding = 2) readonly buffer Table { WEIGHT_T table[]; };
#define TABLE_AT(r, j) float(table[pc.off[2] + (r) * d + (j)])
#endif

void main() {
  uint d = pc.d;
  int first_row = pc.first_row, rows = pc.rows;
  GRID_STRIDE(idx, call.n * d, 256) {
    uint i = idx / d, j = idx % d;
    int v = ids[pc.off[1] + i] - first_row;
    if (v >= 0 && v < rows) y[pc.off[3] + idx] = TABLE_AT(uint(v), j) * pc.scale;
  }
}
