// SPDX-License-Identifier: MIT
// tern-bench on a shared machine: sessions that run at once (--sessions) and tests measured beside busy
// processes (--compete).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tern/tern.h"

namespace tern::bench {

// What --sessions measures: `sessions` sessions of one model, each on its own thread, all started together, each
// running one forward of `prefill` tokens (none for 0) and then `generate` appends of one token.
struct SessionsWork {
  int sessions = 4;
  int64_t prefill = 0, generate = 0;
  int repetitions = 5;
};

// Seconds from the common start to the last session's end, per repetition: with threads = 1 and with the default
// thread count (threads = 0), the two alternated (a machine whose load changes changes both alike).
struct SessionsTimes {
  std::vector<double> one_thread_s, default_s;
};

// False with a message on a runtime error. `base`: the session options of the command line.
bool run_sessions(const tern_model* model, const tern_session_options& base, int64_t vocab, const SessionsWork& work,
                  SessionsTimes* times, std::string* error);
void print_sessions(const SessionsWork& work, const SessionsTimes& times, const std::string& model);

// `count` processes that only spin (one core each), started now; they end with stop_busy_processes or with
// this process.
std::vector<pid_t> start_busy_processes(int count);
void stop_busy_processes(const std::vector<pid_t>& pids);

}  // namespace tern::bench
