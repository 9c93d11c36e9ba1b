// SPDX-License-Identifier: MIT
// JSON from untrusted files (config.json, safetensors headers), parsed and shown with bounds a hostile input cannot
// push past: nesting depth, the length of what a message quotes, and time linear in the text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "format/status.h"

namespace tern::convert {

// Arrays and objects nest at most this deep; a real config or header uses 3 or 4 levels.
constexpr int kMaxJsonDepth = 64;

// Parses `text` (the whole of it must be one JSON value) without recursion and without quadratic steps. On failure
// the Status says why, without the file's name (callers prefix it): "not valid JSON (syntax error at byte 17)",
// "nested deeper than 64 levels of arrays and objects". When `duplicate_key` is given it receives the first key that
// appears twice in the top-level object ("" if none); nlohmann would otherwise keep the last silently.
Result<nlohmann::json> parse_json(std::string_view text, std::string* duplicate_key = nullptr);

// parse_json, refusing any object (at any depth) with a key that appears twice, naming it: "the key \"a\" appears
// twice in one object". For files (tokenizer.json) whose maps a reader would otherwise take the last of silently.
// Numbers with a fraction or an exponent become the double serde_json_f64 gives, as the `tokenizers` library reads
// them; one out of its range is refused.
Result<nlohmann::json> parse_json_unique_keys(std::string_view text);

// The double serde_json (without its float_roundtrip feature, as the `tokenizers` library builds it) reads from the
// JSON number `text`: the decimal digits gathered into a u64 (digits past its range dropped, those of the integer
// part counted in the exponent), converted to double, then multiplied or divided by the double nearest 10^|exponent|
// (below 1e-308 divided by 1e308 first). That is not always the double nearest the text, and a Unigram model's
// scores read otherwise can break ties in its segmentation differently. false when the value overflows.
bool serde_json_f64(std::string_view text, double* value);

// Compact JSON text of `value` for messages (nlohmann's dump(-1) form), at most `max_chars` characters, cut with
// "..."; it stops writing once past the limit, so a 100 MiB value costs no more than a short one.
std::string json_snippet(const nlohmann::json& value, size_t max_chars = 60);

// A string from the input (a tensor name, a key, a model_type) for messages: at most `max_chars` bytes, cut on a
// UTF-8 character boundary and marked with "...".
std::string clip(std::string_view s, size_t max_chars = 120);

}  // namespace tern::convert
