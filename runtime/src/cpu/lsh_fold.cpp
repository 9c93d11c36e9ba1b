// SPDX-License-Identifier: MIT
#include "cpu/lsh_fold.h"

#include <algorithm>

namespace tern {

std::vector<LshFold> find_lsh_folds(const Model& model) {
  const auto& nodes = model.nodes();
  const auto& values = model.values();
  std::vector<int> readers(values.size(), 0), last_reader(values.size(), -1);
  for (const Node& node : nodes) {
    for (int v : node.inputs) {
      ++readers[v];
      last_reader[v] = std::max(last_reader[v], node.index);
    }
  }
  auto inner_value = [&](int v) { return v != model.input_value() && v != model.output_value(); };
  // A value only node `reader` reads, made by an op of kind `code`.
  auto made_for = [&](int v, int reader, fb::OpCode code) {
    const int p = values[v].producer;
    return p >= 0 && nodes[p].code == code && readers[v] == 1 && last_reader[v] == reader && inner_value(v);
  };
  // The node reading v, where v has exactly one reader and it is of kind `code`; -1 otherwise.
  auto only_reader = [&](int v, fb::OpCode code) {
    if (readers[v] != 1 || !inner_value(v)) return -1;
    const int r = last_reader[v];
    return nodes[r].code == code ? r : -1;
  };
  std::vector<LshFold> folds;
  for (const Node& a : nodes) {
    if (a.code != fb::OpCode::ATTENTION) continue;
    if (a.fb_op->params_as_AttentionParams()->kind_type() != fb::AttentionKind::Lsh) continue;
    const int qkv = a.inputs[0];
    if (!made_for(qkv, a.index, fb::OpCode::LINEAR)) continue;
    const Node& proj = nodes[values[qkv].producer];
    if (proj.weights[0]->dtype != fb::DType::F32) continue;  // the fold packs float32 columns of it
    const int h = proj.inputs[0];
    if (!made_for(h, proj.index, fb::OpCode::LAYER_NORM)) continue;
    const Node& norm = nodes[values[h].producer];
    const int x2 = norm.inputs[0];
    if (x2 == model.input_value() || last_reader[x2] <= a.index) continue;
    LshFold f{a.index, norm.index, proj.index};
    int out = only_reader(a.outputs[0], fb::OpCode::LINEAR);
    if (out >= 0 && nodes[out].weights[0]->dtype != fb::DType::F32) out = -1;
    const int add = out < 0 ? -1 : only_reader(nodes[out].outputs[0], fb::OpCode::ADD);
    if (add >= 0) {
      const Node& r = nodes[add];
      const int p = nodes[out].outputs[0];
      const int x1 = r.inputs[0] == p ? r.inputs[1] : r.inputs[0];
      const int y1 = r.outputs[0];
      // x1 changes while the attention runs: nothing between it and the ADD may read x1.
      bool read_between = false;
      for (int k = a.index + 1; k < add; ++k) {
        read_between = read_between || std::count(nodes[k].inputs.begin(), nodes[k].inputs.end(), x1) > 0;
      }
      if (x1 != p && x1 != x2 && inner_value(x1) && inner_value(y1) && last_reader[x1] == add && !read_between &&
          values[x1].width == values[y1].width) {
        f.output = out;
        f.residual = add;
        f.residual_in = x1;
        f.residual_out = y1;
      }
    }
    folds.push_back(f);
  }
  return folds;
}

}  // namespace tern
