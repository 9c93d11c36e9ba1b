// SPDX-License-Identifier: MIT
#include "sentencepiece_corpus.h"

#include <cstring>
#include <sstream>

#include "test_support.h"

namespace tern::test {

namespace {

// splitmix64: the same sequence everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return size_t(next() % n); }
  template <typename T>
  const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }

 private:
  uint64_t s_;
};

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// Inserts `what` at a random byte position (which may split a UTF-8 sequence: that is wanted too).
std::string insert_at_random(const std::string& line, const std::string& what, Rng& rng) {
  const size_t at = rng.below(line.size() + 1);
  return line.substr(0, at) + what + line.substr(at);
}

// Snippets that exercise one rule each. NUL, controls, zero-width, NBSP and other spaces, ligatures, combining
// marks, CJK, Hangul, emoji (with skin tone and ZWJ), full-width and half-width forms, the escape symbol itself,
// piece-looking strings, malformed and truncated UTF-8.
const std::vector<std::string>& snippets() {
  static const std::vector<std::string> s = {
      std::string(1, '\0'), "\x01", "\x7f", "\r", "\x0b", "\x0c", "\t", "\t\t", "  ", "   ",
      utf8(0x200B), utf8(0x200D), utf8(0xFEFF), utf8(0x00AD), utf8(0x00A0), utf8(0x2003), utf8(0x3000),
      utf8(0x2028), utf8(0x0085), utf8(0xFB01), utf8(0xFB02), utf8(0xFB03), utf8(0x2126), utf8(0x212B),
      "e" + utf8(0x0301), "a" + utf8(0x0308), utf8(0x00E9), utf8(0x00C5), utf8(0x1E9B) + utf8(0x0323),
      utf8(0x4E2D) + utf8(0x6587), utf8(0x65E5) + utf8(0x672C) + utf8(0x8A9E), utf8(0xD55C) + utf8(0xAD6D),
      utf8(0x1100) + utf8(0x1161), utf8(0x3042) + utf8(0x30A2), utf8(0xFF71) + utf8(0xFF9E),
      utf8(0x1F600), utf8(0x1F44D) + utf8(0x1F3FD), utf8(0x1F468) + utf8(0x200D) + utf8(0x1F469),
      utf8(0xFF21) + utf8(0xFF42) + utf8(0xFF13), utf8(0x2460), utf8(0x00BD), utf8(0x2075), utf8(0x1D400),
      utf8(0x2581), utf8(0x2581) + " " + utf8(0x2581), "<unk>", "<s>", "</s>", "<0x41>", "<sep>", "[MASK]",
      utf8(0xFFFD), utf8(0x10FFFF), utf8(0xE000), utf8(0x0627) + utf8(0x0644), utf8(0x05D0),
      "\xff", "\xfe\xfe", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80",
      "\x80", "\xbf\x80", "\xe2\x96", "\xe2", "\xf0\x9f\x98", "\xc3", "\xe2\x82\xac\xe2\x82",
  };
  return s;
}

std::string upper_ascii(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = char(c - 'a' + 'A');
  }
  return s;
}

// ASCII letters and digits as their full-width forms (U+FF01 block), each with probability 1/2.
std::string full_width(const std::string& s, Rng& rng) {
  std::string out;
  for (char c : s) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum && rng.below(2) == 0) {
      out += utf8(0xFF01 + uint32_t(c - '!'));
    } else {
      out += c;
    }
  }
  return out;
}

// Spaces doubled or turned into tabs, and whitespace put in front and behind.
std::string mangle_spaces(const std::string& s, Rng& rng) {
  static const std::vector<std::string> ws = {" ", "  ", "\t", " \t ", "   ", "\n", utf8(0x00A0)};
  std::string out = rng.below(2) ? rng.pick(ws) : "";
  for (char c : s) {
    if (c == ' ' && rng.below(3) == 0) {
      out += rng.pick(ws);
    } else {
      out += c;
    }
  }
  if (rng.below(2)) out += rng.pick(ws);
  return out;
}

// Replaces every occurrence of `from` by `to`.
std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// Vowels with a combining acute or as precomposed letters.
std::string accents(const std::string& s, Rng& rng) {
  std::string out;
  for (char c : s) {
    out += c;
    if ((c == 'e' || c == 'a' || c == 'o') && rng.below(3) == 0) out += utf8(0x0301);
  }
  return replace_all(replace_all(out, "u", utf8(0x00FC)), "i", utf8(0x00EF));
}

}  // namespace

