// SPDX-License-Identifier: MIT
// The model's last hidden state: the value the output head reads, as Hugging Face's base models (LlamaModel,
// GPT2Model, ...) return it as last_hidden_state, after the final norm and before the head. Apps that compute
// embeddings read it (tern_session_forward_hidden) instead of the logits.
#pragma once

#include <cstdint>
#include <string>

#include "format/model.h"

namespace tern {

struct HiddenState {
  int value = -1;     // the value index of the hidden state [n, width]; -1 when the model has none (see why)
  int producer = -1;  // the op that writes it (the final norm)
  int head = -1;      // the op that reads it to make the logits: a LINEAR or an ADAPTIVE_LOG_SOFTMAX
  int64_t width = 0;  // d
  std::string why;    // when value is -1: why the model has no hidden state to give
};

// From the model's output value back through the elementwise ops that may follow the head (a SOFTCAP or other
// ACTIVATION, a LOG_SOFTMAX) to the head: its input is the hidden state. A model whose output comes from another op,
// or whose head reads the model input directly, has none.
HiddenState find_hidden_state(const Model& model);

}  // namespace tern
