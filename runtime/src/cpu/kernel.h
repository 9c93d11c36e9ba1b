// SPDX-License-Identifier: MIT
// The CPU backend's kernel interface: what a kernel sees for one call, what it is built with, and what it reports.
#pragma once

#include <pthreadpool.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/huge_pages.h"
#include "format/model.h"
#include "format/status.h"
#include "ops/sink_cache.h"

namespace tern {

// What a kernel sees for one call.
struct RunContext {
  int64_t n = 0;                   // tokens in this call
  int64_t pos0 = 0;                // absolute position of the first of them
  int64_t call_end = 0;            // pos0 + n of the whole call, which a block of its rows keeps (ROTARY's
                                   // per-call frequencies)
  pthreadpool_t pool = nullptr;    // shared by the session's kernels
  int threads = 1;
  const int32_t* ids = nullptr;    // [n], the model input
  const std::vector<void*>* values = nullptr;  // per value index: [n, width] buffer for this call
  float* scratch = nullptr;        // per-thread scratch, see CpuKernel::scratch_bytes
  // Per value index: stored as float16 (tern_activation_storage F16); null when none is. Only values kept whole
  // between row chains are: an op in a chain sees float32 rows (the backend widens them), so only a kernel that
  // reads or writes such a value outside a chain (an LSH layer folded into its attention op) looks here.
  const std::vector<bool>* half_values = nullptr;
  bool stores_half(int value) const { return half_values && (*half_values)[size_t(value)]; }
  float* in(const Node& node, int i) const { return static_cast<float*>((*values)[node.inputs[i]]); }
  float* out(const Node& node, int i) const { return static_cast<float*>((*values)[node.outputs[i]]); }
};

// Facts a kernel needs when it is built at session creation.
struct KernelConfig {
  int64_t max_tokens = 0;  // state capacity
  int64_t max_batch = 0;   // most tokens per call
  int threads = 1;
  pthreadpool_t pool = nullptr;
  // tern_kv_storage F16: KV stores (cpu/kv_store.h) hold float16 keys and values; other state stays float32.
  bool half_kv = false;
  // tern_session_options.forward_only: no call continues a sequence, so state only a later call reads is not kept.
  bool forward_only = false;
  // Attention sinks (tern_session_options.sink_tokens / sink_window): off unless sinks.on(). Then every ATTENTION
  // node is dense and fed by a ROTARY node, which passes its rows unrotated.
  SinkCache sinks;
  // Where the kernel's state and the tables it computes at creation are allocated (cpu/huge_pages.h): the
  // session's, which may be the app's allocator.
  cpu::BufferSource* buffers = nullptr;
};

class CpuKernel {
 public:
  virtual ~CpuKernel() = default;
  virtual Status run(const RunContext& ctx) = 0;
  // Forget the sequence (streaming state back to empty).
  virtual void reset() {}
  // True if run() changes state that later calls read (such ops run even when no logits are wanted).
  virtual bool has_state() const { return false; }
  virtual uint64_t state_bytes() const { return 0; }          // allocated at creation
  // The streaming state as bytes (tern_session_save_state / load_state), for a sequence of `position` tokens: how
  // many, written by save_state and read back by load_state. The count depends only on the kernel's configuration
  // and the position, so a session can check a saved state's sizes before it changes anything.
  virtual uint64_t saved_state_bytes(int64_t /*position*/) const { return 0; }
  virtual void save_state(int64_t /*position*/, uint8_t* /*out*/) const {}
  // Bytes at the start of the saved state that are counts, not float32 rows (the rest is checked finite on load).
  virtual uint64_t saved_count_bytes(int64_t /*position*/) const { return 0; }
  // TERN_INVALID_ARGUMENT where those counts cannot be this kernel's after `position` tokens (checked before any
  // state is loaded; a forged blob can match the checksum).
  virtual Status check_saved_counts(int64_t /*position*/, const uint8_t* /*in*/) const { return Status::Ok(); }
  // True when the saved rows are float16 (a KV store under kv_storage F16: saved layout 1, core/session_state.cpp).
  virtual bool saves_halves() const { return false; }
  virtual void load_state(int64_t /*position*/, const uint8_t* /*in*/) {}
  virtual uint64_t packed_weight_bytes() const { return 0; }  // backend-owned weight copies
  // True if the kernel copied every weight it uses into its own packed form at creation and never reads the model's
  // copies again: the backend may then drop those pages of the mapped file from memory (Model::release_pages).
  virtual bool weights_packed() const { return false; }
  // Context shift (Backend::shift): a dense attention kernel moves and rotates its cache; the session calls it
  // only on models whose stateful ops all can.
  virtual Status shift(int64_t /*keep*/, int64_t /*position*/) { return Unsupported("this op cannot shift its state"); }
  virtual uint64_t scratch_bytes() const { return 0; }        // all threads together
  // Scratch a call of n tokens needs (for the planner); kernels whose scratch grows with n override it.
  virtual uint64_t scratch_bytes_for(int64_t /*n*/) const { return scratch_bytes(); }
};

using KernelFactory = Result<std::unique_ptr<CpuKernel>> (*)(const Node& node, const Model& model,
                                                             const KernelConfig& cfg);

}  // namespace tern
