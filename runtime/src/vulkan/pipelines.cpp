// SPDX-License-Identifier: MIT
#include "vulkan/pipelines.h"

#include "vulkan/shaders.h"

namespace tern::vk {

PipelineCache::~PipelineCache() {
  const Api& vk = ctx_.api();
  for (auto& [key, p] : pipelines_) vk.vkDestroyPipeline(ctx_.device(), p.pipeline, nullptr);
  for (auto& [n, l] : layouts_) {
    vk.vkDestroyPipelineLayout(ctx_.device(), l.second, nullptr);
    vk.vkDestroyDescriptorSetLayout(ctx_.device(), l.first, nullptr);
  }
}

Result<VkDescriptorSetLayout> PipelineCache::set_layout(int bindings) {
  auto it = layouts_.find(bindings);
  if (it != layouts_.end()) return it->second.first;
  const Api& vk = ctx_.api();
  std::vector<VkDescriptorSetLayoutBinding> b(static_cast<size_t>(bindings));
  for (int i = 0; i < bindings; ++i) {
    b[i].binding = uint32_t(i);
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo lci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  lci.bindingCount = uint32_t(bindings);
  lci.pBindings = b.data();
  VkDescriptorSetLayout set = VK_NULL_HANDLE;
  TERN_VK_RETURN_IF_ERROR(vk.vkCreateDescriptorSetLayout(ctx_.device(), &lci, nullptr, &set), "vkCreateDescriptorSetLayout");
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushConstantBytes};  // every family's block fits
  VkPipelineLayoutCreateInfo pci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pci.setLayoutCount = 1;
  pci.pSetLayouts = &set;
  pci.pushConstantRangeCount = 1;
  pci.pPushConstantRanges = &range;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkResult r = vk.vkCreatePipelineLayout(ctx_.device(), &pci, nullptr, &layout);
  if (r != VK_SUCCESS) {
    vk.vkDestroyDescriptorSetLayout(ctx_.device(), set, nullptr);
    return vk_error(r, "vkCreatePipelineLayout");
  }
  layouts_[bindings] = {set, layout};
  return set;
}

Result<Pipeline> PipelineCache::get(const char* shader, const std::vector<uint32_t>& spec, int bindings) {
  auto key = std::make_pair(std::string(shader), spec);
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second;
  const EmbeddedShader* code = find_shader(shader);
  if (!code) return Unsupported(std::string("shader '") + shader + "' is not built into this library");
  TERN_ASSIGN_OR_RETURN(auto set, set_layout(bindings));
  const Api& vk = ctx_.api();
  VkShaderModuleCreateInfo sci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  sci.codeSize = code->words * sizeof(uint32_t);
  sci.pCode = code->code;
  VkShaderModule module = VK_NULL_HANDLE;
  TERN_VK_RETURN_IF_ERROR(vk.vkCreateShaderModule(ctx_.device(), &sci, nullptr, &module), std::string("vkCreateShaderModule ") + shader);
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (size_t i = 0; i < spec.size(); ++i) entries[i] = {uint32_t(i), uint32_t(i * sizeof(uint32_t)), sizeof(uint32_t)};
  VkSpecializationInfo si{uint32_t(entries.size()), entries.data(), spec.size() * sizeof(uint32_t), spec.data()};
  VkComputePipelineCreateInfo cpi{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cpi.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpi.stage.module = module;
  cpi.stage.pName = "main";
  cpi.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
  Pipeline p;
  p.layout = layouts_[bindings].second;
  p.set_layout = set;
  p.bindings = bindings;
  cpi.layout = p.layout;
  VkResult r = vk.vkCreateComputePipelines(ctx_.device(), VK_NULL_HANDLE, 1, &cpi, nullptr, &p.pipeline);
  vk.vkDestroyShaderModule(ctx_.device(), module, nullptr);
  TERN_VK_RETURN_IF_ERROR(r, std::string("vkCreateComputePipelines ") + shader);
  pipelines_[key] = p;
  return p;
}

}  // namespace tern::vk
