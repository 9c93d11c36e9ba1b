// SPDX-License-Identifier: MIT
// The generation path's fusions: in calls of up to kFusedRowsMax rows (a generated token, a few drafted ones) a
// LINEAR's matrix-vector dispatch (shaders/linear_rows.comp) also applies the norm that feeds it (prologue) and the
// activation and residual add that follow it (epilogue), and those ops' own dispatches get no workgroups. A layer of
// a pre-norm transformer then takes one dispatch per projection instead of up to three. Calls of more rows run every
// op as recorded (the GEMM writes the LINEAR's output and the norm, activation and add run after it), so a fusion
// changes no value of a prefill. Dense attention's matrix-vector dispatch likewise appends the call's keys and values
// (ops_attention.cpp). TERN_VULKAN_NO_FUSION=1 turns them off (tests compare both ways).
#pragma once

#include <vector>

#include "core/planner.h"
#include "format/model.h"

namespace tern::vk {

// The most rows of a call the fused dispatches serve: linear_rows.comp's largest tier (ops_linear.cpp).
constexpr int64_t kFusedRowsMax = 8;

// What one LINEAR's matrix-vector dispatch takes over; -1 where nothing.
struct LinearFusion {
  int norm = -1;        // a LAYER_NORM or RMS_NORM (whole rows) whose output is this LINEAR's input: x is its input,
                        // normalised on the way in
  int activation = -1;  // the ACTIVATION whose input is y (y + bias on the way out)
  int residual = -1;    // the ADD whose one input is y (or the activation's output): its other input added last
  int residual_value = -1;  // that other input
  int output = -1;      // the value the dispatch writes: the last fused op's output, or the LINEAR's own
};

struct FusionPlan {
  bool enabled = false;              // false under TERN_VULKAN_NO_FUSION=1 (ops_attention.cpp's append follows it)
  std::vector<LinearFusion> linear;  // per node (LINEAR nodes only)
  std::vector<bool> skipped;         // per node: its dispatches run no workgroups in calls of up to kFusedRowsMax rows
};

// Picks the fusions from the graph: an op is fused only into the op that runs next to it in node order (a norm's
// consumers may be several LINEARs, all fused, nothing else between), its skipped output read by nothing else.
// TERN_VULKAN_NO_FUSION=1: none.
FusionPlan plan_fusions(const Model& model);

// The arena for calls of `rows` tokens with the fusions' reads and writes in the values' lifetimes: a fused
// dispatch writes its output when the LINEAR runs and reads its norm's input then, so those values live from (and
// until) the LINEAR, and nothing the dispatch reads shares memory with what it writes in any call.
ArenaPlan plan_fused_arena(const Model& model, const FusionPlan& fusion, int64_t rows);

}  // namespace tern::vk
