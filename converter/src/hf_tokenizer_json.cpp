// SPDX-License-Identifier: MIT
#include "hf_tokenizer_json.h"

#include <cmath>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "config.h"
#include "format/input_file.h"
#include "hf_tokenizer_steps.h"
#include "importers/hf_decoder.h"
#include "json_text.h"
#include "text/token_limits.h"

namespace tern::convert {
namespace {

using nlohmann::json;

// Gemma 3's tokenizer.json, the largest in use, is 33 MB.
constexpr uint64_t kMaxTokenizerJsonBytes = uint64_t(512) << 20;

using TokenIds = std::unordered_map<std::string_view, int32_t>;  // views into the parsed JSON's strings

// "token id 128255 ('<|x|>') is not below the model's vocabulary size 128000 (...)" for the largest id of a group.
Status check_below(const Config& c, const std::string& what, int64_t largest, const std::string& token,
                   int64_t vocab_size) {
  if (largest < vocab_size) return Status::Ok();
  return c.error(what + " " + std::to_string(largest) + (token.empty() ? "" : " ('" + clip(token) + "')") +
                 " is not below the model's vocabulary size " + std::to_string(vocab_size) +
                 " (the width of its logits)");
}

// model.vocab of a BPE model: {token: id}; ids distinct and below vocab_size.
Status read_bpe_vocab(const Config& c, int64_t vocab_size, HfTokenizerJson* out, TokenIds* ids) {
  const json* vocab = c.get("vocab");
  if (!vocab || !vocab->is_object()) return c.field_error("vocab", "must be an object {token: id}");
  int64_t largest = -1;
  std::string largest_token;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it->is_number_unsigned() || it->get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max()))
      return c.field_error("vocab", "gives '" + clip(it.key()) + "' the id " + Config::show(*it) +
                                        "; ids are integers from 0 to 2147483647");
    if (int64_t(it->get<uint64_t>()) > largest) {
      largest = int64_t(it->get<uint64_t>());
      largest_token = it.key();
    }
  }
  TERN_RETURN_IF_ERROR(check_below(c, "model.vocab's token id", largest, largest_token, vocab_size));
  out->pieces.assign(size_t(vocab_size), std::string());
  std::vector<bool> taken(size_t(vocab_size), false);
  ids->reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    const int32_t id = int32_t(it->get<uint64_t>());
    if (taken[size_t(id)])
      return c.field_error("vocab", "gives the id " + std::to_string(id) + " to both '" + clip(out->pieces[size_t(id)]) +
                                        "' and '" + clip(it.key()) + "'");
    if (it.key().size() > kMaxPieceBytes)
      return c.field_error("vocab", piece_too_long_message("token id " + std::to_string(id), it.key().size()));
    taken[size_t(id)] = true;
    out->pieces[size_t(id)] = it.key();
    ids->emplace(std::string_view(it.key()), id);
  }
  out->model_vocab_entries = int64_t(vocab->size());
  return Status::Ok();
}

// One merge as its two tokens: "a b" (exactly one space; the legacy form) or ["a", "b"].
Status merge_pair(const Config& c, const json& m, size_t index, std::string_view* a, std::string_view* b) {
  const std::string key = "merges[" + std::to_string(index) + "]";
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
      return c.field_error(key, "must be two tokens separated by one space, got " + Config::show(m));
    *a = std::string_view(s).substr(0, space);
    *b = std::string_view(s).substr(space + 1);
    return Status::Ok();
  }
  if (!m.is_array() || m.size() != 2 || !m[0].is_string() || !m[1].is_string())
    return c.field_error(key, "must be \"a b\" or [\"a\", \"b\"], got " + Config::show(m));
  *a = m[0].get_ref<const std::string&>();
  *b = m[1].get_ref<const std::string&>();
  return Status::Ok();
}

