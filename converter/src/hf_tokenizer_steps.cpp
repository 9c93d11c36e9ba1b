// SPDX-License-Identifier: MIT
#include "hf_tokenizer_steps.h"

#include <limits>

#include "json_text.h"
#include "text/hf_regex.h"
#include "text/sentencepiece_tables.h"
#include "text/token_limits.h"

namespace tern::convert {
namespace {

using nlohmann::json;

// "ByteLevel, Split, ..." for the messages that refuse a type.
std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

// The component's "type" (tokenizers' tagged form; the legacy untagged form is not read). `what` is "normalizer",
// "pre_tokenizer", "decoder" or "post_processor".
Result<std::string> component_type(const json& value, const Config& c, const char* what,
                                   const std::vector<std::string>& supported) {
  if (!value.is_object()) return c.error(std::string(what) + " must be an object with a \"type\", got " + Config::show(value));
  TERN_ASSIGN_OR_RETURN(std::string type, c.string("type"));
  for (const std::string& s : supported)
    if (type == s) return type;
  return c.error(std::string(what) + " type '" + clip(type) + "' is not supported (supported: " + join(supported) + ")");
}

// A Rust `char` field: a string of exactly one Unicode scalar value (the parser has checked the UTF-8).
Result<std::string> one_char(const Config& c, const std::string& key) {
  TERN_ASSIGN_OR_RETURN(std::string s, c.string(key));
  size_t chars = 0;
  for (unsigned char b : s) chars += (b & 0xC0) != 0x80;
  if (chars != 1) return c.field_error(key, "must be one character, got " + Config::show(json(s)));
  return s;
}

// A usize field stored as int32.
Result<int32_t> count(const Config& c, const std::string& key) {
  TERN_ASSIGN_OR_RETURN(int64_t v, c.integer(key, 0));
  return int32_t(v);
}

// SplitPattern / ReplacePattern: {"String": s} (matched literally) or {"Regex": r} (Oniguruma syntax), a regex
// compiled now as tokenizers compiles it when it loads the file.
// A Replace or Prepend normalizer's content: at most kMaxReplacementBytes, as the runtime checks at load.
Status check_replacement(const Config& c, const std::string& key, const std::string& content) {
  if (content.size() <= kMaxReplacementBytes) return Status::Ok();
  return c.field_error(key, "is " + std::to_string(content.size()) +
                                " bytes long; a normalization rule may write at most " +
                                std::to_string(kMaxReplacementBytes));
}

Status read_pattern(const Config& c, HfStepSpec* step) {
  const json* p = c.get("pattern");
  if (!p) return c.field_error("pattern", "is missing");
  const auto bad = [&] {
    return c.field_error("pattern", "must be {\"String\": text} or {\"Regex\": expression}, got " + Config::show(*p));
  };
  if (!p->is_object() || p->size() != 1) return bad();
  const auto it = p->begin();
  if (!it->is_string() || (it.key() != "String" && it.key() != "Regex")) return bad();
  step->pattern = it->get<std::string>();
  step->pattern_is_regex = it.key() == "Regex";
  if (!step->pattern_is_regex) return Status::Ok();
  // By size first: a pattern of megabytes is refused before any compiling work.
  if (step->pattern.size() > HfRegex::kMaxPatternBytes)
    return c.field_error("pattern", "is a regular expression of " + std::to_string(step->pattern.size()) +
                                        " bytes, above the " + std::to_string(HfRegex::kMaxPatternBytes) +
                                        " bytes the tokenizer compiles");
  auto compiled = HfRegex::compile(step->pattern);
  if (!compiled.ok())
    return c.field_error("pattern", "regular expression " + Config::show(json(step->pattern)) +
                                        " cannot be compiled: " + compiled.status().message());
  return Status::Ok();
}

Result<fb::HfSplitBehavior> split_behavior(const Config& c, std::optional<std::string> fallback) {
  TERN_ASSIGN_OR_RETURN(std::string b, c.choice("behavior", {"Removed", "Isolated", "MergedWithPrevious",
                                                             "MergedWithNext", "Contiguous"}, std::move(fallback)));
  if (b == "Removed") return fb::HfSplitBehavior::REMOVED;
  if (b == "Isolated") return fb::HfSplitBehavior::ISOLATED;
  if (b == "MergedWithPrevious") return fb::HfSplitBehavior::MERGED_WITH_PREVIOUS;
  if (b == "MergedWithNext") return fb::HfSplitBehavior::MERGED_WITH_NEXT;
  return fb::HfSplitBehavior::CONTIGUOUS;
}

// ByteLevel (pre_tokenizers/byte_level.rs), the pre-tokenizer and the decoder alike: add_prefix_space and
// trim_offsets are required, use_regex defaults to true.
Status read_byte_level(const Config& c, HfStepSpec* step) {
  TERN_ASSIGN_OR_RETURN(step->add_prefix_space, c.boolean("add_prefix_space"));
  TERN_RETURN_IF_ERROR(c.boolean("trim_offsets").status());
  TERN_ASSIGN_OR_RETURN(step->use_regex, c.boolean("use_regex", true));
  return Status::Ok();
}

// Metaspace (pre_tokenizers/metaspace.rs), also the decoder: replacement, prepend_scheme (default "always"), split
// (default true), and the legacy add_prefix_space, whose false must come with prepend_scheme "never".
Status read_metaspace(const Config& c, HfStepSpec* step) {
  TERN_ASSIGN_OR_RETURN(step->content, one_char(c, "replacement"));
  TERN_ASSIGN_OR_RETURN(std::string scheme, c.choice("prepend_scheme", {"always", "first", "never"}, "always"));
  step->prepend_scheme = scheme == "always"  ? fb::HfPrependScheme::ALWAYS
                         : scheme == "first" ? fb::HfPrependScheme::FIRST
                                             : fb::HfPrependScheme::NEVER;
  if (c.has("add_prefix_space")) {
    TERN_ASSIGN_OR_RETURN(bool add, c.boolean("add_prefix_space"));
    if (!add && step->prepend_scheme != fb::HfPrependScheme::NEVER)
      return c.field_error("add_prefix_space", "is false but prepend_scheme is \"" + scheme + "\" (tokenizers: "
                                               "add_prefix_space does not match declared prepend_scheme)");
  }
  TERN_ASSIGN_OR_RETURN(step->split, c.boolean("split", true));
  return Status::Ok();
}

// A Sequence's list member, each item read by `one` with its own place in messages.
template <class ReadOne>
Status read_sequence(const Config& c, const std::string& key, ReadOne one) {
  const json* items = c.get(key);
  if (!items || !items->is_array()) return c.field_error(key, "must be a list, got " + (items ? Config::show(*items) : "nothing"));
  for (size_t i = 0; i < items->size(); ++i)
    TERN_RETURN_IF_ERROR(one((*items)[i], c.prefix() + key + "[" + std::to_string(i) + "]."));
  return Status::Ok();
}

Status read_normalizer_at(const json& value, const std::string& file, const std::string& where,
                          std::vector<HfStepSpec>* out) {
  const Config c(value, file, where);
  TERN_ASSIGN_OR_RETURN(const std::string type,
                        component_type(value, c, "normalizer",
                                       {"NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Prepend", "Replace", "Strip",
                                        "StripAccents", "Precompiled", "Sequence"}));
  if (type == "Sequence") {
    return read_sequence(c, "normalizers", [&](const json& item, const std::string& at) {
      return read_normalizer_at(item, file, at, out);
    });
  }
  HfStepSpec step;
  using N = fb::HfNormalizer;
  if (type == "NFC") {
    step.kind = uint8_t(N::NFC);
  } else if (type == "NFD") {
    step.kind = uint8_t(N::NFD);
  } else if (type == "NFKC") {
    step.kind = uint8_t(N::NFKC);
  } else if (type == "NFKD") {
    step.kind = uint8_t(N::NFKD);
  } else if (type == "Lowercase") {
    step.kind = uint8_t(N::LOWERCASE);
  } else if (type == "StripAccents") {
    step.kind = uint8_t(N::STRIP_ACCENTS);
  } else if (type == "Prepend") {
    step.kind = uint8_t(N::PREPEND);
    TERN_ASSIGN_OR_RETURN(step.content, c.string("prepend"));
    TERN_RETURN_IF_ERROR(check_replacement(c, "prepend", step.content));
  } else if (type == "Replace") {
    step.kind = uint8_t(N::REPLACE);
    TERN_RETURN_IF_ERROR(read_pattern(c, &step));
    TERN_ASSIGN_OR_RETURN(step.content, c.string("content"));
    TERN_RETURN_IF_ERROR(check_replacement(c, "content", step.content));
  } else if (type == "Strip") {
    step.kind = uint8_t(N::STRIP);
    TERN_ASSIGN_OR_RETURN(step.left, c.boolean("strip_left"));
    TERN_ASSIGN_OR_RETURN(step.right, c.boolean("strip_right"));
  } else {  // Precompiled: the charsmap as base64 (spm_precompiled's serialization)
    step.kind = uint8_t(N::PRECOMPILED);
    TERN_ASSIGN_OR_RETURN(const std::string text, c.string("precompiled_charsmap"));
    if (!decode_base64(text, &step.precompiled_charsmap))
      return c.field_error("precompiled_charsmap", "is not valid base64");
    auto map = PrecompiledCharsMap::parse(step.precompiled_charsmap);
    if (!map.ok()) return c.field_error("precompiled_charsmap", "is not a SentencePiece charsmap: " + map.status().message());
    // spm_precompiled reads the trie's first unit on every lookup: tokenizers panics on one without units.
    if (map.value().empty()) return c.field_error("precompiled_charsmap", "has an empty trie (tokenizers cannot run it)");
  }
  out->push_back(std::move(step));
  return Status::Ok();
}

Status read_pre_tokenizer_at(const json& value, const std::string& file, const std::string& where,
                             std::vector<HfStepSpec>* out) {
  const Config c(value, file, where);
  TERN_ASSIGN_OR_RETURN(const std::string type,
                        component_type(value, c, "pre_tokenizer",
                                       {"ByteLevel", "Split", "Metaspace", "Digits", "WhitespaceSplit", "Whitespace",
                                        "Punctuation", "Sequence"}));
  if (type == "Sequence") {
    return read_sequence(c, "pretokenizers", [&](const json& item, const std::string& at) {
      return read_pre_tokenizer_at(item, file, at, out);
    });
  }
  HfStepSpec step;
  using P = fb::HfPreTokenizer;
  if (type == "ByteLevel") {
    step.kind = uint8_t(P::BYTE_LEVEL);
    TERN_RETURN_IF_ERROR(read_byte_level(c, &step));
  } else if (type == "Split") {
    step.kind = uint8_t(P::SPLIT);
    TERN_RETURN_IF_ERROR(read_pattern(c, &step));
    TERN_ASSIGN_OR_RETURN(step.behavior, split_behavior(c, std::nullopt));
    TERN_ASSIGN_OR_RETURN(step.invert, c.boolean("invert"));
  } else if (type == "Metaspace") {
    step.kind = uint8_t(P::METASPACE);
    TERN_RETURN_IF_ERROR(read_metaspace(c, &step));
  } else if (type == "Digits") {
    step.kind = uint8_t(P::DIGITS);
    TERN_ASSIGN_OR_RETURN(step.individual_digits, c.boolean("individual_digits"));
  } else if (type == "WhitespaceSplit") {
    step.kind = uint8_t(P::WHITESPACE_SPLIT);
  } else if (type == "Whitespace") {
    step.kind = uint8_t(P::WHITESPACE);
  } else {  // Punctuation
    step.kind = uint8_t(P::PUNCTUATION);
    TERN_ASSIGN_OR_RETURN(step.behavior, split_behavior(c, "Isolated"));
  }
  out->push_back(std::move(step));
  return Status::Ok();
}

Status read_decoder_at(const json& value, const std::string& file, const std::string& where,
                       std::vector<HfStepSpec>* out) {
  const Config c(value, file, where);
  TERN_ASSIGN_OR_RETURN(const std::string type,
                        component_type(value, c, "decoder",
                                       {"ByteLevel", "Metaspace", "ByteFallback", "Fuse", "Strip", "Replace",
                                        "Sequence"}));
  if (type == "Sequence") {
    return read_sequence(c, "decoders", [&](const json& item, const std::string& at) {
      return read_decoder_at(item, file, at, out);
    });
  }
  HfStepSpec step;
  using D = fb::HfDecoder;
  if (type == "ByteLevel") {
    step.kind = uint8_t(D::BYTE_LEVEL);
    TERN_RETURN_IF_ERROR(read_byte_level(c, &step));
  } else if (type == "Metaspace") {
    step.kind = uint8_t(D::METASPACE);
    TERN_RETURN_IF_ERROR(read_metaspace(c, &step));
  } else if (type == "ByteFallback") {
    step.kind = uint8_t(D::BYTE_FALLBACK);
  } else if (type == "Fuse") {
    step.kind = uint8_t(D::FUSE);
  } else if (type == "Strip") {
    step.kind = uint8_t(D::STRIP);
    TERN_ASSIGN_OR_RETURN(step.content, one_char(c, "content"));
    TERN_ASSIGN_OR_RETURN(step.start, count(c, "start"));
    TERN_ASSIGN_OR_RETURN(step.stop, count(c, "stop"));
  } else {  // Replace: normalizers::Replace, the same serialization
    step.kind = uint8_t(D::REPLACE);
    TERN_RETURN_IF_ERROR(read_pattern(c, &step));
    TERN_ASSIGN_OR_RETURN(step.content, c.string("content"));
  }
  out->push_back(std::move(step));
  return Status::Ok();
}

// A token id of a processor's field (u32 in tokenizers; the caller checks it against the vocabulary size).
Result<int32_t> processor_id(const json& v, const Config& c, const std::string& key) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max()))
    return c.field_error(key, "must hold token ids, got " + Config::show(v));
  return int32_t(v.get<uint64_t>());
}

