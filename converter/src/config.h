// SPDX-License-Identifier: MIT
// Typed, validated access to a checkpoint's config.json. Every failure is one line naming the field:
//   config.json: field 'hidden_size' must be a positive integer, got "abc"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/status.h"

namespace tern::convert {

class Config {
 public:
  // `json` must outlive the Config. `prefix` qualifies field names of nested objects, e.g. "attention[3].".
  explicit Config(const nlohmann::json& json, std::string file = "config.json", std::string prefix = "");

  // True when `key` is present and not null; null counts as absent so optional fields take their default.
  bool has(const std::string& key) const;
  const nlohmann::json* get(const std::string& key) const;  // nullptr when absent or null

  // Without a fallback the field is required.
  Result<int64_t> positive_int(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const;
  // An integer in [min, INT32_MAX] (min >= 0).
  Result<int64_t> integer(const std::string& key, int64_t min, std::optional<int64_t> fallback = std::nullopt) const;
  Result<bool> boolean(const std::string& key, std::optional<bool> fallback = std::nullopt) const;
  Result<double> positive_number(const std::string& key, std::optional<double> fallback = std::nullopt) const;
  Result<std::string> string(const std::string& key, std::optional<std::string> fallback = std::nullopt) const;
  // A string that must be one of `allowed`.
  Result<std::string> choice(const std::string& key, const std::vector<std::string>& allowed,
                             std::optional<std::string> fallback = std::nullopt) const;

  // "config.json: <message>"
  Status error(const std::string& message) const;
  // "config.json: field '<prefix><key>' <what>"
  Status field_error(const std::string& key, const std::string& what) const;
  const std::string& prefix() const { return prefix_; }
  // Short JSON text of a value for messages.
  static std::string show(const nlohmann::json& value);

 private:
  const nlohmann::json& json_;
  std::string file_;
  std::string prefix_;
};

}  // namespace tern::convert
