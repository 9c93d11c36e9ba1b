// SPDX-License-Identifier: MIT
// ROTARY: qkv [n, w] -> the same row with rotary position embedding on its first `heads` blocks of head_dim columns.
// weights: inv_freq [rotary_dim / 2], then long_inv_freq [rotary_dim / 2] (LONGROPE only).
#include "ops/rotary.h"

#include <cmath>
#include <string>

#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

Status check_table(const Node& node, int slot, int64_t pairs) {
  TERN_RETURN_IF_ERROR(expect_shape(node, slot, {pairs}));
  const float* f = node.weights[size_t(slot)]->f32();
  for (int64_t i = 0; i < pairs; ++i) {
    if (!std::isfinite(f[i]) || f[i] < 0.0f) {
      return InvalidModel(node.label() + ": frequency " + std::to_string(i) + " of '" + node.weights[size_t(slot)]->name +
                          "' is not a finite non-negative number");
    }
  }
  return Status::Ok();
}

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  const auto* p = node.fb_op->params_as_RotaryParams();
  const int64_t width = values[node.inputs[0]].width;
  TERN_RETURN_IF_ERROR(expect_width(node, values, true, 0, width));
  if (p->heads() < 1 || p->head_dim() < 2 || p->head_dim() > 4096 || int64_t(p->heads()) * p->head_dim() > width) {
    return InvalidModel(node.label() + ": heads " + std::to_string(p->heads()) + " of head_dim " +
                        std::to_string(p->head_dim()) + " must fit the row of " + std::to_string(width) + " columns");
  }
  if (p->rotary_dim() < 2 || p->rotary_dim() % 2 != 0 || p->rotary_dim() > p->head_dim()) {
    return InvalidModel(node.label() + ": rotary_dim " + std::to_string(p->rotary_dim()) +
                        " must be even and in [2, head_dim " + std::to_string(p->head_dim()) + "]");
  }
  if (p->layout() != fb::RotaryLayout::HALF_SPLIT && p->layout() != fb::RotaryLayout::INTERLEAVED) {
    return InvalidModel(node.label() + ": unknown rotary layout " + std::to_string(int(p->layout())));
  }
  if (!(std::isfinite(p->attention_factor()) && p->attention_factor() > 0.0f)) {
    return InvalidModel(node.label() + ": attention_factor must be positive and finite");
  }
  const int64_t pairs = p->rotary_dim() / 2;
  if (!node.weights[0]) return InvalidModel(node.label() + ": inv_freq is required");
  TERN_RETURN_IF_ERROR(check_table(node, 0, pairs));
  const bool has_long = node.weights.size() > 1 && node.weights[1];
  switch (p->scaling()) {
    case fb::RotaryScaling::STATIC: break;
    case fb::RotaryScaling::DYNAMIC_NTK:
      if (!(std::isfinite(p->base()) && p->base() > 0.0f) || !(std::isfinite(p->factor()) && p->factor() >= 1.0f)) {
        return InvalidModel(node.label() + ": dynamic scaling needs a positive finite base and a finite factor >= 1");
      }
      if (p->rotary_dim() < 4) return InvalidModel(node.label() + ": dynamic scaling needs rotary_dim >= 4");
      break;
    case fb::RotaryScaling::LONGROPE:
      if (!has_long) return InvalidModel(node.label() + ": LONGROPE scaling needs long_inv_freq");
      TERN_RETURN_IF_ERROR(check_table(node, 1, pairs));
      break;
    default: return InvalidModel(node.label() + ": unknown rotary scaling " + std::to_string(int(p->scaling())));
  }
  if (has_long && p->scaling() != fb::RotaryScaling::LONGROPE) {
    return InvalidModel(node.label() + ": only LONGROPE scaling takes long_inv_freq");
  }
  if (p->scaling() != fb::RotaryScaling::STATIC && p->original_max_positions() < 1) {
    return InvalidModel(node.label() + ": original_max_positions must be positive");
  }
  return Status::Ok();
}

// Static frequencies rotate each row on its own; per-call ones depend on the call's last position, so a call is
// never split (cut into appends, its frequencies would change at the cut).
Streaming streaming(const Node& node) {
  return node.fb_op->params_as_RotaryParams()->scaling() == fb::RotaryScaling::STATIC ? Streaming::kRowWise
                                                                                       : Streaming::kWholeCall;
}

}  // namespace

