// SPDX-License-Identifier: MIT
// Built instead of vulkan/ when CMake found no Vulkan loader, headers or glslc (or TERN_VULKAN=OFF).
#include "core/backend.h"
#include "core/planner.h"

namespace tern {
namespace {

Status supports(const Node&, const Model&) { return Status::Ok(); }  // create() says why nothing runs

uint64_t arena_lower_bound(const Model& model, const BackendConfig& config) {
  return plan_arena(model, std::vector<bool>(model.nodes().size(), true), config.max_batch).bytes;
}

Result<std::unique_ptr<Backend>> create(const Model&, const BackendConfig&) {
  return Unsupported("the Vulkan backend is not built into this library (configure with -DTERN_VULKAN=ON and "
                     "libvulkan-dev + glslc installed: tools/install-deps.sh)");
}

}  // namespace

const BackendEntry& vulkan_backend() {
  static const BackendEntry kEntry{supports, arena_lower_bound, create};
  return kEntry;
}

}  // namespace tern
