// SPDX-License-Identifier: MIT
// The Vulkan backend of a session: checks that every op has a shader, takes the model's device (shared with its other
// sessions on it, vulkan/shared_device.h), places the values, uploads the weights not on it yet, records the forward
// pass once, and replays it per call. Its own rewrite: a weight over the device's
// maxStorageBufferRange is split into parts (vulkan/ops_linear.cpp, ops_rowwise.cpp).
#include <algorithm>
#include <cstring>

#include "core/backend.h"
#include "core/planner.h"
#include "ops/op.h"
#include "vulkan/ops.h"

namespace tern {
namespace {

// Everything as one full-size buffer per value (the Vulkan backend has no row chains or folds), the lifetimes
// stretched by the generation path's fusions (vulkan/fusion.h).
ArenaPlan values_plan(const Model& model, const vk::FusionPlan& fusion, int64_t rows) {
  return vk::plan_fused_arena(model, fusion, rows);
}

class VulkanBackend : public Backend {
 public:
  explicit VulkanBackend(const Model& model) : model_(model) {}
  Status build(const BackendConfig& config);
  const char* name() const override { return "Vulkan"; }
  tern_backend id() const override { return TERN_BACKEND_VULKAN; }
  const DeviceInfo& device() const override { return ctx_->info(); }
  std::string ignored_options() const override { return ignored_; }
  Status run(const int32_t* ids, int64_t n, int64_t pos0, float* logits, OpProfile* profile) override;
  uint64_t dispatches(int64_t n, int64_t pos0, uint64_t* per_node) const override {
    return program_->count_dispatches(n, pos0, per_node);
  }
  void reset() override {}  // a run reads only the state of the positions before it: nothing to forget
  Status shift(int64_t keep, int64_t position) override;
  void plan(int64_t n, tern_memory_plan* p) const override {
    p->packed_weight_bytes = weight_bytes_;
    p->arena_bytes = values_plan(model_, fusion_, n).bytes;
  }
  void allocated(tern_memory_plan* p) const override {
    p->packed_weight_bytes = weight_bytes_;
    p->arena_bytes = arena_bytes_;
    p->state_bytes = state_bytes_;
  }
  bool has_state(int node) const override { return saved(node) != nullptr; }
  uint64_t saved_state_bytes(int node, int64_t position) const override {
    const vk::SavedState* s = saved(node);
    return s ? s->bytes(position) : 0;
  }
  Status check_state(int node, int64_t position, const uint8_t* in) const override;
  Status save_state(int node, int64_t position, uint8_t* out) const override;
  Status load_state(int node, int64_t position, const uint8_t* in) override;

 private:
  const vk::SavedState* saved(int node) const {
    const int i = node >= 0 && size_t(node) < saved_index_.size() ? saved_index_[size_t(node)] : -1;
    return i < 0 ? nullptr : &saved_states_[size_t(i)];
  }
  // Copies the saved bytes after s.host_bytes between the op's state and out (save) or in (load).
  Status transfer(const vk::SavedState& s, int64_t position, uint8_t* out, const uint8_t* in) const;

