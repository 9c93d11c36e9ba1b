// SPDX-License-Identifier: MIT
#include "vulkan/memory.h"

#include <algorithm>
#include <string>

namespace tern::vk {
namespace {

constexpr uint64_t kBlockBytes = uint64_t(16) << 20;  // small models share one block; big tensors get their own

int find_memory_type(const VkPhysicalDeviceMemoryProperties& props, uint32_t allowed, VkMemoryPropertyFlags need,
                     VkMemoryPropertyFlags prefer) {
  int fallback = -1;
  for (uint32_t i = 0; i < props.memoryTypeCount; ++i) {
    if (!(allowed & (1u << i))) continue;
    const VkMemoryPropertyFlags f = props.memoryTypes[i].propertyFlags;
    if ((f & need) != need) continue;
    if ((f & prefer) == prefer) return int(i);
    if (fallback < 0) fallback = int(i);
  }
  return fallback;
}

}  // namespace

Memory::~Memory() {
  const Api& vk = ctx_.api();
  for (Block& b : blocks_) {
    if (b.mapped) vk.vkUnmapMemory(ctx_.device(), b.memory);
    vk.vkDestroyBuffer(ctx_.device(), b.buffer, nullptr);
    vk.vkFreeMemory(ctx_.device(), b.memory, nullptr);
  }
}

Result<Memory::Block> Memory::new_block(uint64_t bytes, MemoryKind kind, const char* what) {
  const Api& vk = ctx_.api();
  Block b;
  b.kind = kind;
  b.size = std::max(bytes, kBlockBytes);
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = b.size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
              VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  TERN_VK_RETURN_IF_ERROR(vk.vkCreateBuffer(ctx_.device(), &bci, nullptr, &b.buffer), std::string("vkCreateBuffer for ") + what);
  VkMemoryRequirements req{};
  vk.vkGetBufferMemoryRequirements(ctx_.device(), b.buffer, &req);
  const VkMemoryPropertyFlags need = kind == MemoryKind::kHost
                                         ? VkMemoryPropertyFlags(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
                                         : VkMemoryPropertyFlags(0);
  const VkMemoryPropertyFlags prefer = kind == MemoryKind::kHost ? need | VK_MEMORY_PROPERTY_HOST_CACHED_BIT
                                                                 : VkMemoryPropertyFlags(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  const int type = find_memory_type(ctx_.memory_properties(), req.memoryTypeBits, need, prefer);
  if (type < 0) {
    vk.vkDestroyBuffer(ctx_.device(), b.buffer, nullptr);
    return Status(TERN_DEVICE_ERROR, std::string("no suitable Vulkan memory type for ") + what);
  }
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = uint32_t(type);
  VkResult r = vk.vkAllocateMemory(ctx_.device(), &mai, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    vk.vkDestroyBuffer(ctx_.device(), b.buffer, nullptr);
    return vk_error(r, "allocating " + std::to_string(req.size) + " bytes of Vulkan memory for " + what);
  }
  blocks_.push_back(b);  // owned from here on, freed by the destructor whatever follows
  Block& owned = blocks_.back();
  TERN_VK_RETURN_IF_ERROR(vk.vkBindBufferMemory(ctx_.device(), owned.buffer, owned.memory, 0), "vkBindBufferMemory");
  if (kind == MemoryKind::kHost) {
    void* p = nullptr;
    TERN_VK_RETURN_IF_ERROR(vk.vkMapMemory(ctx_.device(), owned.memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    owned.mapped = static_cast<uint8_t*>(p);
  }
  return owned;
}

Result<Slice> Memory::allocate(uint64_t bytes, MemoryKind kind, const char* what) {
  bytes = std::max<uint64_t>(bytes, 4);
  const uint64_t align = std::max<uint64_t>(64, ctx_.limits().min_storage_buffer_offset_alignment);
  Block* block = nullptr;
  for (Block& b : blocks_) {
    if (b.kind == kind && (b.used + align - 1) / align * align + bytes <= b.size) {
      block = &b;
      break;
    }
  }
  if (!block) {
    TERN_RETURN_IF_ERROR(new_block(bytes, kind, what).status());
    block = &blocks_.back();
  }
  Slice s;
  s.buffer = block->buffer;
  s.offset = (block->used + align - 1) / align * align;
  s.size = bytes;
  s.mapped = block->mapped ? block->mapped + s.offset : nullptr;
  block->used = s.offset + bytes;
  used_[int(kind)] += bytes;
  return s;
}

uint64_t Memory::allocated_bytes(MemoryKind kind) const { return used_[int(kind)]; }

}  // namespace tern::vk
