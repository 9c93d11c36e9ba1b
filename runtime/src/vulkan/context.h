// SPDX-License-Identifier: MIT
// One Vulkan instance, physical device, logical device and compute queue, shared by the sessions on one model and
// device (vulkan/shared_device.h).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/backend.h"
#include "vulkan/limits.h"
#include "vulkan/loader.h"

namespace tern::vk {

class Context {
 public:
  // device 0: the best device (discrete > integrated > virtual > CPU implementation); N >= 1: the loader's N-1-th.
  // With allow_cpu_device false, CPU implementations (lavapipe, SwiftShader) are passed over: Tern's own CPU
  // path is faster than running shaders on the same cores.
  // With f16_storage, the device must have storageBuffer16BitAccess (TERN_UNSUPPORTED naming it otherwise), and
  // it is enabled. With f16_storage_if_available it is enabled where the device has it (a model with float16 weights
  // in the file: read as they are where it can, widened to float32 otherwise); f16_storage_enabled() says which.
  static Result<std::unique_ptr<Context>> create(int device, bool allow_cpu_device, bool f16_storage = false,
                                                 bool f16_storage_if_available = false);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Api& api() const { return api_; }
  VkDevice device() const { return device_; }
  // vkQueueSubmit on the one compute queue. Sessions on different threads share it (vulkan/shared_device.h), and
  // Vulkan requires a queue's submits to be externally synchronised: they take turns on a mutex here. Nothing else
  // touches the queue, so every submit goes through this.
  VkResult submit(const VkSubmitInfo& info, VkFence fence) const;
  uint32_t queue_family() const { return queue_family_; }
  const DeviceLimits& limits() const { return limits_; }
  const DeviceFeatures& features() const { return features_; }
  bool f16_storage_enabled() const { return f16_storage_; }
  const DeviceInfo& info() const { return info_; }
  const VkPhysicalDeviceMemoryProperties& memory_properties() const { return memory_; }

 private:
  Context() = default;
  Status init(int device, bool allow_cpu_device, bool f16_storage, bool f16_storage_if_available);
  void read_features(uint32_t api_version);

  Api api_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  mutable std::mutex submit_mutex_;  // guards queue_
  uint32_t queue_family_ = 0;
  DeviceLimits limits_;
  DeviceFeatures features_;
  bool f16_storage_ = false;
  DeviceInfo info_;
  VkPhysicalDeviceMemoryProperties memory_{};
};

// The environment variables Context::create reads (the loader, validation, the storage-range and 16-bit-storage
// overrides), as one string: contexts created under different values may differ, so they are not shared.
std::string device_environment();

// Messages the Khronos validation layer has reported in this process (env TERN_VULKAN_VALIDATION=1 turns the layer
// on); tests assert it stays zero.
uint64_t validation_message_count();

}  // namespace tern::vk