std::vector<std::string> kjv_heldout_lines() {
  std::istringstream in(read_file(source_path("examples/models/kjv-byte/heldout.txt")));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> unicode_training_lines() {
  return {
      "Caf" + utf8(0x00E9) + " cr" + utf8(0x00E8) + "me br" + utf8(0x00FB) + "l" + utf8(0x00E9) + "e, na" +
          utf8(0x00EF) + "ve fa" + utf8(0x00E7) + "ade",
      utf8(0x039A) + utf8(0x03B1) + utf8(0x03BB) + utf8(0x03B7) + utf8(0x03BC) + utf8(0x03AD) + utf8(0x03C1) +
          utf8(0x03B1) + " " + utf8(0x03BA) + utf8(0x03CC) + utf8(0x03C3) + utf8(0x03BC) + utf8(0x03B5),
      utf8(0x041F) + utf8(0x0440) + utf8(0x0438) + utf8(0x0432) + utf8(0x0435) + utf8(0x0442) + " " +
          utf8(0x043C) + utf8(0x0438) + utf8(0x0440),
      utf8(0x4E2D) + utf8(0x6587) + utf8(0x6587) + utf8(0x672C) + utf8(0x3002) + utf8(0x65E5) + utf8(0x672C) +
          utf8(0x8A9E) + utf8(0x306E) + utf8(0x30C6) + utf8(0x30AD) + utf8(0x30B9) + utf8(0x30C8),
      utf8(0xD55C) + utf8(0xAD6D) + utf8(0xC5B4) + " " + utf8(0x1F600) + utf8(0x1F44D) + " " + utf8(0xFF21) +
          utf8(0xFF22) + utf8(0xFF23) + " " + utf8(0xFB01) + "ne",
  };
}

std::vector<std::string> sentencepiece_test_lines(const std::vector<std::string>& base, size_t count, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::string> lines;
  lines.reserve(count);
  for (size_t i = 0; i < base.size() && lines.size() < count; ++i) lines.push_back(base[i]);
  while (lines.size() < count) {
    std::string line = rng.pick(base);
    // One to three transformations, in random order.
    const size_t steps = 1 + rng.below(3);
    for (size_t s = 0; s < steps; ++s) {
      switch (rng.below(13)) {
        case 0: line = upper_ascii(line); break;
        case 1: line = mangle_spaces(line, rng); break;
        case 2: line = full_width(line, rng); break;
        case 3: line = replace_all(replace_all(line, "fi", utf8(0xFB01)), "fl", utf8(0xFB02)); break;
        case 4: line = accents(line, rng); break;
        case 5:
        case 6:
        case 7: line = insert_at_random(line, rng.pick(snippets()), rng); break;
        case 8: line = line.substr(0, rng.below(line.size() + 1)); break;  // may cut a UTF-8 sequence short
        case 9: {  // a very long line
          const size_t n = 5 + rng.below(40);
          for (size_t k = 0; k < n; ++k) line += " " + rng.pick(base);
          break;
        }
        case 10: {  // raw random bytes
          const size_t n = rng.below(24);
          for (size_t k = 0; k < n; ++k) line = insert_at_random(line, std::string(1, char(rng.below(256))), rng);
          break;
        }
        case 11: line = rng.below(4) == 0 ? std::string() : rng.pick(snippets()); break;
        default: {  // a line of snippets alone
          line.clear();
          const size_t n = 1 + rng.below(8);
          for (size_t k = 0; k < n; ++k) line += rng.pick(snippets()) + (rng.below(2) ? " " : "");
          break;
        }
      }
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::string proto_varint(uint64_t value) {
  std::string out;
  for (; value >= 0x80; value >>= 7) out += char(0x80 | (value & 0x7F));
  return out + char(value);
}

std::string sentencepiece_model_proto(const std::vector<std::string>& pieces) {
  // Field keys: ModelProto.pieces 1 (piece 1, score 2 as fixed32, type 3), trainer_spec 2 (model_type 3 = UNIGRAM),
  // normalizer_spec 3 (name 1).
  auto bytes_field = [](char key, const std::string& value) { return key + proto_varint(value.size()) + value; };
  std::string model;
  model.reserve(pieces.size() * 24 + 64);
  auto add_piece = [&](const std::string& piece, float score, int type) {
    char fixed[4];
    std::memcpy(fixed, &score, 4);
    model += bytes_field('\x0a', bytes_field('\x0a', piece) + '\x15' + std::string(fixed, 4) + '\x18' + char(type));
  };
  add_piece("<unk>", 0.0f, 2);
  add_piece("<s>", 0.0f, 3);
  add_piece("</s>", 0.0f, 3);
  for (size_t i = 0; i < pieces.size(); ++i) add_piece(pieces[i], -1.0f - float(i % 1000) * 0.01f, 1);
  model += bytes_field('\x12', std::string("\x18\x01", 2));
  model += bytes_field('\x1a', bytes_field('\x0a', "identity"));
  return model;
}

}  // namespace tern::test
