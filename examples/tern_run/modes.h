// SPDX-License-Identifier: MIT
// What tern-run does once the model is loaded and every option checked: --plan, --prompt, --score, --ids. Each
// prints its line for people on stdout, or under --json adds its member to the report; each returns 0 or the exit
// status of an error it printed.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "options.h"
#include "tern/tern.hpp"

namespace tern::run {

struct Run {
  const Options& opt;
  const ModelHandle& model;
  SessionHandle& session;
  int64_t context;         // the windows' length: --max-tokens, else the model's context (0: none)
  nlohmann::json& report;  // --json's object
};

int print_plan(Run& run);
int generate(Run& run);
int score(Run& run);
int run_ids(Run& run);

}  // namespace tern::run
