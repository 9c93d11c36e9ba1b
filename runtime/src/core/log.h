// SPDX-License-Identifier: MIT
// The library's log: notices that are not errors go to the app's tern_set_log_callback, or to stderr by default.
#pragma once

#include <string>

#include "tern/tern.h"

namespace tern {

void log(tern_log_level level, const std::string& message);

}  // namespace tern
