// The C API's generation section (tern.h): samplers, generators, text for byte-level vocabularies.
#include <new>
#include <string>

#include "core/c_api_internal.h"
#include "core/generator.h"
#include "core/sampler.h"
#include "core/sized_options.h"
#include "tern/tern.h"

struct tern_sampler {
  tern::LogitSampler sampler;
};

struct tern_generator {
  tern::TokenGenerator generator;
  std::string last_error;
};

namespace {

using tern::capi::fail;
using tern::capi::guarded;

tern_status record(tern_generator* g, const tern::Status& st) {
  if (!st.ok()) g->last_error = st.message();
  return st.code();
}

// guarded's report for a generator's calls: the generator's message slot.
auto recorder(tern_generator* g) {
  return [g](const tern::Status& st) { return record(g, st); };
}

// The model's byte vocabulary size, or the status for a model without one.
tern::Result<int64_t> byte_vocab(const tern_model* model, const char* fn) {
  if (model == nullptr) return tern::InvalidArgument(std::string(fn) + ": null model");
  const tern::Model& m = tern::capi::model_of(model);
  const auto* meta = m.fb().metadata();
  const auto* vocab = meta ? meta->vocab() : nullptr;
  if (vocab == nullptr) {
    return tern::Unsupported(std::string(fn) + ": the model describes no vocabulary; only byte-level vocabularies "
                             "have text in this library");
  }
  if (vocab->kind() != tern::fb::VocabKind::BYTES) {
    const char* name = tern::fb::EnumNameVocabKind(vocab->kind());
    return tern::Unsupported(std::string(fn) + ": the model's vocabulary is of kind " + (*name ? name : "unknown") +
                             (vocab->note() ? std::string(" (") + vocab->note()->c_str() + ")" : std::string()) +
                             "; this library turns text into ids only for byte-level (BYTES) vocabularies so far");
  }
  return m.vocab_size();
}

}  // namespace

