// SPDX-License-Identifier: MIT
// Lowering of graph ops to dispatches of a Program. One entry per op code with shaders (op_table.cpp); each
// op family's lowering lives in its own file (ops_rowwise.cpp, ops_linear.cpp, ops_attention.cpp).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/model.h"
#include "ops/attention_pattern.h"
#include "ops/head_layout.h"
#include "ops/rotary.h"
#include "ops/sink_cache.h"
#include "vulkan/fusion.h"
#include "vulkan/program.h"
#include "vulkan/push_constants.h"
#include "vulkan/shared_device.h"

namespace tern::vk {

// A stateful op's device state as the bytes every backend saves (the layout in ops/: ops/kv_state.h for the KV
// stores; the CPU kernel's CpuKernel::save_state for the others): the session's state blob then reads the same on
// both backends, and a state moves between them. copies tile the saved bytes after the first
// host_bytes, in increasing order of `saved`; the host bytes (Compressive's row counts, which the device derives
// from the position) are written by `host` on save and must equal them on load.
struct StateCopy {
  uint64_t saved, device, bytes;  // saved bytes [saved, saved + bytes) <-> the state slice's [device, device + bytes)
};
struct SavedState {
  int node = -1;
  std::string where;  // the op, for messages
  Slice slice;        // the op's state (Lowering::state)
  std::function<uint64_t(int64_t position)> bytes;  // CpuKernel::saved_state_bytes
  std::function<void(int64_t position, std::vector<StateCopy>* copies)> copies;
  uint64_t host_bytes = 0;
  std::function<void(int64_t position, uint8_t* out)> host;  // host_bytes of them, when not 0
  // Where the saved bytes hold counts the device indexes with (LSH buckets): the CPU kernel's check of them
  // (CpuKernel::check_saved_counts), run before anything is loaded; null when there are none.
  std::function<Status(int64_t position, const uint8_t* in)> check;
};

// A LINEAR weight or EMBEDDING table [rows, cols] on the device as one of its shader's variants reads it:
//   F32 (or a float16 file weight on a device without 16-bit storage, widened): the float shader;
//   F16 in the file (read as stored) or F32 with weight_storage F16 (converted): the WEIGHT_F16 variant, in halves;
//   I8 / I4: the file's bytes, read as 32-bit words by the WEIGHT_I8 / WEIGHT_I4 variant, with the scale tensor as
//   stored (F32 for I8, F16 for I4) in one more binding.
// Rows are whole bindable units in every form (I8 / I4 rows are multiples of 32 elements: 32 bytes / 4 words for
// I8, 16 bytes / 4 words for I4), so a part of whole rows (split_rows) starts at an exact binding offset.
struct MatrixWeight {
  Slice data;
  const char* shader = "";       // the variant: one of the four names matrix_weight was given
  uint32_t element_bytes = 4;    // pc.off units of the data binding: 4 (floats, or I8 / I4 words), 2 (halves)
  uint64_t row_bytes = 0;        // of one row on the device
  bool quantized = false;        // I8 / I4: scales and group below
  Slice scales;                  // [rows, cols / group], F32 (I8) or F16 (I4)
  uint32_t scale_bytes = 4;      // pc.off units of the scale binding: 4 (F32), 2 (F16, read as words)
  uint64_t scale_row_bytes = 0;
  uint32_t group = 0;            // columns per scale
  // Rows [begin, begin + count) of the data, and of the scales (ending on a whole word, which the allocation has).
  Binding rows(int64_t begin, int64_t count, const char* what) const {
    return {data, uint64_t(begin) * row_bytes, uint64_t(count) * row_bytes, what, element_bytes};
  }
  Binding scale_rows(int64_t begin, int64_t count) const {
    const uint64_t at = uint64_t(begin) * scale_row_bytes, end = at + uint64_t(count) * scale_row_bytes;
    return {scales, at, (scales.offset + end + 3) / 4 * 4 - scales.offset - at, "scales", scale_bytes};
  }
};

// What lowering an op may use: where values live, weights on the device, and the program being built.
class Lowering {
 public:
  // memory: the session's own (arena, state, constants); device: the weights, shared with the model's other
  // sessions on this device.
  Lowering(const Model& model, SharedDevice& device, Memory& memory, Program& program, int64_t max_tokens,
           int64_t max_batch)
      : model(model),
        device(device),
        ctx(device.context()),
        memory(memory),
        program(program),
        max_tokens(max_tokens),
        max_batch(max_batch) {}

  const Model& model;
  SharedDevice& device;
  const Context& ctx;
  Memory& memory;
  Program& program;
  const int64_t max_tokens, max_batch;

  std::vector<Binding> values;  // per value: its place for a call ([max_batch, width]); set by the runner
  FusionPlan fusion;            // the generation path's fusions (vulkan/fusion.h); set by the runner

