// SPDX-License-Identifier: MIT
// Lookups over the generated tables (unicode_data.h), UTF-8, normalization forms (UAX #15), lower-casing and
// extended grapheme clusters (UAX #29).
#include "text/unicode.h"

#include <algorithm>

#include "text/unicode_data.h"

namespace tern::unicode {

const char* const kUnicodeVersion = data::kVersion;

namespace {

using data::GraphemeBreak;

uint16_t record(char32_t c) {
  if (c > 0x10FFFF) return uint16_t(Category::Cn);
  return data::kRecords[data::kStage2[size_t(data::kStage1[c >> data::kShift]) * data::kBlock +
                                      (c & (data::kBlock - 1))]];
}

GraphemeBreak grapheme_break(uint16_t r) { return GraphemeBreak((r >> 5) & 0xF); }
bool is_pictographic(uint16_t r) { return (r >> 11) & 1; }

// Hangul syllables (Unicode chapter 3.12): S = SBase + (L * VCount + V) * TCount + T.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t combining_class(char32_t c) {
  if (c < 0x300) return 0;
  const data::CombiningRun* end = data::kCombining + data::kCombiningCount;
  const data::CombiningRun* it =
      std::upper_bound(data::kCombining, end, c, [](char32_t v, const data::CombiningRun& r) { return v < r.first; });
  if (it == data::kCombining) return 0;
  --it;
  return c <= it->last ? it->ccc : 0;
}

const data::Decomposition* find_decomposition(char32_t c) {
  if (c < 0xA0) return nullptr;
  const data::Decomposition* end = data::kDecompositions + data::kDecompositionCount;
  const data::Decomposition* it = std::lower_bound(
      data::kDecompositions, end, c, [](const data::Decomposition& d, char32_t v) { return d.code_point < v; });
  return it != end && it->code_point == c ? it : nullptr;
}

// Appends c's full decomposition (canonical, or compatibility too) to out. Mappings nest a few levels at most.
void decompose(char32_t c, bool compat, std::u32string* out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    char32_t s = c - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const data::Decomposition* d = find_decomposition(c);
  if (d == nullptr || (d->compat && !compat)) {
    out->push_back(c);
    return;
  }
  for (size_t i = 0; i < d->length; ++i) decompose(data::kDecompositionPool[d->offset + i], compat, out);
}

// The primary composite of (a, b), or 0 when there is none.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const data::Composition* end = data::kCompositions + data::kCompositionCount;
  const data::Composition* it =
      std::lower_bound(data::kCompositions, end, std::make_pair(a, b), [](const data::Composition& p, auto key) {
        return p.first != key.first ? p.first < key.first : p.second < key.second;
      });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

// Canonical ordering: each run of non-starters sorted stably by combining class.
void reorder(std::u32string* s) {
  size_t i = 0;
  while (i < s->size()) {
    if (combining_class((*s)[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < s->size() && combining_class((*s)[j]) != 0) ++j;
    if (j - i > 1)
      std::stable_sort(s->begin() + i, s->begin() + j,
                       [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
}

// Canonical composition of a canonically ordered, fully decomposed string, in place.
void compose(std::u32string* s) {
  if (s->empty()) return;
  size_t starter = std::u32string::npos;  // index (in the output) of the last starter that may still compose
  int last_class = 0;                     // class of the last character kept after the starter (0: none)
  size_t out = 0;
  for (size_t i = 0; i < s->size(); ++i) {
    char32_t c = (*s)[i];
    int cc = combining_class(c);
    // Not blocked: nothing kept since the starter, or everything kept since has a lower class than c.
    if (starter != std::u32string::npos && (last_class == 0 || last_class < cc)) {
      char32_t composite = compose_pair((*s)[starter], c);
      if (composite != 0) {
        (*s)[starter] = composite;
        continue;
      }
    }
    if (cc == 0) {
      starter = out;
      last_class = 0;
    } else {
      last_class = cc;
    }
    (*s)[out++] = c;
  }
  s->resize(out);
}

}  // namespace

Category category(char32_t c) { return Category(record(c) & 0x1F); }
bool is_white_space(char32_t c) { return (record(c) >> 9) & 1; }
bool is_alphanumeric(char32_t c) { return ((record(c) >> 10) & 1) || is_number(c); }
bool is_combining_mark_unicode9(char32_t c) { return (record(c) >> 12) & 1; }
bool is_punctuation_unicode8(char32_t c) { return (record(c) >> 13) & 1; }

size_t decode_utf8(std::string_view s, size_t pos, char32_t* c) {
  if (pos >= s.size()) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
  size_t left = s.size() - pos;
  unsigned char b0 = p[0];
  if (b0 < 0x80) {
    *c = b0;
    return 1;
  }
  size_t n;
  char32_t v;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
    v = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    v = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    v = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    *c = 0xFFFD;
    return 1;
  }
  if (left < n || p[1] < lo || p[1] > hi) {
    *c = 0xFFFD;
    return 1;
  }
  for (size_t i = 1; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) {
      *c = 0xFFFD;
      return 1;
    }
    v = (v << 6) | (p[i] & 0x3F);
  }
  *c = v;
  return n;
}

void append_utf8(char32_t c, std::string* out) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
  if (c < 0x80) {
    out->push_back(char(c));
  } else if (c < 0x800) {
    out->push_back(char(0xC0 | (c >> 6)));
    out->push_back(char(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(char(0xE0 | (c >> 12)));
    out->push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(char(0x80 | (c & 0x3F)));
  } else {
    out->push_back(char(0xF0 | (c >> 18)));
    out->push_back(char(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(char(0x80 | (c & 0x3F)));
  }
}

std::string normalize(std::string_view text, Form form) {
  bool ascii = std::all_of(text.begin(), text.end(), [](char b) { return static_cast<unsigned char>(b) < 0x80; });
  if (ascii) return std::string(text);
  bool compat = form == Form::NFKC || form == Form::NFKD;
  std::u32string chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    char32_t c;
    pos += decode_utf8(text, pos, &c);
    decompose(c, compat, &chars);
  }
  reorder(&chars);
  if (form == Form::NFC || form == Form::NFKC) compose(&chars);
  std::string out;
  out.reserve(text.size());
  for (char32_t c : chars) append_utf8(c, &out);
  return out;
}

std::string to_lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const data::LowerMapping* end = data::kLowerMappings + data::kLowerMappingCount;
  for (size_t pos = 0; pos < text.size();) {
    char32_t c;
    pos += decode_utf8(text, pos, &c);
    if (c < 0x80) {
      out.push_back(char(c >= 'A' && c <= 'Z' ? c + 32 : c));
      continue;
    }
    const data::LowerMapping* it = std::lower_bound(
        data::kLowerMappings, end, c, [](const data::LowerMapping& m, char32_t v) { return m.code_point < v; });
    if (it == end || it->code_point != c) {
      append_utf8(c, &out);
      continue;
    }
    for (char32_t l : it->lower)
      if (l != 0) append_utf8(l, &out);
  }
  return out;
}

std::vector<size_t> grapheme_starts(std::string_view text) {
  std::vector<size_t> starts;
  GraphemeBreak prev = GraphemeBreak::Other;
  size_t regional_run = 0;     // regional indicators in a row ending at the previous character
  bool emoji_tail = false;     // the previous characters are ExtPict Extend* (GB11's left side before the ZWJ)
  bool emoji_zwj = false;      // ... followed by the ZWJ that is the previous character
  for (size_t pos = 0; pos < text.size();) {
    char32_t c;
    size_t len = decode_utf8(text, pos, &c);
    uint16_t r = record(c);
    GraphemeBreak gb = grapheme_break(r);
    bool pictographic = is_pictographic(r);
    bool boundary;
    if (pos == 0) {
      boundary = true;  // GB1
    } else if (prev == GraphemeBreak::CR && gb == GraphemeBreak::LF) {
      boundary = false;  // GB3
    } else if (prev == GraphemeBreak::Control || prev == GraphemeBreak::CR || prev == GraphemeBreak::LF ||
               gb == GraphemeBreak::Control || gb == GraphemeBreak::CR || gb == GraphemeBreak::LF) {
      boundary = true;  // GB4, GB5
    } else if (prev == GraphemeBreak::L && (gb == GraphemeBreak::L || gb == GraphemeBreak::V ||
                                            gb == GraphemeBreak::LV || gb == GraphemeBreak::LVT)) {
      boundary = false;  // GB6
    } else if ((prev == GraphemeBreak::LV || prev == GraphemeBreak::V) &&
               (gb == GraphemeBreak::V || gb == GraphemeBreak::T)) {
      boundary = false;  // GB7
    } else if ((prev == GraphemeBreak::LVT || prev == GraphemeBreak::T) && gb == GraphemeBreak::T) {
      boundary = false;  // GB8
    } else if (gb == GraphemeBreak::Extend || gb == GraphemeBreak::ZWJ || gb == GraphemeBreak::SpacingMark ||
               prev == GraphemeBreak::Prepend) {
      boundary = false;  // GB9, GB9a, GB9b
    } else if (emoji_zwj && pictographic) {
      boundary = false;  // GB11
    } else if (prev == GraphemeBreak::RegionalIndicator && gb == GraphemeBreak::RegionalIndicator) {
      boundary = regional_run % 2 == 0;  // GB12, GB13: pairs
    } else {
      boundary = true;  // GB999
    }
    if (boundary) starts.push_back(pos);
    regional_run = gb == GraphemeBreak::RegionalIndicator ? regional_run + 1 : 0;
    emoji_zwj = emoji_tail && gb == GraphemeBreak::ZWJ;
    emoji_tail = pictographic || (emoji_tail && gb == GraphemeBreak::Extend);
    prev = gb;
    pos += len;
  }
  return starts;
}

}  // namespace tern::unicode
