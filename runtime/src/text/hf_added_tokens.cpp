// SPDX-License-Identifier: MIT
#include "text/hf_added_tokens.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "text/hf_piece.h"
#include "text/hf_steps.h"
#include "text/token_limits.h"
#include "text/unicode.h"

namespace tern::hf {

namespace {

// The Rust's regexes ^\w and \w$ on the text after and before a match.
bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  char32_t c;
  unicode::decode_utf8(s, 0, &c);
  return is_word_char(c);
}
bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t start = s.size() - 1;
  while (start > 0 && (uint8_t(s[start]) & 0xC0) == 0x80) --start;
  char32_t c;
  unicode::decode_utf8(s, start, &c);
  return is_word_char(c);
}
// \s*$: where the whitespace that ends s starts.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (uint8_t(s[start]) & 0xC0) == 0x80) --start;
    char32_t c;
    unicode::decode_utf8(s, start, &c);
    if (!unicode::is_white_space(c)) break;
    end = start;
  }
  return end;
}
// ^\s*: the length of the whitespace that starts s.
size_t leading_space_length(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    char32_t c;
    const size_t n = unicode::decode_utf8(s, i, &c);
    if (!unicode::is_white_space(c)) break;
    i += n;
  }
  return i;
}

// The longest key of the trie that starts at text[pos]: its value, *length set; -1 when none.
int32_t longest_at(const PieceTrie& trie, std::string_view text, size_t pos, size_t* length) {
  int32_t node = PieceTrie::root(), found = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    node = trie.child(node, uint8_t(text[i]));
    if (node == PieceTrie::kNoNode) break;
    if (trie.value(node) != PieceTrie::kNoValue) {
      found = trie.value(node);
      *length = i + 1 - pos;
    }
  }
  return found;
}

}  // namespace

Result<std::unique_ptr<AddedTokens>> AddedTokens::build(
    const fb::HfTokenizer& table, int64_t vocab_size,
    const std::function<Result<std::string>(std::string_view)>& normalize) {
  auto added = std::make_unique<AddedTokens>();
  std::unordered_map<std::string, size_t> by_content;
  std::map<int32_t, size_t> by_id;
  const auto* list = table.added_tokens();
  const size_t count = list ? list->size() : 0;
  for (size_t i = 0; i < count; ++i) {
    const fb::HfAddedToken* t = list->Get(flatbuffers::uoffset_t(i));
    const std::string what = "hf_tokenizer added token " + std::to_string(i);
    if (t->content() == nullptr || t->content()->size() == 0) continue;
    Token token;
    token.id = t->id();
    token.content = t->content()->str();
    token.special = t->special();
    token.single_word = t->single_word();
    token.lstrip = t->lstrip();
    token.rstrip = t->rstrip();
    token.normalized = t->normalized();
    if (!is_valid_utf8(token.content)) return InvalidModel(what + "'s content is not valid UTF-8");
    if (token.content.size() > kMaxPieceBytes) {
      return InvalidModel(piece_too_long_message(what + "'s content", token.content.size()));
    }
    if (token.id < 0 || token.id >= vocab_size) {
      return InvalidModel(what + " has id " + std::to_string(token.id) + ", outside the vocabulary of " +
                          std::to_string(vocab_size));
    }
    auto same = by_content.find(token.content);
    if (same != by_content.end()) {
      token.id = added->tokens_[same->second].id;
      added->tokens_[same->second] = std::move(token);
      continue;
    }
    auto taken = by_id.find(token.id);
    if (taken != by_id.end()) {
      return InvalidModel(what + " has id " + std::to_string(token.id) + ", the id of added token " +
                          std::to_string(taken->second));
    }
    by_id[token.id] = i;
    by_content[token.content] = added->tokens_.size();
    added->tokens_.push_back(std::move(token));
  }

  // The two sets, each keyed by what it is matched by.
  std::vector<std::string> normalized_keys(added->tokens_.size());
  std::vector<std::string_view> raw_keys, norm_keys;
  std::vector<int32_t> raw_values, norm_values;
  std::unordered_map<std::string_view, size_t> norm_seen;
  for (size_t i = 0; i < added->tokens_.size(); ++i) {
    const Token& t = added->tokens_[i];
    if (!t.normalized) {
      raw_keys.push_back(t.content);
      raw_values.push_back(int32_t(i));
      continue;
    }
    auto normalized = normalize(t.content);
    if (!normalized.ok())
      return InvalidModel("hf_tokenizer added token \"" + t.content + "\": " + normalized.status().message());
    normalized_keys[i] = std::move(normalized).value();
    const std::string_view key = normalized_keys[i];
    if (key.size() > kMaxPieceBytes) {
      return InvalidModel(
          piece_too_long_message("hf_tokenizer added token \"" + t.content + "\" normalized", key.size()));
    }
    if (key.empty()) {
      return InvalidModel("hf_tokenizer added token \"" + t.content + "\" normalizes to an empty string");
    }
    auto [it, fresh] = norm_seen.emplace(key, i);
    if (!fresh) {
      return InvalidModel("hf_tokenizer added tokens \"" + added->tokens_[it->second].content + "\" and \"" +
                          t.content + "\" normalize to the same string");
    }
    norm_keys.push_back(key);
    norm_values.push_back(int32_t(i));
  }
  added->has_raw_ = !raw_keys.empty();
  added->has_normalized_ = !norm_keys.empty();
  added->raw_ = PieceTrie::build(raw_keys, raw_values);
  added->normalized_ = PieceTrie::build(norm_keys, norm_values);
  return added;
}

std::vector<AddedTokens::Match> AddedTokens::find(std::string_view text, bool normalized_set,
                                                  bool split_specials) const {
  if (text.empty()) return {{-1, 0, 0}};
  const bool has = normalized_set ? has_normalized_ : has_raw_;
  if (!has) return {{-1, 0, text.size()}};
  const PieceTrie& trie = normalized_set ? normalized_ : raw_;
  std::vector<Match> out;
  size_t start_offset = 0;
  size_t pos = 0;
  size_t space_run_end = 0;
  while (pos < text.size()) {
    size_t length = 0;
    const int32_t index = longest_at(trie, text, pos, &length);
    if (index < 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + length;
    pos = stop;  // the search goes on after the match, whatever becomes of it
    const Token& token = tokens_[size_t(index)];
    if (!split_specials && token.special) continue;
    if (token.single_word) {
      const bool start_space = start == 0 || !ends_with_word(text.substr(0, start));
      const bool stop_space = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    // lstrip takes the whitespace before the token, but not what an earlier match already took (looking no further
    // back than that keeps the search linear).
    if (token.lstrip) {
      start = start <= start_offset
                  ? start_offset
                  : start_offset + trailing_space_start(text.substr(start_offset, start - start_offset));
    }
    if (token.rstrip) {
      // Matches inside one whitespace run end where it ends: measured once, so rstrip scans no byte twice.
      if (stop >= space_run_end) space_run_end = stop + leading_space_length(text.substr(stop));
      stop = space_run_end;
    }
    if (start_offset < start) out.push_back({-1, start_offset, start});
    out.push_back({index, start, stop});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({-1, start_offset, text.size()});
  return out;
}

}  // namespace tern::hf
