// The device side of a session: everything a session runs somewhere other than on the CPU kernels (today: the
// Vulkan backend, vulkan/). The session keeps the position and the checks; the runner owns the device, the
// weights copied there, the arena and the streaming state, all allocated at creation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/model.h"
#include "core/status.h"

namespace tern {

struct DeviceInfo {
  std::string name;    // e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string driver;  // e.g. "llvmpipe, Mesa 22.3.6 (LLVM 15.0.6)"
  std::string type;    // discrete GPU | integrated GPU | virtual GPU | CPU | other
};

class DeviceRunner {
 public:
  virtual ~DeviceRunner() = default;
  // Runs ids [n] at positions pos0..pos0+n-1 after the pos0 tokens held in the state; logits [n, vocab] or null.
  // No allocation; ids are checked against the vocabulary before anything runs. op_ns (per node) or null: each op's
  // device time (timestamp queries) is added to it.
  virtual Status run(const int32_t* ids, int64_t n, int64_t pos0, float* logits, uint64_t* op_ns) = 0;
  virtual const DeviceInfo& device() const = 0;
  virtual uint64_t weight_bytes() const = 0;  // device copies of the model's weights
  virtual uint64_t arena_bytes() const = 0;   // activations for max_batch tokens, in device memory
  virtual uint64_t state_bytes() const = 0;   // streaming state (KV caches, rings) in device memory

  // The streaming state as tern_session_save_state saves it (core/session_state.cpp): per op node (its index), the
  // bytes its CPU kernel saves (CpuKernel::save_state) for a sequence of `position` tokens, so that a state moves
  // between backends. Saving and loading are not runs: they copy through the host-visible buffer of a call's
  // logits, a buffer-full at a time (one-time command buffers), and allocate no device memory.
  virtual bool has_state(int node) const = 0;  // as the node's CpuKernel::has_state()
  virtual uint64_t saved_state_bytes(int node, int64_t position) const = 0;
  // TERN_INVALID_ARGUMENT where saved bytes cannot be this node's state at `position` (before anything is loaded).
  virtual Status check_state(int node, int64_t position, const uint8_t* in) const = 0;
  virtual Status save_state(int node, int64_t position, uint8_t* out) const = 0;  // saved_state_bytes of them
  // A device error here leaves this op's state undefined (the session's other ops and position are unchanged).
  virtual Status load_state(int node, int64_t position, const uint8_t* in) = 0;
};

struct VulkanConfig {
  int device = 0;               // 0: the best device; N >= 1: the loader's device N-1
  bool allow_cpu_device = true;  // false (backend auto): a CPU implementation such as lavapipe does not count
  int64_t max_tokens = 0;
  int64_t max_batch = 0;
  bool f16_weights = false;  // LINEAR weights and EMBEDDING tables stored as float16 (needs storageBuffer16BitAccess)
};

// Fails with TERN_UNSUPPORTED naming the first op (and attention kind) without a shader, or the missing loader or
// device, and with TERN_DEVICE_ERROR / TERN_OUT_OF_MEMORY when the device refuses.
Result<std::unique_ptr<DeviceRunner>> create_vulkan_runner(const Model& model, const VulkanConfig& config);

}  // namespace tern