// TemplateProcessing's single template: [{"SpecialToken": {"id": name, "type_id": n}} | {"Sequence": {"id": "A",
// "type_id": n}}, ...], each special token's ids taken from special_tokens {name: {"id", "ids", "tokens"}}.
Status read_template(const Config& c, std::vector<int32_t>* prefix, std::vector<int32_t>* suffix) {
  const json* single = c.get("single");
  const json* specials = c.get("special_tokens");
  if (!single || !single->is_array()) return c.field_error("single", "must be a list of template pieces");
  if (!specials || !specials->is_object()) return c.field_error("special_tokens", "must be an object");
  bool seen_text = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& piece = (*single)[i];
    const std::string key = "single[" + std::to_string(i) + "]";
    if (!piece.is_object() || piece.size() != 1 || !piece.begin()->is_object() ||
        !piece.begin()->contains("id") || !(*piece.begin())["id"].is_string())
      return c.field_error(key, "must be {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": {\"id\": ...}}, got " +
                                    Config::show(piece));
    const std::string name = (*piece.begin())["id"].get<std::string>();
    if (piece.begin().key() == "Sequence") {
      if (name != "A") return c.field_error(key, "is sequence '" + clip(name) + "'; a single text's template holds only A");
      if (seen_text) return c.field_error(key, "repeats sequence A");
      seen_text = true;
      continue;
    }
    if (piece.begin().key() != "SpecialToken")
      return c.field_error(key, "must be a SpecialToken or a Sequence, got " + Config::show(piece));
    const auto special = specials->find(name);
    if (special == specials->end())
      return c.field_error(key, "names special token '" + clip(name) + "', which special_tokens lacks");
    const json* ids = special->is_object() && special->contains("ids") ? &(*special)["ids"] : nullptr;
    const json* tokens = special->is_object() && special->contains("tokens") ? &(*special)["tokens"] : nullptr;
    const std::string special_key = "special_tokens." + clip(name) + ".ids";
    if (!ids || !ids->is_array() || !tokens || !tokens->is_array() || ids->size() != tokens->size())
      return c.field_error(special_key, "must be a list of ids as long as its \"tokens\"");
    for (const json& id : *ids) {
      TERN_ASSIGN_OR_RETURN(int32_t v, processor_id(id, c, special_key));
      (seen_text ? suffix : prefix)->push_back(v);
    }
  }
  if (!seen_text) return c.field_error("single", "has no sequence A: the text would be dropped");
  return Status::Ok();
}

