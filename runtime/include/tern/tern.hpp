/* SPDX-License-Identifier: MIT */
// Thin C++ wrapper over the C API: RAII handles, errors as tern::Error values (no exceptions).
// Needs C++11 (std::shared_ptr, explicit operator bool); the suite compiles it with -std=c++11 -pedantic.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tern/tern.h"

namespace tern {

struct Error {
  // Constructors rather than default member initialisers keep Error{code, message} valid C++11.
  Error() : code(TERN_OK) {}
  Error(tern_status c, const std::string& m) : code(c), message(m) {}
  tern_status code;
  std::string message;
  explicit operator bool() const { return code != TERN_OK; }  // true when there is an error
};

// A loaded model, shared: copies share one tern_model, freed with the last of them and of the sessions made from it.
class ModelHandle {
 public:
  ModelHandle() {}  // no model: valid() is false
  static ModelHandle load(const std::string& path, Error* error) {
    tern_model* m = nullptr;
    tern_status st = tern_model_load(path.c_str(), &m);
    if (error) *error = Error{st, st == TERN_OK ? "" : tern_last_error()};
    return ModelHandle(m);
  }
  // From size bytes in memory (tern_model_load_buffer): a 64-byte aligned buffer is read in place and must outlive
  // every copy of the handle and its sessions; any other is copied (copied_bytes()) and may go at once.
  static ModelHandle load_buffer(const void* data, size_t size, Error* error) {
    tern_model* m = nullptr;
    tern_status st = tern_model_load_buffer(data, size, &m);
    if (error) *error = Error{st, st == TERN_OK ? "" : tern_last_error()};
    return ModelHandle(m);
  }
  bool valid() const { return model_ != nullptr; }
  const tern_model* get() const { return model_.get(); }
  tern_model_info info() const {
    tern_model_info i{};
    tern_model_get_info(model_.get(), &i);
    return i;
  }
  // The evaluation's tokens per call (tern_model_segment_length); 0: none recorded.
  int64_t segment_length() const { return tern_model_segment_length(model_.get()); }
  uint64_t copied_bytes() const { return tern_model_copied_bytes(model_.get()); }

 private:
  explicit ModelHandle(tern_model* m) : model_(m, tern_model_free) {}
  std::shared_ptr<tern_model> model_;
};

// A session, shared like ModelHandle. It keeps its model alive: the ModelHandle it was created from may go first.
class SessionHandle {
 public:
  SessionHandle() {}  // no session: valid() is false
  // options.allocator (an app's tern_allocator) is copied; its user_data must outlive the session.
  static SessionHandle create(const ModelHandle& model, const tern_session_options& options, Error* error) {
    tern_session* s = nullptr;
    tern_status st = tern_session_create(model.get(), &options, &s);
    if (error) *error = Error{st, st == TERN_OK ? "" : tern_last_error()};
    return SessionHandle(model, s);
  }
  bool valid() const { return session_ != nullptr; }
  tern_session* get() const { return session_.get(); }

