// The Vulkan backend of a session: checks that every op has a shader, opens the device, places the values, uploads
// the weights, records the forward pass once, and replays it per call.
#include <algorithm>
#include <cstring>

#include "core/device_runner.h"
#include "core/planner.h"
#include "ops/op.h"
#include "vulkan/ops.h"

namespace tern {
namespace {

class VulkanRunner : public DeviceRunner {
 public:
  Status build(const Model& model, const VulkanConfig& config);
  Status run(const int32_t* ids, int64_t n, int64_t pos0, float* logits, uint64_t* op_ns) override;
  const DeviceInfo& device() const override { return ctx_->info(); }
  uint64_t weight_bytes() const override { return weight_bytes_; }
  uint64_t arena_bytes() const override { return arena_bytes_; }
  uint64_t state_bytes() const override { return state_bytes_; }
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

  // Destroyed in reverse: the program before the pipelines and memory it uses, all before the device.
  std::unique_ptr<vk::Context> ctx_;
  std::unique_ptr<vk::Memory> memory_;
  std::unique_ptr<vk::PipelineCache> pipelines_;
  std::unique_ptr<vk::Program> program_;
  vk::Slice ids_;     // host: [max_batch] int32
  vk::Slice output_;  // host: [max_batch, vocab] float
  int64_t vocab_ = 0;
  int64_t id_limit_ = 0;  // ids must lie in [0, id_limit_): the smallest embedding table read from the ids
  uint64_t weight_bytes_ = 0, arena_bytes_ = 0, state_bytes_ = 0;
  std::string whole_sequence_op_;  // an op that cannot continue a sequence (routing), or empty
  std::vector<vk::SavedState> saved_states_;  // the stateful ops
  std::vector<int> saved_index_;              // per node: its entry in saved_states_, or -1
};

Status check_ops(const Model& model) {
  for (const Node& node : model.nodes()) {
    const vk::VulkanOp* op = vk::find_vulkan_op(node.code);
    if (!op) return Unsupported(node.label() + ": op " + find_op(node.code)->name + " has no Vulkan shader yet");
    TERN_RETURN_IF_ERROR(op->supports(node, model));
  }
  return Status::Ok();
}

Status VulkanRunner::build(const Model& model, const VulkanConfig& config) {
  auto ctx = vk::Context::create(config.device, config.allow_cpu_device, config.f16_weights);
  if (!ctx.ok()) return ctx.status();
  ctx_ = std::move(ctx).value();
  memory_ = std::make_unique<vk::Memory>(*ctx_);
  pipelines_ = std::make_unique<vk::PipelineCache>(*ctx_);
  program_ = std::make_unique<vk::Program>(*ctx_, *memory_, *pipelines_, config.max_batch);
  vocab_ = model.vocab_size();

  // Values: the intermediate ones in one device arena placed by the planner; ids and logits in host-visible memory.
  const auto& nodes = model.nodes();
  const ArenaPlan plan = plan_arena(model, std::vector<bool>(nodes.size(), true), config.max_batch);
  auto arena = memory_->allocate(plan.bytes, vk::MemoryKind::kDevice, "the arena");
  if (!arena.ok()) return arena.status();
  auto ids = memory_->allocate(uint64_t(config.max_batch) * sizeof(int32_t), vk::MemoryKind::kHost, "the ids");
  if (!ids.ok()) return ids.status();
  ids_ = ids.value();
  auto out = memory_->allocate(uint64_t(config.max_batch) * uint64_t(vocab_) * sizeof(float), vk::MemoryKind::kHost, "the logits");
  if (!out.ok()) return out.status();
  output_ = out.value();
  arena_bytes_ = plan.bytes;

  vk::Lowering low(model, *ctx_, *memory_, *program_, config.max_tokens, config.max_batch);
  low.f16_weights = config.f16_weights;
  const auto& values = model.values();
  low.values.resize(values.size());
  for (size_t v = 0; v < values.size(); ++v) {
    const uint64_t bytes = uint64_t(config.max_batch) * uint64_t(values[v].width) * dtype_size(values[v].dtype);
    if (int(v) == model.input_value()) {
      low.values[v] = {ids_, 0, bytes, "ids"};
    } else if (int(v) == model.output_value()) {
      low.values[v] = {output_, 0, bytes, "output"};
    } else if (plan.offsets[v] >= 0) {
      low.values[v] = {arena.value(), uint64_t(plan.offsets[v]), bytes, "an activation"};
    }
  }
  id_limit_ = INT64_MAX;
  for (const Node& node : nodes) {
    if (node.code == fb::OpCode::EMBEDDING) id_limit_ = std::min(id_limit_, node.weights[0]->shape[0]);
    if (node.code == fb::OpCode::ADAPTIVE_EMBEDDING) {  // the vocabulary: the clusters' tables' rows together
      int64_t rows = 0;
      for (size_t w = 0; w < node.weights.size(); w += 2) rows += node.weights[w] ? node.weights[w]->shape[0] : 0;
      id_limit_ = std::min(id_limit_, rows);
    }
    TERN_RETURN_IF_ERROR(vk::find_vulkan_op(node.code)->lower(node, low));
  }
  TERN_RETURN_IF_ERROR(low.upload());
  weight_bytes_ = low.weight_bytes;
  state_bytes_ = low.state_bytes;
  arena_bytes_ += low.scratch_bytes;
  whole_sequence_op_ = low.whole_sequence_op;
  saved_states_ = std::move(low.saved_states);
  saved_index_.assign(nodes.size(), -1);
  for (size_t i = 0; i < saved_states_.size(); ++i) saved_index_[size_t(saved_states_[i].node)] = int(i);
  return program_->finish();
}

Status VulkanRunner::run(const int32_t* ids, int64_t n, int64_t pos0, float* logits, uint64_t* op_ns) {
  if (pos0 != 0 && !whole_sequence_op_.empty()) {
    return Unsupported(whole_sequence_op_ + ": routing attention clusters the whole sequence at once, so it cannot "
                       "continue one: appending after " + std::to_string(pos0) + " tokens is not supported; run the "
                       "whole sequence in one forward call (models with routing layers do not stream)");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= id_limit_) {
      return InvalidArgument("token id " + std::to_string(ids[i]) + " at position " + std::to_string(pos0 + i) +
                             " is outside the vocabulary [0, " + std::to_string(id_limit_) + ")");
    }
  }
  std::memcpy(ids_.mapped, ids, size_t(n) * sizeof(int32_t));
  TERN_RETURN_IF_ERROR(program_->run(n, pos0, op_ns));
  if (logits) std::memcpy(logits, output_.mapped, size_t(n) * size_t(vocab_) * sizeof(float));
  return Status::Ok();
}

Status VulkanRunner::check_state(int node, int64_t position, const uint8_t* in) const {
  const vk::SavedState* s = saved(node);
  if (!s || s->host_bytes == 0) return Status::Ok();
  std::vector<uint8_t> want(size_t(s->host_bytes));
  s->host(position, want.data());
  if (std::memcmp(want.data(), in, want.size()) != 0) {
    return InvalidArgument(s->where + ": the saved state's row counts are not those of a sequence of " +
                           std::to_string(position) + " tokens");
  }
  return Status::Ok();
}

Status VulkanRunner::save_state(int node, int64_t position, uint8_t* out) const {
  const vk::SavedState* s = saved(node);
  if (!s) return Status::Ok();
  if (s->host_bytes > 0) s->host(position, out);
  return transfer(*s, position, out, nullptr);
}

Status VulkanRunner::load_state(int node, int64_t position, const uint8_t* in) {
  const vk::SavedState* s = saved(node);
  if (!s) return Status::Ok();
  return transfer(*s, position, nullptr, in);
}

Status VulkanRunner::transfer(const vk::SavedState& s, int64_t position, uint8_t* out, const uint8_t* in) const {
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

}  // namespace

Result<std::unique_ptr<DeviceRunner>> create_vulkan_runner(const Model& model, const VulkanConfig& config) {
  // Ops first: a model the backend cannot run is reported the same way with or without a device.
  TERN_RETURN_IF_ERROR(check_ops(model));
  auto runner = std::make_unique<VulkanRunner>();
  TERN_RETURN_IF_ERROR(runner->build(model, config));
  return std::unique_ptr<DeviceRunner>(std::move(runner));
}

}  // namespace tern
