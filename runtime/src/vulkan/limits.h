// SPDX-License-Identifier: MIT
// Device limits read at run time, and the checks every pipeline and binding passes at session creation: a shader
// that would exceed a limit fails session creation with a message naming the limit, never at dispatch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/status.h"

namespace tern::vk {

struct DeviceLimits {
  uint64_t max_storage_buffer_range = 0;          // maxStorageBufferRange (bytes one binding may span); lowered by
                                                  // TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE (context.cpp)
  uint64_t min_storage_buffer_offset_alignment = 1;  // minStorageBufferOffsetAlignment (at least 4)
  uint32_t max_compute_shared_memory_size = 0;    // maxComputeSharedMemorySize (bytes per workgroup)
  uint32_t max_compute_work_group_size[3] = {0, 0, 0};
  uint32_t max_compute_work_group_invocations = 0;
  uint32_t max_compute_work_group_count[3] = {0, 0, 0};
  uint32_t max_push_constants_size = 0;
  uint32_t max_bound_descriptor_sets = 0;
  uint32_t max_per_stage_storage_buffers = 0;     // maxPerStageDescriptorStorageBuffers
  float timestamp_period_ns = 0;                  // timestampPeriod; 0 when the compute queue has no timestamps
  // VkPhysicalDeviceSubgroupProperties (Vulkan 1.1; 0 / false on a 1.0 device): subgroupSize, and whether compute
  // shaders have subgroup arithmetic (supportedStages has COMPUTE, supportedOperations has ARITHMETIC and BASIC).
  // TERN_VULKAN_NO_SUBGROUP_ARITHMETIC=1 turns the latter off (context.cpp), to run the shared-memory fallbacks.
  uint32_t subgroup_size = 0;
  bool subgroup_arithmetic = false;
};

// Device features read at run time (vkGetPhysicalDeviceFeatures2; all false on a Vulkan 1.0 device). Only
// storage_buffer_16bit is ever enabled, at device creation and only for a session that stores weights as float16.
struct DeviceFeatures {
  uint32_t api_version = 0;           // VkPhysicalDeviceProperties::apiVersion
  bool storage_buffer_16bit = false;  // storageBuffer16BitAccess (Vulkan 1.1): float16_t in storage buffers
  bool storage_buffer_8bit = false;   // storageBuffer8BitAccess (Vulkan 1.2)
  bool shader_float16 = false;        // shaderFloat16 (Vulkan 1.2): 16-bit float arithmetic
  bool shader_int8 = false;           // shaderInt8 (Vulkan 1.2)
};

// What one dispatch of one pipeline needs; `where` names the op for messages.
struct DispatchNeeds {
  std::string where;
  uint32_t local_size[3] = {1, 1, 1};
  uint32_t shared_bytes = 0;
  uint32_t max_groups[3] = {1, 1, 1};  // for the largest call (max_batch tokens)
  uint32_t push_bytes = 0;
  uint32_t storage_buffers = 0;
};

Status check_dispatch(const DeviceLimits& limits, const DispatchNeeds& needs);
// A one-dimensional workgroup size: `wanted` (a power of two) halved until the device allows it, but not below
// `least` (check_dispatch then names what the device lacks).
uint32_t fit_workgroup(const DeviceLimits& limits, uint32_t wanted, uint32_t least);
// One binding of `bytes` (after aligning its offset down to the device's alignment).
Status check_binding(const DeviceLimits& limits, const std::string& where, const std::string& what, uint64_t bytes);

// Rows [begin, begin + count) of a row-major weight, bound as one sub-range.
struct RowRange {
  int64_t begin = 0, count = 0;
};
// Splits a weight of `rows` rows of `row_bytes` each, starting `offset` bytes into its buffer, into parts of whole
// rows whose bindings fit maxStorageBufferRange, binding from the part's offset aligned down to
// minStorageBufferOffsetAlignment as Program::add does; a part ends where the next one starts aligned when that
// keeps it at least half as long. One part when the whole weight fits; an error naming the limit when one row
// (plus the alignment) does not.
Result<std::vector<RowRange>> split_rows(const DeviceLimits& limits, const std::string& where, const std::string& what,
                                         uint64_t offset, int64_t rows, uint64_t row_bytes);

}  // namespace tern::vk
