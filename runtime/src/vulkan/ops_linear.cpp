// Lowering of LINEAR to the tiled GEMM of shaders/linear.comp.
#include "vulkan/ops.h"

namespace tern::vk {

Status lower_linear(const Node& node, Lowering& low) {
  const TensorInfo* w = node.weights[0];  // [out, in]
  const int64_t out = w->shape[0], in = w->shape[1];
  auto wt = low.weight(w);
  if (!wt.ok()) return wt.status();
  const bool has_bias = node.weights.size() > 1 && node.weights[1];
  auto bias = has_bias ? low.weight(node.weights[1]) : wt;  // [out]; W stands in, unread, when absent
  if (!bias.ok()) return bias.status();
  // 16 x 16 tiles where the device runs 256 invocations a workgroup (most do), 8 x 8 otherwise.
  const DeviceLimits& l = low.ctx.limits();
  const uint32_t tile = (l.max_compute_work_group_invocations >= 256 && l.max_compute_work_group_size[0] >= 16 &&
                         l.max_compute_work_group_size[1] >= 16) ? 16 : 8;
  DispatchSpec s;
  s.where = where(node);
  s.node = node.index;
  s.shader = "linear";
  s.spec = {tile, has_bias ? 1u : 0u};
  s.local_size = {tile, tile, 1};
  s.shared_bytes = 2 * tile * tile * sizeof(float);
  s.args[0] = int32_t(in);
  s.args[1] = int32_t(out);
  s.groups = [out, tile](int64_t n) {
    return Groups{uint32_t((out + tile - 1) / tile), uint32_t((n + tile - 1) / tile), 1};
  };
  s.bindings = {low.values[node.inputs[0]], {wt.value(), 0, 0, "weight"}, {bias.value(), 0, 0, "bias"},
                low.values[node.outputs[0]]};
  return low.program.add(std::move(s));
}

}  // namespace tern::vk
