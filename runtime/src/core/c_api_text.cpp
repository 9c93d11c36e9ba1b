// SPDX-License-Identifier: MIT
// The C API's text section (tern.h): text <-> token ids through the model's tokenizer (text/tokenizer.h).
#include <cstring>
#include <string>
#include <vector>

#include "core/c_api_internal.h"
#include "text/tokenizer.h"
#include "tern/tern.h"

namespace {

using tern::capi::fail;
using tern::capi::guarded;
using tern::capi::null_argument;

// The model's tokenizer, or the status for a model that has none.
tern::Result<const tern::Tokenizer*> tokenizer_of(const tern_model* model, const char* fn) {
  if (model == nullptr) return null_argument(fn, "model");
  const tern::Model& m = tern::capi::model_of(model);
  if (const tern::Tokenizer* t = m.tokenizer()) return t;
  const auto* meta = m.fb().metadata();
  const auto* vocab = meta ? meta->vocab() : nullptr;
  if (vocab == nullptr) return tern::Unsupported(std::string(fn) + ": the model file carries no tokenizer: use token ids");
  const char* name = tern::fb::EnumNameVocabKind(vocab->kind());
  return tern::Unsupported(std::string(fn) + ": the model file carries no tokenizer (vocabulary kind " +
                           (*name ? name : "unknown to this library") + ")" +
                           (vocab->note() ? std::string(": ") + vocab->note()->c_str() : std::string()) +
                           "; use token ids, or convert with tern-convert --tokenizer FILE");
}

tern::Status check_id(const char* fn, int32_t id, int64_t vocab_size, int64_t at = -1) {
  if (id >= 0 && int64_t(id) < vocab_size) return tern::Status::Ok();
  return tern::InvalidArgument(std::string(fn) + ": id " + std::to_string(id) +
                               (at >= 0 ? " at index " + std::to_string(at) : std::string()) +
                               " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
}

// Copies text to buf [capacity] after setting *len; a size query (buf NULL, capacity 0) only sets *len.
tern_status put_text(const char* fn, const std::string& text, char* buf, size_t capacity, size_t* len) {
  *len = text.size();
  if (!buf && capacity == 0) return TERN_OK;
  if (capacity < text.size()) {
    return fail(tern::InvalidArgument(std::string(fn) + ": the text needs " + std::to_string(text.size()) +
                                      " bytes; capacity is " + std::to_string(capacity)));
  }
  if (!text.empty()) std::memcpy(buf, text.data(), text.size());
  return TERN_OK;
}

// tern_tokenize and tern_tokenize_with (fn names the one called).
tern_status tokenize(const char* fn, const tern_model* model, const char* text, size_t len, uint32_t flags,
                     int32_t* ids, int64_t capacity, int64_t* n) {
  return guarded("tokenizing", [&]() -> tern_status {
    const std::string name(fn);
    if (!n) return fail(null_argument(fn, "n"));
    if (!text && len > 0) return fail(null_argument(fn, "text"));
    if (capacity < 0) return fail(tern::InvalidArgument(name + ": capacity " + std::to_string(capacity) + " is negative"));
    if (!ids && capacity > 0) return fail(null_argument(fn, "ids"));
    const uint32_t known = TERN_TOKENIZE_ADD_SPECIAL | TERN_TOKENIZE_SPECIALS_AS_TEXT;
    if ((flags & ~known) != 0) {
      return fail(tern::InvalidArgument(name + ": flags " + std::to_string(flags) +
                                        " hold bits this library does not know"));
    }
    auto t = tokenizer_of(model, fn);
    if (!t.ok()) return fail(t.status());
    if (len > size_t(INT32_MAX)) return fail(tern::InvalidArgument(name + ": text longer than 2^31 - 1 bytes"));
    std::vector<int32_t> out;
    const tern::Status st = t.value()->encode(std::string_view(text ? text : "", len),
                                              (flags & TERN_TOKENIZE_ADD_SPECIAL) != 0,
                                              (flags & TERN_TOKENIZE_SPECIALS_AS_TEXT) != 0, &out);
    if (!st.ok()) return fail(tern::InvalidArgument(name + ": " + st.message()));
    *n = int64_t(out.size());
    if (!ids && capacity == 0) return TERN_OK;  // size query
    if (capacity < *n) {
      return fail(tern::InvalidArgument(name + ": the text needs " + std::to_string(*n) + " ids; capacity is " +
                                        std::to_string(capacity)));
    }
    if (!out.empty()) std::memcpy(ids, out.data(), out.size() * sizeof(int32_t));
    return TERN_OK;
  });
}

}  // namespace

extern "C" {

const char* tern_model_tokenizer(const tern_model* model) {
  if (model == nullptr) return "";
  const tern::Tokenizer* t = tern::capi::model_of(model).tokenizer();
  return t ? t->name().c_str() : "";
}

int32_t tern_model_special_token(const tern_model* model, tern_special_token which) {
  const tern::Tokenizer* t = model ? tern::capi::model_of(model).tokenizer() : nullptr;
  if (t == nullptr) return -1;
  switch (which) {
    case TERN_TOKEN_BOS: return t->bos_id();
    case TERN_TOKEN_EOS: return t->eos_id();
    case TERN_TOKEN_UNK: return t->unk_id();
    case TERN_TOKEN_PAD: return t->pad_id();
  }
  return -1;
}

int tern_model_is_end_token(const tern_model* model, int32_t id) {
  const tern::Tokenizer* t = model ? tern::capi::model_of(model).tokenizer() : nullptr;
  return t != nullptr && t->is_end(id) ? 1 : 0;
}

int tern_model_adds_bos(const tern_model* model) {
  const tern::Tokenizer* t = model ? tern::capi::model_of(model).tokenizer() : nullptr;
  return t != nullptr && t->adds_bos() ? 1 : 0;
}

tern_status tern_tokenize(const tern_model* model, const char* text, size_t len, int32_t* ids, int64_t capacity,
                          int64_t* n) {
  return tokenize("tern_tokenize", model, text, len, 0, ids, capacity, n);
}

tern_status tern_tokenize_with(const tern_model* model, const char* text, size_t len, uint32_t flags, int32_t* ids,
                               int64_t capacity, int64_t* n) {
  return tokenize("tern_tokenize_with", model, text, len, flags, ids, capacity, n);
}

tern_status tern_token_to_text(const tern_model* model, int32_t id, char* buf, size_t capacity, size_t* len) {
  return guarded("turning a token into text", [&]() -> tern_status {
    if (!len) return fail(null_argument("tern_token_to_text", "len"));
    if (!buf && capacity > 0) return fail(null_argument("tern_token_to_text", "buf"));
    auto t = tokenizer_of(model, "tern_token_to_text");
    if (!t.ok()) return fail(t.status());
    const tern::Status st = check_id("tern_token_to_text", id, tern::capi::model_of(model).vocab_size());
    if (!st.ok()) return fail(st);
    return put_text("tern_token_to_text", t.value()->piece_text(id), buf, capacity, len);
  });
}

tern_status tern_detokenize(const tern_model* model, const int32_t* ids, int64_t n, char* buf, size_t capacity,
                            size_t* len) {
  return guarded("turning tokens into text", [&]() -> tern_status {
    if (!len) return fail(null_argument("tern_detokenize", "len"));
    if (!buf && capacity > 0) return fail(null_argument("tern_detokenize", "buf"));
    if (n < 0) return fail(tern::InvalidArgument("tern_detokenize: n " + std::to_string(n) + " is negative"));
    if (!ids && n > 0) return fail(null_argument("tern_detokenize", "ids"));
    auto t = tokenizer_of(model, "tern_detokenize");
    if (!t.ok()) return fail(t.status());
    const int64_t vocab = tern::capi::model_of(model).vocab_size();
    for (int64_t i = 0; i < n; ++i) {
      const tern::Status st = check_id("tern_detokenize", ids[i], vocab, i);
      if (!st.ok()) return fail(st);
    }
    return put_text("tern_detokenize", t.value()->decode(ids, size_t(n)), buf, capacity, len);
  });
}

}  // extern "C"
