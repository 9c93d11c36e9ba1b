// SPDX-License-Identifier: MIT
#include "text/hf_piece.h"

#include <algorithm>

#include "text/unicode.h"

namespace tern::hf {

namespace {

size_t char_length(std::string_view s, size_t pos) {
  char32_t c;
  return unicode::decode_utf8(s, pos, &c);
}

// The spans of successive matches found by `next(from, &begin, &end)`, with the onig crate's find_iter rule for
// empty matches: the search after an empty match starts one character later, and an empty match right after a
// non-empty one is dropped.
template <typename Next>
Spans iterate_matches(std::string_view text, Next next) {
  if (text.empty()) return {{0, 0, false}};
  Spans spans;
  size_t prev = 0, last_end = 0;
  bool skip_next_empty = false;
  while (last_end <= text.size()) {
    size_t begin = 0, end = 0;
    if (!next(last_end, &begin, &end)) break;
    last_end = end;
    if (begin == end) {
      last_end += end < text.size() ? char_length(text, end) : 1;
      if (skip_next_empty) {
        skip_next_empty = false;
        continue;
      }
    } else {
      skip_next_empty = true;
    }
    if (prev != begin) spans.push_back({prev, begin, false});
    spans.push_back({begin, end, true});
    prev = end;
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
  return spans;
}

}  // namespace

Piece whole_piece(std::string_view text) {
  Piece p;
  p.text = std::string(text);
  p.origin.resize(text.size());
  // Each byte's origin is the start of its character.
  for (size_t i = 0; i < text.size();) {
    const size_t n = char_length(text, i);
    for (size_t k = 0; k < n; ++k) p.origin[i + k] = Origin(i);
    i += n;
  }
  return p;
}

void transform_range(Piece* piece, size_t begin, size_t end, const std::vector<Change>& dest, size_t initial_offset) {
  const std::string_view old(piece->text);
  size_t cursor = begin;  // the next old character to be replaced or removed
  auto skip_one = [&] {
    if (cursor < end) cursor += char_length(old, cursor);
  };
  for (size_t i = 0; i < initial_offset; ++i) skip_one();

  std::string text;
  std::vector<Origin> origin;
  for (const Change& ch : dest) {
    size_t align;
    if (ch.change > 0) {
      // A new character shares the alignment of the byte before it; at the very start, the piece's own start.
      align = cursor < 1 ? piece->shift : piece->origin[cursor - 1];
    } else {
      align = cursor < piece->origin.size() ? piece->origin[cursor]
                                            : (piece->origin.empty() ? piece->shift : piece->origin.back());
      skip_one();
    }
    for (int32_t k = 0; k < -ch.change; ++k) skip_one();
    unicode::append_utf8(ch.c, &text);
    origin.resize(text.size(), Origin(align));
  }

  if (begin == 0 && end == old.size()) {  // the whole text rewritten (NFC, ...): the new one takes its place
    piece->text = std::move(text);
    piece->origin = std::move(origin);
    return;
  }
  // A part of it (Prepend's first character, ...): spliced in place, no second copy of the rest.
  piece->text.replace(begin, end - begin, text);
  piece->origin.erase(piece->origin.begin() + std::ptrdiff_t(begin), piece->origin.begin() + std::ptrdiff_t(end));
  piece->origin.insert(piece->origin.begin() + std::ptrdiff_t(begin), origin.begin(), origin.end());
}

void prepend(Piece* piece, std::string_view s) {
  if (piece->text.empty()) return;
  char32_t next;
  const size_t next_len = unicode::decode_utf8(piece->text, 0, &next);
  std::vector<Change> dest;
  for (size_t i = 0; i < s.size();) {
    char32_t c;
    const size_t n = unicode::decode_utf8(s, i, &c);
    dest.push_back({c, i == 0 ? 0 : 1});
    i += n;
  }
  dest.push_back({next, 1});
  transform_range(piece, 0, next_len, dest, 0);
}

Spans find_literal(std::string_view text, std::string_view literal) {
  return iterate_matches(text, [&](size_t from, size_t* begin, size_t* end) {
    const size_t at = text.find(literal, from);
    if (at == std::string_view::npos) return false;
    *begin = at;
    *end = at + literal.size();
    return true;
  });
}

Spans find_regex(std::string_view text, const HfRegex& regex) {
  return iterate_matches(text, [&](size_t from, size_t* begin, size_t* end) {
    return regex.find(text, from, begin, end);
  });
}

Spans find_chars(std::string_view text, const std::function<bool(char32_t)>& is_match) {
  if (text.empty()) return {{0, 0, false}};
  Spans spans;
  size_t last_offset = 0;
  for (size_t i = 0; i < text.size();) {
    char32_t c;
    const size_t n = unicode::decode_utf8(text, i, &c);
    if (is_match(c)) {
      if (last_offset < i) spans.push_back({last_offset, i, false});
      spans.push_back({i, i + n, true});
      last_offset = i + n;
    }
    i += n;
  }
  if (text.size() > last_offset) spans.push_back({last_offset, text.size(), false});
  return spans;
}

void invert(Spans* spans) {
  for (Span& s : *spans) s.match = !s.match;
}

void replace(Piece* piece, const Spans& spans, std::string_view content) {
  std::string text;
  std::vector<Origin> origin;
  text.reserve(piece->text.size());
  origin.reserve(piece->text.size());
  size_t last_end = 0;
  for (const Span& s : spans) {
    if (!s.match) continue;
    text.append(piece->text, last_end, s.begin - last_end);
    origin.insert(origin.end(), piece->origin.begin() + last_end, piece->origin.begin() + s.begin);
    // The content's characters are all new ones placed after the removed match: they take the alignment of the
    // match's last byte (of the piece's start for an empty match at 0).
    const size_t align = s.end < 1 ? piece->shift : piece->origin[s.end - 1];
    text.append(content);
    origin.resize(text.size(), Origin(align));
    last_end = s.end;
  }
  text.append(piece->text, last_end, std::string::npos);
  origin.insert(origin.end(), piece->origin.begin() + last_end, piece->origin.end());
  piece->text = std::move(text);
  piece->origin = std::move(origin);
}

Piece slice(const Piece& piece, size_t begin, size_t end) {
  Piece p;
  p.text = piece.text.substr(begin, end - begin);
  p.origin.assign(piece.origin.begin() + begin, piece.origin.begin() + end);
  p.shift = piece.origin[begin];
  return p;
}

void split(const Piece& piece, const Spans& spans, fb::HfSplitBehavior behavior, std::vector<Piece>* out) {
  struct Part {
    size_t begin, end;
    bool remove;
  };
  std::vector<Part> parts;
  bool previous_match = false;
  switch (behavior) {
    case fb::HfSplitBehavior::ISOLATED:
      for (const Span& s : spans) parts.push_back({s.begin, s.end, false});
      break;
    case fb::HfSplitBehavior::REMOVED:
      for (const Span& s : spans) parts.push_back({s.begin, s.end, s.match});
      break;
    case fb::HfSplitBehavior::CONTIGUOUS:
      for (const Span& s : spans) {
        if (s.match == previous_match && !parts.empty()) {
          parts.back().end = s.end;
        } else {
          parts.push_back({s.begin, s.end, false});
        }
        previous_match = s.match;
      }
      break;
    case fb::HfSplitBehavior::MERGED_WITH_PREVIOUS:
      for (const Span& s : spans) {
        if (s.match && !previous_match && !parts.empty()) {
          parts.back().end = s.end;
        } else {
          parts.push_back({s.begin, s.end, false});
        }
        previous_match = s.match;
      }
      break;
    case fb::HfSplitBehavior::MERGED_WITH_NEXT:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !parts.empty()) {
          parts.back().begin = it->begin;
        } else {
          parts.push_back({it->begin, it->end, false});
        }
        previous_match = it->match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
  }
  // Empty parts are left out: every caller drops them (PreTokenizedString::split keeps no empty split).
  for (const Part& p : parts) {
    if (!p.remove && p.begin < p.end) out->push_back(slice(piece, p.begin, p.end));
  }
}

bool is_word_char(char32_t c) {
  const unicode::Category k = unicode::category(c);
  return (unicode::is_alphanumeric(c) && k != unicode::Category::No) || unicode::is_mark(c) ||
         k == unicode::Category::Pc || c == 0x200C || c == 0x200D;
}

}  // namespace tern::hf
