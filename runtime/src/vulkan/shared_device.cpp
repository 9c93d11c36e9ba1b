// SPDX-License-Identifier: MIT
#include "vulkan/shared_device.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <tuple>

#include "format/dequantize.h"
#include "format/half.h"
#include "vulkan/program.h"

namespace tern::vk {
namespace {

std::atomic<int64_t> g_live{0};
std::atomic<uint64_t> g_uploads{0}, g_upload_bytes{0};

using RegistryKey = std::pair<const Model*, DeviceOptions>;

// Devices by key, held weakly: the sessions own them. Expired entries are dropped on the next acquire.
struct Registry {
  std::mutex mutex;
  std::map<RegistryKey, std::weak_ptr<SharedDevice>> devices;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: a session freed during static destruction still finds it
  return *r;
}

}  // namespace

bool DeviceOptions::operator<(const DeviceOptions& o) const {
  return std::tie(device, allow_cpu_device, f16_storage, f16_storage_if_available, environment) <
         std::tie(o.device, o.allow_cpu_device, o.f16_storage, o.f16_storage_if_available, o.environment);
}

SharedDeviceCounts shared_device_counts() { return {g_live.load(), g_uploads.load(), g_upload_bytes.load()}; }

Result<std::shared_ptr<SharedDevice>> SharedDevice::acquire(const Model& model, const DeviceOptions& options) {
  Registry& r = registry();
  // Held while a device is created: a second thread asking for the same key waits and then finds it.
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto it = r.devices.begin(); it != r.devices.end();) {
    it = it->second.expired() ? r.devices.erase(it) : std::next(it);
  }
  const RegistryKey key{&model, options};
  auto found = r.devices.find(key);
  if (found != r.devices.end()) {
    if (auto live = found->second.lock()) return live;
  }
  TERN_ASSIGN_OR_RETURN(auto ctx, Context::create(options.device, options.allow_cpu_device, options.f16_storage,
                                                  options.f16_storage_if_available));
  std::shared_ptr<SharedDevice> device(new SharedDevice(std::move(ctx)));
  r.devices[key] = device;
  return device;
}

SharedDevice::SharedDevice(std::unique_ptr<Context> ctx) : ctx_(std::move(ctx)), memory_(*ctx_) { g_live.fetch_add(1); }

SharedDevice::~SharedDevice() { g_live.fetch_sub(1); }

Result<DeviceWeight> SharedDevice::weight(const TensorInfo* tensor, WeightForm form) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = weights_.find({tensor, form});
  if (found != weights_.end()) return found->second;
  Upload u;
  u.data = tensor->data;
  uint64_t allocated = 0;
  switch (form) {
    case WeightForm::kFloat32:
      // A compressed tensor widened to float32 while staging: the fallback for an op without a shader reading it
      // compressed (see ops.h); LINEAR and EMBEDDING read theirs as stored (Lowering::matrix_weight).
      u.widen = is_compressed(tensor->dtype) ? tensor : nullptr;
      u.bytes = allocated = u.widen ? uint64_t(tensor->numel()) * sizeof(float) : tensor->size;
      break;
    case WeightForm::kFloat16:
      if (tensor->dtype != fb::DType::F16 && tensor->dtype != fb::DType::F32) {
        return Unsupported("weight '" + tensor->name + "' is neither float32 nor float16");
      }
      u.to_f16 = tensor->dtype == fb::DType::F32;  // an F16 tensor: the file's halves as they are
      u.bytes = allocated = uint64_t(tensor->numel()) * 2;
      break;
    case WeightForm::kPacked:
      // Whole words: the shaders read packed bytes and float16 scales as uint words, the last one included.
      u.bytes = tensor->size;
      allocated = (tensor->size + 3) / 4 * 4;
      break;
  }
  TERN_ASSIGN_OR_RETURN(u.dst, memory_.allocate(allocated, MemoryKind::kDevice, tensor->name.c_str()));
  const DeviceWeight w{u.dst, u.bytes};
  weights_[{tensor, form}] = w;
  pending_.push_back(u);
  return w;
}

Status SharedDevice::upload_pending() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pending_.empty()) return Status::Ok();
  TERN_RETURN_IF_ERROR(upload(*ctx_, pending_, {}));  // on failure they stay pending: the next session retries
  for (const Upload& u : pending_) {
    g_uploads.fetch_add(1);
    g_upload_bytes.fetch_add(u.bytes);
  }
  pending_.clear();
  return Status::Ok();
}

Status upload(const Context& ctx, const std::vector<Upload>& uploads, const std::vector<Slice>& zeroed) {
  uint64_t total = 0;
  for (const Upload& u : uploads) total += (u.bytes + 3) / 4 * 4;
  if (total == 0 && zeroed.empty()) return Status::Ok();
  total = std::max<uint64_t>(total, 4);
  Memory staging(ctx);  // freed when this returns
  TERN_ASSIGN_OR_RETURN(auto buf, staging.allocate(total, MemoryKind::kHost, "staging the weights"));
  uint64_t at = 0;
  std::vector<std::pair<const Upload*, uint64_t>> copies;
  for (const Upload& u : uploads) {
    uint8_t* dst = buf.mapped + at;
    if (u.to_f16) {  // tensor data is 64-byte aligned (the loader checks), staging offsets multiples of 4
      floats_to_halves(reinterpret_cast<const float*>(u.data), reinterpret_cast<uint16_t*>(dst), 0, u.bytes / 2);
    } else if (u.widen) {
      const TensorInfo& t = *u.widen;
      const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
      dequantize_rows(t, 0, cols > 0 ? t.numel() / cols : 0, reinterpret_cast<float*>(dst));
    } else {
      std::memcpy(dst, u.data, u.bytes);
    }
    copies.push_back({&u, at});
    at += (u.bytes + 3) / 4 * 4;  // each copy's source offset a multiple of 4
  }
  const Api& vk = ctx.api();
  const Slice src = buf;
  return run_once(ctx, [&](VkCommandBuffer cb) {
    for (const auto& [u, offset] : copies) {
      VkBufferCopy region{src.offset + offset, u->dst.offset, u->bytes};
      vk.vkCmdCopyBuffer(cb, src.buffer, u->dst.buffer, 1, &region);
    }
    // State starts as zeros: nothing reads it before it is written, but a saved state should not hold garbage.
    for (const Slice& s : zeroed) vk.vkCmdFillBuffer(cb, s.buffer, s.offset, s.size, 0);
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
    vk.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                            nullptr, 0, nullptr);
  });
}

}  // namespace tern::vk
