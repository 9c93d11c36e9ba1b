// The ops the Vulkan backend runs (by op code, and ATTENTION by kind: both tables list every entry of the schema in
// order, checked at compile time), and the pieces of Lowering every op shares.
#include <algorithm>
#include <cstring>
#include <iterator>

#include "core/half.h"
#include "ops/attention_kinds.h"
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

Status supports_f32(const Node& node, const Model&) { return f32_weights_only(node); }
Status supports_any(const Node&, const Model&) { return Status::Ok(); }

struct KindLowering {
  fb::AttentionKind kind;
  Status (*supports)(const Node& node, const Model& model);
  Status (*lower)(const Node& node, Lowering& low);
};

constexpr KindLowering kAttentionLowerings[] = {
    {fb::AttentionKind::Dense, supports_any, lower_windowed_attention},          // ops_attention.cpp
    {fb::AttentionKind::SlidingWindow, supports_any, lower_windowed_attention},
    {fb::AttentionKind::ChunkedLocal, supports_any, lower_windowed_attention},
    {fb::AttentionKind::Strided, supports_any, lower_windowed_attention},
    {fb::AttentionKind::Fixed, supports_any, lower_windowed_attention},
    {fb::AttentionKind::AdaptiveSpan, supports_any, lower_adaptive_span},        // ops_adaptive_span.cpp
    {fb::AttentionKind::RelativeXL, supports_f32, lower_relative_xl},            // ops_memory.cpp
    {fb::AttentionKind::Lsh, supports_any, lower_lsh_attention},                 // ops_lsh.cpp
    {fb::AttentionKind::Compressive, supports_f32, lower_compressive},           // ops_memory.cpp
    {fb::AttentionKind::Routing, supports_any, lower_routing},                   // ops_routing.cpp
};
static_assert(covers_every_attention_kind(kAttentionLowerings), "a Vulkan lowering for every attention kind, in schema order");

const KindLowering& kind_lowering(const Node& node) {
  return kAttentionLowerings[size_t(node.fb_op->params_as_AttentionParams()->kind_type()) - 1];  // validated: 1..count
}

Status supports_attention(const Node& node, const Model& model) { return kind_lowering(node).supports(node, model); }
Status lower_attention(const Node& node, Lowering& low) { return kind_lowering(node).lower(node, low); }

constexpr VulkanOp kOps[] = {
    {fb::OpCode::EMBEDDING, supports_f32, lower_embedding},
    {fb::OpCode::POSITION, supports_position, lower_position},
    {fb::OpCode::LAYER_NORM, supports_f32, lower_layer_norm},
    {fb::OpCode::LINEAR, supports_f32, lower_linear},
    {fb::OpCode::ACTIVATION, supports_f32, lower_activation},
    {fb::OpCode::ADD, supports_f32, lower_add},
    {fb::OpCode::ATTENTION, supports_attention, lower_attention},
    {fb::OpCode::LOG_SOFTMAX, supports_f32, lower_log_softmax},
    {fb::OpCode::ADAPTIVE_EMBEDDING, supports_f32, lower_adaptive_embedding},
    {fb::OpCode::ADAPTIVE_LOG_SOFTMAX, supports_f32, lower_adaptive_log_softmax},
    {fb::OpCode::CONCAT, supports_f32, lower_concat},
};

static_assert(covers_every_op_code(kOps), "a Vulkan lowering for every op code, in schema order");

}  // namespace

const VulkanOp* find_vulkan_op(fb::OpCode code) {
  const auto i = size_t(code);
  return i < std::size(kOps) ? &kOps[i] : nullptr;
}

Status f32_weights_only(const Node& node) {
  for (const TensorInfo* w : node.weights) {
    if (w && w->dtype != fb::DType::F32) {
      return Unsupported(node.label() + ": weight '" + w->name + "' is " + dtype_name(w->dtype) +
                         "; the Vulkan backend has fp32 shaders only so far");
    }
  }
  return Status::Ok();
}

Groups stride_groups(int64_t count, int64_t per_group) {
  constexpr int64_t kMaxGroups = 65535;  // every device allows this many in x
  const int64_t groups = (count + per_group - 1) / per_group;
  return {uint32_t(std::min(groups, kMaxGroups)), 1, 1};
}

