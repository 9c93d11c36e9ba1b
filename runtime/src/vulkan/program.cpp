// SPDX-License-Identifier: MIT
#include "vulkan/program.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace tern::vk {
namespace {

constexpr uint64_t kFenceTimeoutNs = 600ull * 1000 * 1000 * 1000;  // a lavapipe run of a big model can take minutes

void barrier(const Api& vk, VkCommandBuffer cb, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = dst_access;
  vk.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

}  // namespace

Program::Program(const Context& ctx, Memory& memory, PipelineCache& pipelines, int64_t max_batch)
    : ctx_(ctx), memory_(memory), pipelines_(pipelines), max_batch_(max_batch) {}

Program::~Program() {
  const Api& vk = ctx_.api();
  if (fence_) vk.vkDestroyFence(ctx_.device(), fence_, nullptr);
  if (timestamps_) vk.vkDestroyQueryPool(ctx_.device(), timestamps_, nullptr);
  if (command_pool_) vk.vkDestroyCommandPool(ctx_.device(), command_pool_, nullptr);
  if (pool_) vk.vkDestroyDescriptorPool(ctx_.device(), pool_, nullptr);
}

Status Program::add(DispatchSpec spec) {
  const DeviceLimits& limits = ctx_.limits();
  const int bindings = 1 + int(spec.bindings.size());
  if (bindings > kMaxBindings) return Status(TERN_DEVICE_ERROR, spec.where + ": too many bindings for one dispatch");
  // Every shader reads its binding offsets from the push constants.
  if (spec.push.empty()) {
    return Status(TERN_DEVICE_ERROR, spec.where + ": the dispatch of " + spec.shader + " has no push constants set");
  }
  DispatchNeeds needs;
  needs.where = spec.where;
  for (int a = 0; a < 3; ++a) needs.local_size[a] = spec.local_size[a];
  needs.shared_bytes = spec.shared_bytes;
  const Groups most = spec.groups(max_batch_);
  for (int a = 0; a < 3; ++a) needs.max_groups[a] = most[a];
  needs.push_bytes = kPushConstantBytes;  // the pipeline layout's range, whatever this dispatch pushes
  needs.storage_buffers = uint32_t(bindings);
  TERN_RETURN_IF_ERROR(check_dispatch(limits, needs));

  Dispatch d;
  TERN_ASSIGN_OR_RETURN(auto pipeline, pipelines_.get(spec.shader, spec.spec, bindings));
  d.pipeline = pipeline;
  d.groups = std::move(spec.groups);
  if (skip_up_to_ > 0) {
    d.groups = [groups = std::move(d.groups), rows = skip_up_to_](int64_t n) {
      return n <= rows ? Groups{0, 0, 0} : groups(n);
    };
  }
  d.when = spec.when;
  d.node = spec.node;
  d.push = spec.push;
  const uint64_t align = limits.min_storage_buffer_offset_alignment;
  for (size_t i = 0; i < spec.bindings.size(); ++i) {
    const Binding& b = spec.bindings[i];
    const uint64_t begin = b.slice.offset + b.offset;
    const uint64_t bytes = b.bytes ? b.bytes : b.slice.size - b.offset;
    // Bind from the aligned offset at or below the data; the shader adds the remainder (push.off) to its indices.
    const uint64_t bind_at = begin / align * align;
    const uint64_t range = begin + bytes - bind_at;
    TERN_RETURN_IF_ERROR(check_binding(limits, spec.where, b.what, range));
    // A float16 weight's part may start at any even byte: its offset counts halves, not floats.
    if ((begin - bind_at) % b.element_bytes != 0) return Status(TERN_DEVICE_ERROR, spec.where + ": misaligned binding");
    d.push.set_binding_offset(i + 1, uint32_t((begin - bind_at) / b.element_bytes));
    d.buffers.push_back({b.slice.buffer, bind_at, range});
  }
  dispatches_.push_back(std::move(d));
  return Status::Ok();
}

Status Program::finish() {
  const Api& vk = ctx_.api();
  VkDevice dev = ctx_.device();
  const uint32_t count = uint32_t(std::max<size_t>(1, dispatches_.size()));
  TERN_ASSIGN_OR_RETURN(auto call, memory_.allocate(2 * sizeof(uint32_t), MemoryKind::kHost, "the call parameters"));
  call_ = call;
  TERN_ASSIGN_OR_RETURN(auto indirect, memory_.allocate(uint64_t(count) * sizeof(VkDispatchIndirectCommand),
                                                        MemoryKind::kHost, "dispatch sizes"));
  indirect_ = indirect;

  uint32_t descriptors = 0;
  for (const Dispatch& d : dispatches_) descriptors += uint32_t(d.pipeline.bindings);
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max(1u, descriptors)};
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dpi.maxSets = count;
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &size;
  TERN_VK_RETURN_IF_ERROR(vk.vkCreateDescriptorPool(dev, &dpi, nullptr, &pool_), "vkCreateDescriptorPool");
  for (Dispatch& d : dispatches_) {
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = pool_;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &d.pipeline.set_layout;
    TERN_VK_RETURN_IF_ERROR(vk.vkAllocateDescriptorSets(dev, &ai, &d.set), "vkAllocateDescriptorSets");
    std::vector<VkDescriptorBufferInfo> infos;
    infos.push_back({call_.buffer, call_.offset, call_.size});
    infos.insert(infos.end(), d.buffers.begin(), d.buffers.end());
    std::vector<VkWriteDescriptorSet> writes(infos.size());
    for (size_t i = 0; i < infos.size(); ++i) {
      writes[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[i].dstSet = d.set;
      writes[i].dstBinding = uint32_t(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    vk.vkUpdateDescriptorSets(dev, uint32_t(writes.size()), writes.data(), 0, nullptr);
  }

  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.queueFamilyIndex = ctx_.queue_family();
  TERN_VK_RETURN_IF_ERROR(vk.vkCreateCommandPool(dev, &cpi, nullptr, &command_pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = command_pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  // One recording per class of small calls, with the dispatches that have workgroups in one of its calls (whatever
  // the position: CallKind is left to the workgroup counts), then the whole program for the rest.
  int64_t below = 0;
  for (int64_t bound : small_calls_) {
    const int64_t up_to = std::min(bound, max_batch_);
    if (up_to <= below) continue;
    Recording r;
    r.rows = up_to;
    for (size_t i = 0; i < dispatches_.size(); ++i) {
      for (int64_t n = below + 1; n <= up_to; ++n) {
        const Groups g = dispatches_[i].groups(n);
        if (uint64_t(g[0]) * g[1] * g[2] > 0) {
          r.dispatches.push_back(i);
          break;
        }
      }
    }
    recordings_.push_back(std::move(r));
    below = up_to;
  }
  if (below < max_batch_) {
    Recording whole;
    whole.rows = max_batch_;
    for (size_t i = 0; i < dispatches_.size(); ++i) whole.dispatches.push_back(i);
    recordings_.push_back(std::move(whole));
  }
  std::vector<VkCommandBuffer> buffers(recordings_.size());
  cai.commandBufferCount = uint32_t(buffers.size());
  TERN_VK_RETURN_IF_ERROR(vk.vkAllocateCommandBuffers(dev, &cai, buffers.data()), "vkAllocateCommandBuffers");
  for (size_t r = 0; r < recordings_.size(); ++r) recordings_[r].commands = buffers[r];
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  TERN_VK_RETURN_IF_ERROR(vk.vkCreateFence(dev, &fci, nullptr, &fence_), "vkCreateFence");

  if (ctx_.limits().timestamp_period_ns > 0) {
    VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qci.queryCount = uint32_t(dispatches_.size() + 1);
    TERN_VK_RETURN_IF_ERROR(vk.vkCreateQueryPool(dev, &qci, nullptr, &timestamps_), "vkCreateQueryPool");
  }

  for (Recording& r : recordings_) TERN_RETURN_IF_ERROR(record(r));
  return Status::Ok();
}

Status Program::record(Recording& r) {
  const Api& vk = ctx_.api();
  VkCommandBuffer cb = r.commands;
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  TERN_VK_RETURN_IF_ERROR(vk.vkBeginCommandBuffer(cb, &bi), "vkBeginCommandBuffer");
  if (timestamps_) {
    vk.vkCmdResetQueryPool(cb, timestamps_, 0, uint32_t(dispatches_.size() + 1));
    vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, timestamps_, 0);
  }
  for (size_t i : r.dispatches) {
    const Dispatch& d = dispatches_[i];
    vk.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, d.pipeline.pipeline);
    vk.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, d.pipeline.layout, 0, 1, &d.set, 0, nullptr);
    vk.vkCmdPushConstants(cb, d.pipeline.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, d.push.size(), d.push.data());
    vk.vkCmdDispatchIndirect(cb, indirect_.buffer, indirect_.offset + i * sizeof(VkDispatchIndirectCommand));
    // Ops run in graph order; each may read what any earlier one wrote (and the arena reuses space).
    barrier(vk, cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    // After the barrier: this dispatch has finished, so the difference with the previous stamp is its time.
    if (timestamps_) vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timestamps_, uint32_t(i + 1));
  }
  barrier(vk, cb, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  TERN_VK_RETURN_IF_ERROR(vk.vkEndCommandBuffer(cb), "vkEndCommandBuffer");
  return Status::Ok();
}

Status Program::run(int64_t n, int64_t pos0, uint64_t* op_ns) {
  const Api& vk = ctx_.api();
  const uint32_t call[2] = {uint32_t(n), uint32_t(pos0)};
  std::memcpy(call_.mapped, call, sizeof call);
  // Host-coherent memory: the submit below makes these writes visible to the shaders.
  for (const CallWrite& write : call_writes_) write(n, pos0);
  auto* sizes = reinterpret_cast<VkDispatchIndirectCommand*>(indirect_.mapped);
  for (size_t i = 0; i < dispatches_.size(); ++i) {
    const Groups g = call_groups(i, n, pos0);
    sizes[i] = {g[0], g[1], g[2]};
  }
  const Recording* recording = &recordings_.back();  // n <= max_batch_: the last one takes any call
  for (const Recording& r : recordings_) {
    if (n <= r.rows) {
      recording = &r;
      break;
    }
  }
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &recording->commands;
  TERN_VK_RETURN_IF_ERROR(vk.vkResetFences(ctx_.device(), 1, &fence_), "vkResetFences");
  TERN_VK_RETURN_IF_ERROR(ctx_.submit(si, fence_), "vkQueueSubmit");
  TERN_VK_RETURN_IF_ERROR(vk.vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, kFenceTimeoutNs), "waiting for the device");
  if (op_ns && timestamps_) {
    // Only the recording's stamps were written: each read alone (a wait on an unwritten one would never end).
    auto stamp = [&](size_t slot, uint64_t* value) {
      return vk.vkGetQueryPoolResults(ctx_.device(), timestamps_, uint32_t(slot), 1, sizeof(uint64_t), value,
                                      sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    };
    uint64_t before = 0;
    TERN_VK_RETURN_IF_ERROR(stamp(0, &before), "vkGetQueryPoolResults");
    const double period = ctx_.limits().timestamp_period_ns;
    for (size_t i : recording->dispatches) {
      uint64_t after = 0;
      TERN_VK_RETURN_IF_ERROR(stamp(i + 1, &after), "vkGetQueryPoolResults");
      if (dispatches_[i].node >= 0 && after >= before) {
        op_ns[dispatches_[i].node] += uint64_t(double(after - before) * period);
      }
      before = after;
    }
  }
  return Status::Ok();
}

Groups Program::call_groups(size_t i, int64_t n, int64_t pos0) const {
  const CallKind when = dispatches_[i].when;
  if ((when == CallKind::kFirst && pos0 > 0) || (when == CallKind::kLater && pos0 == 0)) return {0, 0, 0};
  return dispatches_[i].groups(n);
}

uint64_t Program::count_dispatches(int64_t n, int64_t pos0, uint64_t* per_node) const {
  uint64_t total = 0;
  for (size_t i = 0; i < dispatches_.size(); ++i) {
    const Groups g = call_groups(i, n, pos0);
    if (uint64_t(g[0]) * g[1] * g[2] == 0) continue;  // recorded, but no workgroups in this call
    ++total;
    if (per_node && dispatches_[i].node >= 0) ++per_node[dispatches_[i].node];
  }
  return total;
}

Status run_once(const Context& ctx, const std::function<void(VkCommandBuffer)>& record) {
  const Api& vk = ctx.api();
  VkDevice dev = ctx.device();
  VkCommandPool pool = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  cpi.queueFamilyIndex = ctx.queue_family();
  TERN_VK_RETURN_IF_ERROR(vk.vkCreateCommandPool(dev, &cpi, nullptr, &pool), "vkCreateCommandPool");
  auto done = [&](Status st) {
    if (fence) vk.vkDestroyFence(dev, fence, nullptr);
    vk.vkDestroyCommandPool(dev, pool, nullptr);
    return st;
  };
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = pool;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkResult r = vk.vkAllocateCommandBuffers(dev, &cai, &cb);
  if (r != VK_SUCCESS) return done(vk_error(r, "vkAllocateCommandBuffers"));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  r = vk.vkCreateFence(dev, &fci, nullptr, &fence);
  if (r != VK_SUCCESS) return done(vk_error(r, "vkCreateFence"));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vk.vkBeginCommandBuffer(cb, &bi);
  record(cb);
  vk.vkEndCommandBuffer(cb);
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  r = ctx.submit(si, fence);
  if (r != VK_SUCCESS) return done(vk_error(r, "vkQueueSubmit"));
  r = vk.vkWaitForFences(dev, 1, &fence, VK_TRUE, kFenceTimeoutNs);
  return done(r == VK_SUCCESS ? Status::Ok() : vk_error(r, "waiting for the device"));
}

}  // namespace tern::vk
