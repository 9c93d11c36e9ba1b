#include "core/lsh_input_fold.h"

#include <algorithm>

namespace tern {

std::vector<LshInputFold> find_lsh_input_folds(const Model& model) {
  const auto& nodes = model.nodes();
  const auto& values = model.values();
  std::vector<int> readers(values.size(), 0), last_reader(values.size(), -1);
  for (const Node& node : nodes) {
    for (int v : node.inputs) {
      ++readers[v];
      last_reader[v] = std::max(last_reader[v], node.index);
    }
  }
  // A value only `reader` reads, made by an op of kind `code` (not the model's input or output).
  auto made_for = [&](int v, int reader, fb::OpCode code) {
    const int p = values[v].producer;
    return p >= 0 && nodes[p].code == code && readers[v] == 1 && last_reader[v] == reader && v != model.output_value();
  };
  std::vector<LshInputFold> folds;
  for (const Node& a : nodes) {
    if (a.code != fb::OpCode::ATTENTION) continue;
    if (a.fb_op->params_as_AttentionParams()->kind_type() != fb::AttentionKind::Lsh) continue;
    const int qkv = a.inputs[0];
    if (!made_for(qkv, a.index, fb::OpCode::LINEAR)) continue;
    const Node& proj = nodes[values[qkv].producer];
    const int h = proj.inputs[0];
    if (!made_for(h, proj.index, fb::OpCode::LAYER_NORM)) continue;
    const Node& norm = nodes[values[h].producer];
    const int x = norm.inputs[0];
    if (x == model.input_value() || last_reader[x] <= a.index) continue;
    folds.push_back({a.index, norm.index, proj.index});
  }
  return folds;
}

}  // namespace tern
