// SPDX-License-Identifier: MIT
// Lowering of the Llama-family row-wise ops: RMS_NORM (shaders/rms_norm.comp), ROTARY (shaders/rotary.comp, with
// cos | sin written by the host per call) and GATED_ACTIVATION (shaders/gated_activation.comp).
#include <vector>

#include "ops/rotary.h"
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

int64_t width(const Lowering& low, int value) { return low.model.values()[value].width; }

}  // namespace

Status lower_rms_norm(const Node& node, Lowering& low) {
  const auto* p = node.fb_op->params_as_RmsNormParams();
  const int64_t w = width(low, node.outputs[0]);
  const int64_t columns = node.weights[0]->shape[0];
  const int64_t group = p->group() > 0 ? p->group() : columns;    // validated: divides columns
  TERN_ASSIGN_OR_RETURN(auto gain, low.weight(node.weights[0]));  // [columns]
  RmsNormPush push;
  push.width = uint32_t(w);
  push.columns = uint32_t(columns);
  push.group = uint32_t(group);
  push.eps = p->eps();
  push.weight_offset = p->weight_offset();
  // One workgroup per (row, group): n * columns / group items, striding past the device's count.
  const uint32_t wg = row_group(low, group);
  const int64_t groups = columns / group;
  DispatchSpec s =
      make_dispatch(node, "rms_norm", {wg}, wg, push, [groups](int64_t n) { return stride_groups(n * groups, 1); },
                    {low.values[node.inputs[0]], {gain, 0, 0, "gain"}, low.values[node.outputs[0]]});
  s.shared_bytes = wg * sizeof(float);
  return low.program.add(std::move(s));
}

Status lower_rotary(const Node& node, Lowering& low) {
  const Rotary rotary = Rotary::of(node);  // inv_freq (and long_inv_freq) F32: the loader allows nothing else
  const int64_t w = width(low, node.outputs[0]);
  const int pairs = rotary.pairs();
  if (low.sinks.on()) {
    // Attention sinks: the rows pass unrotated (rotary.comp with no head block to rotate copies every column); the
    // attention op they feed rotates them by their index in its cache (ops_sinks.cpp). The table is not read.
    RotaryPush copy;
    copy.width = uint32_t(w);
    copy.head_dim = uint32_t(rotary.head_dim);
    copy.pairs = uint32_t(pairs);
    DispatchSpec s = elementwise(node, "rotary", w, copy);
    s.bindings = {low.values[node.inputs[0]], low.values[node.inputs[0]], low.values[node.outputs[0]]};
    return low.program.add(std::move(s));
  }
  // cos | sin [max_batch, 2, pairs], written by the host for each call: the call's frequencies (from its last
  // position, for DYNAMIC_NTK and LONGROPE) and each row's angle as the CPU path computes them (rotary_cos_sin).
  auto write = [rotary, f = std::vector<float>(size_t(pairs))](int64_t n, int64_t pos0, float* cos_sin) mutable {
    rotary.cos_sin_table(pos0, n, pos0 + n, f.data(), cos_sin);
  };
  TERN_ASSIGN_OR_RETURN(
      auto table, low.call_table(uint64_t(low.max_batch) * 2 * uint64_t(pairs), "rotary cos | sin", std::move(write)));
  RotaryPush push;
  push.width = uint32_t(w);
  push.heads = uint32_t(rotary.heads);
  push.head_dim = uint32_t(rotary.head_dim);
  push.pairs = uint32_t(pairs);
  push.interleaved = rotary.interleaved ? 1 : 0;
  DispatchSpec s = elementwise(node, "rotary", w, push);
  s.bindings = {low.values[node.inputs[0]], {table, 0, 0, "rotary cos | sin"}, low.values[node.outputs[0]]};
  return low.program.add(std::move(s));
}

Status lower_gated_activation(const Node& node, Lowering& low) {
  const int64_t f = width(low, node.outputs[0]);
  RowPush push;
  push.d = uint32_t(f);
  DispatchSpec s = elementwise(node, "gated_activation", f, push);
  s.spec = {uint32_t(node.fb_op->params_as_GatedActivationParams()->kind())};  // 0 RELU .. 3 SILU
  s.bindings = {low.values[node.inputs[0]], low.values[node.outputs[0]]};
  return low.program.add(std::move(s));
}

}  // namespace tern::vk