  const Model& model_;
  std::string ignored_;
  // Destroyed in reverse: the program before the pipelines and memory it uses, all before the device, which the
  // last session on it frees (with the weights).
  std::shared_ptr<vk::SharedDevice> device_;
  const vk::Context* ctx_ = nullptr;  // device_'s
  std::unique_ptr<vk::Memory> memory_;
  std::unique_ptr<vk::PipelineCache> pipelines_;
  std::unique_ptr<vk::Program> program_;
  // A context shift's dispatches (vk::Lowering::shift): one per dense attention op fed by static rotary positions;
  // null where the session cannot shift (attention sinks, forward_only).
  std::unique_ptr<vk::Program> shift_program_;
  vk::Slice ids_;     // host: [max_batch] int32
  vk::Slice output_;  // host: [max_batch, vocab] float
  int64_t vocab_ = 0;
  int64_t id_limit_ = 0;  // ids must lie in [0, id_limit_): the smallest embedding table read from the ids
  uint64_t weight_bytes_ = 0, arena_bytes_ = 0, state_bytes_ = 0;
  vk::FusionPlan fusion_;  // the generation path's fusions, which the arena's lifetimes follow
  std::vector<uint64_t> op_ns_;  // per node: device time of the last call, when profiling
  std::vector<vk::SavedState> saved_states_;  // the stateful ops
  std::vector<int> saved_index_;              // per node: its entry in saved_states_, or -1
};

Status supports(const Node& node, const Model& model) {
  const vk::VulkanOp* op = vk::find_vulkan_op(node.code);
  if (!op) return Unsupported(node.label() + ": op " + find_op(node.code)->name + " has no Vulkan shader yet");
  return op->supports(node, model);
}

uint64_t arena_lower_bound(const Model& model, const BackendConfig& config) {
  return values_plan(model, vk::plan_fusions(model), config.max_batch).bytes;
}

Status VulkanBackend::build(const BackendConfig& backend_config) {
  const tern_session_options& options = *backend_config.options;
  if (options.activation_storage == TERN_ACTIVATION_STORAGE_F16) {
    if (backend_config.named) {
      return Unsupported("activation_storage F16 is a CPU option: the Vulkan backend keeps activations in float32 "
                         "(use backend CPU, or activation_storage F32)");
    }
    ignored_ = "activations float32 (activation_storage F16 is a CPU option)";
  }
  if (options.kv_storage == TERN_KV_STORAGE_F16) {
    if (backend_config.named) {
      return Unsupported("kv_storage F16 is a CPU option: the Vulkan backend keeps keys and values in float32 "
                         "(use backend CPU, or kv_storage F32)");
    }
    ignored_ += std::string(ignored_.empty() ? "" : "; ") + "keys and values float32 (kv_storage F16 is a CPU option)";
  }
  if (options.allocator) {
    if (backend_config.named) {
      return Unsupported("allocator is a CPU option: a Vulkan session's memory comes from the driver "
                         "(use backend CPU, or leave allocator NULL)");
    }
    ignored_ += std::string(ignored_.empty() ? "" : "; ") + "the app's allocator not called (a CPU option)";
  }
  struct {
    int device;
    bool allow_cpu_device;  // false (backend auto): a CPU implementation such as lavapipe does not count
    int64_t max_tokens, max_batch;
    bool f16_weights;  // LINEAR weights and EMBEDDING tables stored as float16 (needs storageBuffer16BitAccess)
    bool f16_weights_if_available;  // weight_storage AUTO: float16 where the device has 16-bit storage
  } const config{options.device,
                 backend_config.named || options.device > 0,
                 backend_config.max_tokens,
                 backend_config.max_batch,
                 options.weight_storage == TERN_WEIGHT_STORAGE_F16,
                 options.weight_storage == TERN_WEIGHT_STORAGE_AUTO};
  const Model& model = model_;
  // A session that may continue a sequence needs every op to continue one here: refused now, never during a run.
  if (!options.forward_only) {
    for (const Node& node : model.nodes()) {
      const vk::VulkanOp* op = vk::find_vulkan_op(node.code);
      if (op->continues) TERN_RETURN_IF_ERROR(op->continues(node));
    }
  }
  // float16 LINEAR weights / EMBEDDING tables in the file are read as they are where the device has 16-bit storage
  // (linear_f16, embedding_f16), and widened to float32 while staging where it does not.
  bool f16_in_file = false;
  for (const Node& node : model.nodes()) {
    if (node.code == fb::OpCode::LINEAR || node.code == fb::OpCode::EMBEDDING) {
      f16_in_file |= node.weights[0] && node.weights[0]->dtype == fb::DType::F16;
    }
  }
  vk::DeviceOptions device_options;
  device_options.device = config.device;
  device_options.allow_cpu_device = config.allow_cpu_device;
  device_options.f16_storage = config.f16_weights;
  device_options.f16_storage_if_available = f16_in_file || config.f16_weights_if_available;
  TERN_ASSIGN_OR_RETURN(device_, vk::SharedDevice::acquire(model, device_options));
  ctx_ = &device_->context();
  memory_ = std::make_unique<vk::Memory>(*ctx_);
  pipelines_ = std::make_unique<vk::PipelineCache>(*ctx_);
  program_ = std::make_unique<vk::Program>(*ctx_, *memory_, *pipelines_, config.max_batch);
  vocab_ = model.vocab_size();

  // Values: the intermediate ones in one device arena placed by the planner; ids and logits in host-visible memory.
  const auto& nodes = model.nodes();
  fusion_ = vk::plan_fusions(model);
  const ArenaPlan plan = values_plan(model, fusion_, config.max_batch);
  TERN_ASSIGN_OR_RETURN(auto arena, memory_->allocate(plan.bytes, vk::MemoryKind::kDevice, "the arena"));
  TERN_ASSIGN_OR_RETURN(
      auto ids, memory_->allocate(uint64_t(config.max_batch) * sizeof(int32_t), vk::MemoryKind::kHost, "the ids"));
  ids_ = ids;
  TERN_ASSIGN_OR_RETURN(auto out, memory_->allocate(uint64_t(config.max_batch) * uint64_t(vocab_) * sizeof(float),
                                                    vk::MemoryKind::kHost, "the logits"));
  output_ = out;
  arena_bytes_ = plan.bytes;

  vk::Lowering low(model, *device_, *memory_, *program_, config.max_tokens, config.max_batch);
  low.f16_weights = config.f16_weights || (config.f16_weights_if_available && ctx_->f16_storage_enabled());
  low.f16_storage = ctx_->f16_storage_enabled();
  low.forward_only = options.forward_only != 0;
  low.sinks = backend_config.sinks;
  if (!backend_config.sinks.on() && !options.forward_only) {
    shift_program_ = std::make_unique<vk::Program>(*ctx_, *memory_, *pipelines_, config.max_batch);
    low.shift = shift_program_.get();
  }
  const auto& values = model.values();
  low.values.resize(values.size());
  for (size_t v = 0; v < values.size(); ++v) {
    const uint64_t bytes = uint64_t(config.max_batch) * uint64_t(values[v].width) * dtype_size(values[v].dtype);
    if (int(v) == model.input_value()) {
      low.values[v] = {ids_, 0, bytes, "ids"};
    } else if (int(v) == model.output_value()) {
      low.values[v] = {output_, 0, bytes, "output"};
    } else if (plan.offsets[v] >= 0) {
      low.values[v] = {arena, uint64_t(plan.offsets[v]), bytes, "an activation"};
    }
  }
  low.fusion = fusion_;
  id_limit_ = INT64_MAX;
  for (const Node& node : nodes) {
    const OpDef* def = find_op(node.code);
    if (def->token_ids) id_limit_ = std::min(id_limit_, def->token_ids(node));
    // An op fused into a LINEAR's matrix-vector dispatch runs only in calls of more rows.
    program_->skip_calls_up_to(low.fusion.skipped[size_t(node.index)] ? vk::kFusedRowsMax : 0);
    TERN_RETURN_IF_ERROR(vk::find_vulkan_op(node.code)->lower(node, low));
  }
  program_->skip_calls_up_to(0);
  // Generation's calls (1 or 2 rows, and up to 8: linear_rows.comp's tiers, ops_linear.cpp) replay command buffers
  // of only their own dispatches, without the other tiers' and the fused ops' empty ones.
  program_->record_small_calls({2, vk::kFusedRowsMax});
  TERN_RETURN_IF_ERROR(low.upload());
  weight_bytes_ = low.weight_bytes;
  state_bytes_ = low.state_bytes;
  arena_bytes_ += low.scratch_bytes;
  op_ns_.assign(nodes.size(), 0);
  saved_states_ = std::move(low.saved_states);
  saved_index_.assign(nodes.size(), -1);
  for (size_t i = 0; i < saved_states_.size(); ++i) saved_index_[size_t(saved_states_[i].node)] = int(i);
  if (shift_program_) TERN_RETURN_IF_ERROR(shift_program_->finish());
  return program_->finish();
}

// Every stateful op is dense attention fed by static rotary positions (Session::check_shift), so each has its
// kv_shift dispatch: keep entries of the position's move to slots 0.., keys rotated, on the device.
Status VulkanBackend::shift(int64_t keep, int64_t position) {
  if (!shift_program_) return Unsupported("a context shift needs a session that continues sequences, without sinks");
  return shift_program_->run(keep, position, nullptr);
}

Status VulkanBackend::run(const int32_t* ids, int64_t n, int64_t pos0, float* logits, OpProfile* profile) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= id_limit_) {
      return InvalidArgument("token id " + std::to_string(ids[i]) + " at position " + std::to_string(pos0 + i) +
                             " is outside the vocabulary [0, " + std::to_string(id_limit_) + ")");
    }
  }
  std::memcpy(ids_.mapped, ids, size_t(n) * sizeof(int32_t));
  if (profile) std::fill(op_ns_.begin(), op_ns_.end(), 0);
  const Status st = program_->run(n, pos0, profile ? op_ns_.data() : nullptr);
  for (size_t i = 0; profile && i < op_ns_.size(); ++i) {
    (*profile)[i].first += 1;
    (*profile)[i].second += op_ns_[i];
  }
  TERN_RETURN_IF_ERROR(st);
  if (logits) std::memcpy(logits, output_.mapped, size_t(n) * size_t(vocab_) * sizeof(float));
  return Status::Ok();
}

