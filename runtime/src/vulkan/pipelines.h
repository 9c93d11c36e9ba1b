// SPDX-License-Identifier: MIT
// Compute pipelines from embedded SPIR-V, one per (shader, specialization constants), shared by the ops of a
// session. Every pipeline has the same interface: storage buffers at bindings 0..k-1 of set 0 (binding 0: the
// call's n and pos0) and one push-constant range that every shader family's block fits in (push_constants.h).
#pragma once

#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "vulkan/context.h"

namespace tern::vk {

constexpr int kMaxBindings = 8;  // BindingOffsets: the shaders' pc.off[8]
// Every pipeline layout has one push-constant range of this many bytes, the least maxPushConstantsSize any device
// has: each shader family's block (push_constants.h) fits in it (PushConstants::set asserts so), and one range for
// all keeps the layouts shared by binding count alone.
constexpr uint32_t kPushConstantBytes = 128;
// The first 32 bytes of every push-constant block, `uint off[8]` (shaders/common/interface.glsl): per binding, the
// element offset of the op's data inside the bound range. Program::add fills them.
using BindingOffsets = std::array<uint32_t, kMaxBindings>;

struct Pipeline {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  int bindings = 0;
};

class PipelineCache {
 public:
  explicit PipelineCache(const Context& ctx) : ctx_(ctx) {}
  ~PipelineCache();
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  // spec[i] is specialization constant constant_id = i (32-bit each).
  Result<Pipeline> get(const char* shader, const std::vector<uint32_t>& spec, int bindings);

 private:
  Result<VkDescriptorSetLayout> set_layout(int bindings);

  const Context& ctx_;
  std::map<int, std::pair<VkDescriptorSetLayout, VkPipelineLayout>> layouts_;  // by binding count
  std::map<std::pair<std::string, std::vector<uint32_t>>, Pipeline> pipelines_;
};

}  // namespace tern::vk
