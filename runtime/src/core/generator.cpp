// SPDX-License-Identifier: MIT
#include "core/generator.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "text/tokenizer.h"

namespace tern {

TokenGenerator::TokenGenerator(Session& session, const tern_generator_options& options, uint64_t binding)
    : session_(&session), options_(options), limit_(session.sequence_limit()), binding_(&session, binding) {
  keep_ = options.keep_tokens > 0 ? options.keep_tokens : std::max<int64_t>(1, limit_ / 2);
  history_cap_ = options.history_tokens > 0                       ? options.history_tokens
                 : options.context_policy == TERN_CONTEXT_SINKS ? kSinksHistory
                                                                : 0;
  // The cut history stays within twice the cap: reserved once where that is small.
  if (history_cap_ > 0 && history_cap_ <= (int64_t(1) << 20)) history_.reserve(size_t(2 * history_cap_ + 1));
  logits_.assign(size_t(session.model().vocab_size()), 0.0f);
  for (const Node& node : session.model().nodes()) {
    if (node.code != fb::OpCode::ROTARY) continue;
    const auto* p = node.fb_op->params_as_RotaryParams();
    // With sinks no position passes S + W + a call: the long frequencies never apply.
    if (p->scaling() == fb::RotaryScaling::LONGROPE && !session.sinks().on()) rope_switch_ = p->original_max_positions();
  }
}

Result<TokenGenerator> TokenGenerator::create(Session& session, const tern_generator_options& options) {
  int policy = 0;  // a C caller may pass a number outside the enum
  static_assert(sizeof policy == sizeof options.context_policy, "an int-sized enum");
  std::memcpy(&policy, &options.context_policy, sizeof policy);
  if (policy < TERN_CONTEXT_STOP || policy > TERN_CONTEXT_SHIFT) {
    return InvalidArgument("tern_generator_options.context_policy must be TERN_CONTEXT_STOP (0), SLIDE (1), SINKS (2) "
                           "or SHIFT (3), got " + std::to_string(policy));
  }
  if (policy == TERN_CONTEXT_SINKS && !session.sinks().on()) {
    return InvalidArgument("TERN_CONTEXT_SINKS needs a session with attention sinks (tern_session_options.sink_window "
                           "> 0)");
  }
  if (policy == TERN_CONTEXT_SHIFT) TERN_RETURN_IF_ERROR(session.check_shift());
  const int64_t limit = session.sequence_limit();
  if (options.keep_tokens < 0 || options.keep_tokens >= limit) {
    return InvalidArgument("tern_generator_options.keep_tokens must be in [0, " + std::to_string(limit) +
                           ") (0: half; the session's sequence limit is " + std::to_string(limit) + "), got " +
                           std::to_string(options.keep_tokens));
  }
  if (options.history_tokens < 0 ||
      (options.history_tokens > 0 && policy != TERN_CONTEXT_SINKS && options.history_tokens < limit)) {
    return InvalidArgument("tern_generator_options.history_tokens must be 0 (every token; under SINKS the last " +
                           std::to_string(kSinksHistory) + ") or at least " +
                           (policy == TERN_CONTEXT_SINKS ? std::string("1")
                                                         : "the sequence limit " + std::to_string(limit) +
                                                               ", which a refill may feed again") +
                           ", got " + std::to_string(options.history_tokens));
  }
  if (options.max_new_tokens < 0) {
    return InvalidArgument("tern_generator_options.max_new_tokens must be >= 0 (0: no limit), got " +
                           std::to_string(options.max_new_tokens));
  }
  if (options.ignore_eos != 0 && options.ignore_eos != 1) {
    return InvalidArgument("tern_generator_options.ignore_eos must be 0 or 1, got " +
                           std::to_string(options.ignore_eos));
  }
  if (session.model().vocab_size() < 1) return InvalidArgument("the model has no vocabulary to generate from");
  const uint64_t binding = session.bind_generator();
  if (binding == 0) {
    return InvalidArgument("the session already has a generator: free it (tern_generator_free) before creating "
                           "another on the same session");
  }
  return TokenGenerator(session, options, binding);
}

Status TokenGenerator::check_session() const {
  if (session_->bound_generator() != binding_.id()) {
    return InvalidArgument("this generator is no longer bound to its session (another generator holds it)");
  }
  if (session_->epoch() != fed_epoch_) {
    return InvalidArgument("the session was changed by a call not made through its generator (tern_session_forward, "
                           "_append, _reset or _load_state; it now holds " + std::to_string(session_->position()) +
                           " tokens, the generator fed " + std::to_string(fed_position_) +
                           "): while a generator is bound, feed the session only through it (or start again with "
                           "tern_generator_prompt)");
  }
  if (session_->position() == fed_position_) return Status::Ok();
  return InvalidArgument("the session holds " + std::to_string(session_->position()) + " tokens where its generator fed " +
                         std::to_string(fed_position_) +
                         ": while a generator is bound, feed the session only through it (or start again with "
                         "tern_generator_prompt)");
}

void TokenGenerator::forget() {
  has_logits_ = false;
  pending_ = false;
  session_->reset();
  fed_position_ = 0;
  fed_epoch_ = session_->epoch();
}

Status TokenGenerator::prompt(const int32_t* ids, int64_t n, int64_t* kept) {
  if (ids == nullptr || n < 1) return InvalidArgument("tern_generator_prompt: the prompt needs at least one token id");
  history_.assign(ids, ids + n);
  dropped_ = 0;
  slides_ = 0;
  pending_ = false;
  start_generation();
  const int64_t fed = std::min(n, limit_);
  Status st = refill(fed);
  if (!st.ok()) {
    forget();
    return st;
  }
  if (kept) *kept = fed;
  trim_history();
  return Status::Ok();
}

void TokenGenerator::trim_history() {
  if (history_cap_ == 0 || int64_t(history_.size()) < 2 * history_cap_) return;
  const int64_t drop = int64_t(history_.size()) - history_cap_;
  history_.erase(history_.begin(), history_.begin() + drop);
  dropped_ += drop;
}

Status TokenGenerator::append(const int32_t* ids, int64_t n) {
  if (ids == nullptr || n < 1) return InvalidArgument("tern_generator_append: needs at least one token id");
  if (!has_logits_) return InvalidArgument("tern_generator_append: no sequence yet: call tern_generator_prompt first");
  TERN_RETURN_IF_ERROR(check_session());
  const int64_t add = n + (pending_ ? 1 : 0);
  if (session_->position() + add > limit_ && options_.context_policy == TERN_CONTEXT_STOP) {
    return Status(TERN_CONTEXT_FULL, "the sequence holds " + std::to_string(session_->position()) + " tokens; " +
                                         std::to_string(add) + " more do not fit in the session's sequence limit of " +
                                         std::to_string(limit_) + " (TERN_CONTEXT_STOP)");
  }
  history_.insert(history_.end(), ids, ids + n);
  pending_ = false;
  start_generation();
  TERN_RETURN_IF_ERROR(feed_tail(add));
  trim_history();
  return Status::Ok();
}

Result<int32_t> TokenGenerator::next(LogitSampler& sampler) {
  if (!has_logits_) return InvalidArgument("tern_generator_next: no sequence yet: call tern_generator_prompt first");
  TERN_RETURN_IF_ERROR(check_session());
  if (stop_ != TERN_STOP_NONE && stop_ != TERN_STOP_CONTEXT_FULL) {
    const char* why = stop_ == TERN_STOP_EOS      ? "at an end token"
                      : stop_ == TERN_STOP_STRING ? "at a stop string"
                                                  : "after max_new_tokens tokens";
    return InvalidArgument(std::string("tern_generator_next: the generation stopped ") + why +
                           " (tern_generator_stop_reason); tern_generator_append or tern_generator_prompt goes on");
  }
  if (pending_) {
    if (Status st = feed_tail(1); !st.ok()) {
      if (st.code() == TERN_CONTEXT_FULL) stop_ = TERN_STOP_CONTEXT_FULL;
      return st;
    }
    pending_ = false;
  }
  TERN_ASSIGN_OR_RETURN(const int32_t token, sampler.sample(logits_.data(), vocab(), history_.data(), int64_t(history_.size())));
  history_.push_back(token);
  pending_ = true;
  trim_history();  // the pending token is the last: kept
  check_stop(token);
  return token;
}

void TokenGenerator::start_generation() {
  stop_ = TERN_STOP_NONE;
  stop_string_ = -1;
  generated_ = 0;
  stop_text_.clear();
}

void TokenGenerator::check_stop(int32_t token) {
  ++generated_;
  const Tokenizer* tokenizer = session_->model().tokenizer();
  if (options_.ignore_eos == 0 && tokenizer != nullptr && tokenizer->is_end(token)) {
    stop_ = TERN_STOP_EOS;
  } else if (completes_stop_string(token)) {
    stop_ = TERN_STOP_STRING;
  } else if (options_.max_new_tokens > 0 && generated_ >= options_.max_new_tokens) {
    stop_ = TERN_STOP_LENGTH;
  }
}

bool TokenGenerator::completes_stop_string(int32_t token) {
  if (stop_strings_.empty()) return false;
  const size_t before = stop_text_.size();
  stop_text_ += session_->model().tokenizer()->piece_text(token);
  // A match not found before ends in the new text: it starts at most size - 1 bytes before it.
  size_t first_end = std::string::npos;
  for (size_t i = 0; i < stop_strings_.size(); ++i) {
    const std::string& s = stop_strings_[i];
    const size_t at = stop_text_.find(s, before >= s.size() ? before - s.size() + 1 : 0);
    if (at != std::string::npos && (first_end == std::string::npos || at + s.size() < first_end)) {
      first_end = at + s.size();
      stop_string_ = int64_t(i);
    }
  }
  if (stop_text_.size() >= longest_stop_) stop_text_.erase(0, stop_text_.size() - (longest_stop_ - 1));
  return first_end != std::string::npos;
}

Status TokenGenerator::set_stop_strings(const char* const* strings, int64_t n) {
  if (n < 0 || (n > 0 && strings == nullptr)) {
    return InvalidArgument("tern_generator_set_stop_strings: n must be >= 0 and strings not null when n > 0, got n " +
                           std::to_string(n));
  }
  if (n > 0 && session_->model().tokenizer() == nullptr) {
    return Unsupported("tern_generator_set_stop_strings: the model file carries no tokenizer, so tokens have no text "
                       "to match stop strings on");
  }
  std::vector<std::string> copies;
  size_t longest = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (strings[i] == nullptr || strings[i][0] == '\0') {
      return InvalidArgument("tern_generator_set_stop_strings: stop string " + std::to_string(i) + " is " +
                             (strings[i] ? "empty" : "null") + "; each needs at least one byte");
    }
    copies.emplace_back(strings[i]);
    longest = std::max(longest, copies.back().size());
  }
  stop_strings_ = std::move(copies);
  longest_stop_ = longest;
  stop_text_.clear();
  stop_text_.reserve(2 * longest + 64);
  return Status::Ok();
}

