// SPDX-License-Identifier: MIT
// Scoring through the streaming state: the ids are fed `segment` at a time with append, so every token after the
// first is predicted exactly once, with all the context the model's state keeps (Transformer-XL's memory, an
// adaptive span, a sliding window's ring), the way those papers evaluate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tern/tern.hpp"

namespace tern::run {

struct StreamScore {
  double nll = 0;          // sum of -log p(ids[i+1] | ids[0..i]) in nats
  int64_t predicted = 0;   // ids.size() - 1
  double seconds = 0;
};

// Resets the session, then streams `ids`. logits_out: null, or [ids.size(), vocab] for every row. False with a
// message on failure.
bool stream_score(SessionHandle& session, const std::vector<int32_t>& ids, int64_t segment, float* logits_out,
                  StreamScore* out, std::string* error);

}  // namespace tern::run
