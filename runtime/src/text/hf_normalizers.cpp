// SPDX-License-Identifier: MIT
// The normalizers of tokenizers 0.23 (normalizers/*.rs) on a Piece, with the alignment each NormalizedString
// operation gives its characters.
#include <string>

#include "text/hf_steps.h"
#include "text/token_limits.h"
#include "text/unicode.h"

namespace tern::hf {

namespace {

const char* normalizer_name(fb::HfNormalizer kind) {
  switch (kind) {
    case fb::HfNormalizer::NFC: return "NFC";
    case fb::HfNormalizer::NFD: return "NFD";
    case fb::HfNormalizer::NFKC: return "NFKC";
    case fb::HfNormalizer::NFKD: return "NFKD";
    case fb::HfNormalizer::LOWERCASE: return "Lowercase";
    case fb::HfNormalizer::PREPEND: return "Prepend";
    case fb::HfNormalizer::REPLACE: return "Replace";
    case fb::HfNormalizer::STRIP: return "Strip";
    case fb::HfNormalizer::PRECOMPILED: return "Precompiled";
    case fb::HfNormalizer::STRIP_ACCENTS: return "StripAccents";
  }
  return nullptr;
}

// Pushes the characters of s: the first replaces the next `replaced` old characters, the others are new.
void push_run(std::string_view s, size_t replaced, std::vector<Change>* dest) {
  bool first = true;
  for (size_t k = 0; k < s.size();) {
    char32_t c;
    k += unicode::decode_utf8(s, k, &c);
    dest->push_back({c, first ? -int32_t(replaced - 1) : 1});
    first = false;
  }
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// A normalization form. The Rust takes each character's changes from unicode-normalization-alignments; here a
// character whose own normalization the output continues with maps to it, and a run that composes or reorders
// (at most kMaxRun characters, then the rest of the text) maps to its first character, as a composition does.
void apply_form(Piece* piece, unicode::Form form) {
  constexpr size_t kMaxRun = 32;
  const std::string out = unicode::normalize(piece->text, form);
  if (out == piece->text) return;
  const std::string_view in(piece->text);
  std::string_view rest(out);
  std::vector<Change> dest;
  size_t i = 0;
  while (i < in.size() && !rest.empty()) {
    char32_t c;
    const size_t n = unicode::decode_utf8(in, i, &c);
    const std::string one = unicode::normalize(in.substr(i, n), form);
    if (!one.empty() && starts_with(rest, one)) {
      push_run(one, 1, &dest);
      rest.remove_prefix(one.size());
      i += n;
      continue;
    }
    size_t j = i + n, chars = 1;
    bool found = false;
    while (j < in.size() && chars < kMaxRun) {
      j += unicode::decode_utf8(in, j, &c);
      ++chars;
      const std::string run = unicode::normalize(in.substr(i, j - i), form);
      if (!run.empty() && starts_with(rest, run)) {
        push_run(run, chars, &dest);
        rest.remove_prefix(run.size());
        i = j;
        found = true;
        break;
      }
    }
    if (!found) {
      size_t remaining = 0;
      for (size_t k = i; k < in.size(); ++remaining) k += unicode::decode_utf8(in, k, &c);
      push_run(rest, remaining, &dest);
      rest = {};
      i = in.size();
    }
  }
  for (size_t k = 0; k < rest.size();) {
    char32_t c;
    k += unicode::decode_utf8(rest, k, &c);
    dest.push_back({c, 1});
  }
  transform(piece, dest, 0);
}

// NormalizedString::lowercase: each character's full lower-case mapping, its first character replacing it.
void apply_lowercase(Piece* piece) {
  const std::string_view in(piece->text);
  std::vector<Change> dest;
  dest.reserve(in.size());
  bool changed = false;
  std::string one;
  for (size_t i = 0; i < in.size();) {
    char32_t c;
    const size_t n = unicode::decode_utf8(in, i, &c);
    if (c < 0x80) {
      const char32_t lower = (c >= 'A' && c <= 'Z') ? c + 32 : c;
      changed |= lower != c;
      dest.push_back({lower, 0});
    } else {
      const std::string lower = unicode::to_lower(in.substr(i, n));
      changed |= lower != in.substr(i, n);
      bool first = true;
      for (size_t k = 0; k < lower.size();) {
        char32_t l;
        k += unicode::decode_utf8(lower, k, &l);
        dest.push_back({l, first ? 0 : 1});
        first = false;
      }
    }
    i += n;
  }
  if (changed) transform(piece, dest, 0);
}

// lstrip / rstrip: the kept characters keep their alignments.
void apply_strip(Piece* piece, bool left, bool right) {
  const std::string_view in(piece->text);
  size_t begin = 0, end = in.size();
  if (left) {
    while (begin < end) {
      char32_t c;
      const size_t n = unicode::decode_utf8(in, begin, &c);
      if (!unicode::is_white_space(c)) break;
      begin += n;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (uint8_t(in[start]) & 0xC0) == 0x80) --start;
      char32_t c;
      unicode::decode_utf8(in, start, &c);
      if (!unicode::is_white_space(c)) break;
      end = start;
    }
  }
  if (begin == 0 && end == in.size()) return;
  piece->text = std::string(in.substr(begin, end - begin));
  piece->origin = std::vector<Origin>(piece->origin.begin() + begin, piece->origin.begin() + end);
}

// NormalizedString::filter dropping combining marks: the kept characters keep their alignments.
void apply_strip_accents(Piece* piece) {
  const std::string_view in(piece->text);
  std::string text;
  std::vector<Origin> origin;
  for (size_t i = 0; i < in.size();) {
    char32_t c;
    const size_t n = unicode::decode_utf8(in, i, &c);
    if (!unicode::is_combining_mark_unicode9(c)) {
      text.append(in.substr(i, n));
      origin.insert(origin.end(), piece->origin.begin() + i, piece->origin.begin() + i + n);
    }
    i += n;
  }
  piece->text = std::move(text);
  piece->origin = std::move(origin);
}

// normalizers/precompiled.rs' `replace`: old_part's characters become new_part's.
void push_replacement(std::string_view old_part, std::string_view new_part, std::vector<Change>* dest) {
  auto count = [](std::string_view s) {
    int64_t n = 0;
    for (size_t i = 0; i < s.size(); ++n) {
      char32_t c;
      i += unicode::decode_utf8(s, i, &c);
    }
    return n;
  };
  const int64_t diff = count(new_part) - count(old_part);
  for (size_t i = 0; i < new_part.size();) {
    char32_t c;
    i += unicode::decode_utf8(new_part, i, &c);
    dest->push_back({c, 0});
  }
  if (diff > 0) {
    for (int64_t k = 0; k < diff && size_t(k) < dest->size(); ++k) (*dest)[dest->size() - 1 - size_t(k)].change = 1;
  } else if (diff < 0 && !dest->empty()) {
    dest->back().change += int32_t(diff);
  }
}

}  // namespace

Result<NormalizerStep> NormalizerStep::from_table(const fb::HfStep& step, size_t index) {
  NormalizerStep n;
  const auto kind = fb::HfNormalizer(step.kind());
  const char* name = normalizer_name(kind);
  if (name == nullptr) {
    return InvalidModel("hf_tokenizer normalizer " + std::to_string(index) + " has unknown kind " +
                        std::to_string(int(step.kind())));
  }
  const std::string what = "hf_tokenizer normalizer " + std::to_string(index) + " (" + name + ")";
  n.kind_ = kind;
  if (kind == fb::HfNormalizer::PREPEND || kind == fb::HfNormalizer::REPLACE) {
    n.content_ = step.content() ? step.content()->str() : std::string();
    if (!is_valid_utf8(n.content_)) return InvalidModel(what + "'s content is not valid UTF-8");
    if (n.content_.size() > kMaxReplacementBytes) {
      return InvalidModel(what + "'s content is " + std::to_string(n.content_.size()) +
                          " bytes long; a normalization rule may write at most " +
                          std::to_string(kMaxReplacementBytes));
    }
  }
  if (kind == fb::HfNormalizer::REPLACE) {
    TERN_ASSIGN_OR_RETURN(Pattern pattern, Pattern::from_step(step, what));
    n.pattern_ = std::make_shared<const Pattern>(std::move(pattern));
  }
  n.left_ = step.left();
  n.right_ = step.right();
  if (kind == fb::HfNormalizer::PRECOMPILED) {
    const auto* bytes = step.precompiled_charsmap();
    n.charsmap_bytes_ = std::make_shared<const std::string>(
        bytes ? std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size()) : std::string());
    auto map = PrecompiledCharsMap::parse(*n.charsmap_bytes_);
    if (!map.ok()) return InvalidModel(what + ": " + map.status().message());
    n.charsmap_ = std::move(map).value();
    // The Rust refuses a map whose replacement pool is not UTF-8.
    const size_t trie_bytes = n.charsmap_bytes_->size() < 4 ? 0 : size_t(uint8_t((*n.charsmap_bytes_)[0])) |
                                                                      size_t(uint8_t((*n.charsmap_bytes_)[1])) << 8 |
                                                                      size_t(uint8_t((*n.charsmap_bytes_)[2])) << 16 |
                                                                      size_t(uint8_t((*n.charsmap_bytes_)[3])) << 24;
    if (n.charsmap_bytes_->size() >= 4 && !is_valid_utf8(std::string_view(*n.charsmap_bytes_).substr(4 + trie_bytes))) {
      return InvalidModel(what + "'s replacement strings are not valid UTF-8");
    }
  }
  return n;
}

