// SPDX-License-Identifier: MIT
// Whether this process can start a pool's worker threads, checked before pthreadpool_create: pthreadpool ignores a
// failed pthread_create and then waits forever for the worker that never started (a session of 2 threads under a
// stack limit that leaves no room for a second stack hung in tern_session_create).
#pragma once

#include "format/status.h"

namespace tern::cpu {

// Starts `workers` threads with the default attributes (those pthreadpool uses), all alive at once, then ends them.
// OutOfMemory naming the count and the reason when one cannot start.
Status probe_worker_threads(int workers);

}  // namespace tern::cpu
