// SPDX-License-Identifier: MIT
// The pre-tokenizers of tokenizers 0.23 (pre_tokenizers/*.rs) on Pieces: each cuts every piece into words, in order.
#include <string>

#include "text/hf_steps.h"
#include "text/hf_utf8.h"
#include "text/unicode.h"

namespace tern::hf {

namespace {

const char* pre_tokenizer_name(fb::HfPreTokenizer kind) {
  switch (kind) {
    case fb::HfPreTokenizer::BYTE_LEVEL: return "ByteLevel";
    case fb::HfPreTokenizer::SPLIT: return "Split";
    case fb::HfPreTokenizer::METASPACE: return "Metaspace";
    case fb::HfPreTokenizer::DIGITS: return "Digits";
    case fb::HfPreTokenizer::WHITESPACE_SPLIT: return "WhitespaceSplit";
    case fb::HfPreTokenizer::WHITESPACE: return "Whitespace";
    case fb::HfPreTokenizer::PUNCTUATION: return "Punctuation";
  }
  return nullptr;
}

// pre_tokenizers/byte_level.rs' pattern (GPT-2's).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// pre_tokenizers/punctuation.rs' is_punc: ASCII punctuation or a Unicode punctuation category (of Unicode 8.0, the
// unicode_categories crate's).
bool is_punctuation(char32_t c) {
  const bool ascii = (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
                     (c >= '{' && c <= '~');
  return ascii || unicode::is_punctuation_unicode8(c);
}

// Whitespace's Invert(\w+|[^\w\s]+) spans: the runs of word characters and the runs of other non-space characters
// are kept (not matches), the whitespace between them is a match (removed).
Spans whitespace_spans(std::string_view text) {
  if (text.empty()) return {{0, 0, false}};
  enum Class { kWord, kSpace, kOther };
  auto class_of = [](char32_t c) {
    if (is_word_char(c)) return kWord;
    return unicode::is_white_space(c) ? kSpace : kOther;
  };
  Spans spans;
  for (size_t i = 0; i < text.size();) {
    char32_t c;
    size_t j = i + unicode::decode_utf8(text, i, &c);
    const Class k = class_of(c);
    while (j < text.size()) {
      const size_t n = unicode::decode_utf8(text, j, &c);
      if (class_of(c) != k) break;
      j += n;
    }
    spans.push_back({i, j, k == kSpace});
    i = j;
  }
  return spans;
}

void map_bytes(Piece* piece) {
  std::vector<Change> dest;
  dest.reserve(piece->text.size());
  for (size_t i = 0; i < piece->text.size();) {
    char32_t c;
    const size_t n = unicode::decode_utf8(piece->text, i, &c);
    for (size_t k = 0; k < n; ++k) dest.push_back({hf_byte_level_char(uint8_t(piece->text[i + k])), k > 0 ? 1 : 0});
    i += n;
  }
  transform(piece, dest, 0);
}

}  // namespace

Result<PreTokenizerStep> PreTokenizerStep::from_table(const fb::HfStep& step, size_t index) {
  PreTokenizerStep p;
  const auto kind = fb::HfPreTokenizer(step.kind());
  const char* name = pre_tokenizer_name(kind);
  if (name == nullptr) {
    return InvalidModel("hf_tokenizer pre-tokenizer " + std::to_string(index) + " has unknown kind " +
                        std::to_string(int(step.kind())));
  }
  const std::string what = "hf_tokenizer pre-tokenizer " + std::to_string(index) + " (" + name + ")";
  p.kind_ = kind;
  if (kind == fb::HfPreTokenizer::SPLIT || kind == fb::HfPreTokenizer::PUNCTUATION) {
    if (step.behavior() > fb::HfSplitBehavior::MAX) {
      return InvalidModel(what + " has unknown behavior " + std::to_string(int(step.behavior())));
    }
    p.behavior_ = step.behavior();
  }
  switch (kind) {
    case fb::HfPreTokenizer::BYTE_LEVEL:
      p.add_prefix_space_ = step.add_prefix_space();
      if (step.use_regex()) {
        auto re = HfRegex::compile(kGpt2Pattern);
        if (!re.ok()) return InternalError(what + ": GPT-2's pattern: " + re.status().message());
        p.byte_level_re_ = std::move(re).value();
      }
      break;
    case fb::HfPreTokenizer::SPLIT: {
      TERN_ASSIGN_OR_RETURN(Pattern pattern, Pattern::from_step(step, what));
      p.pattern_ = std::make_shared<const Pattern>(std::move(pattern));
      p.invert_ = step.invert();
      break;
    }
    case fb::HfPreTokenizer::METASPACE: {
      const std::string_view content = step.content() ? step.content()->string_view() : std::string_view();
      char32_t c = 0;
      if (content.empty() || !is_valid_utf8(content) || unicode::decode_utf8(content, 0, &c) != content.size()) {
        return InvalidModel(what + "'s replacement must be one character");
      }
      if (step.prepend_scheme() > fb::HfPrependScheme::MAX) {
        return InvalidModel(what + " has unknown prepend_scheme " + std::to_string(int(step.prepend_scheme())));
      }
      p.replacement_ = std::string(content);
      p.replacement_char_ = c;
      p.prepend_scheme_ = step.prepend_scheme();
      p.split_ = step.split();
      break;
    }
    case fb::HfPreTokenizer::DIGITS: p.individual_digits_ = step.individual_digits(); break;
    case fb::HfPreTokenizer::WHITESPACE_SPLIT:
    case fb::HfPreTokenizer::WHITESPACE:
    case fb::HfPreTokenizer::PUNCTUATION: break;
  }
  return p;
}

void PreTokenizerStep::split_one(Piece piece, std::vector<Piece>* out) const {
  switch (kind_) {
    case fb::HfPreTokenizer::BYTE_LEVEL:
      if (add_prefix_space_ && piece.text[0] != ' ') prepend(&piece, " ");
      if (byte_level_re_) return split(piece, find_regex(piece.text, *byte_level_re_), fb::HfSplitBehavior::ISOLATED, out);
      out->push_back(std::move(piece));
      return;
    case fb::HfPreTokenizer::SPLIT: {
      Spans spans = pattern_->find_matches(piece.text);
      if (invert_) invert(&spans);
      return split(piece, spans, behavior_, out);
    }
    case fb::HfPreTokenizer::METASPACE: {
      replace(&piece, find_chars(piece.text, [](char32_t c) { return c == U' '; }), replacement_);
      const bool starts_with_replacement = piece.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts_with_replacement && (prepend_scheme_ == fb::HfPrependScheme::ALWAYS ||
                                       (prepend_scheme_ == fb::HfPrependScheme::FIRST && piece.shift == 0))) {
        prepend(&piece, replacement_);
      }
      if (!split_) {
        out->push_back(std::move(piece));
        return;
      }
      const char32_t r = replacement_char_;
      return split(piece, find_chars(piece.text, [r](char32_t c) { return c == r; }),
                   fb::HfSplitBehavior::MERGED_WITH_NEXT, out);
    }
    case fb::HfPreTokenizer::DIGITS:
      return split(piece, find_chars(piece.text, unicode::is_number),
                   individual_digits_ ? fb::HfSplitBehavior::ISOLATED : fb::HfSplitBehavior::CONTIGUOUS, out);
    case fb::HfPreTokenizer::WHITESPACE_SPLIT:
      return split(piece, find_chars(piece.text, unicode::is_white_space), fb::HfSplitBehavior::REMOVED, out);
    case fb::HfPreTokenizer::WHITESPACE:
      return split(piece, whitespace_spans(piece.text), fb::HfSplitBehavior::REMOVED, out);
    case fb::HfPreTokenizer::PUNCTUATION:
      return split(piece, find_chars(piece.text, is_punctuation), behavior_, out);
  }
}

void PreTokenizerStep::apply(Piece piece, std::vector<Piece>* out) const {
  if (piece.text.empty()) return;
  const size_t first = out->size();
  split_one(std::move(piece), out);
  // ByteLevel maps the bytes of every split it made (the Rust's normalize pass over the splits without tokens).
  if (kind_ == fb::HfPreTokenizer::BYTE_LEVEL) {
    for (size_t i = first; i < out->size(); ++i) map_bytes(&(*out)[i]);
  }
}

}  // namespace tern::hf
