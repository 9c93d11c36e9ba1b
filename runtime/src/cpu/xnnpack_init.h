// SPDX-License-Identifier: MIT
#pragma once

#include "format/status.h"

namespace tern::cpu {
// Initialises XNNPACK once per process; thread-safe.
Status ensure_xnnpack();
}  // namespace tern::cpu
