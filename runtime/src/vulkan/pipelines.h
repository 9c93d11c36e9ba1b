// Compute pipelines from embedded SPIR-V, one per (shader, specialization constants), shared by the ops of a
// session. Every pipeline has the same interface: storage buffers at bindings 0..k-1 of set 0 (binding 0: the
// call's n and pos0) and the push constants of shaders/common/interface.glsl.
#pragma once

#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "vulkan/context.h"

namespace tern::vk {

constexpr int kMaxBindings = 8;   // push.off[8]
constexpr int kMaxArgs = 16;      // push.arg[16]
struct Push {
  std::array<uint32_t, kMaxBindings> off{};  // per binding: element offset of the op's data inside the bound range
  std::array<int32_t, kMaxArgs> arg{};       // op parameters (widths, flags, float bits)
};
static_assert(sizeof(Push) == 96, "shaders/common/interface.glsl expects 96 bytes of push constants");

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