// model.merges, in rank order, as (left, right, merged) ids. The merged token is left + right less the first
// continuing_subword_prefix-length bytes of right, as BpeBuilder::build makes it; a token the vocabulary lacks is
// refused at the first (tokenizers: MergeTokenOutOfVocabulary).
Status read_bpe_merges(const Config& c, const TokenIds& ids, HfTokenizerJson* out) {
  const json* merges = c.get("merges");
  if (!merges || !merges->is_array()) return c.field_error("merges", "must be a list of merges");
  const size_t prefix_len = out->continuing_subword_prefix.size();
  const bool legacy = !merges->empty() && (*merges)[0].is_string();
  std::string joined;
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    if (m.is_string() != legacy)
      return c.field_error("merges[" + std::to_string(i) + "]",
                           "mixes the \"a b\" and [\"a\", \"b\"] forms in one list");
    if (legacy && m.get_ref<const std::string&>().rfind("#version", 0) == 0) continue;  // a merges.txt header
    std::string_view a, b;
    TERN_RETURN_IF_ERROR(merge_pair(c, m, i, &a, &b));
    const auto missing = [&](std::string_view token) {
      return c.field_error("merges[" + std::to_string(i) + "]",
                           "merges '" + clip(a) + "' and '" + clip(b) + "', but '" + clip(token) +
                               "' is not in the vocabulary");
    };
    const auto left = ids.find(a), right = ids.find(b);
    if (left == ids.end()) return missing(a);
    if (right == ids.end()) return missing(b);
    if (b.size() < prefix_len)
      return c.field_error("merges[" + std::to_string(i) + "]",
                           "'" + clip(b) + "' is shorter than continuing_subword_prefix");
    joined.assign(a);
    joined.append(b.substr(prefix_len));
    const auto merged = ids.find(joined);
    if (merged == ids.end()) return missing(joined);
    out->merges.insert(out->merges.end(), {left->second, right->second, merged->second});
  }
  return Status::Ok();
}

// An Option<String> / Option<bool> field: null or absent is the default.
Result<std::string> optional_string(const Config& c, const std::string& key) { return c.string(key, ""); }

Status read_bpe(const Config& c, int64_t vocab_size, HfTokenizerJson* out, TokenIds* ids) {
  out->model = fb::HfModelKind::BPE;
  if (const json* dropout = c.get("dropout")) {
    if (!dropout->is_number()) return c.field_error("dropout", "must be a number or null, got " + Config::show(*dropout));
    if (dropout->get<double>() != 0)
      return c.field_error("dropout", "is " + Config::show(*dropout) +
                                          ": BPE dropout skips merges at random (a training-time augmentation), so "
                                          "no fixed encoding exists; only null or 0 is supported");
  }
  TERN_ASSIGN_OR_RETURN(out->continuing_subword_prefix, optional_string(c, "continuing_subword_prefix"));
  TERN_ASSIGN_OR_RETURN(out->end_of_word_suffix, optional_string(c, "end_of_word_suffix"));
  TERN_ASSIGN_OR_RETURN(out->fuse_unk, c.boolean("fuse_unk", false));
  TERN_ASSIGN_OR_RETURN(out->byte_fallback, c.boolean("byte_fallback", false));
  TERN_ASSIGN_OR_RETURN(out->ignore_merges, c.boolean("ignore_merges", false));
  TERN_RETURN_IF_ERROR(read_bpe_vocab(c, vocab_size, out, ids));
  TERN_RETURN_IF_ERROR(read_bpe_merges(c, *ids, out));
  if (c.has("unk_token")) {
    TERN_ASSIGN_OR_RETURN(const std::string unk, c.string("unk_token"));
    const auto it = ids->find(unk);
    // tokenizers fails every encode that needs it (UnkTokenOutOfVocabulary); refused here instead.
    if (it == ids->end()) return c.field_error("unk_token", "'" + clip(unk) + "' is not in the vocabulary");
    out->unk_id = it->second;
  }
  return Status::Ok();
}

