// SPDX-License-Identifier: MIT
// What the Vulkan sessions on one model and device share: the Context (instance, device, the queue and its submit
// mutex) and one device copy of each weight in each form a session reads it in. A process-wide registry hands out
// one SharedDevice per key (the model, and every option that changes how the device is created); sessions hold it
// by shared_ptr, so the copy is freed with the last of them. Everything a call writes (arena, state, host buffers,
// descriptor sets, command buffers, fences, pipelines) stays the session's own.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "format/model.h"
#include "vulkan/memory.h"

namespace tern::vk {

// The options a device is created with (Context::create's arguments and the environment it reads).
struct DeviceOptions {
  int device = 0;  // tern_session_options.device, as the app gave it
  bool allow_cpu_device = false;
  bool f16_storage = false;               // weight_storage F16: 16-bit storage required
  bool f16_storage_if_available = false;  // float16 weights in the file: 16-bit storage where the device has it
  std::string environment = device_environment();
  bool operator<(const DeviceOptions& o) const;
};

// How a weight is laid out on the device (Lowering::weight, weight_f16, weight_packed).
enum class WeightForm { kFloat32, kFloat16, kPacked };

// A weight's device copy, and the bytes a session counts for it in packed_weight_bytes.
struct DeviceWeight {
  Slice slice;
  uint64_t bytes = 0;
};

// A copy into device memory: bytes from host data, staged as they are, converted to float16 (to_f16: data holds
// bytes / 2 floats) or dequantized to float32 (widen: a compressed tensor, bytes / 4 floats).
struct Upload {
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
  Slice dst;
  bool to_f16 = false;
  const TensorInfo* widen = nullptr;
};

// Copies every upload to the device through one staging buffer (freed before this returns) and fills `zeroed` with
// zeros, then a barrier before any shader reads them.
Status upload(const Context& ctx, const std::vector<Upload>& uploads, const std::vector<Slice>& zeroed);

class SharedDevice {
 public:
  // The device of this model and options: the one a live session holds, or a new one. Threads asking at once for
  // the same key get one device.
  static Result<std::shared_ptr<SharedDevice>> acquire(const Model& model, const DeviceOptions& options);
  ~SharedDevice();
  SharedDevice(const SharedDevice&) = delete;
  SharedDevice& operator=(const SharedDevice&) = delete;

  const Context& context() const { return *ctx_; }
  // The tensor on the device in this form: allocated and queued for upload_pending on the first ask, the same slice
  // for every later one (from any session). TERN_UNSUPPORTED for kFloat16 of a tensor neither F32 nor F16.
  Result<DeviceWeight> weight(const TensorInfo* tensor, WeightForm form);
  // Uploads every weight queued by weight() and not yet on the device, whichever session asked for it: when this
  // returns OK, every weight handed out before the call holds its data.
  Status upload_pending();

 private:
  explicit SharedDevice(std::unique_ptr<Context> ctx);

  std::unique_ptr<Context> ctx_;  // first: destroyed after the memory on it
  std::mutex mutex_;              // guards what follows: sessions are created on several threads at once
  Memory memory_;                 // device-local, the weights only
  std::map<std::pair<const TensorInfo*, WeightForm>, DeviceWeight> weights_;
  std::vector<Upload> pending_;
};

// For tests: SharedDevices alive in this process, and the weight copies (and their bytes) uploaded since it started.
struct SharedDeviceCounts {
  int64_t live = 0;
  uint64_t weight_uploads = 0, weight_upload_bytes = 0;
};
SharedDeviceCounts shared_device_counts();

}  // namespace tern::vk
