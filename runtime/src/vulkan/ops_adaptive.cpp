// SPDX-License-Identifier: MIT
// Lowering of ADAPTIVE_EMBEDDING (shaders/adaptive_embedding.comp) and ADAPTIVE_LOG_SOFTMAX
// (shaders/adaptive_log_softmax.comp, three dispatches). A variable number of clusters does not fit a fixed set of
// bindings, so each op's tensors are packed at session creation into one float table with an int header of
// offsets (the layouts are in the shaders' comments), both uploaded with the weights.
#include <algorithm>
#include <cstring>

#include "format/dequantize.h"
#include "ops/adaptive.h"
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

constexpr uint32_t kGroup = 256;

// The packed tensors of one op: floats appended with their offsets noted in an int header.
struct Packed {
  std::vector<int32_t> hdr;
  std::vector<float> data;
  int32_t add(const float* p, int64_t count) {
    if (!p) return -1;
    const auto at = int32_t(data.size());
    data.insert(data.end(), p, p + count);
    return at;
  }
  // Rows [row0, row0 + rows) of a matrix t in any storage, widened to float32 (these ops' shaders read floats).
  int32_t add_rows(const TensorInfo* t, int64_t row0, int64_t rows) {
    if (!t) return -1;
    const auto at = int32_t(data.size());
    const int64_t cols = t->shape[1];
    data.resize(data.size() + size_t(rows * cols));
    dequantize_rows(*t, row0, rows, data.data() + at);
    return at;
  }
};

Status check_size(const Node& node, const Packed& p) {
  if (p.data.size() >= size_t(INT32_MAX)) {
    return Unsupported(node.label() + ": more than 2^31 floats of weights; the Vulkan shader indexes them with 32 bits");
  }
  return Status::Ok();
}

// Uploads the header (ints, bit for bit) and the data.
Status upload(Lowering& low, Packed& p, Slice* hdr, Slice* data, const char* what) {
  std::vector<float> bits(p.hdr.size());
  std::memcpy(bits.data(), p.hdr.data(), p.hdr.size() * sizeof(int32_t));
  TERN_ASSIGN_OR_RETURN(auto h, low.constant(std::move(bits), what));
  if (p.data.empty()) p.data.push_back(0.0f);
  TERN_ASSIGN_OR_RETURN(auto d, low.constant(std::move(p.data), what));
  *hdr = h;
  *data = d;
  return Status::Ok();
}

uint32_t row_group(const Lowering& low) { return fit_workgroup(low.ctx.limits(), 256, 1); }

}  // namespace

Status lower_adaptive_embedding(const Node& node, Lowering& low) {
  TERN_ASSIGN_OR_RETURN(auto spec, AdaptiveInput::from(node, low.model.values()));
  const AdaptiveInput& a = spec;
  const auto K = int32_t(a.clusters());
  Packed p;
  for (int64_t e : a.ends) p.hdr.push_back(int32_t(e));
  for (int64_t di : a.dims) p.hdr.push_back(int32_t(di));
  std::vector<int32_t> tables, projs;
  for (int32_t i = 0; i < K; ++i) {
    tables.push_back(p.add_rows(a.table_tensors[size_t(i)], 0, a.ends[size_t(i) + 1] - a.ends[size_t(i)]));
    projs.push_back(p.add_rows(a.proj_tensors[size_t(i)], 0, a.d));
  }
  p.hdr.insert(p.hdr.end(), tables.begin(), tables.end());
  p.hdr.insert(p.hdr.end(), projs.begin(), projs.end());
  TERN_RETURN_IF_ERROR(check_size(node, p));
  Slice hdr, data;
  TERN_RETURN_IF_ERROR(upload(low, p, &hdr, &data, "adaptive embedding tables"));
  const int64_t d = a.d;
  AdaptiveEmbeddingPush push;
  push.d = uint32_t(d);
  push.scale = a.scale;
  push.clusters = K;
  return low.program.add(make_dispatch(
      node, "adaptive_embedding", {}, kGroup, push,
      [d](int64_t n) { return stride_groups(n * d, kGroup); },
      {low.values[node.inputs[0]], {hdr, 0, 0, "header"}, {data, 0, 0, "tables"}, low.values[node.outputs[0]]}));
}

