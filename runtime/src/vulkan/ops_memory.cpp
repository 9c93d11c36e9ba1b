// SPDX-License-Identifier: MIT
// Lowering of ATTENTION with a memory: kinds RelativeXL (ops/relative_xl.h) and Compressive (ops/compressive.h).
// Four dispatches a call, the memory kept on the device between calls in the op's state (the CPU kernel's bytes):
//   memory_concat    ctx = [memory; h]                               ctx [prefix + n, d] (device scratch)
//   memory_project   qkv = norm(ctx) W^T (+ b)                       qkv [prefix + n, 3*inner] (device scratch)
//   memory_attention out = online-softmax attention of the call's queries over the visible rows (+ XL's r term)
//   memory_update    the state from ctx: XL's last mem_len rows; Compressive's mem and compressed cmem
// prefix, the rows held before a call, is a function of the tokens seen (shaders/common/memory_rows.glsl), so the
// recorded command buffer replays unchanged (pos0 is 32-bit there; sessions hold at most 2^31 tokens). Scratch is [mem + max_batch] rows: nothing grows with n beyond a call.
// XL's r(p) = r_net pe(p) depends on the weights only: computed on the host at session creation, as on the CPU.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "format/dequantize.h"
#include "ops/compressive.h"
#include "ops/relative_xl.h"
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

constexpr uint32_t kGroup = 256;
constexpr uint32_t kQueries = 64;  // local_size_x of memory_attention.comp

struct MemoryOp {
  int64_t d = 0, inner = 0, prefix_max = 0, state_rows = 0;
  HeadLayout layout;  // of the projected rows qkv (memory_project writes them, memory_attention reads q | k | v)
  int heads = 1, head_dim = 1;
  int32_t family = 0, mem_len = 0, cmem_len = 0, rate = 1;
  Slice state, ctx, qkv;
};

// The fields both kinds set alike (family 0: RelativeXL, 1: Compressive); the caller sets the rest.
template <typename Attention>
MemoryOp memory_op(const Attention& a, int32_t family) {
  MemoryOp m;
  m.d = a.d;
  m.inner = a.inner();
  m.layout = a.layout();
  m.heads = a.heads;
  m.head_dim = a.head_dim;
  m.family = family;
  m.mem_len = int32_t(a.mem_len);
  return m;
}

// The push constants of every memory_*.comp with the op's shape; each dispatch adds its own numbers, and each shader
// reads the fields it needs.
MemoryPush memory_push(const MemoryOp& m) {
  MemoryPush push;
  push.family = uint32_t(m.family);
  push.mem_len = uint32_t(m.mem_len);
  push.cmem_len = uint32_t(m.cmem_len);
  push.rate = uint32_t(m.rate);
  push.d = uint32_t(m.d);
  push.qkv_width = uint32_t(m.layout.row);
  push.q_col = uint32_t(m.layout.q);
  push.k_col = uint32_t(m.layout.k);
  push.v_col = uint32_t(m.layout.v);
  push.heads = uint32_t(m.heads);
  return push;
}

uint32_t project_group(const Lowering& low) { return fit_workgroup(low.ctx.limits(), 64, 1); }

Status too_large(const Node& node, int64_t rows, int64_t width) {
  if (double(rows) * double(width) >= double(INT32_MAX)) {
    return Unsupported(node.label() + ": a memory of " + std::to_string(rows) + " x " + std::to_string(width) +
                       " floats; the Vulkan shaders index with 32 bits");
  }
  return Status::Ok();
}

// State and scratch, then memory_concat.
Status begin(const Node& node, Lowering& low, MemoryOp& m) {
  const int64_t rows = m.prefix_max + low.max_batch;
  TERN_RETURN_IF_ERROR(too_large(node, rows, std::max(m.d, m.layout.row)));
  TERN_ASSIGN_OR_RETURN(
      auto state,
      low.state(uint64_t(std::max<int64_t>(m.state_rows, 1)) * uint64_t(m.d) * sizeof(float), "attention memory"));
  if (m.state_rows == 0) low.state_bytes -= uint64_t(m.d) * sizeof(float);  // a placeholder, not state: mem_len 0
  TERN_ASSIGN_OR_RETURN(auto ctx, low.memory.allocate(uint64_t(rows) * uint64_t(m.d) * sizeof(float),
                                                      MemoryKind::kDevice, "attention memory rows"));
  TERN_ASSIGN_OR_RETURN(auto qkv, low.memory.allocate(uint64_t(rows) * uint64_t(m.layout.row) * sizeof(float),
                                                      MemoryKind::kDevice, "attention memory projections"));
  m.state = state;
  m.ctx = ctx;
  m.qkv = qkv;
  const int64_t d = m.d, pm = m.prefix_max;
  DispatchSpec s = make_dispatch(
      node, "memory_concat", {}, kGroup, memory_push(m),
      [d, pm](int64_t n) { return stride_groups((pm + n) * d, kGroup); },
      {low.values[node.inputs[0]], {m.state, 0, 0, "attention memory"}, {m.ctx, 0, 0, "memory rows"}});
  return low.program.add(std::move(s));
}