Rotary Rotary::of(const Node& node) {
  const auto* p = node.fb_op->params_as_RotaryParams();
  Rotary r;
  r.heads = p->heads();
  r.head_dim = p->head_dim();
  r.rotary_dim = p->rotary_dim();
  r.interleaved = p->layout() == fb::RotaryLayout::INTERLEAVED;
  r.attention_factor = p->attention_factor();
  r.scaling = p->scaling();
  r.base = p->base();
  r.factor = p->factor();
  r.original_max_positions = p->original_max_positions();
  r.inv_freq = node.weights[0]->f32();
  r.long_inv_freq = node.weights.size() > 1 && node.weights[1] ? node.weights[1]->f32() : nullptr;
  return r;
}

void Rotary::frequencies(int64_t call_end, float* f) const {
  const int n = pairs();
  const bool beyond = call_end > original_max_positions;
  if (scaling == fb::RotaryScaling::DYNAMIC_NTK && beyond) {
    // In float32, as transformers evaluates it: the base grows with the sequence, the frequencies follow it.
    const float dim = float(rotary_dim);
    const float grown = factor * float(call_end) / float(original_max_positions) - (factor - 1.0f);
    const float b = base * std::pow(grown, dim / (dim - 2.0f));
    for (int i = 0; i < n; ++i) f[i] = 1.0f / std::pow(b, float(2 * i) / dim);
    return;
  }
  const float* table = scaling == fb::RotaryScaling::LONGROPE && beyond ? long_inv_freq : inv_freq;
  for (int i = 0; i < n; ++i) f[i] = table[i];
}

void Rotary::cos_sin_table(int64_t pos0, int64_t n, int64_t call_end, float* f, float* cos_sin) const {
  const int count = pairs();
  frequencies(call_end, f);
  for (int64_t i = 0; i < n; ++i) {
    float* c = cos_sin + 2 * i * count;  // then sin at c + count
    for (int k = 0; k < count; ++k) rotary_cos_sin(pos0 + i, f[k], attention_factor, &c[k], &c[count + k]);
  }
}

const Node* rotary_feeding(const Model& model, const Node& attention) {
  if (attention.inputs.empty()) return nullptr;
  const int value = attention.inputs[0];
  const int producer = model.values()[size_t(value)].producer;
  if (producer < 0 || model.nodes()[size_t(producer)].code != fb::OpCode::ROTARY) return nullptr;
  for (const Node& node : model.nodes()) {
    if (node.index == attention.index) continue;
    for (int v : node.inputs) {
      if (v == value) return nullptr;
    }
  }
  return &model.nodes()[size_t(producer)];
}

void rotary_cos_sin(int64_t position, float f, float attention_factor, float* cos_out, float* sin_out) {
  const float angle = float(position) * f;
  *cos_out = float(std::cos(double(angle))) * attention_factor;
  *sin_out = float(std::sin(double(angle))) * attention_factor;
}

void ref::rotary(const Rotary& r, const float* x, int64_t width, int64_t n, int64_t pos0, int64_t call_end,
                 float* out) {
  std::vector<float> f(size_t(r.pairs()));
  r.frequencies(call_end, f.data());
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * width;
    float* oi = out + i * width;
    for (int64_t c = 0; c < width; ++c) oi[c] = xi[c];
    for (int h = 0; h < r.heads; ++h) {
      const int64_t base = int64_t(h) * r.head_dim;
      for (int k = 0; k < r.pairs(); ++k) {
        float c, s;
        rotary_cos_sin(pos0 + i, f[size_t(k)], r.attention_factor, &c, &s);
        const double a = xi[base + r.first(k)], b = xi[base + r.second(k)];
        oi[base + r.first(k)] = float(a * c - b * s);
        oi[base + r.second(k)] = float(b * c + a * s);
      }
    }
  }
}

extern const OpDef kRotaryOp = {fb::OpCode::ROTARY, "ROTARY", 1, 1, 2, fb::OpParams::RotaryParams,
                                validate, nullptr, nullptr, streaming, nullptr, nullptr, nullptr};

}  // namespace tern
