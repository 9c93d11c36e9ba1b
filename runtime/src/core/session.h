// A session: one sequence being run on one model, with its kernels, arena and streaming state.
#pragma once

#include <pthreadpool.h>

#include <memory>
#include <string>
#include <vector>

#include "core/device_runner.h"
#include "core/half_values.h"
#include "core/model.h"
#include "core/planner.h"
#include "core/row_chains.h"
#include "ops/op.h"

namespace tern {

class Session {
 public:
  static Result<std::unique_ptr<Session>> create(const Model& model, const tern_session_options& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Status forward(const int32_t* ids, int64_t n, float* logits);  // reset, then append
  Status append(const int32_t* ids, int64_t n, float* logits);   // logits may be null
  void reset();
  tern_memory_plan plan(int64_t n) const;
  tern_memory_plan allocated() const;
  // The streaming state as a self-checking byte blob (core/session_state.cpp). save_state with buf null returns the
  // size needed; load_state rejects a blob from another model or session configuration, or a corrupt one, before
  // it changes anything.
  Result<size_t> save_state(void* buf, size_t size) const;
  Status load_state(const void* buf, size_t size);

  void set_profiling(bool enabled);
  // Per op: {calls, total ns} since profiling was last enabled.
  const std::vector<std::pair<int64_t, uint64_t>>& profile() const { return profile_; }

  int64_t position() const { return position_; }
  int64_t max_tokens() const { return max_tokens_; }
  int64_t max_batch() const { return max_batch_; }
  int threads() const { return threads_; }
  const Model& model() const { return model_; }
  // The device a Vulkan session runs on; null on the CPU.
  const DeviceInfo* device() const { return device_ ? &device_->device() : nullptr; }

 private:
  explicit Session(const Model& model) : model_(model) {}
  Status build(const tern_session_options& options);
  // Tries the Vulkan backend; false with *st ok when `auto` should go on with the CPU.
  bool build_device(const tern_session_options& options, Status* st);
  Status run_op(const RunContext& ctx, int index, bool count_call);
  // Whether op `index` keeps streaming state, and the bytes it saves at a position, on the session's backend
  // (core/session_state.cpp).
  bool op_has_state(int index) const;
  uint64_t op_saved_state_bytes(int index, int64_t position) const;
  // The row-wise chains (core/row_chains.h) of the ops in `run` that shrink the arena for max_batch_ rows.
  std::vector<RowChain> pick_row_chains(const std::vector<bool>& run, int64_t block_rows) const;
  // Runs chains_[c] on the call's n rows, block by block (ops not in `run` skipped).
  Status run_chain(int c, const RunContext& ctx, const std::vector<bool>& run);

  const Model& model_;
  pthreadpool_t pool_ = nullptr;
  int threads_ = 1;
  int64_t max_tokens_ = 0;
  int64_t max_batch_ = 0;
  int64_t position_ = 0;
  std::unique_ptr<DeviceRunner> device_;             // a Vulkan session: runs every op; kernels_ stays empty
  std::vector<std::unique_ptr<CpuKernel>> kernels_;  // per node
  std::vector<bool> run_all_;         // every op
  std::vector<bool> run_for_state_;   // only the ops that feed streaming state (append without logits)
  std::vector<RowChain> chains_;      // row-wise chains of run_all_, run block by block (core/row_chains.h)
  std::vector<ValueAlias> aliases_;   // values LSH layers folded into their attention update in place (core/lsh_fold.h)
  std::vector<int> chain_at_;         // per node: index in chains_ of the chain starting there, -1 if none
  std::vector<void*> block_ptrs_;     // per value: its rows for the block being run (run_chain)
  ArenaPlan arena_plan_;              // for max_batch rows
  std::vector<float> arena_;          // arena_plan_.bytes, allocated once
  std::vector<float> scratch_;        // largest per-call scratch of any kernel
  std::vector<float> output_sink_;    // [max_batch, vocab] only when a stateful op writes the output (see build)
  std::vector<void*> value_ptrs_;     // per value: its place in the arena
  std::vector<bool> half_values_;     // per value: stored as float16; empty unless activation_storage F16
  std::vector<std::vector<StagedPlace>> staged_;  // per chain: its float16 places (core/half_values.h)
  std::vector<float> staging_;        // the float32 blocks of the largest chain's staged places
  bool profiling_ = false;
  std::vector<std::pair<int64_t, uint64_t>> profile_;  // per node: calls, total ns; sized at creation
  std::vector<uint64_t> device_ns_;   // per node: device time of the last call, when profiling a Vulkan session
};

}  // namespace tern