// RobertaProcessing / BertProcessing: "cls": [token, id] before the text, "sep": [token, id] after it.
Status read_cls_sep(const Config& c, std::vector<int32_t>* prefix, std::vector<int32_t>* suffix) {
  for (const char* key : {"cls", "sep"}) {
    const json* pair = c.get(key);
    if (!pair || !pair->is_array() || pair->size() != 2 || !(*pair)[0].is_string())
      return c.field_error(key, "must be [token, id]");
    TERN_ASSIGN_OR_RETURN(int32_t id, processor_id((*pair)[1], c, key));
    (std::string(key) == "cls" ? prefix : suffix)->push_back(id);
  }
  return Status::Ok();
}

Status read_post_processor_at(const json& value, const std::string& file, const std::string& where,
                              std::vector<int32_t>* prefix, std::vector<int32_t>* suffix) {
  const Config c(value, file, where);
  TERN_ASSIGN_OR_RETURN(const std::string type,
                        component_type(value, c, "post_processor",
                                       {"TemplateProcessing", "ByteLevel", "RobertaProcessing", "BertProcessing",
                                        "Sequence"}));
  if (type == "Sequence") {
    return read_sequence(c, "processors", [&](const json& item, const std::string& at) {
      return read_post_processor_at(item, file, at, prefix, suffix);
    });
  }
  std::vector<int32_t> before, after;
  if (type == "TemplateProcessing") {
    TERN_RETURN_IF_ERROR(read_template(c, &before, &after));
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    TERN_RETURN_IF_ERROR(read_cls_sep(c, &before, &after));
  } else {  // ByteLevel: offsets only
    HfStepSpec unused;
    return read_byte_level(c, &unused);
  }
  // This processor wraps what the earlier ones of a Sequence made.
  prefix->insert(prefix->begin(), before.begin(), before.end());
  suffix->insert(suffix->end(), after.begin(), after.end());
  return Status::Ok();
}

}  // namespace

