// What the benchmarks here share: reading a comma-separated option and opening a session for one call of n tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tern/tern.h"

namespace tern::bench {

// "1024,4096" -> {1024, 4096} (--lengths, --threads). std::stoll throws on an entry that is not a number.
inline std::vector<int64_t> parse_list(const std::string& list) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos < list.size()) {
    const size_t comma = list.find(',', pos);
    out.push_back(std::stoll(list.substr(pos, comma - pos)));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// A session of `threads` threads whose first call may hold n tokens; nullptr when creation fails (tern_last_error()).
inline tern_session* open_session(tern_model* model, int threads, int64_t n) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = threads;
  so.max_tokens = n;
  so.max_batch = n;
  tern_session* s = nullptr;
  if (tern_session_create(model, &so, &s) != TERN_OK) return nullptr;
  return s;
}

}  // namespace tern::bench