// model.vocab of a Unigram model: [[piece, log probability], ...], the id of each its position.
Status read_unigram(const Config& c, int64_t vocab_size, HfTokenizerJson* out, TokenIds* ids) {
  out->model = fb::HfModelKind::UNIGRAM;
  const json* vocab = c.get("vocab");
  if (!vocab || !vocab->is_array()) return c.field_error("vocab", "must be a list of [piece, score]");
  if (!vocab->empty())
    TERN_RETURN_IF_ERROR(check_below(c, "model.vocab's token id", int64_t(vocab->size()) - 1, "", vocab_size));
  out->pieces.assign(size_t(vocab_size), std::string());
  out->scores.assign(size_t(vocab_size), 0.0);
  ids->reserve(vocab->size());
  for (size_t i = 0; i < vocab->size(); ++i) {
    const json& entry = (*vocab)[i];
    const std::string key = "vocab[" + std::to_string(i) + "]";
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string())
      return c.field_error(key, "must be [piece, score], got " + Config::show(entry));
    if (!entry[1].is_number() || !std::isfinite(entry[1].get<double>()) ||
        std::abs(entry[1].get<double>()) > double(std::numeric_limits<float>::max()))
      return c.field_error(key, "has the score " + Config::show(entry[1]) + "; a score is a finite number");
    const std::string& piece = entry[0].get_ref<const std::string&>();
    if (piece.size() > kMaxPieceBytes) return c.field_error(key, piece_too_long_message("the piece", piece.size()));
    const auto [it, fresh] = ids->emplace(std::string_view(piece), int32_t(i));
    if (!fresh)
      return c.field_error(key, "repeats the piece '" + clip(piece) + "' of vocab[" + std::to_string(it->second) + "]");
    out->pieces[i] = piece;
    out->scores[i] = entry[1].get<double>();
  }
  out->model_vocab_entries = int64_t(vocab->size());
  TERN_ASSIGN_OR_RETURN(out->byte_fallback, c.boolean("byte_fallback", false));
  if (c.has("unk_id")) {
    TERN_ASSIGN_OR_RETURN(int64_t unk, c.integer("unk_id", 0));
    if (unk >= int64_t(vocab->size()))
      return c.field_error("unk_id", std::to_string(unk) + " is not an id of the vocabulary's " +
                                         std::to_string(vocab->size()) + " pieces");
    out->unk_id = int32_t(unk);
  }
  return Status::Ok();
}

// added_tokens: each gets the id tokenizers' AddedVocabulary::add_tokens gives it (the model vocabulary's id of its
// content, else the next id past the model's tokens), which must be the id the file states.
Status read_added_tokens(const Config& top, const std::string& file, const TokenIds& ids, int64_t vocab_size,
                         HfTokenizerJson* out) {
  const json* list = top.get("added_tokens");
  if (!list) return Status::Ok();
  if (!list->is_array()) return top.field_error("added_tokens", "must be a list, got " + Config::show(*list));
  std::unordered_set<std::string_view> contents;
  int64_t next_id = out->model_vocab_entries;
  int64_t largest = -1;
  std::string largest_token;
  for (size_t i = 0; i < list->size(); ++i) {
    const Config c((*list)[i], file, "added_tokens[" + std::to_string(i) + "].");
    if (!(*list)[i].is_object()) return c.error("added_tokens[" + std::to_string(i) + "] must be an object");
    HfAddedTokenSpec t;
    TERN_ASSIGN_OR_RETURN(int64_t id, c.integer("id", 0));
    TERN_ASSIGN_OR_RETURN(t.content, c.string("content"));
    TERN_ASSIGN_OR_RETURN(t.single_word, c.boolean("single_word"));
    TERN_ASSIGN_OR_RETURN(t.lstrip, c.boolean("lstrip"));
    TERN_ASSIGN_OR_RETURN(t.rstrip, c.boolean("rstrip"));
    TERN_ASSIGN_OR_RETURN(t.normalized, c.boolean("normalized"));
    TERN_ASSIGN_OR_RETURN(t.special, c.boolean("special"));
    if (t.content.empty()) continue;  // add_tokens ignores it
    if (t.content.size() > kMaxPieceBytes)
      return c.field_error("content", piece_too_long_message("the content", t.content.size()));
    if (!contents.insert((*list)[i]["content"].get_ref<const std::string&>()).second)
      return c.field_error("content", "'" + clip(t.content) + "' repeats an earlier added token");
    const auto in_vocab = ids.find(t.content);
    const int64_t given = in_vocab != ids.end() ? in_vocab->second : next_id++;
    if (given != id)
      return c.field_error("id", "is " + std::to_string(id) + ", but tokenizers gives '" + clip(t.content) + "' the id " +
                                     std::to_string(given) +
                                     (in_vocab != ids.end() ? " (its id in the model's vocabulary)"
                                                            : " (the next after the model's vocabulary and the added "
                                                              "tokens before it)"));
    if (in_vocab == ids.end() && id < vocab_size && !out->pieces[size_t(id)].empty())
      return c.field_error("id", std::to_string(id) + " is already the model's token '" +
                                     clip(out->pieces[size_t(id)]) + "'");
    if (id > largest) {
      largest = id;
      largest_token = t.content;
    }
    t.id = int32_t(id);
    out->added_tokens.push_back(std::move(t));
  }
  return check_below(top, "added token id", largest, largest_token, vocab_size);
}