  // The tensor's data on the device as float32, uploaded once per device (SharedDevice: however many ops and
  // sessions read it), counted once in this session's weight_bytes. A compressed
  // tensor (F16, I8, I4: is_compressed) is widened on the host while staging (format/dequantize.h, dequantize_rows),
  // counted as the floats uploaded. That is the fallback which keeps any op running whose weight slot becomes
  // compressible (OpDef::compressible) before it has a shader reading the compressed bytes; the native paths are
  // LINEAR and EMBEDDING (matrix_weight).
  Result<Slice> weight(const TensorInfo* tensor);
  // The tensor as float16, uploaded once per device however many ops read it this way: an F32 tensor converted on the host
  // while staging (round to nearest even), an F16 one as it is stored; for the ops with float16-weight shaders.
  Result<Slice> weight_f16(const TensorInfo* tensor);
  // The tensor's bytes as they are stored (the device copy rounded up to whole 32-bit words), uploaded once per device.
  Result<Slice> weight_packed(const TensorInfo* tensor);
  // A LINEAR weight or EMBEDDING table [rows, cols] as its shader reads it (see MatrixWeight).
  Result<MatrixWeight> matrix_weight(const TensorInfo* tensor, const char* const shaders[4]);
  bool f16_weights = false;  // weight_storage F16: LINEAR weights and EMBEDDING tables stored F32 as float16
  bool f16_storage = false;  // storageBuffer16BitAccess enabled: float16 weights of the file read as they are
  bool forward_only = false;  // tern_session_options.forward_only: no state that only a later call would read
  SinkCache sinks;            // attention sinks (BackendConfig::sinks): ROTARY passes rows, dense ATTENTION keeps a sink cache
  // The dispatches of a context shift (VulkanBackend::shift), run apart from the forward pass with n = the entries
  // kept and pos0 = the positions held; null where the session cannot shift (sinks, forward_only).
  Program* shift = nullptr;
  // A table computed on the host at session creation (e.g. sinusoid frequencies), in the session's own memory (it
  // may depend on the session's options), counted in scratch_bytes with the arena.
  Result<Slice> constant(std::vector<float> data, const char* what);
  // Device state for an op (KV rings), zeroed bytes counted in state_bytes.
  Result<Slice> state(uint64_t bytes, const char* what);
  // Device scratch of an op, valid within one call, counted in scratch_bytes (reported with the arena).
  Result<Slice> scratch(uint64_t bytes, const char* what);
  // A table the host writes for each call before its dispatches run (ROTARY's cos | sin of the call's positions):
  // `floats` floats of host-visible memory allocated now, counted in scratch_bytes; `write` fills them for the
  // call's n tokens at positions pos0.. (Program::add_call_write).
  Result<Slice> call_table(uint64_t floats, const char* what,
                           std::function<void(int64_t n, int64_t pos0, float* table)> write);

  // Uploads the weights this session asked for that are not on the device yet (SharedDevice::upload_pending), then
  // its constants and zeroed state.
  Status upload();
  uint64_t weight_bytes = 0;  // of the (shared) weights this session reads, each once
  uint64_t state_bytes = 0;
  uint64_t scratch_bytes = 0;  // device scratch ops allocate for max_batch tokens, reported with the arena
  // The stateful ops, as their CPU kernels' has_state(): what tern_session_save_state saves.
  std::vector<SavedState> saved_states;
  // The saved state of an op whose device state is its CPU kernel's bytes as they are (`bytes` of them).
  void save_whole(const Node& node, const Slice& state, uint64_t bytes);

 private:
  Result<Slice> device_weight(const TensorInfo* tensor, WeightForm form);

