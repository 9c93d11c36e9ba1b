// SPDX-License-Identifier: MIT
// What the benchmarks here share: reading a comma-separated option and opening a session for one call of n tokens.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tern/tern.h"

namespace tern::bench {

// "1024,4096" -> {1024, 4096} (--lengths, --threads); false when an entry is empty, not a whole number, or outside
// [lo, hi].
inline bool parse_list(const std::string& list, int64_t lo, int64_t hi, std::vector<int64_t>* out) {
  out->clear();
  size_t pos = 0;
  while (true) {
    const size_t comma = list.find(',', pos);
    const std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi) return false;
    out->push_back(v);
    if (comma == std::string::npos) return true;
    pos = comma + 1;
  }
}

// A session of `threads` threads whose first call may hold n tokens; nullptr when creation fails (tern_last_error()).
// The benches only run forwards: forward_only, so no state for later calls (an LSH layer's generation cache) is
// planned or kept, and the bytes reported are what one call of n tokens needs.
inline tern_session* open_session(tern_model* model, int threads, int64_t n) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = threads;
  so.max_tokens = n;
  so.max_batch = n;
  so.forward_only = 1;
  tern_session* s = nullptr;
  if (tern_session_create(model, &so, &s) != TERN_OK) return nullptr;
  return s;
}

}  // namespace tern::bench
