// Lowering of the Llama-family row-wise ops: GATED_ACTIVATION (shaders/gated_activation.comp).
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

int64_t width(const Lowering& low, int value) { return low.model.values()[value].width; }

}  // namespace

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
