// SPDX-License-Identifier: MIT
// A golden's generation: a prompt in one call, then one id per step, and the reference's logits (the prompt call's
// last row, then each step's). Written by tools/reference/make_reformer_generation_goldens.py and
// make_routing_generation_goldens.py as generation.json and generation_logits.npy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npy.h"
#include "tern/tern.h"

namespace tern::test {

struct Generation {
  int64_t prompt = 0;
  std::vector<int32_t> ids;
  npy::Array logits;  // [1 + steps, vocab]
};

Generation load_generation(const std::string& dir);

// The prompt in one call, then the steps in calls of `per_call` ids (1: one token at a time); a session saved and
// reloaded into a fresh one after `reload_after` steps (0: never). Returns each row the golden holds.
std::vector<float> generate(tern_model* model, const Generation& gen, int threads, int64_t per_call,
                            int64_t reload_after = 0, tern_backend backend = TERN_BACKEND_CPU);

// Every step of `gen` within `tolerance` of the golden (overall and per step): on the CPU one token a call at 1 and
// 2 threads, 7 a call (each still runs alone, in order), and saved and restored into a new session after 20 steps;
// on another backend one token a call, 7 a call, and saved and restored after 20 steps.
void check_generation(tern_model* model, const Generation& gen, const std::string& name, double tolerance,
                      tern_backend backend = TERN_BACKEND_CPU);

// A forward_only session of `model` (max_tokens: the golden's ids) plans and keeps no state, gives the prompt the
// logits `prompt_logits` (its first prompt * vocab floats) bit for bit, and refuses to continue, naming forward_only.
void check_forward_only(tern_model* model, const Generation& gen, const std::vector<float>& prompt_logits);

// The largest relative error of one row of `vocab` floats.
double worst_row_error(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab);

}  // namespace tern::test
