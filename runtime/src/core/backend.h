// SPDX-License-Identifier: MIT
// The one boundary between a session and where it runs. A Backend owns its kernels or device, the weights it copied,
// the arena and the streaming state, and its own graph rewrites, all made at creation; the session keeps what is the
// same everywhere (options, position, the state blob's format, the whole-sequence rule, plan reporting).
// Backends: the CPU (cpu/backend.cpp) and Vulkan (vulkan/backend.cpp, or vulkan_absent/ in a build without it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/model.h"
#include "format/status.h"
#include "ops/sink_cache.h"
#include "tern/tern.h"

namespace tern {

struct DeviceInfo {
  std::string name;    // e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string driver;  // e.g. "llvmpipe, Mesa 22.3.6 (LLVM 15.0.6)"; on the CPU, e.g. "kernels: avx512"
  std::string type;    // discrete GPU | integrated GPU | virtual GPU | CPU | other
};

// Per node: {calls, total ns}.
using OpProfile = std::vector<std::pair<int64_t, uint64_t>>;

// What a backend is created with: the caller's options and the session's resolved numbers.
struct BackendConfig {
  const tern_session_options* options = nullptr;  // each backend reads and checks the fields that are its own
  int64_t max_tokens = 0;  // state capacity
  int64_t max_batch = 0;   // most tokens in one call
  int threads = 1;
  // The caller named this backend (not TERN_BACKEND_AUTO): an option of another backend is refused, not ignored.
  bool named = false;
  // Attention sinks, checked by the session (every ATTENTION dense, fed by a ROTARY node): off unless sinks.on().
  SinkCache sinks;
  // Where not null, a backend that checks its exact need against the budget (check_fits with packed true) writes
  // that need here first: a session that fitted max_tokens to the budget refits with it when the check fails.
  tern_memory_plan* exact_need = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const = 0;  // "CPU", "Vulkan"
  virtual tern_backend id() const = 0;
  // What it runs on: {"CPU", "kernels: <ISA>", "CPU"} on the CPU (the variant of its kernels, cpu/isa.h), the
  // Vulkan device's name, driver and type.
  virtual const DeviceInfo& device() const = 0;
  // For messages: "the CPU", or the device's name.
  virtual std::string where() const { return device().name; }
  // Options this backend ignores (set for another backend; only when not named), for the session's notice, or "".
  virtual std::string ignored_options() const { return ""; }
  // How the KV stores of its dense / windowed / sparse attention ops hold keys and values (tern_kv_storage): what
  // the planner counts for them.
  virtual tern_kv_storage kv_storage() const { return TERN_KV_STORAGE_F32; }

  // Runs ids [n] at positions pos0.. after the pos0 tokens the state holds; logits [n, vocab] or null (then only
  // the ops that feed streaming state need to run). No allocation. profile (per node) or null: each op's calls and
  // time are added to it. On an error the session resets the backend.
  virtual Status run(const int32_t* ids, int64_t n, int64_t pos0, float* logits, OpProfile* profile) = 0;
  // As run, but the call's output is the model's last hidden state (ops/hidden_state.h) instead of the logits: its
  // rows [n, width] are written to hidden (or not, when null) and added column by column to pooled_sum [width] (or
  // not, when null); the head need not run. The state advances as in run. No allocation. TERN_UNSUPPORTED naming
  // why where the backend cannot read the value back.
  virtual Status run_hidden(const int32_t* /*ids*/, int64_t /*n*/, int64_t /*pos0*/, float* /*hidden*/,
                            double* /*pooled_sum*/, OpProfile* /*profile*/) {
    return Unsupported(std::string("the last hidden state is read back on the CPU backend only; this session runs on ") +
                       where() + " (create it with backend CPU)");
  }
  // The device dispatches `run` does for a call of n tokens after pos0 (0 on a backend without them, the CPU): the
  // total, and with per_node ([nodes], zeroed by the caller, or null) each added to its op's entry.
  virtual uint64_t dispatches(int64_t /*n*/, int64_t /*pos0*/, uint64_t* /*per_node*/) const { return 0; }
  // Forget the sequence (streaming state back to empty).
  virtual void reset() = 0;
  // The app's abort callback (tern_session_set_callbacks), for a backend that can ask it inside a run (the CPU,
  // between ops): a nonzero answer ends the run with TERN_ABORTED. Null: none. The session asks it between parts.
  virtual void set_abort(tern_abort_callback /*abort*/, void* /*user_data*/) {}
  // Context shift (TERN_CONTEXT_SHIFT), checked by the session (every stateful op a dense ATTENTION fed by a static
  // ROTARY node): of the `position` tokens held, the cache entries of the last `keep` move to positions 0..keep-1
  // and their keys are rotated by -(position - keep) positions in place. No allocation.
  virtual Status shift(int64_t keep, int64_t position) = 0;

