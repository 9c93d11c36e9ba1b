// SPDX-License-Identifier: MIT
// Lowering of LINEAR to the tiled GEMM of shaders/linear.comp.
#include "vulkan/ops.h"

namespace tern::vk {

Status lower_linear(const Node& node, Lowering& low) {
  const TensorInfo* w = node.weights[0];  // [out, in]
  const int64_t out = w->shape[0], in = w->shape[1];
  // W as linear.comp's variant for its form reads it (MatrixWeight: float, float16 in halves, int8 / int4 words
  // with their scales); the bias stays float.
  static const char* const kShaders[4] = {"linear", "linear_f16", "linear_i8", "linear_i4"};
  TERN_ASSIGN_OR_RETURN(auto wt, low.matrix_weight(w, kShaders));
  const bool has_bias = node.weights.size() > 1 && node.weights[1];
  TERN_ASSIGN_OR_RETURN(auto bias, has_bias ? low.weight(node.weights[1]) : wt.data);  // [out]
  // 16 x 16 tiles where the device runs 256 invocations a workgroup (most do), 8 x 8 otherwise.
  const DeviceLimits& l = low.ctx.limits();
  const uint32_t tile = (l.max_compute_work_group_invocations >= 256 && l.max_compute_work_group_size[0] >= 16 &&
                         l.max_compute_work_group_size[1] >= 16) ? 16 : 8;
  // A weight over maxStorageBufferRange is bound as parts of whole output rows, one dispatch each writing its
  // columns of y (bias and scales sliced alike); one part, the whole weight, otherwise.
  TERN_ASSIGN_OR_RETURN(auto parts, split_rows(l, where(node), "weight", wt.data.offset, out, wt.row_bytes));
  for (const RowRange& part : parts) {
    const int64_t rows = part.count;
    DispatchSpec s;
    s.where = where(node);
    s.node = node.index;
    s.shader = wt.shader;
    s.spec = {tile, has_bias ? 1u : 0u};
    s.local_size = {tile, tile, 1};
    s.shared_bytes = 2 * tile * tile * sizeof(float);
    LinearPush push;
    push.in_dim = uint32_t(in);
    push.out_dim = uint32_t(rows);
    push.y_stride = uint32_t(out);
    push.group = wt.group;
    s.push.set(push);
    s.groups = [rows, tile](int64_t n) {
      return Groups{uint32_t((rows + tile - 1) / tile), uint32_t((n + tile - 1) / tile), 1};
    };
    const uint64_t col0 = uint64_t(part.begin) * sizeof(float);
    Binding y = low.values[node.outputs[0]];  // from column part.begin of row 0
    y.offset += col0;
    if (y.bytes) y.bytes -= col0;
    const Binding wpart = wt.rows(part.begin, rows, "weight");
    // Without a bias the part of W stands in, unread.
    const Binding b = has_bias ? Binding{bias, col0, uint64_t(rows) * sizeof(float), "bias"} : wpart;
    s.bindings = {low.values[node.inputs[0]], wpart, b, y};
    if (wt.quantized) s.bindings.push_back(wt.scale_rows(part.begin, rows));  // binding 5
    TERN_RETURN_IF_ERROR(low.program.add(std::move(s)));
  }
  return Status::Ok();
}

}  // namespace tern::vk
