// SPDX-License-Identifier: MIT
// A sequence grown token by token in a borrowed Session (tern_generator_*): the prompt, then one sampled token per
// next(), fed lazily at the start of the following call, with the context policy applied where the sequence reaches
// the session's sequence limit (core/session.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/sampler.h"
#include "core/session.h"

namespace tern {

// A session's binding to its one generator (Session::bind_generator), released when the generator goes: moves with
// the generator, so that a TokenGenerator moved out of a Result still holds it.
class GeneratorBinding {
 public:
  GeneratorBinding(Session* session, uint64_t id) : session_(session), id_(id) {}
  GeneratorBinding(GeneratorBinding&& other) noexcept : session_(other.session_), id_(other.id_) { other.id_ = 0; }
  GeneratorBinding& operator=(GeneratorBinding&& other) noexcept {
    std::swap(session_, other.session_);
    std::swap(id_, other.id_);
    return *this;
  }
  GeneratorBinding(const GeneratorBinding&) = delete;
  GeneratorBinding& operator=(const GeneratorBinding&) = delete;
  ~GeneratorBinding() {
    if (id_ != 0) session_->unbind_generator(id_);
  }
  uint64_t id() const { return id_; }

 private:
  Session* session_;
  uint64_t id_;
};

class TokenGenerator {
 public:
  // The history a SINKS generator keeps by default (tern_generator_options.history_tokens 0).
  static constexpr int64_t kSinksHistory = 4096;
  // Checks the options against the session (keep_tokens below its sequence limit) and binds it: a session that has
  // a generator already is refused.
  static Result<TokenGenerator> create(Session& session, const tern_generator_options& options);

  // Resets the session and feeds the last min(n, limit) prompt ids; *kept gets that count.
  Status prompt(const int32_t* ids, int64_t n, int64_t* kept);
  // Feeds ids after the sequence (the pending token first), under the context policy.
  Status append(const int32_t* ids, int64_t n);
  // Feeds the pending token, then samples the next one from the logits.
  Result<int32_t> next(LogitSampler& sampler);

  // [vocab], or null before a prompt.
  const float* logits() const { return has_logits_ ? logits_.data() : nullptr; }
  int64_t vocab() const { return int64_t(logits_.size()); }
  // The last history_tokens (or all) of the tokens since the prompt.
  const std::vector<int32_t>& history() const { return history_; }
  int64_t slides() const { return slides_; }
  const Session& session() const { return *session_; }

  // Why the generation stopped (tern_stop_reason); stop_string: the matched string's index, or -1.
  tern_stop_reason stop_reason() const { return stop_; }
  int64_t stop_string() const { return stop_string_; }
  // Stop strings, matched on the text of the tokens generated since the last prompt or append.
  Status set_stop_strings(const char* const* strings, int64_t n);

  // The blob of tern_generator_save / _restore (core/generator_state.cpp): with buf null, the size needed.
  Result<size_t> save(const LogitSampler& sampler, void* buf, size_t size) const;
  Status restore(LogitSampler& sampler, const void* buf, size_t size);

 private:
  TokenGenerator(Session& session, const tern_generator_options& options, uint64_t binding);
  // The session still holds what this generator fed it.
  Status check_session() const;
  // Feeds the last n history tokens after the session's sequence, or applies the policy when they do not fit.
  Status feed_tail(int64_t n);
  // Resets the session and feeds the last n history tokens, with the last one's logits.
  Status refill(int64_t n);
  // Appends ids [n] to the session in calls of at most max_batch, the last token's logits into logits_.
  Status run(const int32_t* ids, int64_t n);
  void forget();  // after a failed call: no sequence, as the session after a failed append
  // Drops the oldest tokens down to history_cap_ once the history holds twice as many (amortised O(1) a token).
  void trim_history();
  // A new generation after a prompt or append: not stopped, nothing generated, no stop text.
  void start_generation();
  // After next() sampled token: the stop reason it gives, if any.
  void check_stop(int32_t token);
  // Whether token's text completes a stop string (stop_string_ then says which); keeps the text a later token may
  // complete one with.
  bool completes_stop_string(int32_t token);

  Session* session_;
  tern_generator_options options_;
  int64_t limit_ = 0;                // the session's sequence limit
  int64_t keep_ = 0;                 // SLIDE: tokens kept
  // LongRoPE (ROTARY scaling LONGROPE): the original length past which the long frequencies apply; 0 for other
  // models. A sequence that grows past it is fed again whole, as transformers' generate drops its cache there: the
  // keys cached with the short frequencies are recomputed with the long ones.
  int64_t rope_switch_ = 0;
  std::vector<float> logits_;        // [vocab], the logits the next token is sampled from
  std::vector<float> call_logits_;   // [rows, vocab]: a prefill's last call on a model that cannot split calls
  std::vector<int32_t> history_;
  int64_t history_cap_ = 0;          // tern_generator_options.history_tokens resolved; 0: every token
  int64_t dropped_ = 0;              // tokens since the prompt no longer in history_
  bool has_logits_ = false;
  bool pending_ = false;             // history_.back() was returned by next() and is not fed yet
  int64_t fed_position_ = 0;         // the session's position after this generator's last call
  uint64_t fed_epoch_ = 0;           // the session's epoch after this generator's last call
  int64_t slides_ = 0;
  // Stopping (tern_generator_stop_reason).
  tern_stop_reason stop_ = TERN_STOP_NONE;
  int64_t stop_string_ = -1;
  int64_t generated_ = 0;            // tokens next() returned since the last prompt or append
  std::vector<std::string> stop_strings_;
  size_t longest_stop_ = 0;          // bytes of the longest stop string
  // The end of the generated text: its last longest_stop_ - 1 bytes before a token is added (a stop string that
  // a later token completes starts in them), with the token's text after them while it is checked.
  std::string stop_text_;
  GeneratorBinding binding_;         // last: released first when the generator goes
};

}  // namespace tern
