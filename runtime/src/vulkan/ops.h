// Lowering of graph ops to dispatches of a Program. One entry per op code with shaders (op_table.cpp); each
// op family's lowering lives in its own file (ops_rowwise.cpp, ops_linear.cpp, ops_attention.cpp).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/model.h"
#include "vulkan/program.h"
#include "vulkan/push_constants.h"

namespace tern::vk {

// A stateful op's device state as the bytes its CPU kernel saves (CpuKernel::save_state): the session's state blob
// then reads the same on both backends, and a state moves between them. copies tile the saved bytes after the first
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
};

// What lowering an op may use: where values live, weights on the device, and the program being built.
class Lowering {
 public:
  Lowering(const Model& model, const Context& ctx, Memory& memory, Program& program, int64_t max_tokens,
           int64_t max_batch)
      : model(model), ctx(ctx), memory(memory), program(program), max_tokens(max_tokens), max_batch(max_batch) {}

  const Model& model;
  const Context& ctx;
  Memory& memory;
  Program& program;
  const int64_t max_tokens, max_batch;

  std::vector<Binding> values;  // per value: its place for a call ([max_batch, width]); set by the runner

  // The tensor's data on the device, uploaded once per session however many ops read it.
  Result<Slice> weight(const TensorInfo* tensor);
  // The tensor as float16 (converted on the host while staging, round to nearest even), uploaded once however
  // many ops read it this way; for the ops with float16-weight shaders when f16_weights is set.
  Result<Slice> weight_f16(const TensorInfo* tensor);
  bool f16_weights = false;  // weight_storage F16: LINEAR weights and EMBEDDING tables as float16
  // A table computed on the host at session creation (e.g. sinusoid frequencies), uploaded with the weights.
  Result<Slice> constant(std::vector<float> data, const char* what);
  // Device state for an op (KV rings), zeroed bytes counted in state_bytes.
  Result<Slice> state(uint64_t bytes, const char* what);
  // Device scratch of an op, valid within one call, counted in scratch_bytes (reported with the arena).
  Result<Slice> scratch(uint64_t bytes, const char* what);

  // Copies every weight and constant to the device through one staging buffer, then frees it.
  Status upload();
  uint64_t weight_bytes = 0, state_bytes = 0;
  uint64_t scratch_bytes = 0;  // device scratch ops allocate for max_batch tokens, reported with the arena
  // The stateful ops, as their CPU kernels' has_state(): what tern_session_save_state saves.
  std::vector<SavedState> saved_states;
  // The saved state of an op whose device state is its CPU kernel's bytes as they are (`bytes` of them).
  void save_whole(const Node& node, const Slice& state, uint64_t bytes);

 private:
  struct Pending {
    const uint8_t* data;
    uint64_t bytes;  // on the device
    Slice dst;
    bool to_f16 = false;  // data holds bytes / 2 floats, staged as float16
  };
  std::map<const TensorInfo*, Slice> weights_, weights_f16_;
  std::vector<std::unique_ptr<std::vector<float>>> constants_;
  std::vector<Pending> pending_;
  std::vector<Slice> zeroed_;
};

struct VulkanOp {
  fb::OpCode code;
  // TERN_UNSUPPORTED naming the op (and kind) when this node needs something without a shader yet.
  Status (*supports)(const Node& node, const Model& model);
  Status (*lower)(const Node& node, Lowering& low);
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
Status f32_weights_only(const Node& node);

// The lowering of each op family.
Status lower_embedding(const Node& node, Lowering& low);
Status lower_position(const Node& node, Lowering& low);
Status lower_layer_norm(const Node& node, Lowering& low);
Status lower_activation(const Node& node, Lowering& low);
Status lower_add(const Node& node, Lowering& low);
Status lower_log_softmax(const Node& node, Lowering& low);
Status lower_linear(const Node& node, Lowering& low);
// ATTENTION by kind (the kind table is in op_table.cpp).
Status lower_windowed_attention(const Node& node, Lowering& low);  // Dense, SlidingWindow, ChunkedLocal, Strided, Fixed
Status lower_relative_xl(const Node& node, Lowering& low);
Status lower_compressive(const Node& node, Lowering& low);
Status lower_adaptive_embedding(const Node& node, Lowering& low);
Status lower_adaptive_log_softmax(const Node& node, Lowering& low);
Status lower_lsh_attention(const Node& node, Lowering& low);  // ops_lsh.cpp
Status lower_concat(const Node& node, Lowering& low);
Status lower_routing(const Node& node, Lowering& low);
Status lower_adaptive_span(const Node& node, Lowering& low);
Status supports_position(const Node& node, const Model& model);

}  // namespace tern::vk
