// SPDX-License-Identifier: MIT
// The Vulkan loader, opened at run time (dlopen) so that libtern links and runs on machines without one: a
// session asking for Vulkan there gets a clear TERN_UNSUPPORTED instead of a process that cannot start.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>
#include <vector>

#include "format/status.h"

namespace tern::vk {

#define TERN_VK_GLOBAL_FUNCTIONS(X) X(vkCreateInstance) X(vkEnumerateInstanceLayerProperties)

#define TERN_VK_INSTANCE_FUNCTIONS(X)                                                                        \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                       \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice)      \
  X(vkGetDeviceProcAddr)

// Present only with the instance extensions or versions that bring them; may stay null.
#define TERN_VK_OPTIONAL_INSTANCE_FUNCTIONS(X) \
  X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2) X(vkCreateDebugUtilsMessengerEXT) X(vkDestroyDebugUtilsMessengerEXT)

#define TERN_VK_DEVICE_FUNCTIONS(X)                                                                           \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements) \
  X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory)                  \
  X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout)                            \
  X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout)                       \
  X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool)      \
  X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCreateCommandPool) X(vkDestroyCommandPool)       \
  X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkCmdBindPipeline)             \
  X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatchIndirect) X(vkCmdPipelineBarrier)          \
  X(vkCmdCopyBuffer) X(vkCmdFillBuffer) X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences)                 \
  X(vkResetFences) X(vkDeviceWaitIdle)            \
  X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkCmdResetQueryPool) X(vkCmdWriteTimestamp) X(vkGetQueryPoolResults)

#define TERN_VK_DECLARE(name) PFN_##name name = nullptr;

// Function pointers of one instance and one device.
struct Api {
  void* library = nullptr;
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  TERN_VK_GLOBAL_FUNCTIONS(TERN_VK_DECLARE)
  TERN_VK_INSTANCE_FUNCTIONS(TERN_VK_DECLARE)
  TERN_VK_OPTIONAL_INSTANCE_FUNCTIONS(TERN_VK_DECLARE)
  TERN_VK_DEVICE_FUNCTIONS(TERN_VK_DECLARE)

  // Opens the platform's loader (libvulkan.so.1; libvulkan.so on Android; env TERN_VULKAN_LOADER overrides the
  // name) and its global functions.
  Status open();
  Status load_instance(VkInstance instance);
  Status load_device(VkDevice device);
  void close();
};

// The shared objects mapped in this process (their paths), to tell which ones a Vulkan call opens.
std::vector<std::string> mapped_objects();
// Keeps every shared object mapped now that is not in `before` (the drivers and layers vkCreateInstance opened, and
// what they link) mapped for the life of the process, as the loader itself is (Api::close).
void keep_mapped_since(const std::vector<std::string>& before);

#undef TERN_VK_DECLARE

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
const char* result_name(VkResult r);
// TERN_OUT_OF_MEMORY for the out-of-memory results, TERN_DEVICE_ERROR otherwise; `what` names the call.
Status vk_error(VkResult r, const std::string& what);

}  // namespace tern::vk

#define TERN_VK_RETURN_IF_ERROR(call, what)              \
  do {                                                   \
    VkResult _tern_vr = (call);                          \
    if (_tern_vr != VK_SUCCESS) return ::tern::vk::vk_error(_tern_vr, what); \
  } while (0)
