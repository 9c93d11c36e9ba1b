// SPDX-License-Identifier: MIT
// A C++ app of the installed libtern (tern.hpp): loads a byte-level model, runs a prompt, prints the most likely
// next byte and the library's version. Usage: consumer_cpp MODEL.tern TEXT
#include <cstdio>
#include <string>
#include <vector>

#include "tern/tern.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL.tern TEXT\n", argv[0]);
    return 2;
  }
  tern::Error error;
  tern::ModelHandle model = tern::ModelHandle::load(argv[1], &error);
  if (error) {
    std::fprintf(stderr, "load: %s\n", error.message.c_str());
    return 1;
  }
  tern_session_options options;
  tern_session_options_init(&options);
  options.threads = 1;
  tern::SessionHandle session = tern::SessionHandle::create(model, options, &error);
  if (error) {
    std::fprintf(stderr, "session: %s\n", error.message.c_str());
    return 1;
  }
  const std::string text = argv[2];
  std::vector<int32_t> ids(text.begin(), text.end());
  for (int32_t& id : ids) id &= 0xff;
  std::vector<float> logits;
  if (tern::Error e = session.forward(ids, &logits)) {
    std::fprintf(stderr, "forward: %s\n", e.message.c_str());
    return 1;
  }
  const int64_t vocab = session.vocab_size();
  const float* last = logits.data() + (ids.size() - 1) * size_t(vocab);
  int64_t best = 0;
  for (int64_t v = 1; v < vocab; ++v)
    if (last[v] > last[best]) best = v;
  std::printf("libtern %s (header %d.%d.%d), %s: next byte after \"%s\": %lld\n", tern_version(), TERN_VERSION_MAJOR,
              TERN_VERSION_MINOR, TERN_VERSION_PATCH, model.info().architecture, text.c_str(), (long long)best);
  return 0;
}