Result<Slice> Lowering::weight(const TensorInfo* tensor) {
  auto it = weights_.find(tensor);
  if (it != weights_.end()) return it->second;
  TERN_ASSIGN_OR_RETURN(auto slice, memory.allocate(tensor->size, MemoryKind::kDevice, tensor->name.c_str()));
  weights_[tensor] = slice;
  pending_.push_back({tensor->data, tensor->size, slice});
  weight_bytes += tensor->size;
  return slice;
}

Result<Slice> Lowering::weight_f16(const TensorInfo* tensor) {
  auto it = weights_f16_.find(tensor);
  if (it != weights_f16_.end()) return it->second;
  if (tensor->dtype != fb::DType::F32) return Unsupported("weight '" + tensor->name + "' is not float32");
  const uint64_t elements = tensor->size / sizeof(float);
  TERN_ASSIGN_OR_RETURN(auto slice, memory.allocate(elements * 2, MemoryKind::kDevice, tensor->name.c_str()));
  weights_f16_[tensor] = slice;
  pending_.push_back({tensor->data, elements * 2, slice, true});
  weight_bytes += elements * 2;
  return slice;
}

Result<Slice> Lowering::constant(std::vector<float> data, const char* what) {
  const uint64_t bytes = data.size() * sizeof(float);
  TERN_ASSIGN_OR_RETURN(auto slice, memory.allocate(bytes, MemoryKind::kDevice, what));
  constants_.push_back(std::make_unique<std::vector<float>>(std::move(data)));
  pending_.push_back({reinterpret_cast<const uint8_t*>(constants_.back()->data()), bytes, slice});
  weight_bytes += bytes;
  return slice;
}

Result<Slice> Lowering::state(uint64_t bytes, const char* what) {
  TERN_ASSIGN_OR_RETURN(auto slice, memory.allocate(bytes, MemoryKind::kDevice, what));
  state_bytes += bytes;
  zeroed_.push_back(slice);
  return slice;
}

void Lowering::save_whole(const Node& node, const Slice& state, uint64_t bytes) {
  SavedState s;
  s.node = node.index;
  s.where = node.label();
  s.slice = state;
  s.bytes = [bytes](int64_t) { return bytes; };
  s.copies = [bytes](int64_t, std::vector<StateCopy>* copies) {
    if (bytes > 0) copies->push_back({0, 0, bytes});
  };
  saved_states.push_back(std::move(s));
}

Result<Slice> Lowering::scratch(uint64_t bytes, const char* what) {
  TERN_ASSIGN_OR_RETURN(auto slice, memory.allocate(bytes, MemoryKind::kDevice, what));
  scratch_bytes += bytes;
  return slice;
}

Status Lowering::upload() {
  uint64_t total = 0;
  for (const Pending& p : pending_) total += (p.bytes + 3) / 4 * 4;
  if (total == 0 && zeroed_.empty()) return Status::Ok();
  total = std::max<uint64_t>(total, 4);
  Memory staging(ctx);  // freed when this returns
  TERN_ASSIGN_OR_RETURN(auto buf, staging.allocate(total, MemoryKind::kHost, "staging the weights"));
  uint64_t at = 0;
  std::vector<std::pair<const Pending*, uint64_t>> copies;
  for (const Pending& p : pending_) {
    uint8_t* dst = buf.mapped + at;
    if (p.to_f16) {  // tensor data is 64-byte aligned (the loader checks), staging offsets multiples of 4
      floats_to_halves(reinterpret_cast<const float*>(p.data), reinterpret_cast<uint16_t*>(dst), 0, p.bytes / 2);
    } else {
      std::memcpy(dst, p.data, p.bytes);
    }
    copies.push_back({&p, at});
    at += (p.bytes + 3) / 4 * 4;  // each copy's source offset a multiple of 4
  }
  const Api& vk = ctx.api();
  const Slice src = buf;
  TERN_RETURN_IF_ERROR(run_once(ctx, [&](VkCommandBuffer cb) {
    for (const auto& [p, offset] : copies) {
      VkBufferCopy region{src.offset + offset, p->dst.offset, p->bytes};
      vk.vkCmdCopyBuffer(cb, src.buffer, p->dst.buffer, 1, &region);
    }
    // State starts as zeros: nothing reads it before it is written, but a saved state should not hold garbage.
    for (const Slice& s : zeroed_) vk.vkCmdFillBuffer(cb, s.buffer, s.offset, s.size, 0);
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
    vk.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                            nullptr, 0, nullptr);
  }));
  pending_.clear();
  constants_.clear();
  return Status::Ok();
}

}  // namespace tern::vk