extern "C" {

int64_t tern_session_sequence_limit(const tern_session* session) {
  return session ? tern::capi::session_of(session).sequence_limit() : 0;
}

void tern_sampler_options_init(tern_sampler_options* options) {
  if (options) *options = tern::default_sampler_options();
}

tern_status tern_sampler_create(const tern_sampler_options* options, tern_sampler** out) {
  if (!out) return fail(tern::InvalidArgument("tern_sampler_create: out is null"));
  *out = nullptr;
  tern_sampler_options o = tern::default_sampler_options();
  if (tern::Status st = tern::read_sized_options(options, "tern_sampler_options", &o); !st.ok()) return fail(st);
  return guarded("while creating a sampler", [&] {
    auto sampler = tern::LogitSampler::create(o);
    if (!sampler.ok()) return fail(sampler.status());
    *out = new tern_sampler{std::move(sampler).value()};
    return TERN_OK;
  });
}

void tern_sampler_free(tern_sampler* sampler) { delete sampler; }

tern_status tern_sampler_sample(tern_sampler* sampler, const float* logits, int64_t vocab, const int32_t* history,
                                int64_t n_history, int32_t* token) {
  if (!sampler || !token) return fail(tern::InvalidArgument("tern_sampler_sample: null sampler or token"));
  return guarded("for the sampler's scratch", [&] {
    auto t = sampler->sampler.sample(logits, vocab, history, n_history);
    if (!t.ok()) return fail(t.status());
    *token = t.value();
    return TERN_OK;
  });
}

tern_status tern_sampler_set_seed(tern_sampler* sampler, uint64_t seed) {
  if (!sampler) return fail(tern::InvalidArgument("tern_sampler_set_seed: null sampler"));
  sampler->sampler.reseed(seed);
  return TERN_OK;
}

void tern_generator_options_init(tern_generator_options* options) {
  if (options) *options = tern_generator_options{sizeof(tern_generator_options), TERN_CONTEXT_SLIDE, 0};
}

tern_status tern_generator_create(tern_session* session, const tern_generator_options* options, tern_generator** out) {
  if (!session || !out) return fail(tern::InvalidArgument("tern_generator_create: null session or out"));
  *out = nullptr;
  tern_generator_options o;
  tern_generator_options_init(&o);
  if (tern::Status st = tern::read_sized_options(options, "tern_generator_options", &o); !st.ok()) return fail(st);
  return guarded("while creating a generator", [&] {
    auto generator = tern::TokenGenerator::create(tern::capi::session_of(session), o);
    if (!generator.ok()) return fail(generator.status());
    *out = new tern_generator{std::move(generator).value(), ""};
    return TERN_OK;
  });
}

void tern_generator_free(tern_generator* generator) { delete generator; }

tern_status tern_generator_prompt(tern_generator* generator, const int32_t* ids, int64_t n, int64_t* kept) {
  if (!generator) return fail(tern::InvalidArgument("tern_generator_prompt: null generator"));
  return guarded("for the prompt", [&] { return record(generator, generator->generator.prompt(ids, n, kept)); },
                 recorder(generator));
}

tern_status tern_generator_append(tern_generator* generator, const int32_t* ids, int64_t n) {
  if (!generator) return fail(tern::InvalidArgument("tern_generator_append: null generator"));
  return guarded("for the history", [&] { return record(generator, generator->generator.append(ids, n)); },
                 recorder(generator));
}

tern_status tern_generator_next(tern_generator* generator, tern_sampler* sampler, int32_t* token) {
  if (!generator) return fail(tern::InvalidArgument("tern_generator_next: null generator"));
  if (!sampler || !token) {
    if (token) *token = -1;
    return record(generator, tern::InvalidArgument("tern_generator_next: null sampler or token"));
  }
  *token = -1;
  return guarded(
      "for the history",
      [&] {
        auto t = generator->generator.next(sampler->sampler);
        if (!t.ok()) return record(generator, t.status());
        *token = t.value();
        return TERN_OK;
      },
      recorder(generator));
}

const float* tern_generator_logits(const tern_generator* generator, int64_t* vocab) {
  if (vocab) *vocab = generator ? generator->generator.vocab() : 0;
  return generator ? generator->generator.logits() : nullptr;
}

const int32_t* tern_generator_history(const tern_generator* generator, int64_t* n) {
  const std::vector<int32_t>* h = generator ? &generator->generator.history() : nullptr;
  if (n) *n = h ? int64_t(h->size()) : 0;
  return h && !h->empty() ? h->data() : nullptr;
}

int64_t tern_generator_slides(const tern_generator* generator) { return generator ? generator->generator.slides() : 0; }

const char* tern_generator_last_error(const tern_generator* generator) {
  return generator ? generator->last_error.c_str() : "null generator";
}

tern_status tern_tokenize(const tern_model* model, const char* text, size_t len, int32_t* ids, int64_t capacity,
                          int64_t* n) {
  if (!n) return fail(tern::InvalidArgument("tern_tokenize: n is null"));
  if (!text && len > 0) return fail(tern::InvalidArgument("tern_tokenize: text is null"));
  if (capacity < 0 || (!ids && capacity > 0)) return fail(tern::InvalidArgument("tern_tokenize: ids is null or capacity negative"));
  auto vocab = byte_vocab(model, "tern_tokenize");
  if (!vocab.ok()) return fail(vocab.status());
  if (len > size_t(INT64_MAX)) return fail(tern::InvalidArgument("tern_tokenize: text too long"));
  *n = int64_t(len);
  for (size_t i = 0; i < len; ++i) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    if (int64_t(b) >= vocab.value()) {
      return fail(tern::InvalidArgument("tern_tokenize: byte " + std::to_string(b) + " at offset " + std::to_string(i) +
                                        " is outside the model's vocabulary of " + std::to_string(vocab.value()) + " tokens"));
    }
  }
  if (!ids && capacity == 0) return TERN_OK;  // size query
  if (capacity < int64_t(len)) {
    return fail(tern::InvalidArgument("tern_tokenize: the text needs " + std::to_string(len) + " ids; capacity is " +
                                      std::to_string(capacity)));
  }
  for (size_t i = 0; i < len; ++i) ids[i] = int32_t(static_cast<unsigned char>(text[i]));
  return TERN_OK;
}

tern_status tern_token_to_text(const tern_model* model, int32_t id, char* buf, size_t capacity, size_t* len) {
  if (!len) return fail(tern::InvalidArgument("tern_token_to_text: len is null"));
  if (!buf && capacity > 0) return fail(tern::InvalidArgument("tern_token_to_text: buf is null"));
  auto vocab = byte_vocab(model, "tern_token_to_text");
  if (!vocab.ok()) return fail(vocab.status());
  if (id < 0 || int64_t(id) >= vocab.value()) {
    return fail(tern::InvalidArgument("tern_token_to_text: id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                      std::to_string(vocab.value()) + ")"));
  }
  *len = id < 256 ? 1 : 0;  // ids >= 256 of a byte vocabulary are special tokens without text
  if (!buf && capacity == 0) return TERN_OK;
  if (capacity < *len) {
    return fail(tern::InvalidArgument("tern_token_to_text: the text of id " + std::to_string(id) + " needs " +
                                      std::to_string(*len) + " bytes; capacity is " + std::to_string(capacity)));
  }
  if (*len == 1) buf[0] = char(static_cast<unsigned char>(id));
  return TERN_OK;
}

}  // extern "C"
