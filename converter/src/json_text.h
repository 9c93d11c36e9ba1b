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
Result<nlohmann::json> parse_json_unique_keys(std::string_view text);

// Compact JSON text of `value` for messages (nlohmann's dump(-1) form), at most `max_chars` characters, cut with
// "..."; it stops writing once past the limit, so a 100 MiB value costs no more than a short one.
std::string json_snippet(const nlohmann::json& value, size_t max_chars = 60);

// A string from the input (a tensor name, a key, a model_type) for messages: at most `max_chars` bytes, cut on a
// UTF-8 character boundary and marked with "...".
std::string clip(std::string_view s, size_t max_chars = 120);

}  // namespace tern::convert
