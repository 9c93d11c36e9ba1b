// SPDX-License-Identifier: MIT
// An LSH layer folded into its attention op (CPU backend). A Reformer LSH layer is
//   h = LAYER_NORM(x2) [n, d];  qk|v = LINEAR(h) [n, 2*inner];  o = ATTENTION lsh(qk|v) [n, inner];
//   p = LINEAR(o) [n, d];  y1 = ADD(x1, p)
// and the attention hashes and sorts all n rows of one head at a time. Run as written, h, qk|v, o and p are
// full-size values (at 65,536 tokens and d = inner = 1024: 1.25 GiB). Folded, the attention op normalises x2 and
// projects one head at a time into [n, 2*dh] of its own scratch (the input fold), and adds each head's share of the
// output projection, o_h W_o[:, head]^T, into x1's rows, which y1 then names (the output fold): the other four
// nodes do not run and their values take no arena. The arithmetic is the same per row, except that the output
// projection's sum over inner is taken head by head (float32 rounding: ~1e-7 relative).
#pragma once

#include <vector>

#include "format/model.h"

namespace tern {

struct LshFold {
  int attention = -1;   // the ATTENTION node (kind Lsh), which runs the others
  int norm = -1;        // LAYER_NORM of x2
  int projection = -1;  // LINEAR to qk | v
  // The output fold, where it applies (-1 otherwise): LINEAR o -> p and ADD x1 + p -> y1; y1 takes x1's place.
  int output = -1;
  int residual = -1;
  int residual_in = -1;   // value x1
  int residual_out = -1;  // value y1
};

// Every LSH attention whose input is LINEAR(LAYER_NORM(x2)) with each intermediate read by the next op only, and
// x2 read again after the attention (so the planner keeps it alive while the attention reads it). The output fold
// also needs o read only by a LINEAR whose result only an ADD reads, with that ADD the last reader of its other
// input x1 and no op between the attention and the ADD reading x1.
std::vector<LshFold> find_lsh_folds(const Model& model);

}  // namespace tern
