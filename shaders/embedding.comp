#version 450
// EMBEDDING: y[i, :] = table[ids[i], :]. ids [n] (checked by the host), table [V, d], y [n, d].
// The table bound is rows [first_row, first_row + rows): the whole table, or one part of one over
// maxStorageBufferRange (ops_rowwise.cpp: one dispatch per part); each writes the rows of y whose ids it holds.
// Built twice (cmake/EmbedShaders.cmake): "embedding", and "embedding_f16" with WEIGHT_F16, where the table is
// float16 (weight_storage F16), widened to float; its off[2] counts halves.
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
} pc;
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
layout(std430, binding = 2) readonly buffer Table { WEIGHT_T table[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

void main() {
  uint d = pc.d;
  int first_row = pc.first_row, rows = pc.rows;
  GRID_STRIDE(idx, call.n * d, 256) {
    uint i = idx / d, j = idx % d;
    int v = ids[pc.off[1] + i] - first_row;
    if (v >= 0 && v < rows) y[pc.off[3] + idx] = float(table[pc.off[2] + uint(v) * d + j]);
  }
}