  // The planner's numbers for calls of n tokens: packed_weight_bytes, arena_bytes (with scratch), row_chains and
  // row_block_rows. The session fills in the rest.
  virtual void plan(int64_t n, tern_memory_plan* p) const = 0;
  // What was allocated at creation: packed_weight_bytes, arena_bytes, state_bytes.
  virtual void allocated(tern_memory_plan* p) const = 0;

  // The streaming state as tern_session_save_state saves it (core/session_state.cpp): per op node, the bytes its CPU
  // kernel saves (CpuKernel::save_state) for a sequence of `position` tokens, on every backend, so that a state moves
  // between backends.
  virtual bool has_state(int node) const = 0;
  // The layout of a node's saved bytes (core/session_state.cpp): 0, the CPU kernel's float32 rows; 1, the same
  // rows with keys and values as float16 (a KV store under kv_storage F16).
  virtual uint32_t state_layout(int /*node*/) const { return 0; }
  virtual uint64_t saved_state_bytes(int node, int64_t position) const = 0;
  // TERN_INVALID_ARGUMENT where saved bytes cannot be this node's state at `position` (before anything is loaded):
  // counts that are not a sequence of `position` tokens, or a key, value or memory row that is not finite (a forged
  // blob's checksum can be matched; a NaN loaded would turn every later logit into NaN).
  virtual Status check_state(int node, int64_t position, const uint8_t* in) const = 0;
  virtual Status save_state(int node, int64_t position, uint8_t* out) const = 0;  // saved_state_bytes of them
  // An error here leaves this op's state undefined (the session's other ops and position are unchanged).
  virtual Status load_state(int node, int64_t position, const uint8_t* in) = 0;
};

// A backend as the session picks it: what it is, what it can run, and how it is made.
struct BackendEntry {
  // Asked for every node before creation: TERN_UNSUPPORTED naming the op (and attention kind) and why, when this
  // backend cannot run it.
  Status (*supports)(const Node& node, const Model& model);
  // A lower bound on the arena this backend allocates for calls of max_batch tokens (with its own rewrites), for
  // the session's memory check before anything big is allocated.
  uint64_t (*arena_lower_bound)(const Model& model, const BackendConfig& config);
  // TERN_UNSUPPORTED when the backend is absent or refuses an option; TERN_DEVICE_ERROR / TERN_OUT_OF_MEMORY when
  // its device or memory refuses.
  Result<std::unique_ptr<Backend>> (*create)(const Model& model, const BackendConfig& config);
};

const BackendEntry& cpu_backend();
const BackendEntry& vulkan_backend();

// Fails with the planner's numbers when `need` (packed weights + arena + state) does not fit the budget or, without
// one, the machine's memory. `packed` false: before the weights are packed, the total is a lower bound.
Status check_fits(const tern_memory_plan& need, bool packed, uint64_t budget, const Model& model, int64_t max_tokens,
                  int64_t max_batch);

// TERN_INVALID_ARGUMENT naming `where` when the `bytes` of saved state at `floats` (float32s) hold a NaN or infinity.
Status check_saved_floats(const std::string& where, const uint8_t* floats, uint64_t bytes);
// The same for saved float16s (IEEE half bits).
Status check_saved_halves(const std::string& where, const uint8_t* halves, uint64_t bytes);

}  // namespace tern
