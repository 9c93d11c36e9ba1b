// SPDX-License-Identifier: MIT
// Fuzz target: a .tern model file from an untrusted source. Loads it from memory; if it loads, creates a small
// session and runs a few tokens through forward and append, so that everything the loader accepted is also
// exercised by the planner and the kernels, and runs its tokenizer (if any) both ways on a text that meets every
// stage of a tokenizer.json pipeline.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tern/tern.h"

namespace {

constexpr int64_t kTokens = 8;
// Outputs wider than this are loaded and planned but not run: the logits buffer would dominate the run.
constexpr int64_t kMaxRunVocab = int64_t(1) << 20;

void run_session(const tern_model* model) {
  tern_session_options opts;
  tern_session_options_init(&opts);
  opts.threads = 1;
  opts.max_tokens = kTokens;
  opts.memory_budget_bytes = uint64_t(512) << 20;  // a plan larger than this fails cleanly instead of allocating
  tern_session* s = nullptr;
  if (tern_session_create(model, &opts, &s) != TERN_OK) return;
  tern_memory_plan plan;
  tern_session_plan(s, kTokens, &plan);
  tern_session_memory(s, &plan);
  const int64_t vocab = tern_session_vocab_size(s);
  if (vocab <= kMaxRunVocab) {
    std::vector<int32_t> ids(kTokens);
    for (int64_t i = 0; i < kTokens; ++i) ids[size_t(i)] = int32_t((i * 7 + 3) % vocab);
    std::vector<float> logits(size_t(kTokens * vocab));
    if (tern_session_forward(s, ids.data(), 4, logits.data()) == TERN_OK) {
      tern_session_append(s, ids.data() + 4, 2, logits.data());
      tern_session_append(s, ids.data() + 6, 2, nullptr);
      tern_session_append(s, ids.data(), 1, logits.data());  // past max_tokens: must fail cleanly
    }
  }
  tern_session_free(s);
}

// Encodes a text with special-token text, several scripts, digits and whitespace runs in each mode, and decodes
// what came out.
void run_tokenizer(const tern_model* model) {
  static const char kText[] = "<|begin|>The word  caf\xC3\xA9's 12345\t\r\n\xE6\x9D\xB1\xE4\xBA\xAC <s></s> "
                              "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD <|end|> \xFF\xFE";
  int32_t ids[256];
  char text[1024];
  for (unsigned flags : {0u, unsigned(TERN_TOKENIZE_ADD_SPECIAL), unsigned(TERN_TOKENIZE_SPECIALS_AS_TEXT)}) {
    int64_t n = 0;
    if (tern_tokenize_with(model, kText, sizeof kText - 1, flags, ids, 256, &n) != TERN_OK) continue;
    size_t len = 0;
    tern_detokenize(model, ids, n, text, sizeof text, &len);
    for (int64_t i = 0; i < n; ++i) tern_token_to_text(model, ids[i], text, sizeof text, &len);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The loader requires a 64-byte aligned buffer (mmap gives page alignment). Allocate exactly `size` bytes
  // so that AddressSanitizer catches a read one byte past the end.
  void* buf = nullptr;
  if (posix_memalign(&buf, 64, size ? size : 1) != 0) return 0;
  if (size) std::memcpy(buf, data, size);
  tern_model* model = nullptr;
  if (tern_model_load_buffer(buf, size, &model) == TERN_OK) {
    tern_model_info info;
    tern_model_get_info(model, &info);
    run_session(model);
    run_tokenizer(model);
    tern_model_free(model);
  }
  std::free(buf);
  return 0;
}
