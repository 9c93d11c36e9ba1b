// SPDX-License-Identifier: MIT
// The ops the Vulkan backend runs (by op code, and ATTENTION by kind: both tables list every entry of the schema in
// order, checked at compile time), and the pieces of Lowering every op shares.
#include <algorithm>
#include <iterator>

#include "ops/attention_kinds.h"
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

// Ops whose weights go through Lowering: F32 or compressed (a compressed one in a slot the loader allowed is
// widened by Lowering::weight where the op has no shader for it).
Status supports_floats(const Node& node, const Model&) { return float_weights_only(node); }
// Ops whose weights are read on the host as float32 views (adaptive span's key_pe and spans, tabled at session
// creation; ROTARY's frequencies, each call): a compressed one there needs widening in ops/ first.
Status supports_host_f32(const Node& node, const Model&) { return host_f32_weights_only(node); }
Status supports_any(const Node&, const Model&) { return Status::Ok(); }

struct KindLowering {
  fb::AttentionKind kind;
  Status (*supports)(const Node& node, const Model& model);
  Status (*lower)(const Node& node, Lowering& low);
  // True when a later call (position > 0) continues what the lowering keeps; false where the shaders run whole
  // sequences only (a session that may continue one is refused at creation: VulkanOp::continues). Routing: each
  // cluster's best keys are kept on the CPU only.
  bool continues;
};

constexpr KindLowering kAttentionLowerings[] = {
    {fb::AttentionKind::Dense, supports_any, lower_windowed_attention, true},          // ops_attention.cpp
    {fb::AttentionKind::SlidingWindow, supports_any, lower_windowed_attention, true},
    {fb::AttentionKind::ChunkedLocal, supports_any, lower_windowed_attention, true},
    {fb::AttentionKind::Strided, supports_any, lower_windowed_attention, true},
    {fb::AttentionKind::Fixed, supports_any, lower_windowed_attention, true},
    {fb::AttentionKind::AdaptiveSpan, supports_host_f32, lower_adaptive_span, true},   // ops_adaptive_span.cpp
    {fb::AttentionKind::RelativeXL, supports_floats, lower_relative_xl, true},         // ops_memory.cpp
    {fb::AttentionKind::Lsh, supports_any, lower_lsh_attention, true},                 // ops_lsh.cpp
    {fb::AttentionKind::Compressive, supports_floats, lower_compressive, true},        // ops_memory.cpp
    {fb::AttentionKind::Routing, supports_any, lower_routing, false},                  // ops_routing.cpp
};
static_assert(covers_every_attention_kind(kAttentionLowerings), "a Vulkan lowering for every attention kind, in schema order");

const KindLowering& kind_lowering(const Node& node) {
  return kAttentionLowerings[size_t(node.fb_op->params_as_AttentionParams()->kind_type()) - 1];  // validated: 1..count
}

Status supports_attention(const Node& node, const Model& model) { return kind_lowering(node).supports(node, model); }
Status lower_attention(const Node& node, Lowering& low) { return kind_lowering(node).lower(node, low); }
Status attention_continues(const Node& node) {
  if (kind_lowering(node).continues) return Status::Ok();
  return Unsupported(node.label() + ": continuing a sequence through " + attention_kind(node).name +
                     " attention runs on the CPU backend only; on Vulkan, create the session forward_only (each call "
                     "a whole sequence), or use --backend cpu");
}

constexpr VulkanOp kOps[] = {
    {fb::OpCode::EMBEDDING, supports_floats, lower_embedding},
    {fb::OpCode::POSITION, supports_position, lower_position},
    {fb::OpCode::LAYER_NORM, supports_floats, lower_layer_norm},
    {fb::OpCode::LINEAR, supports_floats, lower_linear},
    {fb::OpCode::ACTIVATION, supports_floats, lower_activation},
    {fb::OpCode::ADD, supports_floats, lower_add},
    {fb::OpCode::ATTENTION, supports_attention, lower_attention, attention_continues},
    {fb::OpCode::LOG_SOFTMAX, supports_floats, lower_log_softmax},
    {fb::OpCode::ADAPTIVE_EMBEDDING, supports_floats, lower_adaptive_embedding},  // widened on the host
    {fb::OpCode::ADAPTIVE_LOG_SOFTMAX, supports_floats, lower_adaptive_log_softmax},
    {fb::OpCode::CONCAT, supports_floats, lower_concat},
    {fb::OpCode::RMS_NORM, supports_floats, lower_rms_norm},          // ops_decoder.cpp
    {fb::OpCode::ROTARY, supports_host_f32, lower_rotary},            // frequencies read on the host per call
    {fb::OpCode::GATED_ACTIVATION, supports_floats, lower_gated_activation},
};

static_assert(covers_every_op_code(kOps), "a Vulkan lowering for every op code, in schema order");

}  // namespace

const VulkanOp* find_vulkan_op(fb::OpCode code) {
  const auto i = size_t(code);
  return i < std::size(kOps) ? &kOps[i] : nullptr;
}

