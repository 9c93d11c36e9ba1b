// SPDX-License-Identifier: MIT
// A session: one sequence being run on one model, on one backend (core/backend.h). The session keeps what is the
// same on every backend: the options, the position, the whole-sequence rule, the state blob and plan reporting.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "format/model.h"
#include "ops/hidden_state.h"

namespace tern {

// The checksum of saved blobs (session states, generators): FNV-1a over 8-byte little-endian words, then the tail
// bytes one at a time, from kBlobChecksumSeed (FNV-1a's offset basis); fast enough for states of hundreds of MB.
constexpr uint64_t kBlobChecksumSeed = 1469598103934665603ull;
uint64_t blob_checksum(uint64_t h, const uint8_t* p, size_t n);

class Session {
 public:
  static Result<std::unique_ptr<Session>> create(const Model& model, const tern_session_options& options);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Status forward(const int32_t* ids, int64_t n, float* logits);  // reset, then append
  Status append(const int32_t* ids, int64_t n, float* logits);   // logits may be null
  // Resets, then runs ids [n] as forward does, giving the model's last hidden state (ops/hidden_state.h) instead of
  // the logits: hidden [n, d] (or null) and pooled [d], its mean over the n rows (or null; not both null).
  // TERN_UNSUPPORTED naming why where the model or the backend has none to give.
  Status forward_hidden(const int32_t* ids, int64_t n, float* hidden, float* pooled);
  // The model's last hidden state; value -1 where it has none (why says so).
  const HiddenState& hidden_state() const { return hidden_; }
  void reset();
  // Context shift (TERN_CONTEXT_SHIFT): keeps the last `keep` of the tokens held, moved to positions 0..keep-1 with
  // their keys rotated there; the position becomes keep. check_shift: TERN_UNSUPPORTED naming the op when the model
  // cannot shift (every op with state must be dense attention fed by static rotary positions).
  Status shift(int64_t keep);
  Status check_shift() const { return shift_support_; }
  // Attention sinks (tern_session_options.sink_tokens / sink_window); off unless sinks().on().
  const SinkCache& sinks() const { return sinks_; }
  tern_memory_plan plan(int64_t n) const;
  tern_memory_plan allocated() const;
  // The streaming state as a self-checking byte blob (core/session_state.cpp). save_state with buf null returns the
  // size needed; load_state rejects a blob from another model or session configuration, or a corrupt one, before
  // it changes anything.
  Result<size_t> save_state(void* buf, size_t size) const;
  Status load_state(const void* buf, size_t size);

  // One call at a time (tern.h, "Thread safety"): an entry point of the C API takes the session for its call with
  // try_enter and gives it back with leave; try_enter is false while another thread's call holds it, which is an
  // app's bug reported as such instead of two calls racing inside the kernels.
  bool try_enter() const { return !in_call_.exchange(true, std::memory_order_acquire); }
  void leave() const { in_call_.store(false, std::memory_order_release); }

  // The app's abort and progress callbacks (tern_session_set_callbacks): with either set, a call longer than
  // kCallbackRows that may be split runs in parts of that many rows, asking abort before each.
  struct Callbacks {
    tern_abort_callback abort = nullptr;
    tern_progress_callback progress = nullptr;
    void* user_data = nullptr;
  };
  static constexpr int64_t kCallbackRows = TERN_CALLBACK_ROWS;
  void set_callbacks(const Callbacks& callbacks);

  // Counts the calls that changed the sequence (append, forward, reset, shift, load_state), so that a generator can
  // tell whether a call it did not make came between two of its own (core/generator.h).
  uint64_t epoch() const { return epoch_; }
  // The generator bound to this session (0: none), one at a time: bind_generator returns a new nonzero id, or 0
  // when one is bound already; unbind_generator(id) releases it.
  uint64_t bound_generator() const { return bound_generator_; }
  uint64_t bind_generator();
  void unbind_generator(uint64_t id);

  void set_profiling(bool enabled);
  // Per op: {calls, total ns} since profiling was last enabled.
  const OpProfile& profile() const { return profile_; }
  // Per op: floating-point operations of those calls (OpDef::flops; 0 for ops that do not count them).
  const std::vector<uint64_t>& profile_flops() const { return profile_flops_; }

