// SPDX-License-Identifier: MIT
// Saving and restoring a generator (tern_generator_save / tern_generator_restore): the generator's sequence, the
// sampler's PRNG state and the session's state (core/session_state.cpp) in one blob.
//
// Layout, little-endian:
//   0    char[8]  "TERNGENR"
//   8    u32      format version (1)
//   12   u32      flags: bit 0 the generator has logits (a prompt was fed), bit 1 a token is pending (returned by
//                 next, not fed yet); other bits 0
//   16   u64      checksum of every other byte (core/session.h, blob_checksum): bytes 0..15, then 24..end
//   24   generator options: i32 context_policy, i32 ignore_eos, i64 keep_tokens, i64 history_tokens,
//                 i64 max_new_tokens
//   56   sampler options: f32 temperature, i32 top_k, f32 top_p, f32 min_p, f32 repetition_penalty,
//                 i32 repetition_last_n (the seed is not compared: the PRNG state follows)
//   80   u64[4]   the sampler's xoshiro256** state (never all zero)
//   112  i64      vocab; i64 fed position; i64 tokens dropped from the history; i64 slides
//   144  i32      stop reason; i32 0; i64 stop string index (-1: none); i64 tokens generated since the prompt or append
//   168  i64      history tokens H; i64 stop text bytes T; u64 session state bytes S
//   192  i32[H]   history; f32[vocab] logits (only with flag bit 0); u8[T] stop text; u8[S] the session state
// Every value is checked on restore, before anything changes; the session state is checked by Session::load_state.
#include <cmath>
#include <cstring>
#include <string>

#include "core/generator.h"

namespace tern {
namespace {

constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'G', 'E', 'N', 'R'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kHasLogits = 1u, kPending = 2u;
constexpr size_t kChecksumAt = 16, kBodyAt = 24, kFixedBytes = 192;
// A stop text longer than this is no stop string's tail (they are the app's few words).
constexpr int64_t kMaxStopText = int64_t(1) << 24;

// Appends values at p, or only counts their bytes while p is null.
class Writer {
 public:
  explicit Writer(uint8_t* p) : p_(p) {}
  template <typename T>
  void put(T v) {
    bytes(&v, sizeof v);
  }
  void bytes(const void* data, size_t n) {
    if (p_ && n > 0) std::memcpy(p_ + size_, data, n);
    size_ += n;
  }
  size_t size() const { return size_; }