bool NormalizerStep::apply_precompiled(Piece* piece, size_t max_bytes) const {
  const std::string_view in(piece->text);
  std::vector<Change> dest;
  dest.reserve(in.size());
  bool modified = false;
  // The replacement of `part`, or false: the first rule found for a prefix of it replaces the whole part.
  auto rule = [&](std::string_view part, std::string_view* replacement) {
    return charsmap_.shortest_match(part, replacement) > 0 && is_valid_utf8(*replacement);
  };
  std::vector<size_t> starts = unicode::grapheme_starts(in);
  starts.push_back(in.size());
  for (size_t g = 0; g + 1 < starts.size(); ++g) {
    const std::string_view grapheme = in.substr(starts[g], starts[g + 1] - starts[g]);
    std::string_view replacement;
    if (grapheme.size() < 6 && rule(grapheme, &replacement)) {
      modified = true;
      push_replacement(grapheme, replacement, &dest);
      if (dest.size() > max_bytes) return false;  // a character is at least a byte
      continue;
    }
    for (size_t i = 0; i < grapheme.size();) {
      char32_t c;
      const size_t n = unicode::decode_utf8(grapheme, i, &c);
      const std::string_view part = grapheme.substr(i, n);
      if (rule(part, &replacement)) {
        modified = true;
        push_replacement(part, replacement, &dest);
        if (dest.size() > max_bytes) return false;
      } else {
        dest.push_back({c, 0});
      }
      i += n;
    }
  }
  if (modified) transform(piece, dest, 0);
  return true;
}

