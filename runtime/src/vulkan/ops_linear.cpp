// SPDX-License-Identifier: MIT
// Lowering of LINEAR: the register-blocked GEMM of shaders/linear.comp for calls of many rows, the matrix-vector shader
// shaders/linear_rows.comp for calls of a few (generation). The program is recorded once, so each part of W gets
// both dispatches and a call's n picks one: the other gets no workgroups (DispatchSpec::groups).
#include <algorithm>
#include <vector>

#include "vulkan/ops.h"

namespace tern::vk {
namespace {

// linear_rows.comp's shape. Calls of up to 2 rows (generation, n = 1) run it specialised for 2 rows, calls of 3 to 8
// for 8, larger ones the GEMM: on lavapipe every row of x the shader is specialised for costs about as much as the
// weight's own loads (a call of 1 row: 2 rows cost the same as 1 within the noise, 8 rows about 2.5 times as much),
// and the GEMM costs the same for 1 row as for 16. An empty tier's dispatch costs a barrier, not measurable beside
// the others. kRowsOuts columns of y a workgroup: each row of x loaded once serves that many columns.
constexpr uint32_t kRowTiers[] = {2, 8};
constexpr uint32_t kRowsMax = 8;
constexpr uint32_t kRowsOuts = 4;
// Columns a workgroup of the 2-row tier with a fused norm (vulkan/fusion.h): each workgroup reads x twice more for the
// norm's statistics and the norm's weights once, which 16 columns share as the weights' own loads do x's.
constexpr uint32_t kNormRowsOuts = 16;

// Workgroup counts of linear_rows for `count` workgroups, as (x, y) within maxComputeWorkGroupCount[0] (65535 on
// every device allows out / kRowsOuts up to 262140 columns in x alone; y takes a larger vocabulary).
Groups rows_groups(uint32_t max_x, int64_t count) {
  const int64_t x = std::min<int64_t>(count, max_x);
  return Groups{uint32_t(x), uint32_t((count + x - 1) / x), 1};
}

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

// linear_rows.comp's fusions for the node (Lowering::fusion, vulkan/fusion.h): its spec constants, push constants
// and bindings, from the GEMM's push constants and bindings (x, W, bias, y, scales) and y's byte offset of the part.
struct RowsFusion {
  uint32_t norm = 0;    // NORM: 0 none, 1 LAYER_NORM, 2 RMS_NORM
  int32_t activation = -1;
  bool residual = false;
  LinearPush push;
  std::vector<Binding> bindings;
};

Result<RowsFusion> rows_fusion(const Node& node, Lowering& low, const LinearPush& push,
                               const std::vector<Binding>& gemm, uint64_t col0) {
  RowsFusion r;
  r.push = push;
  r.bindings = gemm;
  // The shader declares bindings 1 to 7 whatever it is specialised for, so every one is bound: W stands in, unread,
  // for the scales of a float W (5), a norm's weights (6, 7) and the residual (6).
  r.bindings.resize(7, gemm[1]);
  const LinearFusion& f = low.fusion.linear[size_t(node.index)];
  if (f.norm < 0 && f.activation < 0 && f.residual < 0) return r;
  // y is the last fused op's output, from the part's column.
  r.bindings[3] = low.values[size_t(f.output)];
  r.bindings[3].offset += col0;
  if (r.bindings[3].bytes) r.bindings[3].bytes -= col0;
  if (f.norm >= 0) {
    const Node& norm = low.model.nodes()[size_t(f.norm)];
    r.bindings[0] = low.values[size_t(norm.inputs[0])];
    TERN_ASSIGN_OR_RETURN(auto gain, low.weight(norm.weights[0]));  // [in]
    Slice beta = gain;  // unread where absent
    if (norm.code == fb::OpCode::LAYER_NORM) {
      r.norm = 1;
      r.push.norm_eps = norm.fb_op->params_as_LayerNormParams()->eps();
      if (norm.weights.size() > 1 && norm.weights[1]) {
        TERN_ASSIGN_OR_RETURN(beta, low.weight(norm.weights[1]));
        r.push.norm_beta = 1;
      }
    } else {
      r.norm = 2;
      const auto* p = norm.fb_op->params_as_RmsNormParams();
      r.push.norm_eps = p->eps();
      r.push.norm_offset = p->weight_offset();
    }
    r.bindings[5] = {gain, 0, 0, "norm gain"};  // binding 6
    r.bindings[6] = {beta, 0, 0, "norm beta"};  // binding 7
  }
  if (f.activation >= 0) {
    const auto* p = low.model.nodes()[size_t(f.activation)].fb_op->params_as_ActivationParams();
    r.activation = int32_t(p->kind());
    r.push.cap = p->cap();
  }
  if (f.residual >= 0) {
    Binding residual = low.values[size_t(f.residual_value)];  // binding 6, at y's columns
    residual.offset += col0;
    if (residual.bytes) residual.bytes -= col0;
    r.bindings[5] = residual;
    r.residual = true;
  }
  return r;
}

}  // namespace

Status lower_linear(const Node& node, Lowering& low) {
  const TensorInfo* w = node.weights[0];  // [out, in]
  const int64_t out = w->shape[0], in = w->shape[1];
  // W as the variant for its form reads it (MatrixWeight: float, float16 in halves, int8 / int4 words with their
  // scales); the bias stays float. linear_rows' variants are in the same order, then with subgroupAdd.
  static const char* const kShaders[4] = {"linear", "linear_f16", "linear_i8", "linear_i4"};
  static const char* const kRowsShaders[2][4] = {
      {"linear_rows", "linear_rows_f16", "linear_rows_i8", "linear_rows_i4"},
      {"linear_rows_sg", "linear_rows_f16_sg", "linear_rows_i8_sg", "linear_rows_i4_sg"}};
  TERN_ASSIGN_OR_RETURN(auto wt, low.matrix_weight(w, kShaders));
  const int form = int(std::find_if(kShaders, kShaders + 4, [&](const char* s) { return s == wt.shader; }) - kShaders);
  const bool has_bias = node.weights.size() > 1 && node.weights[1];
  TERN_ASSIGN_OR_RETURN(auto bias, has_bias ? low.weight(node.weights[1]) : wt.data);  // [out]
  const DeviceLimits& l = low.ctx.limits();
  // GEMM: the register-blocked tile for the device (gemm_tiles).
  const GemmTiles t = gemm_tiles(l, low.ctx.info().type == "CPU");
  // Matrix-vector: with subgroup arithmetic, one subgroup (at least 8 invocations: 32- and 64-wide GPUs use all of
  // theirs, lavapipe's 8 are one SIMD vector and need no barrier); a 64-wide shared-memory tree otherwise.
  const bool subgroups = l.subgroup_arithmetic;
  const uint32_t rows_wg =
      subgroups ? fit_workgroup(l, std::max<uint32_t>(8, l.subgroup_size), 1) : fit_workgroup(l, 64, 1);
  // A weight over maxStorageBufferRange is bound as parts of whole output rows, one dispatch each writing its
  // columns of y (bias and scales sliced alike); one part, the whole weight, otherwise.
  TERN_ASSIGN_OR_RETURN(auto parts, split_rows(l, where(node), "weight", wt.data.offset, out, wt.row_bytes));
  for (const RowRange& part : parts) {
    const int64_t rows = part.count;
    LinearPush push;
    push.in_dim = uint32_t(in);
    push.out_dim = uint32_t(rows);
    push.y_stride = uint32_t(out);
    push.group = wt.group;
    const uint64_t col0 = uint64_t(part.begin) * sizeof(float);
    Binding y = low.values[node.outputs[0]];  // from column part.begin of row 0
    y.offset += col0;
    if (y.bytes) y.bytes -= col0;
    const Binding wpart = wt.rows(part.begin, rows, "weight");
    // Without a bias the part of W stands in, unread.
    const Binding b = has_bias ? Binding{bias, col0, uint64_t(rows) * sizeof(float), "bias"} : wpart;
    std::vector<Binding> bindings = {low.values[node.inputs[0]], wpart, b, y};
    if (wt.quantized) bindings.push_back(wt.scale_rows(part.begin, rows));  // binding 5

    // Calls of up to kRowsMax rows, one dispatch per tier, with the fusions of the plan (rows_fusion): 16-byte units
    // where W's part and x start on 16 bytes and a row is whole units (linear_rows.comp, VEC16).
    TERN_ASSIGN_OR_RETURN(RowsFusion fused, rows_fusion(node, low, push, bindings, col0));
    static const uint32_t kVecUnit[4] = {4, 8, 16, 32};  // columns in 16 bytes of each form
    const Binding& xb = fused.bindings[0];
    const bool vec16 = in % kVecUnit[form] == 0 && (wpart.slice.offset + wpart.offset) % 16 == 0 &&
                       (xb.slice.offset + xb.offset) % 16 == 0;
    // A norm's weights read as vec4s beside x's (NORM_VEC16) where they start on 16 bytes.
    auto aligned16 = [](const Binding& b) { return (b.slice.offset + b.offset) % 16 == 0; };
    const bool norm_vec16 = fused.norm != 0 && vec16 && aligned16(fused.bindings[5]) && aligned16(fused.bindings[6]);
    const uint32_t max_x = std::max<uint32_t>(1, l.max_compute_work_group_count[0]);
    uint32_t below = 0;
    for (uint32_t tier : kRowTiers) {
      // With a norm every workgroup computes its rows' statistics first: more columns a workgroup share them.
      const uint32_t outs = fused.norm != 0 && tier <= 2 ? kNormRowsOuts : kRowsOuts;
      const int64_t rows_count = (rows + outs - 1) / outs;
      DispatchSpec mv = make_dispatch(
          node, kRowsShaders[subgroups ? 1 : 0][form],
          {rows_wg, has_bias ? 1u : 0u, tier, outs, vec16 ? 1u : 0u, fused.norm, uint32_t(fused.activation),
           fused.residual ? 1u : 0u, norm_vec16 ? 1u : 0u},
          rows_wg, fused.push,
          [max_x, rows_count, below, tier](int64_t n) {
            return n > below && n <= tier ? rows_groups(max_x, rows_count) : Groups{0, 0, 0};
          },
          fused.bindings);
      mv.shared_bytes = rows_wg * tier * outs * uint32_t(sizeof(float));
      TERN_RETURN_IF_ERROR(low.program.add(std::move(mv)));
      below = tier;
      if (low.max_batch <= tier) break;
    }
    if (low.max_batch <= kRowsMax) continue;  // no call has more rows

    // Calls of more.
    // Vector loads where every row of x, of W starts on a whole vec4 (W's float16: 4 halves, 8 bytes; int8 / int4
    // W is read a word of 4 elements at a time anyway).
    const bool x_vec4 = in % 4 == 0 && (xb.slice.offset + xb.offset) % 16 == 0;
    const bool w_vec4 = in % 4 == 0 && (wpart.slice.offset + wpart.offset) % (4 * wt.element_bytes) == 0;
    DispatchSpec gemm = make_dispatch(
        node, wt.shader,
        {t.invocations(), has_bias ? 1u : 0u, t.bm, t.bn, t.bk, t.tm, t.tn, x_vec4 ? 1u : 0u, w_vec4 ? 1u : 0u},
        t.invocations(), push,
        [rows, t](int64_t n) {
          if (n <= kRowsMax) return Groups{0, 0, 0};
          return Groups{uint32_t((rows + t.bn - 1) / t.bn), uint32_t((n + t.bm - 1) / t.bm), 1};
        },
        std::move(bindings));
    gemm.shared_bytes = t.shared_bytes();
    TERN_RETURN_IF_ERROR(low.program.add(std::move(gemm)));
  }
  return Status::Ok();
}

}  // namespace tern::vk
