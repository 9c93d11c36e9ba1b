// An LSH layer's input projection folded into its attention op (CPU backend). A Reformer LSH layer is
//   h = LAYER_NORM(x) [n, d];  qk|v = LINEAR(h) [n, 2*inner];  o = ATTENTION lsh(qk|v) [n, inner]
// and the attention hashes and sorts all n rows of one head at a time, so run as written h and qk|v are full-size
// values (at 65,536 tokens, d = inner = 1024: 768 MiB). Folded, the attention op normalises x and projects one head
// at a time into [n, 2*dh] of its own scratch; the LAYER_NORM and LINEAR nodes do not run and h and qk|v take no
// memory. The arithmetic per row and column is the same (the layer norm's own function, and XNNPACK's GEMM on the
// weight's rows of that head).
#pragma once

#include <vector>

#include "core/model.h"

namespace tern {

struct LshInputFold {
  int attention = -1;   // the ATTENTION node (kind Lsh), which runs the other two
  int norm = -1;        // the LAYER_NORM node
  int projection = -1;  // the LINEAR node
};

// Every LSH attention whose input is LINEAR(LAYER_NORM(x)) with each intermediate read by the next op only, and x
// read again after the attention (so the planner keeps x alive while the attention reads it).
std::vector<LshInputFold> find_lsh_input_folds(const Model& model);

}  // namespace tern