  // The device dispatches a call of n tokens after `position` held ones runs (Backend::dispatches), without running
  // it: the total in *total, and per op into per_node ([nodes], or null). TERN_INVALID_ARGUMENT where no such call
  // can run: n outside 1..max_batch, or a position before 0, past the sequence limit, or after 0 when forward_only.
  Status dispatches(int64_t n, int64_t position, uint64_t* per_node, uint64_t* total) const;

  int64_t position() const { return position_; }
  int64_t max_tokens() const { return max_tokens_; }
  // Tokens a sequence can hold (tern_session_sequence_limit): max_tokens where an op's state grows with the
  // sequence or its positions come from a table, otherwise kMaxSequence (the session continues past max_tokens in
  // the state it has).
  int64_t sequence_limit() const { return sequence_limit_; }
  // Whether a call may be split into consecutive appends with the same results (every op kRowWise or kAppends):
  // not with a Transformer-XL or compressive memory, which moves once per call.
  bool splits_calls() const { return splits_calls_; }
  // The most positions a sequence of a session without a limit of its own may reach (positions are uint32 on the
  // device, and rings index int32 positions).
  static constexpr int64_t kMaxSequence = int64_t(1) << 31;
  // max_batch by default in a session whose max_tokens was fitted to memory (context_note): a call of a few
  // thousand tokens keeps the arena small next to a state of millions.
  static constexpr int64_t kFittedBatch = 4096;
  // Why max_tokens is what it is (tern_session_context_note): "max_tokens N: " then the app's, the model's context,
  // the sinks' cache, or the largest whose plan fits the budget (or half of MemAvailable at creation).
  const std::string& context_note() const { return context_note_; }
  int64_t max_batch() const { return max_batch_; }
  int threads() const { return threads_; }
  const Model& model() const { return model_; }
  tern_backend backend() const { return backend_->id(); }
  // What the session runs on ({"CPU", "", "CPU"} on the CPU).
  const DeviceInfo& device() const { return backend_->device(); }

 private:
  mutable std::atomic<bool> in_call_{false};
  explicit Session(const Model& model) : model_(model) {}
  Status build(const tern_session_options& options);
  // Every node supported, then the backend created; under backend auto a refusal goes on to the next candidate.
  Status create_backend(const BackendEntry& entry, const BackendConfig& config);
  // Where a call's rows go: logits [n, vocab] (or nowhere, when null), or with `hidden_state` the last hidden
  // state's rows hidden [n, d] (or null) and their column sums added into pooled_sum [d] (or null).
  struct CallOutput {
    float* logits = nullptr;
    bool hidden_state = false;
    float* hidden = nullptr;
    double* pooled_sum = nullptr;
  };
  // append's checks and bookkeeping around run_parts.
  Status append_call(const int32_t* ids, int64_t n, const CallOutput& out);
  // The backend runs of one append: ids [n] in parts of kCallbackRows with the callbacks between them, or whole.
  Status run_parts(const int32_t* ids, int64_t n, const CallOutput& out);

  const Model& model_;
  int threads_ = 1;
  int64_t max_tokens_ = 0;
  int64_t max_batch_ = 0;
  int64_t position_ = 0;
  int64_t sequence_limit_ = 0;
  SinkCache sinks_;
  Status shift_support_;  // check_shift's answer, found at creation
  std::string context_note_;
  bool splits_calls_ = true;
  std::unique_ptr<Backend> backend_;
  bool forward_only_ = false;     // tern_session_options.forward_only: no call continues a sequence
  HiddenState hidden_;
  std::vector<double> pooled_sum_;  // [d]: forward_hidden's column sums, sized at creation
  Callbacks callbacks_;
  uint64_t epoch_ = 0;
  uint64_t bound_generator_ = 0;
  uint64_t generator_ids_ = 0;    // ids handed out so far
  bool profiling_ = false;
  OpProfile profile_;  // per node: calls, total ns; sized at creation
  std::vector<uint64_t> profile_flops_;       // per node, sized at creation
  std::vector<int64_t> profile_calls_before_;  // per node: calls before the current call, sized at creation
};

}  // namespace tern
