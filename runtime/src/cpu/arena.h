// SPDX-License-Identifier: MIT
// The CPU backend's arena: the planner's buffers (core/planner.h) after the CPU's own rewrites, which change sizes
// and lifetimes: row chains (cpu/row_chains.h), values LSH layers update in place (cpu/lsh_fold.h), and values
// stored as float16 (cpu/half_values.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/planner.h"
#include "cpu/row_chains.h"

namespace tern {

// Plans for calls of `rows` tokens, running the ops where run_op[i] is true. The model's input and output
// values live in caller memory and are not placed. `chains` (from find_row_chains with the same run_op) run block
// by block: their blocked values take min(rows, block_rows) rows and keep their own lifetimes, since each block
// rewrites them before reading; every other value a chain touches is alive across the whole chain, because a later
// block still reads (or an earlier one already wrote) its rows.
// `aliases`: values a kernel writes by updating another value's rows in place (cpu/row_chains.h).
// `half_values`: per value, stored as float16 (2 bytes an element; tern_activation_storage F16); empty: none.
// Offsets are per value; a value sharing another's place has its offset.
ArenaPlan plan_cpu_arena(const Model& model, const std::vector<bool>& run_op, int64_t rows,
                         const std::vector<RowChain>& chains = {}, const std::vector<ValueAlias>& aliases = {},
                         const std::vector<bool>& half_values = {});

// The candidates worth running in blocks for calls of `rows` tokens. Blocking a chain shrinks its inner values but
// keeps its full-size inputs and outputs alive across the whole chain (an input read by the last block, an output
// written by the first), so in a narrow model it can cost more than it saves: a candidate is kept when the most
// bytes alive at any of its ops is smaller run in blocks than in one pass. Chains of one block (rows <= block_rows)
// are never kept.
std::vector<RowChain> choose_row_chains(const Model& model, const std::vector<bool>& run_op, int64_t rows,
                                        const std::vector<RowChain>& candidates);

}  // namespace tern
