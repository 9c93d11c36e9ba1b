// SPDX-License-Identifier: MIT
// A session's whole forward pass as one command buffer, recorded once at session creation and replayed for every
// call. What changes between calls (n and pos0, the ids, the workgroup counts for n tokens) lives in host-visible
// buffers the shaders and vkCmdDispatchIndirect read, so nothing is re-recorded.
#pragma once

#include <array>
#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "vulkan/limits.h"
#include "vulkan/memory.h"
#include "vulkan/pipelines.h"

namespace tern::vk {

using Groups = std::array<uint32_t, 3>;
// Workgroup counts of a dispatch for a call of n tokens.
using GroupsFn = std::function<Groups(int64_t n)>;
// A host write of what a call reads besides n and pos0 (ROTARY's cos | sin of the call's positions), into
// host-visible memory allocated at session creation: run by Program::run for each call before the submit.
using CallWrite = std::function<void(int64_t n, int64_t pos0)>;

// A range the shader sees at one binding.
struct Binding {
  Slice slice;
  uint64_t offset = 0;  // bytes into the slice
  uint64_t bytes = 0;   // 0: to the end of the slice
  const char* what = "";
  uint32_t element_bytes = 4;  // the shader's element at this binding (2: float16 weights): pc.off counts these
};

// A dispatch's push constants: the bytes of its shader family's struct (push_constants.h), as vkCmdPushConstants
// takes them. Every struct starts with the binding offsets, which Program::add fills in.
class PushConstants {
 public:
  template <typename PushT>
  void set(const PushT& push) {
    static_assert(std::is_standard_layout_v<PushT> && std::is_trivially_copyable_v<PushT>,
                  "a push-constant struct is plain 4-byte fields, copied as bytes");
    static_assert(std::is_same_v<decltype(PushT::off), BindingOffsets> && offsetof(PushT, off) == 0,
                  "a push-constant struct starts with the binding offsets, as its GLSL block does");
    static_assert(sizeof(PushT) % 4 == 0, "push-constant sizes are multiples of 4 bytes");
    static_assert(sizeof(PushT) <= kPushConstantBytes, "the struct must fit the pipelines' push-constant range");
    std::memcpy(bytes_.data(), &push, sizeof push);
    size_ = uint32_t(sizeof push);
  }
  // Element offset of binding b's data inside its bound range: pc.off[b], at byte 4b of every struct.
  void set_binding_offset(size_t b, uint32_t elements) {
    std::memcpy(bytes_.data() + b * sizeof(uint32_t), &elements, sizeof elements);
  }
  bool empty() const { return size_ == 0; }
  uint32_t size() const { return size_; }
  const void* data() const { return bytes_.data(); }

 private:
  std::array<uint8_t, kPushConstantBytes> bytes_{};
  uint32_t size_ = 0;  // bytes of the struct last set; 0: none yet
};

// Which calls a dispatch runs in: every call, only a call at position 0 (a first call), or only later ones (an op
// whose first call runs whole and whose later positions step against a cache, as LSH attention's).
enum class CallKind { kEvery, kFirst, kLater };

struct DispatchSpec {
  std::string where;                 // the op, for messages
  int node = -1;                     // the op's index, for per-op times
  const char* shader = "";
  std::vector<uint32_t> spec;        // specialization constants
  std::array<uint32_t, 3> local_size{1, 1, 1};  // as the spec constants make it
  uint32_t shared_bytes = 0;
  std::vector<Binding> bindings;     // bindings 1..; binding 0 is the call (n, pos0)
  PushConstants push;                // the shader family's struct (push.set); binding offsets by Program::add
  GroupsFn groups;
  CallKind when = CallKind::kEvery;
};

class Program {
 public:
  Program(const Context& ctx, Memory& memory, PipelineCache& pipelines, int64_t max_batch);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // Checks the dispatch against the device's limits for calls of up to max_batch tokens, then appends it.
  Status add(DispatchSpec spec);
  // Dispatches added from now on run no workgroups in calls of up to `rows` rows (0: none skipped): the ops a fused
  // dispatch does for such calls (vulkan/fusion.h).
  void skip_calls_up_to(int64_t rows) { skip_up_to_ = rows; }
  // Calls of up to bounds[0] rows, of up to bounds[1], ... (ascending) each get a command buffer of their own holding
  // only the dispatches with workgroups in some call of theirs (empty ones still cost a barrier each); larger calls
  // run the whole program. Set before finish(); none by default.
  void record_small_calls(std::vector<int64_t> bounds) { small_calls_ = std::move(bounds); }
  // Adds a host write that every call runs before its dispatches (CallWrite).
  void add_call_write(CallWrite write) { call_writes_.push_back(std::move(write)); }
  // Allocates descriptor sets and the per-call buffers, and records the command buffer.
  Status finish();
  // Runs the recorded program for a call of n tokens after pos0 held ones, and waits for it. With op_ns (per node)
  // and a device with timestamps, adds each op's device time to it.
  Status run(int64_t n, int64_t pos0, uint64_t* op_ns);
  // The dispatches that run does for a call of n tokens after pos0 (those with a workgroup count above zero): their
  // number, and with per_node ([nodes of the model], or null) each added to its op's entry.
  uint64_t count_dispatches(int64_t n, int64_t pos0, uint64_t* per_node) const;

 private:
  struct Dispatch {
    Pipeline pipeline;
    VkDescriptorSet set = VK_NULL_HANDLE;
    PushConstants push;
    std::vector<VkDescriptorBufferInfo> buffers;  // bindings 1..
    GroupsFn groups;
    CallKind when = CallKind::kEvery;
    int node = -1;
  };

  // A recorded command buffer: the calls of up to `rows` rows that no earlier recording takes run it.
  struct Recording {
    int64_t rows = 0;
    std::vector<size_t> dispatches;  // indices into dispatches_, in order
    VkCommandBuffer commands = VK_NULL_HANDLE;
  };

  // Workgroup counts of dispatch i in a call of n tokens after pos0: {0, 0, 0} where it is not that call's (CallKind).
  Groups call_groups(size_t i, int64_t n, int64_t pos0) const;
  // Records r's dispatches, each followed by a barrier and, with timestamps, its stamp.
  Status record(Recording& r);

  const Context& ctx_;
  Memory& memory_;
  PipelineCache& pipelines_;
  int64_t max_batch_;
  int64_t skip_up_to_ = 0;  // skip_calls_up_to
  std::vector<int64_t> small_calls_;  // record_small_calls
  std::vector<Recording> recordings_;  // the small calls' (ascending rows), then the whole program's
  std::vector<Dispatch> dispatches_;
  std::vector<CallWrite> call_writes_;
  Slice call_;      // host: uint32 n, pos0
  Slice indirect_;  // host: [dispatches, 3] uint32 workgroup counts
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool timestamps_ = VK_NULL_HANDLE;  // [dispatches + 1]: before the first dispatch (0) and after dispatch i (i + 1)
};

// Runs `record` in a one-time command buffer and waits (weight uploads at session creation).
Status run_once(const Context& ctx, const std::function<void(VkCommandBuffer)>& record);

}  // namespace tern::vk
