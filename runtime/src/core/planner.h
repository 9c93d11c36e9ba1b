// Memory planner: places every intermediate value of a call in one arena, reusing space between values
// whose lifetimes do not overlap (greedy by size, as TFLite's arena planner does).
#pragma once

#include <cstdint>
#include <vector>

#include "core/model.h"

namespace tern {

struct ArenaPlan {
  std::vector<int64_t> offsets;  // per value: byte offset in the arena, -1 if not in the arena
  uint64_t bytes = 0;            // arena size
};

constexpr uint64_t kArenaAlignment = 64;

// Plans for calls of `rows` tokens, running the ops where run_op[i] is true. The model's input and output
// values live in caller memory and are not placed.
ArenaPlan plan_arena(const Model& model, const std::vector<bool>& run_op, int64_t rows);

}  // namespace tern
