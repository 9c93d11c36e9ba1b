// SPDX-License-Identifier: MIT
#include "config.h"

#include "json_text.h"

#include <cmath>
#include <limits>

namespace tern::convert {

// Sizes end up in int32 schema fields (heads, head_dim); anything larger is a typo, not a model.
constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

Config::Config(const nlohmann::json& json, std::string file, std::string prefix)
    : json_(json), file_(std::move(file)), prefix_(std::move(prefix)) {}

const nlohmann::json* Config::get(const std::string& key) const {
  if (!json_.is_object()) return nullptr;
  auto it = json_.find(key);
  if (it == json_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool Config::has(const std::string& key) const { return get(key) != nullptr; }

std::string Config::show(const nlohmann::json& value) { return json_snippet(value); }

Status Config::error(const std::string& message) const { return InvalidModel(file_ + ": " + message); }

Status Config::field_error(const std::string& key, const std::string& what) const {
  return error("field '" + prefix_ + key + "' " + what);
}

Result<int64_t> Config::positive_int(const std::string& key, std::optional<int64_t> fallback) const {
  return integer(key, 1, fallback);
}

Result<int64_t> Config::integer(const std::string& key, int64_t min, std::optional<int64_t> fallback) const {
  const nlohmann::json* v = get(key);
  if (!v) {
    if (fallback) return *fallback;
    return field_error(key, "is missing");
  }
  if (!v->is_number_unsigned() || v->get<uint64_t>() < uint64_t(min) || v->get<uint64_t>() > uint64_t(kMaxInt)) {
    const std::string kind = min == 1 ? "a positive integer" : "an integer >= " + std::to_string(min);
    return field_error(key, "must be " + kind + " (at most " + std::to_string(kMaxInt) + "), got " + show(*v));
  }
  return int64_t(v->get<uint64_t>());
}

Result<bool> Config::boolean(const std::string& key, std::optional<bool> fallback) const {
  const nlohmann::json* v = get(key);
  if (!v) {
    if (fallback) return *fallback;
    return field_error(key, "is missing");
  }
  if (!v->is_boolean()) return field_error(key, "must be true or false, got " + show(*v));
  return v->get<bool>();
}

Result<double> Config::positive_number(const std::string& key, std::optional<double> fallback) const {
  const nlohmann::json* v = get(key);
  if (!v) {
    if (fallback) return *fallback;
    return field_error(key, "is missing");
  }
  if (!v->is_number() || !(v->get<double>() > 0) || !std::isfinite(v->get<double>()))
    return field_error(key, "must be a positive number, got " + show(*v));
  return v->get<double>();
}

Result<std::string> Config::string(const std::string& key, std::optional<std::string> fallback) const {
  const nlohmann::json* v = get(key);
  if (!v) {
    if (fallback) return *fallback;
    return field_error(key, "is missing");
  }
  if (!v->is_string()) return field_error(key, "must be a string, got " + show(*v));
  return v->get<std::string>();
}

Result<std::string> Config::choice(const std::string& key, const std::vector<std::string>& allowed,
                                   std::optional<std::string> fallback) const {
  TERN_ASSIGN_OR_RETURN(std::string s, string(key, std::move(fallback)));
  for (const auto& a : allowed)
    if (s == a) return s;
  std::string list;
  for (size_t i = 0; i < allowed.size(); ++i)
    list += std::string(i ? ", " : "") + "\"" + allowed[i] + "\"";
  return field_error(key, "must be one of " + list + "; got " + show(nlohmann::json(s)));
}

}  // namespace tern::convert