Status read_hf_normalizer(const json& value, const std::string& file, std::vector<HfStepSpec>* out) {
  return value.is_null() ? Status::Ok() : read_normalizer_at(value, file, "normalizer.", out);
}

Status read_hf_pre_tokenizer(const json& value, const std::string& file, std::vector<HfStepSpec>* out) {
  return value.is_null() ? Status::Ok() : read_pre_tokenizer_at(value, file, "pre_tokenizer.", out);
}

Status read_hf_decoder(const json& value, const std::string& file, std::vector<HfStepSpec>* out) {
  return value.is_null() ? Status::Ok() : read_decoder_at(value, file, "decoder.", out);
}

Status read_hf_post_processor(const json& value, const std::string& file, std::vector<int32_t>* prefix,
                              std::vector<int32_t>* suffix) {
  return value.is_null() ? Status::Ok() : read_post_processor_at(value, file, "post_processor.", prefix, suffix);
}

bool decode_base64(const std::string& text, std::string* out) {
  out->clear();
  if (text.size() % 4 != 0) return false;
  const auto value = [](char ch) -> int {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
  };
  out->reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const size_t pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=' && text[i + 3] == '=') : 0;
    uint32_t bits = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int v = k >= 4 - pad ? 0 : value(text[i + k]);
      if (v < 0) return false;
      bits = bits << 6 | uint32_t(v);
    }
    // Canonical: the bits a padded group drops must be zero.
    if ((pad == 1 && (bits & 0xFF)) || (pad == 2 && (bits & 0xFFFF))) return false;
    out->push_back(char(bits >> 16));
    if (pad < 2) out->push_back(char(bits >> 8 & 0xFF));
    if (pad < 1) out->push_back(char(bits & 0xFF));
  }
  return true;
}

}  // namespace tern::convert