  Error forward(const std::vector<int32_t>& ids, std::vector<float>* logits) {
    logits->resize(ids.size() * size_t(vocab_size()));
    return check(tern_session_forward(get(), ids.data(), int64_t(ids.size()), logits->data()));
  }
  // The model's last hidden state (tern_session_forward_hidden): hidden [n, d] and/or pooled [d], each resized; pass
  // null for the one not wanted.
  Error forward_hidden(const std::vector<int32_t>& ids, std::vector<float>* hidden, std::vector<float>* pooled) {
    const size_t d = size_t(hidden_size());
    if (hidden) hidden->resize(ids.size() * d);
    if (pooled) pooled->resize(d);
    return check(tern_session_forward_hidden(get(), ids.data(), int64_t(ids.size()), hidden ? hidden->data() : nullptr,
                                             pooled ? pooled->data() : nullptr));
  }
  // d of the hidden state; 0 where the model has none (the session's last error says why).
  int64_t hidden_size() const { return tern_session_hidden_size(get()); }
  // logits may be null when only the state should advance.
  Error append(const int32_t* ids, int64_t n, float* logits) { return check(tern_session_append(get(), ids, n, logits)); }
  Error reset() { return check(tern_session_reset(get())); }
  // The streaming state as bytes (tern_session_save_state), and back.
  Error save_state(std::vector<uint8_t>* out) const {
    size_t size = 0;
    if (Error e = check(tern_session_save_state(get(), nullptr, &size))) return e;
    out->resize(size);
    return check(tern_session_save_state(get(), out->data(), &size));
  }
  Error load_state(const std::vector<uint8_t>& state) { return check(tern_session_load_state(get(), state.data(), state.size())); }
  // Abort and progress for long calls (tern_session_set_callbacks); either may be null.
  Error set_callbacks(tern_abort_callback abort, tern_progress_callback progress, void* user_data) {
    return check(tern_session_set_callbacks(get(), abort, progress, user_data));
  }
  // The planner's numbers for a call of n tokens (zeros when n is out of range: the overload below says why).
  tern_memory_plan plan(int64_t n) const {
    tern_memory_plan p{};
    tern_session_plan(get(), n, &p);
    return p;
  }
  Error plan(int64_t n, tern_memory_plan* out) const { return check(tern_session_plan(get(), n, out)); }
  tern_backend_info backend() const {
    tern_backend_info b{};
    tern_session_get_backend(get(), &b);
    return b;
  }
  int64_t position() const { return tern_session_position(get()); }
  int64_t vocab_size() const { return tern_session_vocab_size(get()); }
  int64_t max_tokens() const { return tern_session_max_tokens(get()); }
  // Why max_tokens is what it is (tern_session_context_note).
  std::string context_note() const { return tern_session_context_note(get()); }

 private:
  SessionHandle(const ModelHandle& model, tern_session* s) : model_(model), session_(s, tern_session_free) {}
  Error check(tern_status st) const { return Error{st, st == TERN_OK ? "" : tern_session_last_error(get())}; }
  ModelHandle model_;  // declared first: destroyed after the session (tern_model_free needs its sessions gone)
  std::shared_ptr<tern_session> session_;
};

// ---- Generation (tern.h, "Generation") ----

// A sampler (tern_sampler_*): logits -> one token id. Move-only; the C handle is freed with the object.
class Sampler {
 public:
  Sampler() {}
  static Sampler create(const tern_sampler_options& options, Error* error) {
    tern_sampler* s = nullptr;
    tern_status st = tern_sampler_create(&options, &s);
    if (error) *error = Error{st, st == TERN_OK ? "" : tern_last_error()};
    return Sampler(s);
  }
  // Every default (temperature 1, no truncation, no penalty, seed 0).
  static Sampler create(Error* error) {
    tern_sampler_options o;
    tern_sampler_options_init(&o);
    return create(o, error);
  }
  Sampler(Sampler&& other) : sampler_(other.sampler_) { other.sampler_ = nullptr; }
  Sampler& operator=(Sampler&& other) {
    std::swap(sampler_, other.sampler_);
    return *this;
  }
  ~Sampler() { tern_sampler_free(sampler_); }
  bool valid() const { return sampler_ != nullptr; }
  tern_sampler* get() const { return sampler_; }

  // One token from logits [vocab]; history feeds the repetition penalty.
  Error sample(const float* logits, int64_t vocab, const std::vector<int32_t>& history, int32_t* token) {
    tern_status st = tern_sampler_sample(sampler_, logits, vocab, history.empty() ? nullptr : history.data(),
                                         int64_t(history.size()), token);
    return Error{st, st == TERN_OK ? "" : tern_last_error()};
  }
  Error set_seed(uint64_t seed) {
    tern_status st = tern_sampler_set_seed(sampler_, seed);
    return Error{st, st == TERN_OK ? "" : tern_last_error()};
  }

