// SPDX-License-Identifier: MIT
#include "vulkan/loader.h"

#include <dlfcn.h>
#if defined(__linux__)
#include <link.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <string>

namespace tern::vk {
namespace {

// The loader's file name where it is installed for apps: Android ships only the unversioned libvulkan.so in its
// system image; macOS and iOS take the Vulkan SDK's loader (over MoltenVK); Linux distributions install the
// versioned libvulkan.so.1 with the runtime package and the unversioned name only with the -dev one.
constexpr const char* kPlatformLoader =
#if defined(__ANDROID__)
    "libvulkan.so";
#elif defined(__APPLE__)
    "libvulkan.1.dylib";
#else
    "libvulkan.so.1";
#endif

}  // namespace

Status Api::open() {
  // TERN_VULKAN_LOADER overrides it: a loader outside the library path, or a vendor's own.
  const char* name = std::getenv("TERN_VULKAN_LOADER");
  if (!name || !*name) name = kPlatformLoader;
  library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    return Unsupported(std::string("no Vulkan loader: cannot open ") + name +
                       " (install libvulkan1 and a driver, e.g. mesa-vulkan-drivers)");
  }
  vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(library, "vkGetInstanceProcAddr"));
  if (!vkGetInstanceProcAddr) return Unsupported(std::string(name) + " has no vkGetInstanceProcAddr");
#define TERN_VK_LOAD(fn)                                                                   \
  fn = reinterpret_cast<PFN_##fn>(vkGetInstanceProcAddr(nullptr, #fn));                    \
  if (!fn) return Unsupported(std::string("the Vulkan loader lacks ") + #fn);
  TERN_VK_GLOBAL_FUNCTIONS(TERN_VK_LOAD)
#undef TERN_VK_LOAD
  return Status::Ok();
}

Status Api::load_instance(VkInstance instance) {
#define TERN_VK_LOAD(fn)                                                                   \
  fn = reinterpret_cast<PFN_##fn>(vkGetInstanceProcAddr(instance, #fn));                   \
  if (!fn) return Unsupported(std::string("the Vulkan instance lacks ") + #fn);
  TERN_VK_INSTANCE_FUNCTIONS(TERN_VK_LOAD)
#undef TERN_VK_LOAD
#define TERN_VK_LOAD_OPTIONAL(fn) fn = reinterpret_cast<PFN_##fn>(vkGetInstanceProcAddr(instance, #fn));
  TERN_VK_OPTIONAL_INSTANCE_FUNCTIONS(TERN_VK_LOAD_OPTIONAL)
#undef TERN_VK_LOAD_OPTIONAL
  return Status::Ok();
}

Status Api::load_device(VkDevice device) {
#define TERN_VK_LOAD(fn)                                                                   \
  fn = reinterpret_cast<PFN_##fn>(vkGetDeviceProcAddr(device, #fn));                       \
  if (!fn) return Unsupported(std::string("the Vulkan device lacks ") + #fn);
  TERN_VK_DEVICE_FUNCTIONS(TERN_VK_LOAD)
#undef TERN_VK_LOAD
  return Status::Ok();
}

void Api::close() {
  // The loader stays mapped for the life of the process (dlopen counts references; a later session finds it
  // loaded): unloading it would unload the driver too, which drivers do not all survive, and LeakSanitizer could no
  // longer attribute a driver's allocations to it.
  library = nullptr;
}

std::vector<std::string> mapped_objects() {
  std::vector<std::string> names;
#if defined(__linux__)
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && *info->dlpi_name) static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name);
        return 0;
      },
      &names);
#endif
  std::sort(names.begin(), names.end());
  return names;
}

void keep_mapped_since(const std::vector<std::string>& before) {
  // The loader unloads a driver when the last instance using it is destroyed, and each session creates and destroys
  // its own instance. Drivers do not all survive being unloaded and loaded again, reloading one (lavapipe brings
  // LLVM) makes every later session slower to create, and a driver's allocations that only its own globals
  // reference read as leaks to LeakSanitizer once its globals are unmapped (lavapipe keeps such a block from its
  // first instance). RTLD_NOLOAD opens nothing new; RTLD_NODELETE keeps the object mapped after its last dlclose.
  for (const std::string& name : mapped_objects()) {
    if (!std::binary_search(before.begin(), before.end(), name)) dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  }
}

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    default: return "VkResult error";
  }
}

Status vk_error(VkResult r, const std::string& what) {
  const std::string m = what + " failed: " + result_name(r) + " (" + std::to_string(int(r)) + ")";
  if (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY) return OutOfMemory(m);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) return Unsupported(m + ": no Vulkan driver");
  return Status(TERN_DEVICE_ERROR, m);
}

}  // namespace tern::vk
