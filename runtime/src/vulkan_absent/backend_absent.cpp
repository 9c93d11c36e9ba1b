// Built instead of vulkan/ when CMake found no Vulkan loader, headers or glslc (or TERN_VULKAN=OFF).
#include "core/device_runner.h"

namespace tern {

Result<std::unique_ptr<DeviceRunner>> create_vulkan_runner(const Model&, const VulkanConfig&) {
  return Unsupported("the Vulkan backend is not built into this library (configure with -DTERN_VULKAN=ON and "
                     "libvulkan-dev + glslc installed: tools/install-deps.sh)");
}

}  // namespace tern