 private:
  explicit Sampler(tern_sampler* s) : sampler_(s) {}
  Sampler(const Sampler&);             // not copyable
  Sampler& operator=(const Sampler&);  // (C++11: declared, never defined)
  tern_sampler* sampler_ = nullptr;
};

// A generator (tern_generator_*) on a session, which it keeps alive (it holds a SessionHandle). Move-only.
class Generator {
 public:
  Generator() {}  // no generator: valid() is false
  static Generator create(const SessionHandle& session, const tern_generator_options& options, Error* error) {
    tern_generator* g = nullptr;
    tern_status st = tern_generator_create(session.get(), &options, &g);
    if (error) *error = Error{st, st == TERN_OK ? "" : tern_last_error()};
    return Generator(session, g);
  }
  static Generator create(const SessionHandle& session, Error* error) {
    tern_generator_options o;
    tern_generator_options_init(&o);
    return create(session, o, error);
  }
  Generator(Generator&& other) : session_(other.session_), generator_(other.generator_) { other.generator_ = nullptr; }
  Generator& operator=(Generator&& other) {
    std::swap(session_, other.session_);
    std::swap(generator_, other.generator_);
    return *this;
  }
  ~Generator() { tern_generator_free(generator_); }
  bool valid() const { return generator_ != nullptr; }
  tern_generator* get() const { return generator_; }

  // Resets the session and feeds the prompt; *kept (may be null) gets the tokens that fit.
  Error prompt(const std::vector<int32_t>& ids, int64_t* kept) {
    return check(tern_generator_prompt(generator_, ids.empty() ? nullptr : ids.data(), int64_t(ids.size()), kept));
  }
  Error append(const std::vector<int32_t>& ids) {
    return check(tern_generator_append(generator_, ids.empty() ? nullptr : ids.data(), int64_t(ids.size())));
  }
  // The next token; Error code TERN_CONTEXT_FULL under TERN_CONTEXT_STOP once the sequence is full.
  Error next(Sampler& sampler, int32_t* token) { return check(tern_generator_next(generator_, sampler.get(), token)); }
  // The logits the next token is drawn from (a copy), empty before a prompt.
  std::vector<float> logits() const {
    int64_t vocab = 0;
    const float* l = tern_generator_logits(generator_, &vocab);
    return l ? std::vector<float>(l, l + vocab) : std::vector<float>();
  }
  std::vector<int32_t> history() const {
    int64_t n = 0;
    const int32_t* h = tern_generator_history(generator_, &n);
    return h ? std::vector<int32_t>(h, h + n) : std::vector<int32_t>();
  }
  int64_t slides() const { return tern_generator_slides(generator_); }
  // Why the generation stopped (tern_generator_stop_reason); *stop_string (may be null): the matched string's index.
  tern_stop_reason stop_reason(int64_t* stop_string = nullptr) const {
    return tern_generator_stop_reason(generator_, stop_string);
  }
  Error set_stop_strings(const std::vector<std::string>& strings) {
    std::vector<const char*> pointers;
    for (size_t i = 0; i < strings.size(); ++i) pointers.push_back(strings[i].c_str());
    return check(tern_generator_set_stop_strings(generator_, pointers.empty() ? nullptr : &pointers[0],
                                                 int64_t(pointers.size())));
  }
  // The generator, its session's state and the sampler's PRNG state as bytes (tern_generator_save), and back.
  Error save(const Sampler& sampler, std::vector<uint8_t>* out) const {
    size_t size = 0;
    if (Error e = check(tern_generator_save(generator_, sampler.get(), nullptr, &size))) return e;
    out->resize(size);
    return check(tern_generator_save(generator_, sampler.get(), out->data(), &size));
  }
  Error restore(Sampler& sampler, const std::vector<uint8_t>& saved) {
    return check(tern_generator_restore(generator_, sampler.get(), saved.data(), saved.size()));
  }

