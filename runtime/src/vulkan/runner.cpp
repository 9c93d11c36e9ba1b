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

 private:
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

}  // namespace

Result<std::unique_ptr<DeviceRunner>> create_vulkan_runner(const Model& model, const VulkanConfig& config) {
  // Ops first: a model the backend cannot run is reported the same way with or without a device.
  TERN_RETURN_IF_ERROR(check_ops(model));
  auto runner = std::make_unique<VulkanRunner>();
  TERN_RETURN_IF_ERROR(runner->build(model, config));
  return std::unique_ptr<DeviceRunner>(std::move(runner));
}

}  // namespace tern
