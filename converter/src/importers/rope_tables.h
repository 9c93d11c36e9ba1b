// SPDX-License-Identifier: MIT
// Rotary position embedding tables computed at conversion, as Hugging Face transformers' modeling_rope_utils.py
// computes inv_freq and attention_factor for each rope type (default, linear, dynamic, yarn, longrope, llama3), in
// float32 where transformers computes in float32. The ROTARY op (schema/tern.fbs) reads the tables as weights;
// dynamic NTK and LongRoPE's long table are chosen per call by the runtime (RotaryParams.scaling).
//
// Where the parameters come from (docs/models-llama.md, "RoPE"): config.json's rope_scaling (transformers 4.x) or
// rope_parameters (5.x, with rope_theta inside; Gemma 3: one per layer type), the legacy "type" key accepted for
// "rope_type", rope_theta and partial_rotary_factor beside them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/status.h"
#include "graph_builder.h"

namespace tern::convert {

// One RoPE as a config describes it.
struct RopeConfig {
  double theta = 10000.0;                 // rope_theta (the family's default when config.json has none)
  int64_t head_dim = 0;
  double partial_rotary_factor = 1.0;     // rotary_dim = int(head_dim * partial_rotary_factor)
  int64_t max_position_embeddings = 0;
  // config.json's top-level original_max_position_embeddings (Phi-3 keeps it there): for llama3, yarn and
  // longrope it takes priority over the scaling object's, as transformers' standardize_rope_params gives it.
  std::optional<int64_t> original_max_position_embeddings;
  // The scaling object (rope_scaling or one rope_parameters entry), nullptr for none (the default rope), and the
  // name messages give it, e.g. "rope_scaling" or "rope_parameters.full_attention".
  const nlohmann::json* scaling = nullptr;
  std::string scaling_name = "rope_scaling";
};

struct RopeTables {
  std::string type;       // "default", "linear", ...
  int64_t rotary_dim = 0;
  std::vector<float> inv_freq;       // [rotary_dim / 2]
  std::vector<float> long_inv_freq;  // [rotary_dim / 2], longrope only
  float attention_factor = 1.0f;
  fb::RotaryScaling scaling = fb::RotaryScaling::STATIC;
  double base = 0.0;      // dynamic: rope_theta
  double factor = 1.0;    // dynamic
  int64_t original_max_positions = 0;  // dynamic, longrope
};

// The rope types transformers defines that the converter computes.
const std::vector<std::string>& known_rope_types();

// The tables of `rope`. An unknown rope type, a missing required key, or a value transformers could not use (a
// factor list of the wrong length, equal llama3 frequency factors) is an error naming the key, e.g.
//   config.json: field 'rope_scaling.rope_type' 'foo' is not supported (known: default, linear, ...)
Result<RopeTables> rope_tables(const RopeConfig& rope);

// ROTARY parameters for `tables` over `heads` blocks of `head_dim` columns (HALF_SPLIT, Hugging Face's rotate_half).
fb::RotaryParamsT rotary_params(const RopeTables& tables, int32_t heads, int32_t head_dim);

}  // namespace tern::convert