Status TokenGenerator::feed_tail(int64_t n) {
  Status st;
  const int64_t at = session_->position();
  if (rope_switch_ > 0 && at <= rope_switch_ && at + n > rope_switch_ && dropped_ + int64_t(history_.size()) <= limit_) {
    st = refill(int64_t(history_.size()));  // past LongRoPE's original length: every key again, long frequencies
  } else if (session_->position() + n <= limit_) {
    st = run(history_.data() + history_.size() - size_t(n), n);
  } else if (options_.context_policy == TERN_CONTEXT_STOP) {
    return Status(TERN_CONTEXT_FULL, "the sequence is full: the session holds " + std::to_string(session_->position()) +
                                         " tokens, its sequence limit (tern_session_sequence_limit); TERN_CONTEXT_STOP "
                                         "feeds no more (start again with tern_generator_prompt)");
  } else if (options_.context_policy == TERN_CONTEXT_SHIFT && n < limit_) {
    // The last keep tokens' entries move to the start, rotated there; as many fewer as the new tokens need.
    st = session_->shift(std::min(keep_, limit_ - n));
    if (st.ok()) st = run(history_.data() + history_.size() - size_t(n), n);
    ++slides_;
  } else {
    st = refill(std::min(limit_, std::max(keep_, n)));
    ++slides_;
  }
  if (!st.ok()) forget();
  return st;
}

