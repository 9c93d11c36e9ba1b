// SPDX-License-Identifier: MIT
#include "stream_score.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "cli.h"

namespace tern::run {

bool stream_score(SessionHandle& session, const std::vector<int32_t>& ids, int64_t segment, float* logits_out,
                  StreamScore* out, std::string* error) {
  const auto n = int64_t(ids.size());
  const int64_t vocab = session.vocab_size();
  *out = StreamScore{};
  if (n < 2) {
    *error = "need at least 2 tokens to score";
    return false;
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab) {
      *error = "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")";
      return false;
    }
  }
  if (Error e = session.reset()) {
    *error = e.message;
    return false;
  }
  std::vector<float> logits(size_t(std::min(segment, n) * vocab));  // [segment, vocab]
  cli::Timer timer;
  double last_report = 0;
  for (int64_t pos = 0; pos < n; pos += segment) {
    const int64_t len = std::min(segment, n - pos);
    if (Error e = session.append(ids.data() + pos, len, logits.data())) {
      *error = e.message;
      return false;
    }
    if (logits_out) std::memcpy(logits_out + pos * vocab, logits.data(), size_t(len * vocab) * sizeof(float));
    // Row r predicts ids[pos + r + 1]; the last id has nothing to predict.
    for (int64_t r = 0; r < len && pos + r + 1 < n; ++r) {
      const float* row = logits.data() + r * vocab;
      const float mx = *std::max_element(row, row + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - mx);
      const int32_t target = ids[size_t(pos + r + 1)];
      out->nll += (std::log(sum) + mx) - double(row[target]);
      ++out->predicted;
    }
    if (timer.seconds() - last_report >= 5.0) {
      last_report = timer.seconds();
      std::fprintf(stderr, "scoring: %lld / %lld tokens, %.1f tokens/s\n", static_cast<long long>(pos + len),
                   static_cast<long long>(n), double(pos + len) / last_report);
    }
  }
  out->seconds = timer.seconds();
  return true;
}

}  // namespace tern::run
