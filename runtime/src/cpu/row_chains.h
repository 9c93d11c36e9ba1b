// SPDX-License-Identifier: MIT
// Row-block execution on the CPU. A chain is a run of consecutive ops that can run on blocks of rows: row-wise ops
// (Streaming::kRowWise, ops/op.h: embedding, positions, layer norm, linear, activation, add, concat, log-softmax — row i of each
// output needs only row i of the inputs) and attention whose kernel gives the same rows when a call is split into
// appends (Streaming::kAppends: dense, windowed, sparse and adaptive-span attention, where the KV cache or ring
// carries what later rows need of earlier ones). The CPU backend runs a chain block by block: every op of the chain on
// rows [0, b), then every op on [b, 2b), ..., each block an append at its own positions. A value made inside a
// chain and read only inside it then needs [block_rows, width] of arena instead of [n, width]: a model whose every
// op chains runs a prefill of any length in the arena of one block. Values the chain reads from before it, or that
// ops after it read (around LSH, routing or Transformer-XL attention, which need the whole call), keep full size.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "format/model.h"

namespace tern {

// Per-block scratch a chain aims at: block_rows = the largest power of two with block_rows * (bytes of one row of
// all its blocked values) <= this, clamped to [kMinBlockRows, kMaxBlockRows]. Large enough that a linear's GEMM
// keeps its speed, small enough that the blocked values stay a few MiB.
constexpr uint64_t kRowBlockBytes = uint64_t(32) << 20;
constexpr int64_t kMinBlockRows = 256;
constexpr int64_t kMaxBlockRows = 1024;

struct RowChain {
  int first_op = 0;             // node index of the first op
  int last_op = 0;              // node index of the last op (inclusive); ops in between not run are skipped
  int64_t block_rows = 0;       // rows per block
  std::vector<int> blocked;     // values made and read only inside the chain: [block_rows, width] each
  std::vector<int> full;        // the chain's other values (inputs from before, outputs read after): [n, width]
  // (input, output) pairs of full values where the output takes the input's rows: the input is read for the last
  // time at or before the op writing the output (an elementwise op when at it), so row r is read before it is
  // overwritten in every block. In a residual stream y = x + f(x) this keeps one [n, d] buffer instead of two.
  std::vector<std::pair<int, int>> in_place;
};

// A value a kernel writes by updating another value's rows in place, in an op the graph does not show as reading
// or writing either (cpu/lsh_fold.h's output fold): the host is read by `writer`, and from it on `guest` names
// the host's place. `unwritten`: an output the graph gives `writer` that it does not write (its result went into
// the guest), which then needs no place; -1 if none.
struct ValueAlias {
  int host = -1;
  int guest = -1;
  int writer = -1;
  int unwritten = -1;
};

// Maximal chains among the ops with run_op[i] true that have at least one blocked value, in node order. The
// model's input and output values are never blocked, nor an alias's host. block_rows > 0 sets every chain's block
// (tests, tuning).
std::vector<RowChain> find_row_chains(const Model& model, const std::vector<bool>& run_op, int64_t block_rows = 0,
                                      const std::vector<ValueAlias>& aliases = {});

}  // namespace tern