// The top-level member `key`, null when absent.
const json& member(const json& root, const char* key) {
  static const json null;
  const auto it = root.find(key);
  return it == root.end() ? null : *it;
}

// bos_token / eos_token of a tokenizer config: a string, {"content": string, ...} or null.
std::string token_text(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    const auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  return "";
}

}  // namespace

int32_t HfTokenizerJson::id_of(const std::string& token) const {
  if (token.empty()) return -1;
  for (const HfAddedTokenSpec& t : added_tokens)
    if (t.content == token) return t.id;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i] == token) return int32_t(i);
  return -1;
}

Result<HfTokenizerJson> read_hf_tokenizer_json(const std::string& path, int64_t vocab_size) {
  const std::string file = "'" + path + "'";
  TERN_ASSIGN_OR_RETURN(InputFile input, InputFile::open(path));
  TERN_ASSIGN_OR_RETURN(const std::string text, input.read_all(kMaxTokenizerJsonBytes, "a tokenizer.json"));
  auto parsed = parse_json_unique_keys(text);
  if (!parsed.ok()) return InvalidModel(file + ": " + parsed.status().message());
  const json& root = parsed.value();
  if (!root.is_object()) return InvalidModel(file + " must hold one JSON object");
  const Config top(root, file);
  TERN_ASSIGN_OR_RETURN(const std::string version, top.string("version", "1.0"));
  if (version != "1.0") return top.field_error("version", "is '" + clip(version) + "'; tokenizers reads only \"1.0\"");
  const json* model = top.get("model");
  if (!model || !model->is_object()) return top.field_error("model", "must be an object with a \"type\"");
  const Config m(*model, file, "model.");
  TERN_ASSIGN_OR_RETURN(const std::string type, m.string("type"));
  HfTokenizerJson out;
  TokenIds ids;
  if (type == "BPE") {
    TERN_RETURN_IF_ERROR(read_bpe(m, vocab_size, &out, &ids));
  } else if (type == "Unigram") {
    TERN_RETURN_IF_ERROR(read_unigram(m, vocab_size, &out, &ids));
  } else {
    return top.error("model type '" + clip(type) + "' is not supported (supported: BPE, Unigram)");
  }
  TERN_RETURN_IF_ERROR(read_added_tokens(top, file, ids, vocab_size, &out));
  TERN_RETURN_IF_ERROR(read_hf_normalizer(member(root, "normalizer"), file, &out.normalizers));
  TERN_RETURN_IF_ERROR(read_hf_pre_tokenizer(member(root, "pre_tokenizer"), file, &out.pre_tokenizers));
  TERN_RETURN_IF_ERROR(read_hf_decoder(member(root, "decoder"), file, &out.decoders));
  TERN_RETURN_IF_ERROR(read_hf_post_processor(member(root, "post_processor"), file, &out.prefix_ids,
                                              &out.suffix_ids));
  for (const auto* list : {&out.prefix_ids, &out.suffix_ids})
    for (int32_t id : *list) TERN_RETURN_IF_ERROR(check_below(top, "post_processor's token id", id, "", vocab_size));
  return out;
}

bool is_hf_tokenizer_json(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (path.compare(slash == std::string::npos ? 0 : slash + 1, std::string::npos, "tokenizer.json") == 0) return true;
  auto input = InputFile::open(path);
  if (!input.ok()) return false;
  auto text = input.value().read_all(kMaxTokenizerJsonBytes, "a tokenizer.json");
  if (!text.ok()) return false;
  auto parsed = parse_json(text.value());
  if (!parsed.ok() || !parsed.value().is_object()) return false;
  const auto model = parsed.value().find("model");
  return model != parsed.value().end() && model->is_object() && model->contains("type");
}

Status hf_tokenizer_special_ids(const std::string& dir, const HfTokenizerJson& tokenizer, int32_t* bos_id,
                                int32_t* eos_id) {
  *bos_id = *eos_id = -1;
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json"}) {
    TERN_ASSIGN_OR_RETURN(const auto config, hf_read_json_beside(dir, name, "a tokenizer config"));
    if (!config || !config->is_object()) continue;
    if (*bos_id < 0) *bos_id = tokenizer.id_of(token_text(*config, "bos_token"));
    if (*eos_id < 0) *eos_id = tokenizer.id_of(token_text(*config, "eos_token"));
  }
  return Status::Ok();
}

}  // namespace tern::convert
