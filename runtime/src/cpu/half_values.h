// SPDX-License-Identifier: MIT
// Float16 storage of the activations a CPU session keeps whole between row chains (tern_activation_storage F16):
// which values qualify, and how each chain widens them into float32 blocks for its ops and narrows them back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/model.h"
#include "cpu/row_chains.h"

namespace tern {

// Per value, stored as float16: the full values of `chains` that every op in `run` touching them reads or writes
// inside a chain (which stages them), or that only a folded LSH layer touches outside one (its kernel widens x2 and
// adds into x1's halves itself, through RunContext::stores_half); values sharing a place (a chain's in-place
// output, an alias's guest) are stored alike. Empty when no value qualifies.
std::vector<bool> pick_half_values(const Model& model, const std::vector<bool>& run, const std::vector<RowChain>& chains,
                                   const std::vector<ValueAlias>& aliases);

// A place of float16 rows a chain reads or writes through a float32 block.
struct StagedPlace {
  std::vector<int> values;  // the chain's full values at this place (an input and the output taking its rows)
  int64_t width = 0;
  size_t staging = 0;       // offset in the chain's staging floats: [block_rows, width]
  // The value made before the chain (its rows widened into the block first) and the one an op of the chain writes
  // (narrowed into its rows after); -1 if none. A chain run in one block shares no place between them.
  int widen_from = -1;
  int narrow_into = -1;
};

// Per chain, its float16 places; *floats: the staging the largest chain needs.
std::vector<std::vector<StagedPlace>> plan_staging(const Model& model, const std::vector<RowChain>& chains,
                                                   const std::vector<bool>& half_values, size_t* floats);

}  // namespace tern