bool NormalizerStep::apply(Piece* piece, size_t max_bytes) const {
  switch (kind_) {
    case fb::HfNormalizer::NFC: apply_form(piece, unicode::Form::NFC); break;
    case fb::HfNormalizer::NFD: apply_form(piece, unicode::Form::NFD); break;
    case fb::HfNormalizer::NFKC: apply_form(piece, unicode::Form::NFKC); break;
    case fb::HfNormalizer::NFKD: apply_form(piece, unicode::Form::NFKD); break;
    case fb::HfNormalizer::LOWERCASE: apply_lowercase(piece); break;
    case fb::HfNormalizer::PREPEND:
      if (!piece->text.empty()) prepend(piece, content_);
      break;
    case fb::HfNormalizer::REPLACE: {
      // The size the replacement gives, known before it is built: each match (possibly empty) becomes content_.
      const Spans spans = pattern_->find_matches(piece->text);
      size_t bytes = piece->text.size();
      for (const Span& span : spans) {
        if (span.match) bytes += content_.size() - (span.end - span.begin);
        if (bytes > max_bytes) return false;
      }
      replace(piece, spans, content_);
      break;
    }
    case fb::HfNormalizer::STRIP: apply_strip(piece, left_, right_); break;
    case fb::HfNormalizer::PRECOMPILED:
      if (!apply_precompiled(piece, max_bytes)) return false;
      break;
    case fb::HfNormalizer::STRIP_ACCENTS: apply_strip_accents(piece); break;
  }
  // The Unicode forms grow a character at most 18 times (U+FDFA); Prepend adds one bounded content.
  return piece->text.size() <= max_bytes;
}

}  // namespace tern::hf
