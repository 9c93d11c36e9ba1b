// SPDX-License-Identifier: MIT
// The C API's generation section (tern.h): samplers and generators (text: c_api_text.cpp).
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
using tern::capi::null_argument;

tern_status record(tern_generator* g, const tern::Status& st) {
  if (!st.ok()) g->last_error = st.message();
  return st.code();
}

// ids [n] of tern_generator_prompt / _append (fn): not NULL, n at least 1.
tern::Status check_ids(const char* fn, const int32_t* ids, int64_t n) {
  if (n < 1) return tern::InvalidArgument(std::string(fn) + ": n is " + std::to_string(n) + "; it needs at least one token id");
  if (!ids) return null_argument(fn, "ids");
  return tern::Status::Ok();
}

// guarded's report for a generator's calls: the generator's message slot.
auto recorder(tern_generator* g) {
  return [g](const tern::Status& st) { return record(g, st); };
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
  if (!out) return fail(null_argument("tern_sampler_create", "out"));
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
  if (!sampler) return fail(null_argument("tern_sampler_sample", "sampler"));
  if (!token) return fail(null_argument("tern_sampler_sample", "token"));
  return guarded("for the sampler's scratch", [&] {
    auto t = sampler->sampler.sample(logits, vocab, history, n_history);
    if (!t.ok()) return fail(t.status());
    *token = t.value();
    return TERN_OK;
  });
}

tern_status tern_sampler_set_seed(tern_sampler* sampler, uint64_t seed) {
  if (!sampler) return fail(null_argument("tern_sampler_set_seed", "sampler"));
  sampler->sampler.reseed(seed);
  return TERN_OK;
}

void tern_generator_options_init(tern_generator_options* options) {
  if (options) *options = tern_generator_options{sizeof(tern_generator_options), TERN_CONTEXT_SLIDE, 0, 0, 0, 0};
}

tern_status tern_generator_create(tern_session* session, const tern_generator_options* options, tern_generator** out) {
  if (!session) return fail(null_argument("tern_generator_create", "session"));
  if (!out) return fail(null_argument("tern_generator_create", "out"));
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
  if (!generator) return fail(null_argument("tern_generator_prompt", "generator"));
  const tern::capi::SessionCall call(generator->generator.session());
  if (!call.held()) return call.busy("tern_generator_prompt");
  if (tern::Status st = check_ids("tern_generator_prompt", ids, n); !st.ok()) return record(generator, st);
  return guarded("for the prompt", [&] { return record(generator, generator->generator.prompt(ids, n, kept)); },
                 recorder(generator));
}

tern_status tern_generator_append(tern_generator* generator, const int32_t* ids, int64_t n) {
  if (!generator) return fail(null_argument("tern_generator_append", "generator"));
  const tern::capi::SessionCall call(generator->generator.session());
  if (!call.held()) return call.busy("tern_generator_append");
  if (tern::Status st = check_ids("tern_generator_append", ids, n); !st.ok()) return record(generator, st);
  return guarded("for the history", [&] { return record(generator, generator->generator.append(ids, n)); },
                 recorder(generator));
}

tern_status tern_generator_next(tern_generator* generator, tern_sampler* sampler, int32_t* token) {
  if (!generator) return fail(null_argument("tern_generator_next", "generator"));
  const tern::capi::SessionCall call(generator->generator.session());
  if (!call.held()) return call.busy("tern_generator_next");
  if (!token) return record(generator, null_argument("tern_generator_next", "token"));
  if (!sampler) {
    *token = -1;
    return record(generator, null_argument("tern_generator_next", "sampler"));
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

tern_stop_reason tern_generator_stop_reason(const tern_generator* generator, int64_t* stop_string) {
  if (stop_string) *stop_string = generator ? generator->generator.stop_string() : -1;
  return generator ? generator->generator.stop_reason() : TERN_STOP_NONE;
}

tern_status tern_generator_set_stop_strings(tern_generator* generator, const char* const* strings, int64_t n) {
  if (!generator) return fail(tern::InvalidArgument("tern_generator_set_stop_strings: null generator"));
  return guarded(
      "for the stop strings", [&] { return record(generator, generator->generator.set_stop_strings(strings, n)); },
      recorder(generator));
}

tern_status tern_generator_save(const tern_generator* generator, const tern_sampler* sampler, void* buf, size_t* size) {
  if (!generator) return fail(tern::InvalidArgument("tern_generator_save: null generator"));
  auto* slot = const_cast<tern_generator*>(generator);  // the generator's message slot
  const tern::capi::SessionCall call(generator->generator.session());
  if (!call.held()) return call.busy("tern_generator_save");
  if (!sampler || !size) return record(slot, tern::InvalidArgument("tern_generator_save: null sampler or size"));
  return guarded(
      "while saving the generator",
      [&] {
        auto saved = generator->generator.save(sampler->sampler, buf, *size);
        if (!saved.ok()) return record(slot, saved.status());
        *size = saved.value();
        return TERN_OK;
      },
      recorder(slot));
}

tern_status tern_generator_restore(tern_generator* generator, tern_sampler* sampler, const void* buf, size_t size) {
  if (!generator) return fail(tern::InvalidArgument("tern_generator_restore: null generator"));
  const tern::capi::SessionCall call(generator->generator.session());
  if (!call.held()) return call.busy("tern_generator_restore");
  if (!sampler) return record(generator, tern::InvalidArgument("tern_generator_restore: null sampler"));
  return guarded("while restoring the generator",
                 [&] { return record(generator, generator->generator.restore(sampler->sampler, buf, size)); },
                 recorder(generator));
}

}  // extern "C"
