// SPDX-License-Identifier: MIT
#include "vulkan/context.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/log.h"

namespace tern::vk {
namespace {

std::atomic<uint64_t> g_validation_messages{0};

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                     VkDebugUtilsMessageTypeFlagsEXT,
                                                     const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  g_validation_messages.fetch_add(1);
  tern::log(severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? TERN_LOG_ERROR : TERN_LOG_WARNING,
            std::string("Vulkan validation: ") + (data && data->pMessage ? data->pMessage : ""));
  return VK_FALSE;
}

bool validation_requested() {
  const char* v = std::getenv("TERN_VULKAN_VALIDATION");
  return v && std::strcmp(v, "1") == 0;
}

// TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE=<bytes>: an upper bound on maxStorageBufferRange, to run on a device with a
// large range (lavapipe) what a driver with a small one (128 MiB on some) would: weights split into more parts, a
// binding over the bound failing by the limit's name. Read here, in every context: a session created after a setenv
// gets a context created under it (device_environment is part of what sessions share a context by). It only lowers.
Status storage_buffer_range_override(uint64_t* range) {
  const char* v = std::getenv("TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE");
  if (!v || !*v) return Status::Ok();
  char* end = nullptr;
  errno = 0;
  const unsigned long long bytes = std::strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0' || v[0] == '-' || bytes < 4) {
    return InvalidArgument(std::string("TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE='") + v +
                           "': expected a number of bytes, at least 4");
  }
  *range = std::min<uint64_t>(*range, bytes);
  return Status::Ok();
}

// TERN_VULKAN_NO_16BIT_STORAGE=1: act as a device without storageBuffer16BitAccess (read per context, like the
// range above), so that the message a float16-weight session gets on such a device can be checked on one that has it.
bool no_16bit_storage_requested() {
  const char* v = std::getenv("TERN_VULKAN_NO_16BIT_STORAGE");
  return v && std::strcmp(v, "1") == 0;
}

// TERN_VULKAN_NO_SUBGROUP_ARITHMETIC=1: act as a device without subgroup arithmetic in compute (read per context),
// so that the shared-memory reductions the shaders fall back to run, and are tested, on a device that has it.
bool no_subgroup_arithmetic_requested() {
  const char* v = std::getenv("TERN_VULKAN_NO_SUBGROUP_ARITHMETIC");
  return v && std::strcmp(v, "1") == 0;
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

// Higher is preferred.
int rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
  }
}

}  // namespace

uint64_t validation_message_count() { return g_validation_messages.load(); }

std::string device_environment() {
  std::string all;
  for (const char* name : {"TERN_VULKAN_LOADER", "TERN_VULKAN_VALIDATION", "TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE",
                           "TERN_VULKAN_NO_16BIT_STORAGE", "TERN_VULKAN_NO_SUBGROUP_ARITHMETIC"}) {
    const char* v = std::getenv(name);
    all += std::string(name) + "=" + (v ? v : "") + ";";
  }
  return all;
}

VkResult Context::submit(const VkSubmitInfo& info, VkFence fence) const {
  std::lock_guard<std::mutex> lock(submit_mutex_);
  return api_.vkQueueSubmit(queue_, 1, &info, fence);
}

Result<std::unique_ptr<Context>> Context::create(int device, bool allow_cpu_device, bool f16_storage,
                                                 bool f16_storage_if_available) {
  std::unique_ptr<Context> c(new Context());
  Status st = c->init(device, allow_cpu_device, f16_storage, f16_storage_if_available);
  if (!st.ok()) return st;
  return c;
}

void Context::read_features(uint32_t api_version) {
  features_.api_version = api_version;
  // The instance asks for Vulkan 1.1, so the 1.1 entry point and structures are there for a 1.1 device; the 1.2
  // structures are chained only for a device that reports 1.2 (a 1.0 device: every feature stays false).
  if (!api_.vkGetPhysicalDeviceFeatures2 || api_version < VK_API_VERSION_1_1) return;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDevice16BitStorageFeatures s16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDevice8BitStorageFeatures s8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features f16i8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  f2.pNext = &s16;
  if (api_version >= VK_API_VERSION_1_2) {
    s16.pNext = &s8;
    s8.pNext = &f16i8;
  }
  api_.vkGetPhysicalDeviceFeatures2(physical_, &f2);
  features_.storage_buffer_16bit = s16.storageBuffer16BitAccess == VK_TRUE && !no_16bit_storage_requested();
  features_.storage_buffer_8bit = s8.storageBuffer8BitAccess == VK_TRUE;
  features_.shader_float16 = f16i8.shaderFloat16 == VK_TRUE;
  features_.shader_int8 = f16i8.shaderInt8 == VK_TRUE;
}

