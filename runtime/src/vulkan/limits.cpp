// SPDX-License-Identifier: MIT
#include "vulkan/limits.h"

#include <algorithm>

namespace tern::vk {
namespace {

Status over(const std::string& where, const std::string& what, uint64_t need, const char* limit, uint64_t have) {
  return Unsupported(where + ": " + what + " needs " + std::to_string(need) + ", more than the device's " + limit +
                     " of " + std::to_string(have));
}

}  // namespace

Status check_dispatch(const DeviceLimits& l, const DispatchNeeds& d) {
  static const char* const kSize[3] = {"maxComputeWorkGroupSize[0]", "maxComputeWorkGroupSize[1]",
                                       "maxComputeWorkGroupSize[2]"};
  static const char* const kCount[3] = {"maxComputeWorkGroupCount[0]", "maxComputeWorkGroupCount[1]",
                                        "maxComputeWorkGroupCount[2]"};
  uint64_t invocations = 1;
  for (int a = 0; a < 3; ++a) {
    if (d.local_size[a] > l.max_compute_work_group_size[a]) {
      return over(d.where, "a workgroup size", d.local_size[a], kSize[a], l.max_compute_work_group_size[a]);
    }
    if (d.max_groups[a] > l.max_compute_work_group_count[a]) {
      return over(d.where, "a dispatch for max_batch tokens", d.max_groups[a], kCount[a], l.max_compute_work_group_count[a]);
    }
    invocations *= d.local_size[a];
  }
  if (invocations > l.max_compute_work_group_invocations) {
    return over(d.where, "a workgroup of invocations", invocations, "maxComputeWorkGroupInvocations",
                l.max_compute_work_group_invocations);
  }
  if (d.shared_bytes > l.max_compute_shared_memory_size) {
    return over(d.where, "shared memory in bytes", d.shared_bytes, "maxComputeSharedMemorySize",
                l.max_compute_shared_memory_size);
  }
  if (d.push_bytes > l.max_push_constants_size) {
    return over(d.where, "push constants in bytes", d.push_bytes, "maxPushConstantsSize", l.max_push_constants_size);
  }
  if (d.storage_buffers > l.max_per_stage_storage_buffers) {
    return over(d.where, "storage buffers", d.storage_buffers, "maxPerStageDescriptorStorageBuffers",
                l.max_per_stage_storage_buffers);
  }
  return Status::Ok();
}

uint32_t fit_workgroup(const DeviceLimits& l, uint32_t wanted, uint32_t least) {
  uint32_t wg = wanted;
  while (wg > least && (wg > l.max_compute_work_group_invocations || wg > l.max_compute_work_group_size[0])) wg /= 2;
  return wg;
}

Status check_binding(const DeviceLimits& l, const std::string& where, const std::string& what, uint64_t bytes) {
  if (bytes > l.max_storage_buffer_range) {
    return over(where, "binding " + what + " in bytes", bytes, "maxStorageBufferRange", l.max_storage_buffer_range);
  }
  return Status::Ok();
}

Result<std::vector<RowRange>> split_rows(const DeviceLimits& l, const std::string& where, const std::string& what,
                                         uint64_t offset, int64_t rows, uint64_t row_bytes) {
  const uint64_t align = std::max<uint64_t>(1, l.min_storage_buffer_offset_alignment);
  const uint64_t range = l.max_storage_buffer_range;
  std::vector<RowRange> parts;
  int64_t r = 0;
  do {
    const uint64_t begin = offset + uint64_t(r) * row_bytes;
    const uint64_t slack = begin % align;  // bound from begin - slack
    const int64_t left = rows - r;
    const uint64_t fit = range > slack && row_bytes > 0 ? (range - slack) / row_bytes : uint64_t(left);
    if (fit == 0) {
      return over(where, "binding one row of " + what + " in bytes", row_bytes + slack, "maxStorageBufferRange", range);
    }
    int64_t count = int64_t(std::min<uint64_t>(fit, uint64_t(left)));
    if (count < left) {
      // Prefer a boundary where the next part starts aligned (its binding then wastes nothing).
      for (int64_t c = count; c >= std::max<int64_t>(1, count / 2); --c) {
        if ((begin + uint64_t(c) * row_bytes) % align == 0) {
          count = c;
          break;
        }
      }
    }
    parts.push_back({r, count});
    r += count;
  } while (r < rows);
  return parts;
}

}  // namespace tern::vk
