// SPDX-License-Identifier: MIT
#include "core/log.h"

#include <cstdio>
#include <mutex>

namespace tern {
namespace {

// The callback and its user_data change together, under the mutex; a logging thread copies the pair out and calls
// it unlocked, so a slow callback holds up no other thread's logging.
std::mutex g_sink_mutex;
tern_log_callback g_callback = nullptr;
void* g_user_data = nullptr;

const char* level_prefix(tern_log_level level) {
  switch (level) {
    case TERN_LOG_ERROR: return "error: ";
    case TERN_LOG_WARNING: return "warning: ";
    case TERN_LOG_INFO: return "";
  }
  return "";
}

}  // namespace

void log(tern_log_level level, const std::string& message) {
  tern_log_callback callback;
  void* user_data;
  {
    std::lock_guard<std::mutex> lock(g_sink_mutex);
    callback = g_callback;
    user_data = g_user_data;
  }
  if (callback) {
    callback(level, message.c_str(), user_data);
  } else {
    std::fprintf(stderr, "tern: %s%s\n", level_prefix(level), message.c_str());
  }
}

}  // namespace tern

extern "C" void tern_set_log_callback(tern_log_callback callback, void* user_data) {
  std::lock_guard<std::mutex> lock(tern::g_sink_mutex);
  tern::g_callback = callback;
  tern::g_user_data = callback ? user_data : nullptr;
}
