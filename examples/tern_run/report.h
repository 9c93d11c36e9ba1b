// SPDX-License-Identifier: MIT
// tern-run's results: a line of text for people, or members of the one JSON object --json prints on stdout.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace tern::run {

// Bytes as a JSON string's text: valid UTF-8 sequences as they are, any other byte b as the code point U+00bb (so
// 0xff reads back as "\u00ff", the character of the same number). The result is valid UTF-8.
std::string json_text(const std::string& bytes);

// The planner's byte counts: a number, or null for the "more than 2^64 - 1 bytes" the library saturates at.
nlohmann::json json_bytes(uint64_t bytes);

// Prints `report` as one line of JSON on stdout, all of it ASCII (other characters as \u escapes), every string in
// it (values and array items) first passed through json_text.
void print_json(const nlohmann::json& report);

}  // namespace tern::run
