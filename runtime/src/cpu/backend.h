// SPDX-License-Identifier: MIT
// The CPU backend: Tern's kernels (cpu/op_table.cpp; float32 matrices on weights packed once per model), with the CPU's
// graph rewrites: LSH layers folded into their attention op (cpu/lsh_fold.h), chains of row-wise ops run in row
// blocks (cpu/row_chains.h), and activations kept whole between chains stored as float16 (cpu/half_values.h).
#pragma once

#include <pthreadpool.h>

#include <memory>
#include <vector>

#include "core/backend.h"
#include "cpu/half_values.h"
#include "cpu/huge_pages.h"
#include "cpu/kernel.h"
#include "cpu/row_chains.h"
#include "ops/hidden_state.h"

namespace tern::cpu {

class CpuBackend : public Backend {
 public:
  static Result<std::unique_ptr<Backend>> create(const Model& model, const BackendConfig& config);
  ~CpuBackend() override;

  const char* name() const override { return "CPU"; }
  tern_backend id() const override { return TERN_BACKEND_CPU; }
  const DeviceInfo& device() const override;
  std::string where() const override { return "the CPU"; }
  std::string ignored_options() const override { return ignored_; }
  Status run(const int32_t* ids, int64_t n, int64_t pos0, float* logits, OpProfile* profile) override;
  Status run_hidden(const int32_t* ids, int64_t n, int64_t pos0, float* hidden, double* pooled_sum,
                    OpProfile* profile) override;
  void reset() override;
  void set_abort(tern_abort_callback abort, void* user_data) override {
    abort_ = abort;
    abort_data_ = user_data;
  }
  Status shift(int64_t keep, int64_t position) override;
  void plan(int64_t n, tern_memory_plan* p) const override;
  void allocated(tern_memory_plan* p) const override;
  tern_kv_storage kv_storage() const override { return half_kv_ ? TERN_KV_STORAGE_F16 : TERN_KV_STORAGE_F32; }
  bool has_state(int node) const override { return kernels_[size_t(node)]->has_state(); }
  uint32_t state_layout(int node) const override { return kernels_[size_t(node)]->saves_halves() ? 1 : 0; }
  uint64_t saved_state_bytes(int node, int64_t position) const override {
    return kernels_[size_t(node)]->saved_state_bytes(position);
  }
  Status check_state(int node, int64_t position, const uint8_t* in) const override;
  Status save_state(int node, int64_t position, uint8_t* out) const override;
  Status load_state(int node, int64_t position, const uint8_t* in) override;

  // The chains, for calls of max_batch rows, that the planner's arena assumes (cpu/arena.h).
  static std::vector<RowChain> pick_row_chains(const Model& model, const std::vector<bool>& run, int64_t max_batch,
                                               int64_t block_rows, const std::vector<ValueAlias>& aliases);

 private:
  CpuBackend(const Model& model, const tern_allocator* allocator)
      : model_(model),
        buffers_(allocator),
        arena_(large_vector<float>(&buffers_)),
        scratch_(large_vector<float>(&buffers_)),
        output_sink_(large_vector<float>(&buffers_)),
        staging_(large_vector<float>(&buffers_)) {}
  Status build(const BackendConfig& config);
  // The ops in `run` on the call's rows; logits null: the output (if an op in `run` writes it) goes to output_sink_.
  Status run_ops(const RunContext& ctx, const std::vector<bool>& run, float* logits, OpProfile* profile);
  Status run_op(const RunContext& ctx, int index, bool count_call, OpProfile* profile);
  // After the op writing the hidden state ran on rows [row0, row0 + rows) of the call: copies them out to
  // hidden_out_ and adds them into pooled_sum_out_. values: the pointers the op wrote through (a chain's block
  // pointers in a chain).
  void take_hidden(const std::vector<void*>& values, int64_t row0, int64_t rows);
  // Runs chains_[c] on the call's n rows, block by block (ops not in `run` skipped).
  Status run_chain(int c, const RunContext& ctx, const std::vector<bool>& run, OpProfile* profile);

  const Model& model_;
  BufferSource buffers_;  // every large buffer below and the kernels' state: declared first, destroyed last
  std::string ignored_;
  pthreadpool_t pool_ = nullptr;
  int threads_ = 1;
  tern_abort_callback abort_ = nullptr;  // asked between ops (tern_session_set_callbacks)
  void* abort_data_ = nullptr;
  bool shares_cores_ = false;  // threads 0: the pool runs a call only on cores no other call holds (cpu/core_share.h)
  int64_t max_batch_ = 0;
  bool half_kv_ = false;  // kv_storage F16
  std::vector<std::unique_ptr<CpuKernel>> kernels_;  // per node
  std::vector<bool> run_all_;         // every op
  std::vector<bool> run_for_state_;   // only the ops that feed streaming state (append without logits)
  std::vector<bool> run_hidden_;      // the ops that feed the hidden state or streaming state (run_hidden)
  HiddenState hidden_;                // the model's last hidden state (value -1: none, or folded into an LSH layer)
  float* hidden_out_ = nullptr;       // during run_hidden: the caller's hidden rows [n, width], or null
  double* pooled_sum_out_ = nullptr;  // during run_hidden: the caller's column sums [width], or null
  std::vector<RowChain> chains_;      // row-wise chains of run_all_, run block by block (cpu/row_chains.h)
  std::vector<ValueAlias> aliases_;   // values LSH layers folded into their attention update in place (cpu/lsh_fold.h)
  std::vector<int> chain_at_;         // per node: index in chains_ of the chain starting there, -1 if none
  std::vector<void*> block_ptrs_;     // per value: its rows for the block being run (run_chain)
  std::vector<int64_t> arena_offsets_;  // per value: its byte offset in the arena, -1 if none (for max_batch rows)
  LargeVector<float> arena_;          // the arena's bytes + alignment slack, allocated once
  LargeVector<float> scratch_;        // largest per-call scratch of any kernel, + alignment slack
  float* scratch_base_ = nullptr;     // scratch_ from its first 64-byte aligned float
  LargeVector<float> output_sink_;    // [max_batch, vocab] only when a stateful op writes the output (see build)
  std::vector<void*> value_ptrs_;     // per value: its place in the arena
  std::vector<bool> half_values_;     // per value: stored as float16; empty unless activation_storage F16
  std::vector<std::vector<StagedPlace>> staged_;  // per chain: its float16 places (cpu/half_values.h)
  LargeVector<float> staging_;        // the float32 blocks of the largest chain's staged places
};

}  // namespace tern::cpu
