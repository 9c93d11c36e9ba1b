// SPDX-License-Identifier: MIT
// Lowering of the elementwise and row-wise ops: embedding, position, layer norm, activation, add, concat, log-softmax.
#include <algorithm>
#include <cmath>

#include "vulkan/ops.h"

namespace tern::vk {
namespace {

int64_t width(const Lowering& low, int value) { return low.model.values()[value].width; }

RowPush row_push(int64_t d) {
  RowPush push;
  push.d = uint32_t(d);
  return push;
}

// One workgroup a row of width d (rows stride by the workgroup count); bindings are set on it.
template <typename PushT>
DispatchSpec per_row(const Node& node, const Lowering& low, const char* shader, int64_t d, const PushT& push) {
  const uint32_t wg = row_group(low, d);
  DispatchSpec s = make_dispatch(node, shader, {wg}, wg, push, [](int64_t n) { return stride_groups(n, 1); }, {});
  s.shared_bytes = wg * sizeof(float);
  return s;
}

// x's 12 leading significant bits (x in [0, 1)), exactly representable in float.
float top_bits(double x, int bits) {
  if (x <= 0.0) return 0.0f;
  int e = 0;
  std::frexp(x, &e);  // x = m 2^e, m in [0.5, 1)
  return float(std::ldexp(std::floor(std::ldexp(x, bits - e)), e - bits));
}

}  // namespace

uint32_t row_group(const Lowering& low, int64_t d) {
  const DeviceLimits& l = low.ctx.limits();
  const uint32_t cap = std::min<uint32_t>({256u, l.max_compute_work_group_invocations, l.max_compute_work_group_size[0]});
  uint32_t wg = 32;
  while (wg < cap && int64_t(wg) < d) wg *= 2;
  while (wg > cap) wg /= 2;
  return std::max(wg, 1u);
}

Status lower_embedding(const Node& node, Lowering& low) {
  const int64_t d = width(low, node.outputs[0]);
  const int64_t V = node.weights[0]->shape[0];
  // The table as embedding.comp's variant for its form reads it (MatrixWeight: float, float16 in halves, int8 /
  // int4 words with their scales).
  static const char* const kShaders[4] = {"embedding", "embedding_f16", "embedding_i8", "embedding_i4"};
  TERN_ASSIGN_OR_RETURN(auto table, low.matrix_weight(node.weights[0], kShaders));  // [V, d]
  // A table over maxStorageBufferRange is bound as parts of whole vocab rows, one dispatch each writing the rows
  // of y whose ids fall in its part; one part, the whole table, otherwise.
  TERN_ASSIGN_OR_RETURN(auto parts,
                        split_rows(low.ctx.limits(), where(node), "table", table.data.offset, V, table.row_bytes));
  for (const RowRange& part : parts) {
    EmbeddingPush push;
    push.d = uint32_t(d);
    push.first_row = int32_t(part.begin);
    push.rows = int32_t(part.count);
    push.group = table.group;
    push.scale = node.fb_op->params_as_EmbeddingParams()->scale();
    DispatchSpec s = elementwise(node, table.shader, d, push);
    s.bindings = {low.values[node.inputs[0]], table.rows(part.begin, part.count, "table"), low.values[node.outputs[0]]};
    if (table.quantized) s.bindings.push_back(table.scale_rows(part.begin, part.count));  // binding 4
    TERN_RETURN_IF_ERROR(low.program.add(std::move(s)));
  }
  return Status::Ok();
}

Status supports_position(const Node& node, const Model&) { return float_weights_only(node); }

// AXIAL (Reformer): pe[p] = [rows[p / s1] | cols[p % s1]]; shaders/position_axial.comp.
static Status lower_axial_position(const Node& node, Lowering& low) {
  const auto* p = node.fb_op->params_as_PositionParams();
  if (low.max_tokens > p->max_positions()) {
    return InvalidArgument("max_tokens " + std::to_string(low.max_tokens) + " exceeds the model's " +
                           std::to_string(p->max_positions()) + " axial positions");
  }
  const TensorInfo* rows = node.weights[0];  // [s0, d0]
  const TensorInfo* cols = node.weights[1];  // [s1, d1]
  TERN_ASSIGN_OR_RETURN(auto r, low.weight(rows));
  TERN_ASSIGN_OR_RETURN(auto c, low.weight(cols));
  AxialPositionPush push;
  push.d0 = uint32_t(rows->shape[1]);
  push.d1 = uint32_t(cols->shape[1]);
  push.s1 = uint32_t(cols->shape[0]);
  DispatchSpec s = elementwise(node, "position_axial", width(low, node.outputs[0]), push);
  s.bindings = {
      low.values[node.inputs[0]], {r, 0, 0, "axial rows"}, {c, 0, 0, "axial cols"}, low.values[node.outputs[0]]};
  return low.program.add(std::move(s));
}

Status lower_position(const Node& node, Lowering& low) {
  const auto* p = node.fb_op->params_as_PositionParams();
  if (p->kind() == fb::PositionKind::AXIAL) return lower_axial_position(node, low);
  const int64_t d = width(low, node.outputs[0]);
  const bool learned = p->kind() == fb::PositionKind::LEARNED;
  if (learned && low.max_tokens > p->max_positions()) {
    return InvalidArgument("max_tokens " + std::to_string(low.max_tokens) + " exceeds the model's " +
                           std::to_string(p->max_positions()) + " learned positions");
  }
  Result<Slice> table = Status(TERN_DEVICE_ERROR, "");
  if (learned) {
    table = low.weight(node.weights[0]);  // [P, d]
  } else {
    // [d/2, 3, 4]: per frequency f_k (in turns) and digit weight W = 4096^w, frac(W f_k) as four parts of 12
    // significant bits (shaders/position.comp says why).
    std::vector<float> turns(static_cast<size_t>(d / 2 * 12));
    for (int64_t k = 0; k < d / 2; ++k) {
      const double f = std::pow(10000.0, -double(2 * k) / double(d)) / (2.0 * M_PI);
      for (int w = 0; w < 3; ++w) {
        double rest = std::fmod(f * std::pow(4096.0, w), 1.0);
        for (int part = 0; part < 4; ++part) {
          const float top = top_bits(rest, 12);
          turns[size_t(k * 12 + w * 4 + part)] = top;
          rest -= double(top);
        }
      }
    }
    table = low.constant(std::move(turns), "sinusoid frequencies");
  }
  if (!table.ok()) return table.status();
  DispatchSpec s = elementwise(node, "position", d, row_push(d));
  s.spec = {learned ? 1u : 0u};
  // A learned table is bound over the max_tokens positions a session can reach, not all of [P, d].
  const uint64_t table_bytes = learned ? uint64_t(low.max_tokens) * uint64_t(d) * sizeof(float) : 0;
  s.bindings = {low.values[node.inputs[0]], {table.value(), 0, table_bytes, "position table"}, low.values[node.outputs[0]]};
  return low.program.add(std::move(s));
}

Status lower_layer_norm(const Node& node, Lowering& low) {
  const int64_t d = width(low, node.outputs[0]);
  TERN_ASSIGN_OR_RETURN(auto gamma, low.weight(node.weights[0]));  // [d]
  const bool has_beta = node.weights.size() > 1 && node.weights[1];
  TERN_ASSIGN_OR_RETURN(auto beta,
                        has_beta ? low.weight(node.weights[1]) : gamma);  // [d]; gamma stands in, unread, when absent
  LayerNormPush push;
  push.d = uint32_t(d);
  push.eps = node.fb_op->params_as_LayerNormParams()->eps();
  push.has_beta = has_beta ? 1 : 0;
  DispatchSpec s = per_row(node, low, "layer_norm", d, push);
  s.bindings = {low.values[node.inputs[0]], {gamma, 0, 0, "gamma"}, {beta, 0, 0, "beta"}, low.values[node.outputs[0]]};
  return low.program.add(std::move(s));
}

Status lower_activation(const Node& node, Lowering& low) {
  const auto* p = node.fb_op->params_as_ActivationParams();
  ActivationPush push;
  push.d = uint32_t(width(low, node.outputs[0]));
  push.cap = p->cap();
  DispatchSpec s = elementwise(node, "activation", push.d, push);
  s.spec = {uint32_t(p->kind())};  // 0 RELU, 1 GELU_ERF, 2 GELU_TANH, 3 SILU, 4 SOFTCAP
  s.bindings = {low.values[node.inputs[0]], low.values[node.outputs[0]]};
  return low.program.add(std::move(s));
}

Status lower_add(const Node& node, Lowering& low) {
  const int64_t d = width(low, node.outputs[0]);
  DispatchSpec s = elementwise(node, "add", d, row_push(d));
  s.bindings = {low.values[node.inputs[0]], low.values[node.inputs[1]], low.values[node.outputs[0]]};
  return low.program.add(std::move(s));
}

Status lower_concat(const Node& node, Lowering& low) {
  const int64_t da = width(low, node.inputs[0]), db = width(low, node.inputs[1]);
  ConcatPush push;
  push.da = uint32_t(da);
  push.db = uint32_t(db);
  DispatchSpec s = elementwise(node, "concat", da + db, push);
  s.bindings = {low.values[node.inputs[0]], low.values[node.inputs[1]], low.values[node.outputs[0]]};
  return low.program.add(std::move(s));
}

Status lower_log_softmax(const Node& node, Lowering& low) {
  const int64_t d = width(low, node.outputs[0]);
  DispatchSpec s = per_row(node, low, "log_softmax", d, row_push(d));
  s.bindings = {low.values[node.inputs[0]], low.values[node.outputs[0]]};
  return low.program.add(std::move(s));
}

}  // namespace tern::vk
