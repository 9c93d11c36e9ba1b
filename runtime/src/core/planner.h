// SPDX-License-Identifier: MIT
// Memory planner: places buffers with known lifetimes in one arena, reusing space between buffers whose lifetimes
// do not overlap (greedy by size, as TFLite's arena planner and TFLite Micro's MicroMemoryPlanner do). It knows
// buffers, not ops: a backend's rewrites (cpu/arena.h) adjust sizes and lifetimes, the planner places them.
#pragma once

#include <cstdint>
#include <vector>

#include "format/model.h"

namespace tern {

constexpr uint64_t kArenaAlignment = 64;

// A buffer alive from op `first` to op `last` (node indices, inclusive); first < 0: takes no place.
struct BufferUse {
  uint64_t bytes = 0;
  int first = -1;
  int last = -1;
};

struct ArenaPlan {
  std::vector<int64_t> offsets;  // per buffer: byte offset in the arena (a multiple of kArenaAlignment), -1 if none
  uint64_t bytes = 0;            // arena size
};

// Places every buffer with first >= 0 (each rounded up to kArenaAlignment), largest first (ties in index order),
// each at the lowest offset clear of the buffers already placed that are alive at the same time.
ArenaPlan place_buffers(const std::vector<BufferUse>& buffers);

// Per value, among the ops with run_op[i] true: the op writing it and the last op reading it (-1 if none).
void value_lifetimes(const Model& model, const std::vector<bool>& run_op, std::vector<int>* first,
                     std::vector<int>* last);

// One buffer per value for calls of `rows` tokens, alive from op first[v] to op last[v] (value_lifetimes, or a
// backend's lifetimes stretched by its rewrites); the model's input and output values are not placed.
ArenaPlan place_values(const Model& model, const std::vector<int>& first, const std::vector<int>& last, int64_t rows);

// One buffer per value for calls of `rows` tokens, running the ops where run_op[i] is true. The model's input and
// output values live in caller memory and are not placed; a value written but never read still needs a place.
ArenaPlan plan_arena(const Model& model, const std::vector<bool>& run_op, int64_t rows);

}  // namespace tern