Status host_f32_weights_only(const Node& node) {
  for (const TensorInfo* w : node.weights) {
    if (w && w->dtype != fb::DType::F32) {
      return Unsupported(node.label() + ": weight '" + w->name + "' is " + dtype_name(w->dtype) +
                         "; the Vulkan backend packs this op's weights from float32 only so far");
    }
  }
  return Status::Ok();
}

Status float_weights_only(const Node& node) {
  for (const TensorInfo* w : node.weights) {
    if (w && w->dtype != fb::DType::F32 && !is_compressed(w->dtype)) {
      return Unsupported(node.label() + ": weight '" + w->name + "' is " + dtype_name(w->dtype) +
                         "; the Vulkan backend reads float weights only (F32, or compressed F16 / I8 / I4)");
    }
  }
  return Status::Ok();
}

Groups stride_groups(int64_t count, int64_t per_group) {
  constexpr int64_t kMaxGroups = 65535;  // every device allows this many in x
  const int64_t groups = (count + per_group - 1) / per_group;
  return {uint32_t(std::min(groups, kMaxGroups)), 1, 1};
}

Result<Slice> Lowering::device_weight(const TensorInfo* tensor, WeightForm form) {
  auto it = weights_.find({tensor, form});
  if (it != weights_.end()) return it->second;
  TERN_ASSIGN_OR_RETURN(auto w, device.weight(tensor, form));
  weights_[{tensor, form}] = w.slice;
  weight_bytes += w.bytes;
  return w.slice;
}

Result<Slice> Lowering::weight(const TensorInfo* tensor) { return device_weight(tensor, WeightForm::kFloat32); }
Result<Slice> Lowering::weight_f16(const TensorInfo* tensor) { return device_weight(tensor, WeightForm::kFloat16); }
Result<Slice> Lowering::weight_packed(const TensorInfo* tensor) { return device_weight(tensor, WeightForm::kPacked); }

Result<MatrixWeight> Lowering::matrix_weight(const TensorInfo* tensor, const char* const shaders[4]) {
  const int64_t cols = tensor->shape.back();
  MatrixWeight m;
  switch (tensor->dtype) {
    case fb::DType::I8:
    case fb::DType::I4: {
      const bool i8 = tensor->dtype == fb::DType::I8;
      TERN_ASSIGN_OR_RETURN(m.data, weight_packed(tensor));
      TERN_ASSIGN_OR_RETURN(m.scales, weight_packed(tensor->scales));
      m.shader = shaders[i8 ? 2 : 3];
      m.element_bytes = 4;  // words
      m.row_bytes = i8 ? uint64_t(cols) : uint64_t(cols) / 2;
      m.quantized = true;
      m.group = uint32_t(tensor->group());
      m.scale_bytes = i8 ? 4 : 2;
      m.scale_row_bytes = uint64_t(cols / tensor->group()) * m.scale_bytes;
      return m;
    }
    case fb::DType::F16:
      if (!f16_storage) break;  // no 16-bit storage: widened to float32 (weight())
      [[fallthrough]];
    case fb::DType::F32:
      if (tensor->dtype == fb::DType::F16 || f16_weights) {
        TERN_ASSIGN_OR_RETURN(m.data, weight_f16(tensor));
        m.shader = shaders[1];
        m.element_bytes = 2;
        m.row_bytes = uint64_t(cols) * 2;
        return m;
      }
      break;
    default:
      break;
  }
  TERN_ASSIGN_OR_RETURN(m.data, weight(tensor));
  m.shader = shaders[0];
  m.element_bytes = 4;
  m.row_bytes = uint64_t(cols) * sizeof(float);
  return m;
}

Result<Slice> Lowering::constant(std::vector<float> data, const char* what) {
  const uint64_t bytes = data.size() * sizeof(float);
  TERN_ASSIGN_OR_RETURN(auto slice, memory.allocate(bytes, MemoryKind::kDevice, what));
  constants_.push_back(std::make_unique<std::vector<float>>(std::move(data)));
  Upload u;
  u.data = reinterpret_cast<const uint8_t*>(constants_.back()->data());
  u.bytes = bytes;
  u.dst = slice;
  pending_.push_back(u);
  scratch_bytes += bytes;
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

Result<Slice> Lowering::call_table(uint64_t floats, const char* what,
                                   std::function<void(int64_t n, int64_t pos0, float* table)> write) {
  const uint64_t bytes = std::max<uint64_t>(floats, 1) * sizeof(float);
  TERN_ASSIGN_OR_RETURN(auto slice, memory.allocate(bytes, MemoryKind::kHost, what));
  scratch_bytes += bytes;
  float* table = reinterpret_cast<float*>(slice.mapped);
  program.add_call_write([table, write = std::move(write)](int64_t n, int64_t pos0) { write(n, pos0, table); });
  return slice;
}

Status Lowering::upload() {
  TERN_RETURN_IF_ERROR(device.upload_pending());
  TERN_RETURN_IF_ERROR(vk::upload(ctx, pending_, zeroed_));
  pending_.clear();
  constants_.clear();
  return Status::Ok();
}

}  // namespace tern::vk
