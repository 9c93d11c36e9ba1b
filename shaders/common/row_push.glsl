// SPDX-License-Identifier: MIT
// The push constants of the row-wise shaders whose only parameter is a row width (add, log_softmax, gated_activation,
// position): RowPush in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform RowPush {
  uint off[8];
  uint d;
} pc;
