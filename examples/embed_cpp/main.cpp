// SPDX-License-Identifier: MIT
// embed_c's app with the C++ wrapper (tern.hpp): RAII handles, errors as values. Loads a byte-level model, turns a
// prompt into ids and generates a few tokens with the library's sampler and generator.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tern/tern.hpp"

namespace {

int fail(const tern::Error& e) {
  std::fprintf(stderr, "embed_cpp: %s (%s)\n", e.message.c_str(), tern_status_string(e.code));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: embed_cpp MODEL.tern PROMPT [TOKENS]\n");
    return 2;
  }
  const int64_t tokens = argc == 4 ? std::atoll(argv[3]) : 40;
  tern::Error err;
  tern::ModelHandle model = tern::ModelHandle::load(argv[1], &err);
  if (err) return fail(err);
  tern_session_options options;
  tern_session_options_init(&options);
  tern::SessionHandle session = tern::SessionHandle::create(model, options, &err);
  if (err) return fail(err);

  std::vector<int32_t> ids;
  if ((err = tern::tokenize(model, argv[2], &ids))) return fail(err);
  if (ids.empty()) return fail(tern::Error{TERN_INVALID_ARGUMENT, "the prompt is empty"});

  tern_sampler_options so;
  tern_sampler_options_init(&so);
  so.temperature = 0.8f;
  so.top_k = 40;
  so.top_p = 0.95f;
  so.seed = 42;
  tern::Sampler sampler = tern::Sampler::create(so, &err);
  if (err) return fail(err);
  // The generator keeps the session alive; by default it slides the context when the sequence is full.
  tern::Generator generator = tern::Generator::create(session, &err);
  if (err) return fail(err);
  int64_t kept = 0;
  if ((err = generator.prompt(ids, &kept))) return fail(err);

  std::string text = argv[2];
  for (int64_t t = 0; t < tokens; ++t) {
    int32_t token = -1;
    std::string piece;
    if ((err = generator.next(sampler, &token))) return fail(err);
    if ((err = tern::token_to_text(model, token, &piece))) return fail(err);
    text += piece;
  }
  std::printf("%s\n\nembed_cpp: %lld prompt tokens (%lld fed), %lld tokens generated, history %zu tokens\n", text.c_str(),
              static_cast<long long>(ids.size()), static_cast<long long>(kept), static_cast<long long>(tokens),
              generator.history().size());
  return 0;
}
