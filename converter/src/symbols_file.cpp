// SPDX-License-Identifier: MIT
#include "symbols_file.h"

#include <unordered_map>

#include "format/input_file.h"
#include "json_text.h"

namespace tern::convert {
namespace {

constexpr uint64_t kMaxSymbolsFileBytes = uint64_t(256) << 20;  // wt103's 267,735 words take about 3 MiB

// The id of the symbol `key` names (null or absent: -1).
Result<int32_t> special_id(const nlohmann::json& root, const char* key,
                           const std::unordered_map<std::string, int32_t>& ids, const std::string& path) {
  const auto it = root.find(key);
  if (it == root.end() || it->is_null()) return int32_t(-1);
  if (!it->is_string()) return InvalidArgument("'" + path + "': \"" + key + "\" must be a string or null");
  const auto found = ids.find(it->get<std::string>());
  if (found == ids.end()) {
    return InvalidArgument("'" + path + "': \"" + key + "\" names '" + clip(it->get<std::string>()) +
                           "', which is not among the symbols");
  }
  return found->second;
}

}  // namespace

Result<SymbolsFile> read_symbols_file(const std::string& path) {
  TERN_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path));
  TERN_ASSIGN_OR_RETURN(std::string text, file.read_all(kMaxSymbolsFileBytes, "a symbol list"));
  auto parsed = parse_json(text);
  if (!parsed.ok()) return InvalidArgument("'" + path + "': " + parsed.status().message());
  const nlohmann::json& root = parsed.value();
  if (!root.is_object()) return InvalidArgument("'" + path + "' must hold one JSON object");
  SymbolsFile out;
  const auto unit = root.find("unit");
  const std::string unit_name = unit != root.end() && unit->is_string() ? unit->get<std::string>() : "";
  if (unit_name == "words") {
    out.unit = fb::SymbolUnit::WORDS;
  } else if (unit_name == "characters") {
    out.unit = fb::SymbolUnit::CHARACTERS;
  } else if (unit_name == "bytes-decimal") {
    out.unit = fb::SymbolUnit::BYTES_DECIMAL;
  } else {
    return InvalidArgument("'" + path + "': \"unit\" must be words, characters or bytes-decimal, not " +
                           (unit == root.end() ? std::string("absent") : json_snippet(*unit)));
  }
  const auto symbols = root.find("symbols");
  if (symbols == root.end() || !symbols->is_array() || symbols->empty()) {
    return InvalidArgument("'" + path + "': \"symbols\" must be a non-empty array of strings");
  }
  std::unordered_map<std::string, int32_t> ids;
  out.symbols.reserve(symbols->size());
  for (size_t i = 0; i < symbols->size(); ++i) {
    const nlohmann::json& s = (*symbols)[i];
    if (!s.is_string() || s.get<std::string>().empty()) {
      return InvalidArgument("'" + path + "': symbols[" + std::to_string(i) + "] must be a non-empty string, not " +
                             json_snippet(s));
    }
    const std::string& sym = s.get_ref<const std::string&>();
    const auto [it, fresh] = ids.emplace(sym, int32_t(i));
    if (!fresh) {
      return InvalidArgument("'" + path + "': symbols[" + std::to_string(i) + "] repeats symbols[" +
                             std::to_string(it->second) + "] ('" + clip(sym) + "')");
    }
    out.symbols.push_back(sym);
  }
  TERN_ASSIGN_OR_RETURN(out.eos_id, special_id(root, "eos", ids, path));
  TERN_ASSIGN_OR_RETURN(out.unk_id, special_id(root, "unk", ids, path));
  if (out.unit == fb::SymbolUnit::CHARACTERS) {
    const auto space = root.find("space");
    if (space == root.end() || !space->is_string() || space->get<std::string>().empty()) {
      return InvalidArgument("'" + path + "': \"space\", the symbol of a space, must be given for characters");
    }
    out.space = space->get<std::string>();
  }
  const auto lower = root.find("lower_case");
  if (lower != root.end() && !lower->is_boolean()) {
    return InvalidArgument("'" + path + "': \"lower_case\" must be true or false");
  }
  out.lower_case = lower != root.end() && lower->get<bool>();
  return out;
}

}  // namespace tern::convert
