// SPDX-License-Identifier: MIT
// Lowering of LINEAR to the tiled GEMM of shaders/linear.comp.
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

// linear.comp's tile: a workgroup computes a bm x bn block of y (tokens x outputs) from bk-wide slices of x and W
// staged in shared memory, each invocation a tm x tn sub-block in registers.
struct GemmTiles {
  uint32_t bm, bn, bk, tm, tn;
  uint32_t invocations() const { return (bm / tm) * (bn / tn); }
  uint32_t shared_bytes() const { return (bm + bn) * (bk + 4) * uint32_t(sizeof(float)); }  // rows padded by a vec4
};

// On a CPU implementation of Vulkan (lavapipe: invocations are SIMD lanes and every load of shared or storage memory
// is a loop over the lanes) 16 x 16 registers an invocation, which read 16 + 16 vec4s for 1024 multiply-adds; on a
// GPU the usual 64 x 64 block of 256 invocations with 4 x 4 each; where a device lacks the invocations or shared
// memory, 32 x 32 blocks of 64 (5 KiB), which fit every Vulkan device (the spec's minimums: 128 invocations, 16 KiB).
GemmTiles gemm_tiles(const DeviceLimits& l, bool cpu_device) {
  const GemmTiles cpu{64, 64, 16, 16, 16}, gpu{64, 64, 16, 4, 4}, small{32, 32, 16, 4, 4};
  const GemmTiles& want = cpu_device ? cpu : gpu;
  const bool fits = l.max_compute_shared_memory_size >= want.shared_bytes() &&
                    l.max_compute_work_group_invocations >= want.invocations() &&
                    l.max_compute_work_group_size[0] >= want.invocations();
  return fits ? want : small;
}

}  // namespace

Status lower_linear(const Node& node, Lowering& low) {
  const TensorInfo* w = node.weights[0];  // [out, in]
  const int64_t out = w->shape[0], in = w->shape[1];
  // W as linear.comp's variant for its form reads it (MatrixWeight: float, float16 in halves, int8 / int4 words
  // with their scales); the bias stays float.
  static const char* const kShaders[4] = {"linear", "linear_f16", "linear_i8", "linear_i4"};
  TERN_ASSIGN_OR_RETURN(auto wt, low.matrix_weight(w, kShaders));
  const bool has_bias = node.weights.size() > 1 && node.weights[1];
  TERN_ASSIGN_OR_RETURN(auto bias, has_bias ? low.weight(node.weights[1]) : wt.data);  // [out]
  const DeviceLimits& l = low.ctx.limits();
  const GemmTiles t = gemm_tiles(l, low.ctx.info().type == "CPU");
  // A weight over maxStorageBufferRange is bound as parts of whole output rows, one dispatch each writing its
  // columns of y (bias and scales sliced alike); one part, the whole weight, otherwise.
  TERN_ASSIGN_OR_RETURN(auto parts, split_rows(l, where(node), "weight", wt.data.offset, out, wt.row_bytes));
  for (const RowRange& part : parts) {
    const int64_t rows = part.count;
    DispatchSpec s;
    s.where = where(node);
    s.node = node.index;
    s.shader = wt.shader;
    const Binding x = low.values[node.inputs[0]];
    const Binding wpart = wt.rows(part.begin, rows, "weight");
    // Vector loads where every row of x, of W starts on a whole vec4 (W's float16: 4 halves, 8 bytes; int8 / int4
    // W is read a word of 4 elements at a time anyway).
    const bool x_vec4 = in % 4 == 0 && (x.slice.offset + x.offset) % 16 == 0;
    const bool w_vec4 = in % 4 == 0 && (wpart.slice.offset + wpart.offset) % (4 * wt.element_bytes) == 0;
    s.spec = {t.invocations(), has_bias ? 1u : 0u, t.bm, t.bn, t.bk, t.tm, t.tn, x_vec4 ? 1u : 0u, w_vec4 ? 1u : 0u};
    s.local_size = {t.invocations(), 1, 1};
    s.shared_bytes = t.shared_bytes();
    LinearPush push;
    push.in_dim = uint32_t(in);
    push.out_dim = uint32_t(rows);
    push.y_stride = uint32_t(out);
    push.group = wt.group;
    s.push.set(push);
    s.groups = [rows, t](int64_t n) {
      return Groups{uint32_t((rows + t.bn - 1) / t.bn), uint32_t((n + t.bm - 1) / t.bm), 1};
    };
    const uint64_t col0 = uint64_t(part.begin) * sizeof(float);
    Binding y = low.values[node.outputs[0]];  // from column part.begin of row 0
    y.offset += col0;
    if (y.bytes) y.bytes -= col0;
    // Without a bias the part of W stands in, unread.
    const Binding b = has_bias ? Binding{bias, col0, uint64_t(rows) * sizeof(float), "bias"} : wpart;
    s.bindings = {x, wpart, b, y};
    if (wt.quantized) s.bindings.push_back(wt.scale_rows(part.begin, rows));  // binding 5
    TERN_RETURN_IF_ERROR(low.program.add(std::move(s)));
  }
  return Status::Ok();
}

}  // namespace tern::vk
