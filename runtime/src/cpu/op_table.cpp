// SPDX-License-Identifier: MIT
// The CPU backend's kernels by op code and by attention kind. Both tables list every entry of the schema in order,
// checked at compile time: an op or kind added to the schema without a CPU kernel fails the build.
#include "cpu/op_table.h"

#include <iterator>

#include "cpu/kernels.h"
#include "ops/attention_kinds.h"

namespace tern::cpu {
namespace {

struct KindKernel {
  fb::AttentionKind kind;
  KernelFactory make;
};

constexpr KindKernel kAttentionKernels[] = {
    {fb::AttentionKind::Dense, make_windowed_attention},
    {fb::AttentionKind::SlidingWindow, make_windowed_attention},
    {fb::AttentionKind::ChunkedLocal, make_windowed_attention},
    {fb::AttentionKind::Strided, make_windowed_attention},
    {fb::AttentionKind::Fixed, make_windowed_attention},
    {fb::AttentionKind::AdaptiveSpan, make_adaptive_span_attention},
    {fb::AttentionKind::RelativeXL, make_relative_xl_attention},
    {fb::AttentionKind::Lsh, make_lsh_attention},
    {fb::AttentionKind::Compressive, make_compressive_attention},
    {fb::AttentionKind::Routing, make_routing_attention},
};
static_assert(covers_every_attention_kind(kAttentionKernels), "a CPU kernel for every attention kind, in schema order");

Result<std::unique_ptr<CpuKernel>> make_attention(const Node& node, const Model& model, const KernelConfig& cfg) {
  const size_t kind = size_t(node.fb_op->params_as_AttentionParams()->kind_type());
  return kAttentionKernels[kind - 1].make(node, model, cfg);  // a validated node's kind is in 1..count
}

struct OpKernel {
  fb::OpCode code;
  KernelFactory make;
};

constexpr OpKernel kOpKernels[] = {
    {fb::OpCode::EMBEDDING, make_embedding},
    {fb::OpCode::POSITION, make_position},
    {fb::OpCode::LAYER_NORM, make_layer_norm},
    {fb::OpCode::LINEAR, make_linear},
    {fb::OpCode::ACTIVATION, make_activation},
    {fb::OpCode::ADD, make_add},
    {fb::OpCode::ATTENTION, make_attention},
    {fb::OpCode::LOG_SOFTMAX, make_log_softmax},
    {fb::OpCode::ADAPTIVE_EMBEDDING, make_adaptive_embedding},
    {fb::OpCode::ADAPTIVE_LOG_SOFTMAX, make_adaptive_log_softmax},
    {fb::OpCode::CONCAT, make_concat},
    {fb::OpCode::RMS_NORM, make_rms_norm},
    {fb::OpCode::ROTARY, make_rotary},
    {fb::OpCode::GATED_ACTIVATION, make_gated_activation},
};

static_assert(covers_every_op_code(kOpKernels), "a CPU kernel for every op code, in schema order");

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_kernel(const Node& node, const Model& model, const KernelConfig& cfg) {
  return kOpKernels[size_t(node.code)].make(node, model, cfg);  // a loaded node's code has an OpDef
}

}  // namespace tern::cpu