 private:
  Generator(const SessionHandle& session, tern_generator* g) : session_(session), generator_(g) {}
  Generator(const Generator&);             // not copyable
  Generator& operator=(const Generator&);
  Error check(tern_status st) const { return Error{st, st == TERN_OK ? "" : tern_generator_last_error(generator_)}; }
  SessionHandle session_;  // declared first: destroyed after the generator
  tern_generator* generator_ = nullptr;
};

// Text -> ids through the model's tokenizer (TERN_UNSUPPORTED for a model file that carries none); flags:
// TERN_TOKENIZE_* (tern_tokenize_with).
inline Error tokenize(const ModelHandle& model, const std::string& text, std::vector<int32_t>* ids, uint32_t flags = 0) {
  int64_t n = 0;
  tern_status st = tern_tokenize_with(model.get(), text.data(), text.size(), flags, nullptr, 0, &n);
  if (st == TERN_OK) {
    ids->resize(size_t(n));
    st = tern_tokenize_with(model.get(), text.data(), text.size(), flags, ids->empty() ? nullptr : ids->data(), n, &n);
  }
  return Error{st, st == TERN_OK ? "" : tern_last_error()};
}

// Streamed token texts (token_to_text) -> text that never ends inside a UTF-8 character: a byte token may carry
// half of one, so an incomplete tail is held back until the bytes that finish it arrive (or flush()).
//   Utf8Stream s;  for each id: fputs(s.push(text).c_str(), out);  at the end: fputs(s.flush().c_str(), out);
// A tail that can never be completed (an invalid lead, or a lead followed by a byte no character continues it with)
// is released as it is, so bad bytes pass through rather than stall the stream.
class Utf8Stream {
 public:
  std::string push(const std::string& bytes) {
    pending_ += bytes;
    const size_t keep = incomplete_tail(pending_);
    std::string ready = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return ready;
  }
  std::string flush() {
    std::string rest;
    rest.swap(pending_);
    return rest;
  }

 private:
  // Bytes at the end of s that start a UTF-8 character and hold fewer than its length, each of them still able to
  // become it (the second byte in the range the lead allows: E0 A0.., ED ..9F, F0 90.., F4 ..8F); else 0.
  static size_t incomplete_tail(const std::string& s) {
    for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
      const size_t pos = s.size() - back;
      const unsigned char c = static_cast<unsigned char>(s[pos]);
      if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back for its lead
      const size_t length = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? (c <= 0xEF ? 3 : 0) : c >= 0xC2 ? 2 : 0;
      if (length <= back) return 0;  // ASCII, an invalid lead, or a character that ended within s
      if (back >= 2) {
        const unsigned char second = static_cast<unsigned char>(s[pos + 1]);
        const unsigned char low = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        const unsigned char high = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        if (second < low || second > high) return 0;
      }
      return back;
    }
    return 0;
  }
  std::string pending_;
};

// Token id -> the text it adds after other tokens ("" for a special token).
inline Error token_to_text(const ModelHandle& model, int32_t id, std::string* text) {
  size_t len = 0;
  tern_status st = tern_token_to_text(model.get(), id, nullptr, 0, &len);
  if (st == TERN_OK) {
    std::vector<char> buf(len > 0 ? len : 1);
    st = tern_token_to_text(model.get(), id, buf.data(), buf.size(), &len);
    if (st == TERN_OK) text->assign(buf.data(), len);
  }
  return Error{st, st == TERN_OK ? "" : tern_last_error()};
}

// Ids -> the text of the whole sequence.
inline Error detokenize(const ModelHandle& model, const std::vector<int32_t>& ids, std::string* text) {
  size_t len = 0;
  const int32_t* p = ids.empty() ? nullptr : ids.data();
  tern_status st = tern_detokenize(model.get(), p, int64_t(ids.size()), nullptr, 0, &len);
  if (st == TERN_OK) {
    std::vector<char> buf(len > 0 ? len : 1);
    st = tern_detokenize(model.get(), p, int64_t(ids.size()), buf.data(), buf.size(), &len);
    if (st == TERN_OK) text->assign(buf.data(), len);
  }
  return Error{st, st == TERN_OK ? "" : tern_last_error()};
}

}  // namespace tern