Status Context::init(int device_choice, bool allow_cpu_device, bool f16_storage, bool f16_storage_if_available) {
  TERN_RETURN_IF_ERROR(api_.open());
  const bool validation = validation_requested();
  std::vector<const char*> layers, extensions;
  if (validation) {
    uint32_t count = 0;
    api_.vkEnumerateInstanceLayerProperties(&count, nullptr);
    std::vector<VkLayerProperties> props(count);
    api_.vkEnumerateInstanceLayerProperties(&count, props.data());
    bool found = false;
    for (const auto& p : props) found = found || std::strcmp(p.layerName, "VK_LAYER_KHRONOS_validation") == 0;
    if (!found) return Unsupported("TERN_VULKAN_VALIDATION=1 but VK_LAYER_KHRONOS_validation is not installed (vulkan-validationlayers)");
    layers.push_back("VK_LAYER_KHRONOS_validation");
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "tern";
  app.pEngineName = "tern";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  ici.enabledLayerCount = uint32_t(layers.size());
  ici.ppEnabledLayerNames = layers.data();
  ici.enabledExtensionCount = uint32_t(extensions.size());
  ici.ppEnabledExtensionNames = extensions.data();
  const std::vector<std::string> mapped_before = mapped_objects();
  VkResult r = api_.vkCreateInstance(&ici, nullptr, &instance_);
  keep_mapped_since(mapped_before);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) return Unsupported("no Vulkan device: the loader found no driver");
  TERN_VK_RETURN_IF_ERROR(r, "vkCreateInstance");
  TERN_RETURN_IF_ERROR(api_.load_instance(instance_));
  if (validation && api_.vkCreateDebugUtilsMessengerEXT) {
    VkDebugUtilsMessengerCreateInfoEXT mci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mci.pfnUserCallback = on_validation_message;
    TERN_VK_RETURN_IF_ERROR(api_.vkCreateDebugUtilsMessengerEXT(instance_, &mci, nullptr, &messenger_),
                            "vkCreateDebugUtilsMessengerEXT");
  }

  uint32_t count = 0;
  TERN_VK_RETURN_IF_ERROR(api_.vkEnumeratePhysicalDevices(instance_, &count, nullptr), "vkEnumeratePhysicalDevices");
  if (count == 0) return Unsupported("no Vulkan device");
  std::vector<VkPhysicalDevice> devices(count);
  TERN_VK_RETURN_IF_ERROR(api_.vkEnumeratePhysicalDevices(instance_, &count, devices.data()), "vkEnumeratePhysicalDevices");
  // The first queue family with compute, per device; -1 where none.
  std::vector<uint32_t> timestamp_bits;  // of the chosen device's compute family, filled below
  auto compute_family = [&](VkPhysicalDevice d) {
    uint32_t n = 0;
    api_.vkGetPhysicalDeviceQueueFamilyProperties(d, &n, nullptr);
    std::vector<VkQueueFamilyProperties> fams(n);
    api_.vkGetPhysicalDeviceQueueFamilyProperties(d, &n, fams.data());
    for (uint32_t i = 0; i < n; ++i) {
      if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        timestamp_bits.assign(1, fams[i].timestampValidBits);
        return int(i);
      }
    }
    return -1;
  };
  VkPhysicalDeviceProperties props{};
  if (device_choice > 0) {
    if (uint32_t(device_choice) > count) {
      // The number as the app gave it (tern_session_options.device N: the loader's device N-1, vulkaninfo's GPU N-1).
      return InvalidArgument("Vulkan device " + std::to_string(device_choice) + " (vulkaninfo's GPU" +
                             std::to_string(device_choice - 1) + ") asked for, but the loader lists " +
                             std::to_string(count) + ": devices 1.." + std::to_string(count) + " (GPU0..GPU" +
                             std::to_string(count - 1) + "), or 0 for the best one");
    }
    physical_ = devices[size_t(device_choice - 1)];
    api_.vkGetPhysicalDeviceProperties(physical_, &props);
    if (compute_family(physical_) < 0) return Unsupported(std::string("Vulkan device '") + props.deviceName + "' has no compute queue");
  } else {
    int best = 0;
    std::string passed_over;
    for (VkPhysicalDevice d : devices) {
      VkPhysicalDeviceProperties p{};
      api_.vkGetPhysicalDeviceProperties(d, &p);
      if (compute_family(d) < 0) continue;
      if (!allow_cpu_device && p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
        passed_over += std::string(passed_over.empty() ? "" : ", ") + p.deviceName;
        continue;
      }
      if (rank(p.deviceType) + 1 > best) {
        best = rank(p.deviceType) + 1;
        physical_ = d;
        props = p;
      }
    }
    if (physical_ == VK_NULL_HANDLE) {
      return Unsupported(passed_over.empty() ? "no Vulkan device with a compute queue"
                                             : "no Vulkan GPU (only " + passed_over + ", a CPU implementation)");
    }
  }
  queue_family_ = uint32_t(compute_family(physical_));
  const bool timestamps = !timestamp_bits.empty() && timestamp_bits[0] > 0;
  api_.vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

  info_.name = props.deviceName;
  info_.type = type_name(props.deviceType);
  info_.driver = "driver version " + std::to_string(props.driverVersion);
  if (api_.vkGetPhysicalDeviceProperties2 && props.apiVersion >= VK_API_VERSION_1_2) {
    VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &driver;
    api_.vkGetPhysicalDeviceProperties2(physical_, &p2);
    info_.driver = std::string(driver.driverName) + ", " + driver.driverInfo;
  }
  const VkPhysicalDeviceLimits& l = props.limits;
  limits_.max_storage_buffer_range = l.maxStorageBufferRange;
  TERN_RETURN_IF_ERROR(storage_buffer_range_override(&limits_.max_storage_buffer_range));
  limits_.min_storage_buffer_offset_alignment = std::max<uint64_t>(4, l.minStorageBufferOffsetAlignment);
  limits_.max_compute_shared_memory_size = l.maxComputeSharedMemorySize;
  for (int a = 0; a < 3; ++a) {
    limits_.max_compute_work_group_size[a] = l.maxComputeWorkGroupSize[a];
    limits_.max_compute_work_group_count[a] = l.maxComputeWorkGroupCount[a];
  }
  limits_.max_compute_work_group_invocations = l.maxComputeWorkGroupInvocations;
  limits_.max_push_constants_size = l.maxPushConstantsSize;
  limits_.max_bound_descriptor_sets = l.maxBoundDescriptorSets;
  limits_.max_per_stage_storage_buffers = l.maxPerStageDescriptorStorageBuffers;
  limits_.timestamp_period_ns = timestamps ? l.timestampPeriod : 0.0f;
  if (api_.vkGetPhysicalDeviceProperties2 && props.apiVersion >= VK_API_VERSION_1_1) {
    VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &subgroup;
    api_.vkGetPhysicalDeviceProperties2(physical_, &p2);
    const VkSubgroupFeatureFlags needed = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    limits_.subgroup_size = subgroup.subgroupSize;
    limits_.subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                                  (subgroup.supportedOperations & needed) == needed && subgroup.subgroupSize > 0 &&
                                  !no_subgroup_arithmetic_requested();
  }

  read_features(props.apiVersion);
  if (f16_storage && !features_.storage_buffer_16bit) {
    return Unsupported(std::string("weight_storage F16 needs storageBuffer16BitAccess (16-bit storage buffers), which "
                                   "Vulkan device '") + props.deviceName + "' does not have; use weight_storage F32");
  }

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  VkPhysicalDevice16BitStorageFeatures enable16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  if (f16_storage_if_available && features_.storage_buffer_16bit) f16_storage = true;
  if (f16_storage) {  // only what a float16-weight session needs; every other session creates a plain device
    enable16.storageBuffer16BitAccess = VK_TRUE;
    dci.pNext = &enable16;
    f16_storage_ = true;
  }
  TERN_VK_RETURN_IF_ERROR(api_.vkCreateDevice(physical_, &dci, nullptr, &device_), "vkCreateDevice");
  TERN_RETURN_IF_ERROR(api_.load_device(device_));
  api_.vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  return Status::Ok();
}

Context::~Context() {
  if (device_) {
    api_.vkDeviceWaitIdle(device_);
    api_.vkDestroyDevice(device_, nullptr);
  }
  if (messenger_) api_.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (instance_) api_.vkDestroyInstance(instance_, nullptr);
  api_.close();
}

}  // namespace tern::vk
