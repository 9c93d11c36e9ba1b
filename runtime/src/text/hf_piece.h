// SPDX-License-Identifier: MIT
// The string a tokenizer.json pipeline rewrites (tokenizers' NormalizedString, less what encoding never reads) and
// the ways its normalizers and pre-tokenizers change and cut it: the Rust's `transform` alignment rule, patterns'
// find_matches, and `split` with its delimiter behaviours (tokenizer/normalizer.rs, tokenizer/pattern.rs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "text/hf_regex.h"
#include "tern_generated.h"

namespace tern::hf {

// A part of the input text: its normalized text and, for each byte of it, the offset in the whole input of the
// original character it is aligned with (the start of the Rust's alignment pair). Only those starts are kept: the
// one thing encoding reads from them is where a piece starts in the original text (Metaspace's prepend_scheme First
// prepends only to the piece that starts at offset 0).
// 4 bytes: texts are below 4 GiB (HfTokenizer::encode refuses longer ones), and the vector is the largest thing
// encoding keeps per byte of text.
using Origin = uint32_t;
struct Piece {
  std::string text;
  std::vector<Origin> origin;  // [text.size()]
  size_t shift = 0;            // offset in the input where this piece's original text starts (offsets_original().0)
};

// The piece of the whole input `text`, each byte aligned with itself.
Piece whole_piece(std::string_view text);

// One character of a rewritten text and how it relates to the characters it replaces, as the Rust's
// transform_range takes it: 1 a new character, 0 replaces the next one, -N replaces the next one and removes N more.
struct Change {
  char32_t c;
  int32_t change;
};
// Replaces the bytes [begin, end) of piece->text (character boundaries) by `dest`, after skipping `initial_offset`
// characters of the old range; each new character takes the origin the Rust's alignment rule gives it.
void transform_range(Piece* piece, size_t begin, size_t end, const std::vector<Change>& dest, size_t initial_offset);
inline void transform(Piece* piece, const std::vector<Change>& dest, size_t initial_offset) {
  transform_range(piece, 0, piece->text.size(), dest, initial_offset);
}
// NormalizedString::prepend: s in front of a non-empty text, aligned with its first character.
void prepend(Piece* piece, std::string_view s);

// A pattern's find_matches: consecutive spans that cover the text, each a match or not.
struct Span {
  size_t begin, end;
  bool match;
};
using Spans = std::vector<Span>;
// Every occurrence of a non-empty literal, leftmost first, without overlap (the Rust compiles it as an escaped regex).
Spans find_literal(std::string_view text, std::string_view literal);
// Every match of a regex, stepping past empty matches as the onig crate's find_iter does.
Spans find_regex(std::string_view text, const HfRegex& regex);
// Every character for which `is_match` holds is a match of its own.
Spans find_chars(std::string_view text, const std::function<bool(char32_t)>& is_match);
void invert(Spans* spans);

// NormalizedString::replace: each match becomes `content`.
void replace(Piece* piece, const Spans& spans, std::string_view content);
// NormalizedString::split: the pieces the spans give under `behavior`, in order (possibly empty ones).
void split(const Piece& piece, const Spans& spans, fb::HfSplitBehavior behavior, std::vector<Piece>* out);
// The piece of bytes [begin, end) of piece.text (character boundaries, begin < end).
Piece slice(const Piece& piece, size_t begin, size_t end);

// Rust's regex \w (Unicode's word characters: Alphabetic, marks, Nd, Pc, Join_Control).
bool is_word_char(char32_t c);

}  // namespace tern::hf
