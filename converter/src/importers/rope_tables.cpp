// SPDX-License-Identifier: MIT
#include "importers/rope_tables.h"

#include <algorithm>
#include <cmath>

#include "config.h"

namespace tern::convert {
namespace {

constexpr double kPi = 3.14159265358979323846;

// transformers' `base ** (torch.arange(0, dim, 2).float() / dim)`: the exponent rounded to float32, the power of the
// float32 base computed wide and rounded once.
float pos_freq(double base, int64_t i, int64_t dim) {
  const float e = float(2 * i) / float(dim);
  return float(std::pow(double(float(base)), double(e)));
}

std::vector<float> default_inv_freq(double base, int64_t dim) {
  std::vector<float> f(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) f[size_t(i)] = 1.0f / pos_freq(base, i, dim);
  return f;
}

// A number the scaling object may hold; `fallback` when absent or null.
Result<std::optional<double>> optional_number(const Config& c, const std::string& key) {
  if (!c.has(key)) return std::optional<double>();
  TERN_ASSIGN_OR_RETURN(double v, c.positive_number(key));
  return std::optional<double>(v);
}

// A number where Python's `value or default` applies: absent, null or 0 take the default.
Result<double> number_or(const Config& c, const std::string& key, double fallback) {
  const nlohmann::json* v = c.get(key);
  if (v && v->is_number() && v->get<double>() == 0.0) return fallback;
  return c.positive_number(key, fallback);
}

Result<std::vector<float>> factor_list(const Config& c, const std::string& key, int64_t half) {
  const nlohmann::json* v = c.get(key);
  if (!v) return c.field_error(key, "is missing");
  if (!v->is_array() || int64_t(v->size()) != half)
    return c.field_error(key, "must be a list of " + std::to_string(half) + " numbers (rotary_dim / 2), got " +
                                  Config::show(*v));
  std::vector<float> out;
  for (const auto& x : *v) {
    if (!x.is_number() || !(x.get<double>() > 0) || !std::isfinite(x.get<double>()))
      return c.field_error(key, "must hold positive numbers, got " + Config::show(x));
    out.push_back(float(x.get<double>()));
  }
  return out;
}

// YaRN (transformers' _compute_yarn_parameters).
Status yarn(const Config& c, const RopeConfig& rope, int64_t original_max, RopeTables* t) {
  const int64_t dim = t->rotary_dim;
  TERN_ASSIGN_OR_RETURN(std::optional<double> factor_opt, optional_number(c, "factor"));
  const double factor = factor_opt ? *factor_opt : double(rope.max_position_embeddings) / double(original_max);
  TERN_ASSIGN_OR_RETURN(double beta_fast, number_or(c, "beta_fast", 32.0));
  TERN_ASSIGN_OR_RETURN(double beta_slow, number_or(c, "beta_slow", 1.0));
  TERN_ASSIGN_OR_RETURN(bool truncate, c.boolean("truncate", true));
  auto get_mscale = [](double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; };
  if (c.has("attention_factor")) {
    TERN_ASSIGN_OR_RETURN(double af, c.positive_number("attention_factor"));
    t->attention_factor = float(af);
  } else {
    TERN_ASSIGN_OR_RETURN(double mscale, number_or(c, "mscale", 0.0));
    TERN_ASSIGN_OR_RETURN(double mscale_all_dim, number_or(c, "mscale_all_dim", 0.0));
    t->attention_factor = float(mscale != 0.0 && mscale_all_dim != 0.0
                                    ? get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
                                    : get_mscale(factor, 1.0));
  }
  const double base = rope.theta;
  auto correction_dim = [&](double rotations) {
    return double(dim) * std::log(double(original_max) / (rotations * 2.0 * kPi)) / (2.0 * std::log(base));
  };
  double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // as transformers, against a zero-width ramp
  t->inv_freq.resize(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float pos = pos_freq(base, i, dim);
    const float extrapolation = 1.0f / pos;
    const float interpolation = 1.0f / (float(factor) * pos);
    const float ramp = std::min(1.0f, std::max(0.0f, (float(i) - float(low)) / (float(high) - float(low))));
    const float keep = 1.0f - ramp;  // inv_freq_extrapolation_factor
    t->inv_freq[size_t(i)] = interpolation * (1.0f - keep) + extrapolation * keep;
  }
  return Status::Ok();
}

// Llama 3.1 (transformers' _compute_llama3_parameters).
Status llama3(const Config& c, const RopeConfig& rope, int64_t original_max, RopeTables* t) {
  TERN_ASSIGN_OR_RETURN(double factor, c.positive_number("factor"));
  TERN_ASSIGN_OR_RETURN(double low_freq_factor, c.positive_number("low_freq_factor"));
  TERN_ASSIGN_OR_RETURN(double high_freq_factor, c.positive_number("high_freq_factor"));
  if (!(high_freq_factor > low_freq_factor))
    return c.field_error("high_freq_factor", "must be greater than low_freq_factor (" +
                                                 Config::show(low_freq_factor) + "), got " +
                                                 Config::show(high_freq_factor));
  const double old_context = double(original_max);
  const double low_wavelen = old_context / low_freq_factor, high_wavelen = old_context / high_freq_factor;
  t->inv_freq = default_inv_freq(rope.theta, t->rotary_dim);
  for (float& f : t->inv_freq) {
    const float wavelen = float(2.0 * kPi) / f;
    const float scaled = wavelen > float(low_wavelen) ? f / float(factor) : f;
    const bool medium = !(wavelen < float(high_wavelen)) && !(wavelen > float(low_wavelen));
    if (medium) {
      const float smooth = (float(old_context) / wavelen - float(low_freq_factor)) /
                           float(high_freq_factor - low_freq_factor);
      f = (1.0f - smooth) * scaled / float(factor) + smooth * scaled;
    } else {
      f = scaled;
    }
  }
  return Status::Ok();
}

// LongRoPE (transformers' _compute_longrope_parameters): short_factor gives inv_freq, long_factor long_inv_freq.
Status longrope(const Config& c, const RopeConfig& rope, int64_t original_max, RopeTables* t) {
  const int64_t dim = t->rotary_dim;
  TERN_ASSIGN_OR_RETURN(std::vector<float> short_factor, factor_list(c, "short_factor", dim / 2));
  TERN_ASSIGN_OR_RETURN(std::vector<float> long_factor, factor_list(c, "long_factor", dim / 2));
  TERN_ASSIGN_OR_RETURN(std::optional<double> factor_opt, optional_number(c, "factor"));
  const double factor = factor_opt ? *factor_opt : double(rope.max_position_embeddings) / double(original_max);
  if (c.has("attention_factor")) {
    TERN_ASSIGN_OR_RETURN(double af, c.positive_number("attention_factor"));
    t->attention_factor = float(af);
  } else {
    t->attention_factor =
        factor <= 1.0 ? 1.0f : float(std::sqrt(1.0 + std::log(factor) / std::log(double(original_max))));
  }
  t->inv_freq.resize(size_t(dim / 2));
  t->long_inv_freq.resize(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float pos = pos_freq(rope.theta, i, dim);
    t->inv_freq[size_t(i)] = 1.0f / (short_factor[size_t(i)] * pos);
    t->long_inv_freq[size_t(i)] = 1.0f / (long_factor[size_t(i)] * pos);
  }
  t->scaling = fb::RotaryScaling::LONGROPE;
  t->original_max_positions = original_max;
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& known_rope_types() {
  static const std::vector<std::string> types = {"default", "linear", "dynamic", "yarn", "longrope", "llama3"};
  return types;
}

Result<RopeTables> rope_tables(const RopeConfig& rope) {
  const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json& scaling = rope.scaling ? *rope.scaling : none;
  const Config c(scaling, "config.json", rope.scaling_name + ".");
  if (rope.scaling && !rope.scaling->is_object())
    return Config(nlohmann::json::object()).field_error(rope.scaling_name, "must be an object, got " +
                                                                              Config::show(*rope.scaling));
  RopeTables t;
  // transformers 4.x and 5.x alike: "rope_type", else the legacy "type", else the default rope.
  const std::string type_key = c.has("rope_type") || !c.has("type") ? "rope_type" : "type";
  TERN_ASSIGN_OR_RETURN(t.type, c.string(type_key, std::string("default")));
  const auto& known = known_rope_types();
  if (std::find(known.begin(), known.end(), t.type) == known.end()) {
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    return Unsupported("config.json: field '" + rope.scaling_name + "." + type_key + "' '" + t.type +
                       "' is not supported (known: " + list + ")");
  }
  if (!(rope.theta > 0) || !std::isfinite(rope.theta))
    return c.error("rope_theta must be a positive number, got " + Config::show(rope.theta));
  if (!(rope.partial_rotary_factor > 0 && rope.partial_rotary_factor <= 1))
    return c.error("partial_rotary_factor must be in (0, 1], got " + Config::show(rope.partial_rotary_factor));
  t.rotary_dim = int64_t(double(rope.head_dim) * rope.partial_rotary_factor);
  if (t.rotary_dim < 2 || t.rotary_dim % 2 != 0)
    return c.error("the rotary dimension int(head_dim " + std::to_string(rope.head_dim) + " * partial_rotary_factor " +
                   Config::show(rope.partial_rotary_factor) + ") = " + std::to_string(t.rotary_dim) +
                   " must be even and at least 2");

  // Scaled types know the pretraining length: the config's top-level field first (Phi-3), then the scaling
  // object's, then max_position_embeddings (transformers' standardize_rope_params).
  int64_t original_max = rope.max_position_embeddings;
  if (rope.original_max_position_embeddings) {
    original_max = *rope.original_max_position_embeddings;
  } else if (c.has("original_max_position_embeddings")) {
    TERN_ASSIGN_OR_RETURN(original_max, c.positive_int("original_max_position_embeddings"));
  }

  if (t.type == "default") {
    t.inv_freq = default_inv_freq(rope.theta, t.rotary_dim);
  } else if (t.type == "linear") {
    TERN_ASSIGN_OR_RETURN(double factor, c.positive_number("factor"));
    t.inv_freq = default_inv_freq(rope.theta, t.rotary_dim);
    for (float& f : t.inv_freq) f /= float(factor);
  } else if (t.type == "dynamic") {
    // The weight is the unscaled table; past max_position_embeddings the runtime recomputes the base per call.
    TERN_ASSIGN_OR_RETURN(t.factor, c.positive_number("factor"));
    t.inv_freq = default_inv_freq(rope.theta, t.rotary_dim);
    t.scaling = fb::RotaryScaling::DYNAMIC_NTK;
    t.base = rope.theta;
    t.original_max_positions = rope.max_position_embeddings;
  } else if (t.type == "yarn") {
    TERN_RETURN_IF_ERROR(yarn(c, rope, original_max, &t));
  } else if (t.type == "llama3") {
    TERN_RETURN_IF_ERROR(llama3(c, rope, original_max, &t));
  } else {
    TERN_RETURN_IF_ERROR(longrope(c, rope, original_max, &t));
  }
  for (float f : t.inv_freq)
    if (!std::isfinite(f) || !(f > 0)) return c.error(rope.scaling_name + " gives a frequency that is not finite");
  return t;
}

fb::RotaryParamsT rotary_params(const RopeTables& t, int32_t heads, int32_t head_dim) {
  fb::RotaryParamsT p;
  p.heads = heads;
  p.head_dim = head_dim;
  p.rotary_dim = int32_t(t.rotary_dim);
  p.layout = fb::RotaryLayout::HALF_SPLIT;
  p.attention_factor = t.attention_factor;
  p.scaling = t.scaling;
  p.base = float(t.base);
  p.factor = float(t.factor);
  p.original_max_positions = t.original_max_positions;
  return p;
}

}  // namespace tern::convert
