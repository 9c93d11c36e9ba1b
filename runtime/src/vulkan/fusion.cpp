// SPDX-License-Identifier: MIT
#include "vulkan/fusion.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tern::vk {
namespace {

// A norm the prologue computes: LAYER_NORM, or RMS_NORM over whole rows (one group, every column).
bool whole_row_norm(const Model& model, const Node& node) {
  if (node.code == fb::OpCode::LAYER_NORM) return true;
  if (node.code != fb::OpCode::RMS_NORM) return false;
  const auto* p = node.fb_op->params_as_RmsNormParams();
  const int64_t columns = node.weights[0]->shape[0];
  return (p->group() <= 0 || p->group() == columns) && columns == model.values()[size_t(node.outputs[0])].width;
}

}  // namespace

FusionPlan plan_fusions(const Model& model) {
  const auto& nodes = model.nodes();
  FusionPlan plan;
  plan.linear.assign(nodes.size(), LinearFusion{});
  plan.skipped.assign(nodes.size(), false);
  for (const Node& node : nodes) {
    if (node.code == fb::OpCode::LINEAR) plan.linear[size_t(node.index)].output = node.outputs[0];
  }
  const char* off = std::getenv("TERN_VULKAN_NO_FUSION");
  if (off && std::strcmp(off, "1") == 0) return plan;
  plan.enabled = true;

  std::vector<std::vector<int>> consumers(model.values().size());  // per value: the nodes reading it, in order
  for (const Node& node : nodes) {
    for (int v : node.inputs) {
      if (v >= 0 && (consumers[size_t(v)].empty() || consumers[size_t(v)].back() != node.index)) {
        consumers[size_t(v)].push_back(node.index);
      }
    }
  }
  const int model_output = model.output_value();
  // The one node reading v, when it is the node right after `after` and v is not the model's output; else null.
  auto next_sole_reader = [&](int v, int after) -> const Node* {
    if (v == model_output || consumers[size_t(v)].size() != 1 || consumers[size_t(v)][0] != after + 1) return nullptr;
    return &nodes[size_t(after + 1)];
  };
  // The epilogue of a LINEAR: LINEAR -> ACTIVATION -> ADD, each the next node and the sole reader of the one before.
  auto epilogue = [&](const Node& node) {
    LinearFusion f;
    int last = node.outputs[0], at = node.index;
    const Node* next = next_sole_reader(last, at);
    if (next && next->code == fb::OpCode::ACTIVATION) {
      f.activation = next->index;
      last = next->outputs[0];
      at = next->index;
      next = next_sole_reader(last, at);
    }
    if (next && next->code == fb::OpCode::ADD && next->inputs[0] != next->inputs[1]) {
      const int other = next->inputs[0] == last ? next->inputs[1] : next->inputs[0];
      if (model.values()[size_t(other)].producer < node.index) {  // complete before the LINEAR runs
        f.residual = next->index;
        f.residual_value = other;
        last = next->outputs[0];
      }
    }
    f.output = last;
    return f;
  };

  // Prologues: a whole-row norm whose output only LINEARs read, the nodes right after it, none with a residual (its
  // binding is the norm's weights', linear_rows.comp's 6 and 7).
  for (const Node& node : nodes) {
    if (node.code == fb::OpCode::LINEAR) plan.linear[size_t(node.index)] = epilogue(node);
  }
  for (const Node& norm : nodes) {
    if (!whole_row_norm(model, norm) || norm.outputs[0] == model_output) continue;
    const std::vector<int>& readers = consumers[size_t(norm.outputs[0])];
    bool fits = !readers.empty();
    for (size_t i = 0; i < readers.size() && fits; ++i) {
      const Node& linear = nodes[size_t(readers[i])];
      fits = readers[i] == norm.index + 1 + int(i) && linear.code == fb::OpCode::LINEAR &&
             linear.inputs[0] == norm.outputs[0] && plan.linear[size_t(linear.index)].residual < 0;
    }
    if (!fits) continue;
    plan.skipped[size_t(norm.index)] = true;
    for (int r : readers) plan.linear[size_t(r)].norm = norm.index;
  }
  for (const LinearFusion& f : plan.linear) {
    if (f.activation >= 0) plan.skipped[size_t(f.activation)] = true;
    if (f.residual >= 0) plan.skipped[size_t(f.residual)] = true;
  }
  return plan;
}

ArenaPlan plan_fused_arena(const Model& model, const FusionPlan& fusion, int64_t rows) {
  const auto& nodes = model.nodes();
  std::vector<int> first, last;
  value_lifetimes(model, std::vector<bool>(nodes.size(), true), &first, &last);
  for (const Node& node : nodes) {
    if (node.code != fb::OpCode::LINEAR) continue;
    const LinearFusion& f = fusion.linear[size_t(node.index)];
    const int out = f.output;
    if (out >= 0 && first[size_t(out)] > node.index) first[size_t(out)] = node.index;
    if (f.norm >= 0) {
      const int u = nodes[size_t(f.norm)].inputs[0];
      last[size_t(u)] = std::max(last[size_t(u)], node.index);
    }
  }
  return place_values(model, first, last, rows);
}

}  // namespace tern::vk
