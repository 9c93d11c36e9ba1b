// Device limits read at run time, and the checks every pipeline and binding passes at session creation: a shader
// that would exceed a limit fails session creation with a message naming the limit, never at dispatch.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace tern::vk {

struct DeviceLimits {
  uint64_t max_storage_buffer_range = 0;          // maxStorageBufferRange (bytes one binding may span)
  uint64_t min_storage_buffer_offset_alignment = 1;
  uint32_t max_compute_shared_memory_size = 0;    // maxComputeSharedMemorySize (bytes per workgroup)
  uint32_t max_compute_work_group_size[3] = {0, 0, 0};
  uint32_t max_compute_work_group_invocations = 0;
  uint32_t max_compute_work_group_count[3] = {0, 0, 0};
  uint32_t max_push_constants_size = 0;
  uint32_t max_bound_descriptor_sets = 0;
  uint32_t max_per_stage_storage_buffers = 0;     // maxPerStageDescriptorStorageBuffers
  float timestamp_period_ns = 0;                  // timestampPeriod; 0 when the compute queue has no timestamps
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
// One binding of `bytes` (after aligning its offset down to the device's alignment).
Status check_binding(const DeviceLimits& limits, const std::string& where, const std::string& what, uint64_t bytes);

}  // namespace tern::vk