Status project(const Node& node, Lowering& low, const MemoryOp& m, const TensorInfo* w, const TensorInfo* bias,
               const TensorInfo* gamma, const TensorInfo* beta, float eps) {
  TERN_ASSIGN_OR_RETURN(auto wt, low.weight(w));                                // [3*inner, d]
  auto stand_in = [&](const TensorInfo* t) { return t ? low.weight(t) : wt; };  // unread when absent
  auto b = stand_in(bias);
  auto g = stand_in(gamma);
  auto be = stand_in(beta);
  for (const auto* r : {&b, &g, &be}) {
    if (!r->ok()) return r->status();
  }
  const uint32_t wg = project_group(low);
  const int64_t pm = m.prefix_max;
  MemoryPush push = memory_push(m);
  push.norm_eps = eps;
  DispatchSpec s =
      make_dispatch(node, "memory_project", {wg, uint32_t(m.d), gamma ? 1u : 0u, beta ? 1u : 0u, bias ? 1u : 0u}, wg,
                    push, [pm](int64_t n) { return stride_groups(pm + n, 1); },
                    {{m.ctx, 0, 0, "memory rows"},
                     {wt, 0, 0, "qkv weight"},
                     {b.value(), 0, 0, "qkv bias"},
                     {g.value(), 0, 0, "norm weight"},
                     {be.value(), 0, 0, "norm bias"},
                     {m.qkv, 0, 0, "memory projections"}});
  s.shared_bytes = uint32_t(std::min<uint64_t>((uint64_t(m.d) + wg) * sizeof(float), UINT32_MAX));
  return low.program.add(std::move(s));
}

Status attend(const Node& node, Lowering& low, const MemoryOp& m, bool xl, Slice uv, Slice r, float scale,
              int64_t clamp_len, bool same_length) {
  const int heads = m.heads;
  MemoryPush push = memory_push(m);
  push.scale = scale;
  push.clamp_len = uint32_t(std::min<int64_t>(clamp_len, INT32_MAX));
  push.same_length = same_length ? 1 : 0;
  DispatchSpec s = make_dispatch(
      node, "memory_attention", {uint32_t(m.head_dim), xl ? 1u : 0u}, kQueries, push,
      [heads](int64_t n) { return Groups{uint32_t((n + kQueries - 1) / kQueries), uint32_t(heads), 1}; },
      {{m.qkv, 0, 0, "memory projections"}, {uv, 0, 0, "r_w_bias | r_r_bias"}, {r, 0, 0, "position table"},
       low.values[node.outputs[0]]});
  return low.program.add(std::move(s));
}

Status update(const Node& node, Lowering& low, const MemoryOp& m, uint32_t mode, Slice conv_w, Slice conv_b, bool has_bias) {
  const int64_t count = m.state_rows * m.d;
  DispatchSpec s = make_dispatch(
      node, "memory_update", {mode, has_bias ? 1u : 0u}, kGroup, memory_push(m),
      [count](int64_t) { return stride_groups(std::max<int64_t>(count, 1), kGroup); },
      {{m.ctx, 0, 0, "memory rows"}, {conv_w, 0, 0, "conv weight"}, {conv_b, 0, 0, "conv bias"},
       {m.state, 0, 0, "attention memory"}});
  return low.program.add(std::move(s));
}

}  // namespace

