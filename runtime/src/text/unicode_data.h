// SPDX-License-Identifier: MIT
// The tables unicode.cpp reads, generated into unicode_data.cpp by tools/unicode/make_tables.py from the Unicode
// Character Database. Private to runtime/src/text/.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::unicode::data {

extern const char* const kVersion;

// Per code point, a packed record: bits 0-4 General_Category (unicode::Category order), 5-8 Grapheme_Cluster_Break
// (GraphemeBreak order), 9 White_Space, 10 Alphabetic, 11 Extended_Pictographic, 12 General_Category M of Unicode 9.0
// (unicode-normalization-alignments' is_combining_mark), 13 General_Category P of Unicode 8.0 (the unicode_categories
// crate's is_punctuation).
// record(c) = kRecords[kStage2[kStage1[c >> kShift] * kBlock + (c & (kBlock - 1))]] for c <= U+10FFFF.
enum class GraphemeBreak : uint8_t {
  Other, CR, LF, Control, Extend, ZWJ, RegionalIndicator, Prepend, SpacingMark, L, V, T, LV, LVT
};
constexpr unsigned kShift = 7;
constexpr unsigned kBlock = 1u << kShift;
extern const uint16_t kStage1[0x110000 >> kShift];
extern const uint8_t kStage2[];
extern const uint16_t kRecords[];

// Canonical_Combining_Class runs, sorted: code points [first, last] have class ccc (all others 0).
struct CombiningRun {
  uint32_t first;
  uint32_t last;
  uint8_t ccc;
};
extern const CombiningRun kCombining[];
extern const size_t kCombiningCount;

// One-level decomposition mappings of UnicodeData.txt (Hangul syllables excluded: they are algorithmic), sorted by
// code point: kDecompositionPool[offset .. offset + length) is the mapping; compat marks a <tag>ged mapping.
struct Decomposition {
  uint32_t code_point;
  uint16_t offset;
  uint8_t length;
  uint8_t compat;
};
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionCount;
extern const uint32_t kDecompositionPool[];

// Canonical compositions (pairs of a two-character canonical mapping, less Full_Composition_Exclusion), sorted by
// (first, second).
struct Composition {
  uint32_t first;
  uint32_t second;
  uint32_t composite;
};
extern const Composition kCompositions[];
extern const size_t kCompositionCount;

// Full lower-case mappings that differ from the character itself, sorted: UnicodeData's simple mapping, replaced
// by SpecialCasing.txt's unconditional one where there is one. Unused lower[] slots are 0.
struct LowerMapping {
  uint32_t code_point;
  uint32_t lower[3];
};
extern const LowerMapping kLowerMappings[];
extern const size_t kLowerMappingCount;

// Simple case folding (CaseFolding.txt statuses C and S), sorted by code point: code_point folds to folded.
struct CaseFold {
  uint32_t code_point;
  uint32_t folded;
};
extern const CaseFold kCaseFolds[];
extern const size_t kCaseFoldCount;

}  // namespace tern::unicode::data