 private:
  uint8_t* p_;
  size_t size_ = 0;
};

// Reads values from [p, end); ok() false once a read would pass the end (it then reads zeros).
class Reader {
 public:
  Reader(const uint8_t* p, const uint8_t* end) : p_(p), end_(end) {}
  template <typename T>
  T get() {
    T v{};
    if (size_t(end_ - p_) < sizeof v) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, p_, sizeof v);
    p_ += sizeof v;
    return v;
  }
  // n bytes in place, or null when fewer remain.
  const uint8_t* take(uint64_t n) {
    if (uint64_t(end_ - p_) < n) {
      ok_ = false;
      return nullptr;
    }
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  bool ok() const { return ok_; }
  uint64_t left() const { return uint64_t(end_ - p_); }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

int raw_policy(const tern_generator_options& o) {
  int policy = 0;
  std::memcpy(&policy, &o.context_policy, sizeof policy);
  return policy;
}

// "the blob's X is A, this generator's is B" for one option that differs, or "" when they agree.
template <typename T>
std::string differs(const char* what, T saved, T mine) {
  if (saved == mine || (saved != saved && mine != mine)) return "";
  return std::string(what) + " was " + std::to_string(saved) + " when saved, is " + std::to_string(mine) + " here";
}

}  // namespace

Result<size_t> TokenGenerator::save(const LogitSampler& sampler, void* buf, size_t size) const {
  TERN_ASSIGN_OR_RETURN(const size_t state_bytes, session_->save_state(nullptr, 0));
  const tern_sampler_options& so = sampler.options();
  uint64_t rng[4];
  sampler.rng().state(rng);
  auto write = [&](uint8_t* out) {
    Writer w(out);
    w.bytes(kMagic, sizeof kMagic);
    w.put<uint32_t>(kVersion);
    w.put<uint32_t>((has_logits_ ? kHasLogits : 0u) | (pending_ ? kPending : 0u));
    w.put<uint64_t>(0);  // the checksum, written last
    w.put<int32_t>(raw_policy(options_));
    w.put<int32_t>(options_.ignore_eos);
    w.put<int64_t>(options_.keep_tokens);
    w.put<int64_t>(options_.history_tokens);
    w.put<int64_t>(options_.max_new_tokens);
    w.put<float>(so.temperature);
    w.put<int32_t>(so.top_k);
    w.put<float>(so.top_p);
    w.put<float>(so.min_p);
    w.put<float>(so.repetition_penalty);
    w.put<int32_t>(so.repetition_last_n);
    w.bytes(rng, sizeof rng);
    w.put<int64_t>(vocab());
    w.put<int64_t>(fed_position_);
    w.put<int64_t>(dropped_);
    w.put<int64_t>(slides_);
    w.put<int32_t>(int32_t(stop_));
    w.put<int32_t>(0);
    w.put<int64_t>(stop_string_);
    w.put<int64_t>(generated_);
    w.put<int64_t>(int64_t(history_.size()));
    w.put<int64_t>(int64_t(stop_text_.size()));
    w.put<uint64_t>(state_bytes);
    w.bytes(history_.data(), history_.size() * sizeof(int32_t));
    if (has_logits_) w.bytes(logits_.data(), logits_.size() * sizeof(float));
    w.bytes(stop_text_.data(), stop_text_.size());
    return w.size();
  };
  const size_t total = write(nullptr) + state_bytes;
  if (buf == nullptr) return total;
  if (size < total) {
    return InvalidArgument("the generator needs " + std::to_string(total) + " bytes; the buffer has " +
                           std::to_string(size));
  }
  auto* out = static_cast<uint8_t*>(buf);
  const size_t head = write(out);
  TERN_RETURN_IF_ERROR(session_->save_state(out + head, state_bytes).status());
  const uint64_t sum = blob_checksum(blob_checksum(kBlobChecksumSeed, out, kChecksumAt), out + kBodyAt, total - kBodyAt);
  std::memcpy(out + kChecksumAt, &sum, sizeof sum);
  return total;
}

Status TokenGenerator::restore(LogitSampler& sampler, const void* buf, size_t size) {
  if (buf == nullptr) return InvalidArgument("tern_generator_restore: the buffer is null");
  const auto* in = static_cast<const uint8_t*>(buf);
  if (size < kFixedBytes || std::memcmp(in, kMagic, sizeof kMagic) != 0) {
    return InvalidArgument("not a Tern generator (" + std::to_string(size) + " bytes, no \"TERNGENR\" header of " +
                           std::to_string(kFixedBytes) + " bytes)");
  }
  uint64_t sum;
  std::memcpy(&sum, in + kChecksumAt, sizeof sum);
  if (blob_checksum(blob_checksum(kBlobChecksumSeed, in, kChecksumAt), in + kBodyAt, size - kBodyAt) != sum) {
    return InvalidArgument("the saved generator is corrupt (checksum mismatch)");
  }
  Reader r(in + sizeof kMagic, in + size);
  const auto version = r.get<uint32_t>();
  const auto flags = r.get<uint32_t>();
  if (version != kVersion) {
    return Unsupported("saved generator format version " + std::to_string(version) +
                       " is not supported (this runtime reads " + std::to_string(kVersion) + ")");
  }
  if ((flags & ~(kHasLogits | kPending)) != 0 || flags == kPending) {
    return InvalidArgument("the saved generator's flags " + std::to_string(flags) +
                           " are not a generator's (a pending token needs logits; other bits are 0)");
  }
  r.get<uint64_t>();  // the checksum
  // Options: the generator's and the sampler's must be those it was saved with.
  std::string mismatch;
  auto compare = [&](const std::string& m) {
    if (mismatch.empty()) mismatch = m;
  };
  compare(differs("tern_generator_options.context_policy", r.get<int32_t>(), raw_policy(options_)));
  compare(differs("tern_generator_options.ignore_eos", r.get<int32_t>(), options_.ignore_eos));
  compare(differs("tern_generator_options.keep_tokens", r.get<int64_t>(), options_.keep_tokens));
  compare(differs("tern_generator_options.history_tokens", r.get<int64_t>(), options_.history_tokens));
  compare(differs("tern_generator_options.max_new_tokens", r.get<int64_t>(), options_.max_new_tokens));
  const tern_sampler_options& so = sampler.options();
  compare(differs("tern_sampler_options.temperature", r.get<float>(), so.temperature));
  compare(differs("tern_sampler_options.top_k", r.get<int32_t>(), so.top_k));
  compare(differs("tern_sampler_options.top_p", r.get<float>(), so.top_p));
  compare(differs("tern_sampler_options.min_p", r.get<float>(), so.min_p));
  compare(differs("tern_sampler_options.repetition_penalty", r.get<float>(), so.repetition_penalty));
  compare(differs("tern_sampler_options.repetition_last_n", r.get<int32_t>(), so.repetition_last_n));
  if (!mismatch.empty()) {
    return InvalidArgument("the saved generator was made with other options: " + mismatch +
                           " (restore into a generator and sampler created with the options it was saved with)");
  }
  uint64_t rng[4];
  for (uint64_t& word : rng) word = r.get<uint64_t>();
  if ((rng[0] | rng[1] | rng[2] | rng[3]) == 0) {
    return InvalidArgument("the saved generator's sampler state is all zero, which no seed gives");
  }
  const auto saved_vocab = r.get<int64_t>(), position = r.get<int64_t>(), dropped = r.get<int64_t>(),
             slides = r.get<int64_t>();
  const auto stop = r.get<int32_t>(), zero = r.get<int32_t>();
  const auto stop_string = r.get<int64_t>(), generated = r.get<int64_t>();
  const auto n_history = r.get<int64_t>(), n_stop_text = r.get<int64_t>();
  const auto state_bytes = r.get<uint64_t>();
  if (saved_vocab != vocab()) {
    return InvalidArgument("the saved generator's vocabulary has " + std::to_string(saved_vocab) +
                           " tokens; this model's has " + std::to_string(vocab()));
  }
  const bool has_logits = (flags & kHasLogits) != 0, pending = (flags & kPending) != 0;
  if (position < 0 || position > limit_ || (!has_logits && position != 0)) {
    return InvalidArgument("the saved generator fed " + std::to_string(position) +
                           " tokens; this session's sequence limit is " + std::to_string(limit_) +
                           (has_logits ? "" : " (and a generator without a prompt fed none)"));
  }
  if (dropped < 0 || slides < 0 || generated < 0 || zero != 0) {
    return InvalidArgument("the saved generator's counts are negative (dropped " + std::to_string(dropped) +
                           ", slides " + std::to_string(slides) + ", generated " + std::to_string(generated) + ")");
  }
  if (stop < TERN_STOP_NONE || stop > TERN_STOP_CONTEXT_FULL || (stop == TERN_STOP_STRING) != (stop_string >= 0) ||
      stop_string < -1) {
    return InvalidArgument("the saved generator's stop reason " + std::to_string(stop) + " (stop string " +
                           std::to_string(stop_string) + ") is not one a generator gives");
  }
  const int64_t cap = history_cap_ > 0 ? 2 * history_cap_ : int64_t(1) << 40;
  if (n_history < 0 || n_history > cap || uint64_t(n_history) > r.left() / sizeof(int32_t) ||
      (has_logits && n_history < 1) || (pending && n_history < 1)) {
    return InvalidArgument("the saved generator's history of " + std::to_string(n_history) +
                           " tokens does not fit its blob or its options (history_tokens " +
                           std::to_string(options_.history_tokens) + ")");
  }
  const uint8_t* history_bytes = r.take(uint64_t(n_history) * sizeof(int32_t));
  const uint8_t* logits_bytes = has_logits ? r.take(uint64_t(vocab()) * sizeof(float)) : nullptr;
  if (n_stop_text < 0 || n_stop_text > kMaxStopText) {
    return InvalidArgument("the saved generator's stop text of " + std::to_string(n_stop_text) +
                           " bytes is no stop string's tail");
  }
  const uint8_t* stop_text = r.take(uint64_t(n_stop_text));
  if (!r.ok() || r.left() != state_bytes) {
    return InvalidArgument("the saved generator of " + std::to_string(size) +
                           " bytes is truncated or has trailing bytes (its header announces " +
                           std::to_string(n_history) + " history tokens and " + std::to_string(state_bytes) +
                           " bytes of session state)");
  }
  std::vector<int32_t> history(static_cast<size_t>(n_history));
  if (n_history > 0) std::memcpy(history.data(), history_bytes, history.size() * sizeof(int32_t));
  for (size_t i = 0; i < history.size(); ++i) {
    if (history[i] < 0 || history[i] >= vocab()) {
      return InvalidArgument("the saved generator's history token " + std::to_string(i) + " is " +
                             std::to_string(history[i]) + ", outside the vocabulary [0, " + std::to_string(vocab()) +
                             ")");
    }
  }
  std::vector<float> logits(logits_.size());
  if (has_logits) {
    std::memcpy(logits.data(), logits_bytes, logits.size() * sizeof(float));
    for (size_t i = 0; i < logits.size(); ++i) {
      if (std::isnan(logits[i]) || logits[i] == INFINITY) {
        return InvalidArgument("the saved generator's logit " + std::to_string(i) + " is " +
                               (std::isnan(logits[i]) ? "NaN" : "+inf") + "; a model's logits are finite");
      }
    }
  }
  const uint8_t* state = r.take(state_bytes);
  int64_t state_position = -1;  // the session state's own position (core/session_state.cpp, offset 24)
  if (state_bytes >= 32) std::memcpy(&state_position, state + 24, sizeof state_position);
  if (state_position != position) {
    return InvalidArgument("the saved generator fed " + std::to_string(position) +
                           " tokens but its session state holds " + std::to_string(state_position));
  }
  TERN_RETURN_IF_ERROR(session_->load_state(state, size_t(state_bytes)));
  // Everything checked and the session loaded: the generator takes the saved sequence.
  sampler.rng().set_state(rng);
  history_ = std::move(history);
  if (history_cap_ > 0) history_.reserve(size_t(2 * history_cap_ + 1));
  logits_ = std::move(logits);
  has_logits_ = has_logits;
  pending_ = pending;
  dropped_ = dropped;
  slides_ = slides;
  stop_ = tern_stop_reason(stop);
  stop_string_ = stop_string;
  generated_ = generated;
  stop_text_.assign(reinterpret_cast<const char*>(stop_text), size_t(n_stop_text));
  fed_position_ = session_->position();
  fed_epoch_ = session_->epoch();
  return Status::Ok();
}

}  // namespace tern