Status lower_adaptive_log_softmax(const Node& node, Lowering& low) {
  TERN_ASSIGN_OR_RETURN(auto spec, AdaptiveSoftmax::from(node, low.model.values()));
  const AdaptiveSoftmax& a = spec;
  const auto K = int32_t(a.clusters());
  const int64_t V = a.vocab(), T = a.tails(), d = a.d;
  Packed p;
  for (int64_t e : a.ends) p.hdr.push_back(int32_t(e));
  for (int64_t di : a.dims) p.hdr.push_back(int32_t(di));
  std::vector<int32_t> w, b, pr, px;
  int32_t pxw = 0;
  for (int32_t i = 0; i < K; ++i) {
    const int64_t rows = a.ends[size_t(i) + 1] - a.ends[size_t(i)], di = a.dims[size_t(i)];
    w.push_back(p.add_rows(a.weight_tensors[size_t(i)], a.weight_row0[size_t(i)], rows));
    b.push_back(p.add(a.biases[size_t(i)], rows));
    pr.push_back(p.add_rows(a.proj_tensors[size_t(i)], 0, d));
    px.push_back(pxw);
    pxw += int32_t(di);
  }
  px.push_back(pxw);
  for (const auto* v : {&w, &b, &pr, &px}) p.hdr.insert(p.hdr.end(), v->begin(), v->end());
  p.hdr.push_back(p.add_rows(a.cluster_weight_tensor, 0, T));
  p.hdr.push_back(p.add(a.cluster_bias, T));
  TERN_RETURN_IF_ERROR(check_size(node, p));
  Slice hdr, data;
  TERN_RETURN_IF_ERROR(upload(low, p, &hdr, &data, "adaptive softmax weights"));
  // Scratch for a call: x proj_i of every cluster [max_batch, PXW] and the head's cluster columns [max_batch, T].
  TERN_ASSIGN_OR_RETURN(auto px_buf, low.memory.allocate(uint64_t(low.max_batch) * uint64_t(pxw) * sizeof(float),
                                                         MemoryKind::kDevice, "adaptive softmax projections"));
  const int64_t hw = std::max<int64_t>(T, 1);
  TERN_ASSIGN_OR_RETURN(auto hc_buf, low.memory.allocate(uint64_t(low.max_batch) * uint64_t(hw) * sizeof(float),
                                                         MemoryKind::kDevice, "adaptive softmax cluster columns"));

  const uint32_t wg = row_group(low);
  AdaptiveLogSoftmaxPush push;
  push.d = uint32_t(d);
  push.vocab = uint32_t(V);
  push.clusters = K;
  push.px_width = uint32_t(pxw);
  for (int stage = 0; stage < 3; ++stage) {
    GroupsFn groups;
    if (stage == 0) {
      groups = [pxw, wg](int64_t n) { return stride_groups(n * pxw, wg); };
    } else if (stage == 1) {
      groups = [V, T, wg](int64_t n) { return stride_groups(n * (V + T), wg); };
    } else {
      groups = [](int64_t n) { return stride_groups(n, 1); };
    }
    DispatchSpec s = make_dispatch(node, "adaptive_log_softmax", {wg, uint32_t(stage)}, wg, push, std::move(groups),
                                   {{hdr, 0, 0, "header"},
                                    {data, 0, 0, "weights"},
                                    low.values[node.inputs[0]],
                                    {px_buf, 0, 0, "projections"},
                                    {hc_buf, 0, 0, "cluster columns"},
                                    low.values[node.outputs[0]]});
    s.shared_bytes = wg * sizeof(float);
    TERN_RETURN_IF_ERROR(low.program.add(std::move(s)));
  }
  return Status::Ok();
}

}  // namespace tern::vk