  std::map<std::pair<const TensorInfo*, WeightForm>, Slice> weights_;  // the ones this session reads
  std::vector<std::unique_ptr<std::vector<float>>> constants_;
  std::vector<Upload> pending_;  // the constants
  std::vector<Slice> zeroed_;
};

struct VulkanOp {
  fb::OpCode code;
  // TERN_UNSUPPORTED naming the op (and kind) when this node needs something without a shader yet.
  Status (*supports)(const Node& node, const Model& model);
  Status (*lower)(const Node& node, Lowering& low);
  // TERN_UNSUPPORTED naming the op when a later call (position > 0) cannot continue what its lowering keeps: asked
  // at session creation unless the session is forward_only. Null: the op continues any sequence.
  Status (*continues)(const Node& node) = nullptr;
};

const VulkanOp* find_vulkan_op(fb::OpCode code);

// Workgroup counts for grid-stride shaders over `count` items, `per_group` items a workgroup, capped at a count
// every device allows.
Groups stride_groups(int64_t count, int64_t per_group);
// "op 3 (LINEAR 'layers.0.qkv')": prefixes lowering messages.
inline std::string where(const Node& node) { return node.label(); }
// A dispatch of `shader` for the op, from what differs between dispatches: spec constants, local size
// (local_x, 1, 1), the shader family's push constants (push_constants.h; Program::add fills in the binding
// offsets), workgroup counts and bindings (1.., as DispatchSpec). A shader that needs shared memory has it set on
// the result.
template <typename PushT>
DispatchSpec make_dispatch(const Node& node, const char* shader, std::vector<uint32_t> spec, uint32_t local_x,
                           const PushT& push, GroupsFn groups, std::vector<Binding> bindings) {
  DispatchSpec d;
  d.node = node.index;
  d.where = where(node);
  d.shader = shader;
  d.spec = std::move(spec);
  d.local_size = {local_x, 1, 1};
  d.push.set(push);
  d.groups = std::move(groups);
  d.bindings = std::move(bindings);
  return d;
}
// A grid-stride dispatch (GRID_STRIDE, local size kElementwiseGroup) over the n * d elements of the op's output;
// spec constants and bindings are set on the result.
constexpr uint32_t kElementwiseGroup = 256;
template <typename PushT>
DispatchSpec elementwise(const Node& node, const char* shader, int64_t d, const PushT& push) {
  return make_dispatch(node, shader, {}, kElementwiseGroup, push,
                       [d](int64_t n) { return stride_groups(n * d, kElementwiseGroup); }, {});
}
// A row-reduction workgroup (shaders/common/reduce.glsl) for rows of d: a power of two, no wider than the row needs
// or the device allows.
uint32_t row_group(const Lowering& low, int64_t d);
// TERN_UNSUPPORTED where the op's weights are read on the host as float32 views (adaptive span tables key_pe and
// its spans at session creation; ROTARY reads its frequencies each call) and one is not F32. Every other op reads
// its weights through Lowering (weight() widens a compressed one) or widens them itself (the adaptive ops' packed
// block), so a compressed weight the loader allowed runs.
Status host_f32_weights_only(const Node& node);
// TERN_UNSUPPORTED where a weight is neither F32 nor compressed (F16, I8, I4): nothing to read it as floats.
Status float_weights_only(const Node& node);

// The lowering of each op family.
Status lower_embedding(const Node& node, Lowering& low);
Status lower_position(const Node& node, Lowering& low);
Status lower_layer_norm(const Node& node, Lowering& low);
Status lower_activation(const Node& node, Lowering& low);
Status lower_add(const Node& node, Lowering& low);
Status lower_log_softmax(const Node& node, Lowering& low);
Status lower_linear(const Node& node, Lowering& low);
Status lower_rms_norm(const Node& node, Lowering& low);          // ops_decoder.cpp
Status lower_rotary(const Node& node, Lowering& low);
Status lower_gated_activation(const Node& node, Lowering& low);
// shaders/attention.comp's push constants with the head layout's fields set (heads, row, q/k/v columns, kv_heads);
// the lowering sets the pattern's.
AttentionPush attention_push(const HeadLayout& heads);
// shaders/attention.comp's dispatch for the op (or its variant `shader`): spec constants, shared memory, workgroups
// of query rows per head; push constants and bindings are set on the result.
DispatchSpec attention_dispatch(const Node& node, const Lowering& low, const AttentionPattern& pattern, const char* shader);
// Records `tiled` (attention_dispatch's, push constants and bindings set) for calls of many rows and beside it
// shaders/attention_rows.comp with the same push constants and bindings for calls of a few (`sinks`: the SINKS
// variants of both; `append`: attention_rows.comp also writes the call's keys and values to the state, APPEND).
Status add_attention(const Node& node, Lowering& low, DispatchSpec tiled, bool sinks, bool append = false);
// ATTENTION by kind (the kind table is in op_table.cpp).
Status lower_windowed_attention(const Node& node, Lowering& low);  // Dense, SlidingWindow, ChunkedLocal, Strided, Fixed
Status lower_relative_xl(const Node& node, Lowering& low);
// ops_sinks.cpp: dense ATTENTION under attention sinks, and the context shift of a dense state [slots, 2*kv_inner]
// (added to low.shift).
Status lower_sink_attention(const Node& node, Lowering& low);
Status lower_kv_shift(const Node& node, Lowering& low, const Rotary& rotary, const Slice& state);
Status lower_compressive(const Node& node, Lowering& low);
Status lower_adaptive_embedding(const Node& node, Lowering& low);
Status lower_adaptive_log_softmax(const Node& node, Lowering& low);
Status lower_lsh_attention(const Node& node, Lowering& low);  // ops_lsh.cpp
Status lower_concat(const Node& node, Lowering& low);
Status lower_routing(const Node& node, Lowering& low);
Status lower_adaptive_span(const Node& node, Lowering& low);
Status supports_position(const Node& node, const Model& model);

}  // namespace tern::vk