Status TokenGenerator::refill(int64_t n) {
  session_->reset();
  fed_position_ = 0;
  return run(history_.data() + history_.size() - size_t(n), n);
}

Status TokenGenerator::run(const int32_t* ids, int64_t n) {
  has_logits_ = false;
  const int64_t batch = session_->max_batch(), vocab = int64_t(logits_.size());
  for (int64_t done = 0; done < n;) {
    const int64_t len = std::min(batch, n - done);
    const int32_t* part = ids + done;
    done += len;
    if (done < n) {
      TERN_RETURN_IF_ERROR(session_->append(part, len, nullptr));  // no logits before the last token's
    } else if (session_->splits_calls()) {
      // The same rows as one call: only the last token's logits are computed.
      if (len > 1) TERN_RETURN_IF_ERROR(session_->append(part, len - 1, nullptr));
      TERN_RETURN_IF_ERROR(session_->append(part + len - 1, 1, logits_.data()));
    } else {
      // A memory that moves once per call: the call stays whole.
      call_logits_.resize(size_t(len * vocab));
      TERN_RETURN_IF_ERROR(session_->append(part, len, call_logits_.data()));
      std::copy(call_logits_.end() - vocab, call_logits_.end(), logits_.begin());
    }
  }
  fed_position_ = session_->position();
  fed_epoch_ = session_->epoch();
  has_logits_ = true;
  return Status::Ok();
}

}  // namespace tern