Status VulkanBackend::check_state(int node, int64_t position, const uint8_t* in) const {
  const vk::SavedState* s = saved(node);
  if (!s) return Status::Ok();
  if (s->check) TERN_RETURN_IF_ERROR(s->check(position, in));
  if (s->host_bytes > 0) {
    std::vector<uint8_t> want(size_t(s->host_bytes));
    s->host(position, want.data());
    if (std::memcmp(want.data(), in, want.size()) != 0) {
      return InvalidArgument(s->where + ": the saved state's row counts are not those of a sequence of " +
                             std::to_string(position) + " tokens");
    }
  }
  return check_saved_floats(s->where, in + s->host_bytes, s->bytes(position) - s->host_bytes);
}

Status VulkanBackend::save_state(int node, int64_t position, uint8_t* out) const {
  const vk::SavedState* s = saved(node);
  if (!s) return Status::Ok();
  if (s->host_bytes > 0) s->host(position, out);
  return transfer(*s, position, out, nullptr);
}

Status VulkanBackend::load_state(int node, int64_t position, const uint8_t* in) {
  const vk::SavedState* s = saved(node);
  if (!s) return Status::Ok();
  return transfer(*s, position, nullptr, in);
}

Status VulkanBackend::transfer(const vk::SavedState& s, int64_t position, uint8_t* out, const uint8_t* in) const {
  std::vector<vk::StateCopy> copies;
  s.copies(position, &copies);
  const uint64_t end = s.bytes(position), chunk = output_.size;
  const vk::Api& api = ctx_->api();
  std::vector<VkBufferCopy> regions;
  size_t first = 0;
  // The logits buffer holds saved bytes [c0, c1) at a time: its part of every copy in one command buffer.
  for (uint64_t c0 = s.host_bytes; c0 < end; c0 += chunk) {
    const uint64_t c1 = std::min(end, c0 + chunk);
    regions.clear();
    while (first < copies.size() && copies[first].saved + copies[first].bytes <= c0) ++first;
    for (size_t i = first; i < copies.size() && copies[i].saved < c1; ++i) {
      const vk::StateCopy& c = copies[i];
      const uint64_t lo = std::max(c0, c.saved), hi = std::min(c1, c.saved + c.bytes);
      const uint64_t device = s.slice.offset + c.device + (lo - c.saved), staging = output_.offset + (lo - c0);
      regions.push_back(out ? VkBufferCopy{device, staging, hi - lo} : VkBufferCopy{staging, device, hi - lo});
    }
    if (in) std::memcpy(output_.mapped, in + c0, size_t(c1 - c0));
    TERN_RETURN_IF_ERROR(vk::run_once(*ctx_, [&](VkCommandBuffer cb) {
      // The last run's shader writes (and reads, before a load overwrites) come before the copy.
      VkMemoryBarrier before{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
      before.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
      before.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      api.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0,
                               nullptr, 0, nullptr);
      if (out) {
        api.vkCmdCopyBuffer(cb, s.slice.buffer, output_.buffer, uint32_t(regions.size()), regions.data());
      } else {
        api.vkCmdCopyBuffer(cb, output_.buffer, s.slice.buffer, uint32_t(regions.size()), regions.data());
      }
      VkMemoryBarrier after{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
      after.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
      after.dstAccessMask = out ? VK_ACCESS_HOST_READ_BIT : VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
      api.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                               out ? VK_PIPELINE_STAGE_HOST_BIT : VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &after, 0,
                               nullptr, 0, nullptr);
    }));
    if (out) std::memcpy(out + c0, output_.mapped, size_t(c1 - c0));
  }
  return Status::Ok();
}

Result<std::unique_ptr<Backend>> create(const Model& model, const BackendConfig& config) {
  auto backend = std::make_unique<VulkanBackend>(model);
  TERN_RETURN_IF_ERROR(backend->build(config));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace

const BackendEntry& vulkan_backend() {
  static const BackendEntry kEntry{supports, arena_lower_bound, create};
  return kEntry;
}

}  // namespace tern
