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
  Error() {}
  Error(tern_status c, std::string m) : code(c), message(std::move(m)) {}
  tern_status code = TERN_OK;
  std::string message;
  explicit operator bool() const { return code != TERN_OK; }  // true when there is an error
};

class ModelHandle {
 public:
  static ModelHandle load(const std::string& path, Error* error) {
    tern_model* m = nullptr;
    tern_status st = tern_model_load(path.c_str(), &m);
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

 private:
  explicit ModelHandle(tern_model* m) : model_(m, tern_model_free) {}
  std::shared_ptr<tern_model> model_;
};

class SessionHandle {
 public:
  static SessionHandle create(const ModelHandle& model, const tern_session_options& options, Error* error) {
    tern_session* s = nullptr;
    tern_status st = tern_session_create(model.get(), &options, &s);
    if (error) *error = Error{st, st == TERN_OK ? "" : tern_last_error()};
    return SessionHandle(s);
  }
  bool valid() const { return session_ != nullptr; }
  tern_session* get() const { return session_.get(); }

  Error forward(const std::vector<int32_t>& ids, std::vector<float>* logits) {
    logits->resize(ids.size() * size_t(vocab_size()));
    return check(tern_session_forward(get(), ids.data(), int64_t(ids.size()), logits->data()));
  }
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
  tern_memory_plan plan(int64_t n) const {
    tern_memory_plan p{};
    tern_session_plan(get(), n, &p);
    return p;
  }
  tern_backend_info backend() const {
    tern_backend_info b{};
    tern_session_get_backend(get(), &b);
    return b;
  }
  int64_t position() const { return tern_session_position(get()); }
  int64_t vocab_size() const { return tern_session_vocab_size(get()); }

 private:
  explicit SessionHandle(tern_session* s) : session_(s, tern_session_free) {}
  Error check(tern_status st) const { return Error{st, st == TERN_OK ? "" : tern_session_last_error(get())}; }
  std::shared_ptr<tern_session> session_;
};

}  // namespace tern