Status lower_relative_xl(const Node& node, Lowering& low) {
  TERN_ASSIGN_OR_RETURN(auto spec, RelativeXL::from(node));
  const RelativeXL& x = spec;
  MemoryOp m = memory_op(x, 0);
  m.prefix_max = x.mem_len;
  m.state_rows = x.mem_len;  // [M, d]: RelativeXL::state_bytes()
  TERN_RETURN_IF_ERROR(begin(node, low, m));
  const auto& w = node.weights;
  TERN_RETURN_IF_ERROR(project(node, low, m, w[0], nullptr, x.norm_weight ? w[4] : nullptr,
                               x.norm_bias ? w[5] : nullptr, x.eps));
  // r(p) for every position a call can read ([P, inner], in double as the reference), and r_w_bias | r_r_bias.
  const int64_t P = x.position_rows(low.max_batch), inner = m.inner, d = x.d;
  TERN_RETURN_IF_ERROR(too_large(node, P, inner));
  std::vector<float> r(size_t(P * inner)), pe(size_t(P * d));
  x.position_encodings(0, P, pe.data());
  std::vector<float> widened;  // a compressed r_net [inner, d], widened for this product
  const float* r_net = float_values(*w[1], &widened);
  for (int64_t p = 0; p < P; ++p) {
    for (int64_t o = 0; o < inner; ++o) {
      double s = 0;
      for (int64_t c = 0; c < d; ++c) s += double(pe[size_t(p * d + c)]) * double(r_net[o * d + c]);
      r[size_t(p * inner + o)] = float(s);
    }
  }
  TERN_ASSIGN_OR_RETURN(auto r_table, low.constant(std::move(r), "relative position table"));
  std::vector<float> uv(x.r_w_bias, x.r_w_bias + inner);
  uv.insert(uv.end(), x.r_r_bias, x.r_r_bias + inner);
  TERN_ASSIGN_OR_RETURN(auto biases, low.constant(std::move(uv), "r_w_bias and r_r_bias"));
  TERN_RETURN_IF_ERROR(attend(node, low, m, true, biases, r_table, x.scale, x.clamp_len, x.same_length));
  if (x.mem_len == 0) return Status::Ok();
  low.save_whole(node, m.state, x.state_bytes());  // [M, d] (ops/relative_xl.h)
  return update(node, low, m, 0, m.ctx, m.ctx, false);
}

Status lower_compressive(const Node& node, Lowering& low) {
  TERN_ASSIGN_OR_RETURN(auto spec, Compressive::from(node));
  const Compressive& c = spec;
  MemoryOp m = memory_op(c, 1);
  m.cmem_len = int32_t(c.cmem_len);
  m.rate = int32_t(c.rate);
  m.prefix_max = c.cmem_len + c.mem_capacity();
  m.state_rows = c.cmem_len + c.mem_capacity();  // cmem [C, d] then mem [M + rate - 1, d], as the CPU kernel
  TERN_RETURN_IF_ERROR(too_large(node, c.cmem_len, c.rate * c.d));
  TERN_RETURN_IF_ERROR(begin(node, low, m));
  const auto& w = node.weights;
  TERN_RETURN_IF_ERROR(project(node, low, m, w[0], c.qkv_bias ? w[1] : nullptr, nullptr, nullptr, 0.0f));
  TERN_RETURN_IF_ERROR(attend(node, low, m, false, m.qkv, m.qkv, c.scale, 0, false));
  uint32_t mode = 1;
  Slice conv_w = m.ctx, conv_b = m.ctx;  // unread stand-ins for the pools
  if (c.compression == fb::Compression::CONV) {
    TERN_ASSIGN_OR_RETURN(auto cw, low.weight(w[2]));  // [d, rate*d]
    conv_w = conv_b = cw;
    if (c.conv_bias) {
      TERN_ASSIGN_OR_RETURN(auto cb, low.weight(w[3]));  // [d]
      conv_b = cb;
    }
  } else {
    mode = c.compression == fb::Compression::MEAN_POOL ? 2 : 3;
  }
  // Saved as ops/compressive.h lays it out: the row counts (functions of the position here), mem, then cmem; the
  // device state holds cmem [C, d] first, then mem [M + rate - 1, d].
  SavedState saved;
  saved.node = node.index;
  saved.where = node.label();
  saved.slice = m.state;
  saved.bytes = [c](int64_t) { return c.saved_bytes(); };
  saved.copies = [c](int64_t, std::vector<StateCopy>* copies) {
    copies->push_back({c.saved_mem_at(), c.cmem_bytes(), c.mem_bytes()});
    if (c.cmem_bytes() > 0) copies->push_back({c.saved_cmem_at(), 0, c.cmem_bytes()});
  };
  saved.host_bytes = Compressive::kSavedCountBytes;
  saved.host = [c](int64_t position, uint8_t* out) {
    const int64_t rows[2] = {c.mem_rows(position), c.cmem_rows(position)};
    std::memcpy(out, rows, sizeof rows);
  };
  low.saved_states.push_back(std::move(saved));
  return update(node, low, m, mode, conv_w, conv_b, c.conv_bias != nullptr);
}

}  // namespace tern::vk
