// SPDX-License-Identifier: MIT
// The push constants of each shader family: one struct per `layout(push_constant) uniform` block, with the block's
// name and its fields' names, types and order. Push-constant blocks use the std430 layout; with 4-byte scalars only
// (int32_t/int, uint32_t/uint, float/float) a field's offset is 4 times its index in both, which the asserts below
// pin down, so that a field added or moved on one side only fails the build instead of reading another's value.
// Every block starts with off[8] (BindingOffsets, filled by Program::add); the op's parameters follow. A lowering
// fills the named fields and hands the struct to make_dispatch (ops.h) or DispatchSpec::push.set.
#pragma once

#include <cstddef>
#include <cstdint>

#include "vulkan/pipelines.h"

namespace tern::vk {

// The field's offset in its struct, as std430 places it in the GLSL block of the same name.
#define TERN_PUSH_FIELD(Push, field, byte) \
  static_assert(offsetof(Push, field) == (byte), #Push "::" #field " is at byte " #byte " of its GLSL block")
// The head layout's fields (ops/head_layout.h) from `byte` on: row (the columns of a qkv row), then where the queries
// (QKV only), the keys and the values start in it.
#define TERN_PUSH_QKV_COLUMNS(Push, byte)                                          \
  TERN_PUSH_FIELD(Push, row, (byte));                                              \
  TERN_PUSH_FIELD(Push, q_col, (byte) + 4);                                        \
  TERN_PUSH_FIELD(Push, k_col, (byte) + 8);                                        \
  TERN_PUSH_FIELD(Push, v_col, (byte) + 12)
#define TERN_PUSH_KV_COLUMNS(Push, byte)                                           \
  TERN_PUSH_FIELD(Push, row, (byte));                                              \
  TERN_PUSH_FIELD(Push, k_col, (byte) + 4);                                        \
  TERN_PUSH_FIELD(Push, v_col, (byte) + 8)
// The struct's size: its fields and nothing else (no padding, no field missing from the asserts).
#define TERN_PUSH_SIZE(Push, fields) \
  static_assert(sizeof(Push) == sizeof(BindingOffsets) + 4 * (fields), #Push " is off[8] and " #fields " 4-byte fields")

// shaders/common/row_push.glsl: add, log_softmax, gated_activation (d = F), position (rows of width d).
struct RowPush {
  BindingOffsets off{};
  uint32_t d = 0;
};
TERN_PUSH_FIELD(RowPush, d, 32);
TERN_PUSH_SIZE(RowPush, 1);

// shaders/embedding.comp: the table bound holds vocab rows [first_row, first_row + rows) of width d.
struct EmbeddingPush {
  BindingOffsets off{};
  uint32_t d = 0;
  int32_t first_row = 0;
  int32_t rows = 0;
  uint32_t group = 0;  // embedding_i8 / _i4: columns per scale
  float scale = 1.0f;  // EmbeddingParams.scale: multiplies every row
};
TERN_PUSH_FIELD(EmbeddingPush, d, 32);
TERN_PUSH_FIELD(EmbeddingPush, first_row, 36);
TERN_PUSH_FIELD(EmbeddingPush, rows, 40);
TERN_PUSH_FIELD(EmbeddingPush, group, 44);
TERN_PUSH_FIELD(EmbeddingPush, scale, 48);
TERN_PUSH_SIZE(EmbeddingPush, 5);

// shaders/activation.comp: x, y [n, d]; cap of SOFTCAP.
struct ActivationPush {
  BindingOffsets off{};
  uint32_t d = 0;
  float cap = 0.0f;
};
TERN_PUSH_FIELD(ActivationPush, d, 32);
TERN_PUSH_FIELD(ActivationPush, cap, 36);
TERN_PUSH_SIZE(ActivationPush, 2);

// shaders/concat.comp: y [n, da + db] = [a | b].
struct ConcatPush {
  BindingOffsets off{};
  uint32_t da = 0;
  uint32_t db = 0;
};
TERN_PUSH_FIELD(ConcatPush, da, 32);
TERN_PUSH_FIELD(ConcatPush, db, 36);
TERN_PUSH_SIZE(ConcatPush, 2);

// shaders/position_axial.comp: rows [s0, d0], cols [s1, d1].
struct AxialPositionPush {
  BindingOffsets off{};
  uint32_t d0 = 0;
  uint32_t d1 = 0;
  uint32_t s1 = 0;
};
TERN_PUSH_FIELD(AxialPositionPush, d0, 32);
TERN_PUSH_FIELD(AxialPositionPush, d1, 36);
TERN_PUSH_FIELD(AxialPositionPush, s1, 40);
TERN_PUSH_SIZE(AxialPositionPush, 3);

// shaders/layer_norm.comp.
struct LayerNormPush {
  BindingOffsets off{};
  uint32_t d = 0;
  float eps = 0.0f;
  uint32_t has_beta = 0;
};
TERN_PUSH_FIELD(LayerNormPush, d, 32);
TERN_PUSH_FIELD(LayerNormPush, eps, 36);
TERN_PUSH_FIELD(LayerNormPush, has_beta, 40);
TERN_PUSH_SIZE(LayerNormPush, 3);

// shaders/rms_norm.comp: x, y [n, width]; groups of `group` columns among the first `columns` (the gain's length).
struct RmsNormPush {
  BindingOffsets off{};
  uint32_t width = 0;
  uint32_t columns = 0;
  uint32_t group = 0;
  float eps = 0.0f;
  float weight_offset = 0.0f;
};
TERN_PUSH_FIELD(RmsNormPush, width, 32);
TERN_PUSH_FIELD(RmsNormPush, columns, 36);
TERN_PUSH_FIELD(RmsNormPush, group, 40);
TERN_PUSH_FIELD(RmsNormPush, eps, 44);
TERN_PUSH_FIELD(RmsNormPush, weight_offset, 48);
TERN_PUSH_SIZE(RmsNormPush, 5);

// shaders/rotary.comp: x, y [n, width]; the first `heads` blocks of head_dim columns rotate `pairs` pairs each.
struct RotaryPush {
  BindingOffsets off{};
  uint32_t width = 0;
  uint32_t heads = 0;
  uint32_t head_dim = 0;
  uint32_t pairs = 0;
  uint32_t interleaved = 0;  // 1: pairs (2k, 2k + 1); 0: (k, k + pairs)
};
TERN_PUSH_FIELD(RotaryPush, width, 32);
TERN_PUSH_FIELD(RotaryPush, heads, 36);
TERN_PUSH_FIELD(RotaryPush, head_dim, 40);
TERN_PUSH_FIELD(RotaryPush, pairs, 44);
TERN_PUSH_FIELD(RotaryPush, interleaved, 48);
TERN_PUSH_SIZE(RotaryPush, 5);

// shaders/linear.comp and linear_rows.comp: W [out_dim, in_dim] (a part's rows when split), y's rows y_stride apart.
// The rest is linear_rows.comp's fusions (vulkan/fusion.h), unread by linear.comp.
struct LinearPush {
  BindingOffsets off{};
  uint32_t in_dim = 0;
  uint32_t out_dim = 0;
  uint32_t y_stride = 0;
  uint32_t group = 0;          // linear_i8 / _i4: inputs per scale
  float norm_eps = 0.0f;       // the fused norm's eps
  float norm_offset = 0.0f;    // RMS_NORM's weight_offset
  uint32_t norm_beta = 0;      // LAYER_NORM: 1 where it has beta
  float cap = 0.0f;            // the fused SOFTCAP activation's cap
};
TERN_PUSH_FIELD(LinearPush, in_dim, 32);
TERN_PUSH_FIELD(LinearPush, out_dim, 36);
TERN_PUSH_FIELD(LinearPush, y_stride, 40);
TERN_PUSH_FIELD(LinearPush, group, 44);
TERN_PUSH_FIELD(LinearPush, norm_eps, 48);
TERN_PUSH_FIELD(LinearPush, norm_offset, 52);
TERN_PUSH_FIELD(LinearPush, norm_beta, 56);
TERN_PUSH_FIELD(LinearPush, cap, 60);
TERN_PUSH_SIZE(LinearPush, 8);

// shaders/adaptive_embedding.comp: y [n, d], clusters K.
struct AdaptiveEmbeddingPush {
  BindingOffsets off{};
  uint32_t d = 0;
  float scale = 0.0f;
  int32_t clusters = 0;
};
TERN_PUSH_FIELD(AdaptiveEmbeddingPush, d, 32);
TERN_PUSH_FIELD(AdaptiveEmbeddingPush, scale, 36);
TERN_PUSH_FIELD(AdaptiveEmbeddingPush, clusters, 40);
TERN_PUSH_SIZE(AdaptiveEmbeddingPush, 3);

// shaders/adaptive_log_softmax.comp (all three stages): x [n, d], out [n, vocab], clusters K, px [n, px_width].
struct AdaptiveLogSoftmaxPush {
  BindingOffsets off{};
  uint32_t d = 0;
  uint32_t vocab = 0;
  int32_t clusters = 0;
  uint32_t px_width = 0;
};
TERN_PUSH_FIELD(AdaptiveLogSoftmaxPush, d, 32);
TERN_PUSH_FIELD(AdaptiveLogSoftmaxPush, vocab, 36);
TERN_PUSH_FIELD(AdaptiveLogSoftmaxPush, clusters, 40);
TERN_PUSH_FIELD(AdaptiveLogSoftmaxPush, px_width, 44);
TERN_PUSH_SIZE(AdaptiveLogSoftmaxPush, 4);

}  // namespace tern::vk

#include "vulkan/push_constants_attention.h"  // the attention families' structs, with the macros above

#undef TERN_PUSH_FIELD
#undef TERN_PUSH_QKV_COLUMNS
#undef TERN_PUSH_KV_COLUMNS
#undef TERN_PUSH_SIZE
