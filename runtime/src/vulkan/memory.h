// SPDX-License-Identifier: MIT
// Device memory: a few large blocks (one VkBuffer each), sub-allocated by bumping an offset. A session allocates
// everything at creation (weights, arena, state, the host-visible buffers of a call) and frees it all at once.
#pragma once

#include <cstdint>
#include <vector>

#include "vulkan/context.h"

namespace tern::vk {

// A range of one block's buffer.
struct Slice {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0;       // bytes into the buffer, aligned to the device's storage-buffer offset alignment
  uint64_t size = 0;         // bytes
  uint8_t* mapped = nullptr; // host address of offset, for host-visible slices
};

enum class MemoryKind { kDevice, kHost };  // device-local for compute; host-visible + coherent for call I/O

class Memory {
 public:
  explicit Memory(const Context& ctx) : ctx_(ctx) {}
  ~Memory();
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  Result<Slice> allocate(uint64_t bytes, MemoryKind kind, const char* what);
  uint64_t allocated_bytes(MemoryKind kind) const;  // sub-allocated, not block sizes

 private:
  struct Block {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    uint64_t size = 0, used = 0;
    MemoryKind kind = MemoryKind::kDevice;
    uint8_t* mapped = nullptr;
  };
  Result<Block> new_block(uint64_t bytes, MemoryKind kind, const char* what);

  const Context& ctx_;
  std::vector<Block> blocks_;
  uint64_t used_[2] = {0, 0};
};

}  // namespace tern::vk
