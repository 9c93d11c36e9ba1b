// SPDX-License-Identifier: MIT
#include "ops/hidden_state.h"

namespace tern {

HiddenState find_hidden_state(const Model& model) {
  HiddenState h;
  const auto& values = model.values();
  const auto& nodes = model.nodes();
  int producer = values[size_t(model.output_value())].producer;
  // Elementwise ops after the head keep the vocabulary's width: walk back through them.
  while (producer >= 0 && nodes[size_t(producer)].inputs.size() == 1 &&
         (nodes[size_t(producer)].code == fb::OpCode::ACTIVATION || nodes[size_t(producer)].code == fb::OpCode::LOG_SOFTMAX)) {
    producer = values[size_t(nodes[size_t(producer)].inputs[0])].producer;
  }
  if (producer < 0) {
    h.why = "the model's output is not made by an op";
    return h;
  }
  const Node& head = nodes[size_t(producer)];
  if (head.code != fb::OpCode::LINEAR && head.code != fb::OpCode::ADAPTIVE_LOG_SOFTMAX) {
    h.why = "the model's output comes from " + head.label() + ", not from a LINEAR head or an adaptive softmax";
    return h;
  }
  const int value = head.inputs[0];
  if (value == model.input_value() || values[size_t(value)].producer < 0) {
    h.why = "the head " + head.label() + " reads the model input, not a hidden state";
    return h;
  }
  if (values[size_t(value)].dtype != fb::DType::F32) {
    h.why = "the head " + head.label() + " reads a value that is not float32";
    return h;
  }
  h.value = value;
  h.producer = values[size_t(value)].producer;
  h.head = head.index;
  h.width = values[size_t(value)].width;
  return h;
}

}  // namespace tern
