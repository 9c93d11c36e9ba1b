// SPDX-License-Identifier: MIT
// HfRegex (runtime/src/text/hf_regex.h) against Oniguruma: the pieces that the `tokenizers` library's Split
// pre-tokenizer cuts random mixed-script strings into with the patterns of real tokenizer.json files
// (tests/fixtures/hf_regex_splits.json, written by tools/reference/make_hf_regex_fixture.js); the syntax outside the
// subset and past the limits refused with a message naming it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "text/hf_regex.h"

namespace {

using namespace tern;

std::unique_ptr<HfRegex> compiled(const std::string& pattern) {
  auto r = HfRegex::compile(pattern);
  INFO(pattern << ": " << r.status().message());
  REQUIRE(r.ok());
  return std::move(r).value();
}

// Split with behavior Isolated: every match and every gap between matches is a piece (empty ones dropped), as UTF-8
// byte lengths. An empty match moves the search on by one character.
std::vector<size_t> isolated_pieces(const HfRegex& re, const std::string& text) {
  std::vector<size_t> pieces;
  size_t pos = 0, last = 0, begin, end;
  while (pos <= text.size() && re.find(text, pos, &begin, &end)) {
    if (begin > last) pieces.push_back(begin - last);
    if (end > begin) {
      pieces.push_back(end - begin);
      last = end;
      pos = end;
    } else {
      if (begin >= text.size()) break;
      size_t step = 1;
      while (begin + step < text.size() && (static_cast<unsigned char>(text[begin + step]) & 0xC0) == 0x80) ++step;
      pos = begin + step;
    }
  }
  if (text.size() > last) pieces.push_back(text.size() - last);
  return pieces;
}

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char b : s) {
    if (b == '\n') out += "\\n";
    else if (b == '\r') out += "\\r";
    else if (b == '\t') out += "\\t";
    else out.push_back(char(b));
  }
  return out;
}

TEST_CASE("hf_regex: the Split patterns of GPT-2, Llama 3, Qwen and GPT-4o cut text as Oniguruma does", "[hf_regex]") {
  const nlohmann::json fixture =
      nlohmann::json::parse(test::read_file(test::source_path("tests/fixtures/hf_regex_splits.json")));
  size_t compared = 0;
  for (const auto& [name, pattern] : fixture.at("patterns").items()) {
    auto re = compiled(pattern.get<std::string>());
    for (const auto& c : fixture.at("cases")) {
      const std::string text = c.at("text").get<std::string>();
      const std::vector<size_t> expected = c.at("pieces").at(name).get<std::vector<size_t>>();
      INFO(name << " on \"" << printable(text) << "\"");
      CHECK(isolated_pieces(*re, text) == expected);
      ++compared;
    }
  }
  CHECK(compared >= 2000);
}

TEST_CASE("hf_regex: leftmost-first priority, quantifiers, classes, anchors and case folding", "[hf_regex]") {
  struct Case {
    const char* pattern;
    const char* text;
    long begin;  // -1: no match
    long end;
  };
  // Expected spans as Oniguruma reports them (each checked with the tokenizers library: the first piece of a Split
  // with behavior Isolated that behavior Removed drops).
  const Case cases[] = {
      {"a|ab", "ab", 0, 1},          {"ab|a", "ab", 0, 2},         {"a*?b", "aab", 0, 3},
      {"a+?", "aaa", 0, 1},          {"a{2,3}", "aaaa", 0, 3},     {"a{2,3}?", "aaaa", 0, 2},
      {"a{2}", "a aa", 2, 4},        {"a{,2}b", "aaab", 1, 4},     {"x{", "x{", 0, 2},
      {"[^a-c]+", "abcdef", 3, 6},   {"[\\d\\s]+", "ab1 2c", 2, 5}, {"\\D+", "12ab3", 2, 4},
      {"[\\S]+", " ab ", 1, 3},      {"[^\\S\\n]+", "a \t\nb", 1, 3}, {"\\w+", "-é_1-", 1, 5},
      {"\\p{Lu}+", "abCDe", 2, 4},    {"\\P{L}+", "ab12c", 2, 4},   {"\\p{^N}+", "12ab3", 2, 4},
      {"(?i:abc)", "xAbC", 1, 4},    {"(?i)k", "\xE2\x84\xAA", 0, 3}, {"a(?i)b|c", "aB", 0, 2},
      {"^b", "a\nb", 2, 3},          {"a$", "a\nb", 0, 1},          {"\\Aa", "ba", -1, -1},
      {"a\\z", "a\na", 2, 3},        {"a(?=b)", "acab", 2, 3},      {"a(?!b)", "aba", 2, 3},
      {"\\s+(?!\\S)", "a   b", 1, 3}, {"\\s+(?!\\S)", "a   ", 1, 4},  {".+", "ab\ncd", 0, 2},
      {"(?m:.+)", "ab\ncd", 0, 5},    {"\\x{e9}|\\u00E8", "\xC3\xA8", 0, 2}, {"[\\x41-\\x43]+", "xABCD", 1, 4},
      {"(a|b)*c", "ababc", 0, 5},    {"(?:)x", "ax", 1, 2},          {"(a*)*b", "aab", 0, 3},
      {"\\.\\*", "a.*", 1, 3},        {"[]a]+", "]a]", 0, 3},        {"[a-]+", "-a-", 0, 3},
  };
  for (const Case& c : cases) {
    auto re = compiled(c.pattern);
    size_t begin = 0, end = 0;
    const bool found = re->find(c.text, 0, &begin, &end);
    INFO(c.pattern << " on \"" << printable(c.text) << "\"");
    REQUIRE(found == (c.begin >= 0));
    if (found) {
      CHECK(long(begin) == c.begin);
      CHECK(long(end) == c.end);
    }
  }
  auto re = compiled("b");
  size_t begin, end;
  CHECK(re->find("abab", 2, &begin, &end));
  CHECK(begin == 3);
  CHECK_FALSE(re->find("abab", 5, &begin, &end));
}

TEST_CASE("hf_regex: syntax outside the subset and patterns past the limits are refused with a reason", "[hf_regex]") {
  struct Case {
    std::string pattern;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"(a)\\1", "backreference"},
      {"\\k<x>", "backreference"},
      {"(?<=a)b", "lookbehind"},
      {"(?<!a)b", "lookbehind"},
      {"a(?=bc)", "lookahead"},
      {"a(?!b|c)", "lookahead"},
      {"(?>a)", "atomic"},
      {"\\p{Foo}", "unknown property name"},
      {"[\\p{Nope}]", "unknown property name"},
      {"(a", "unmatched '('"},
      {"a)", "unmatched ')'"},
      {"[ab", "unterminated character class"},
      {"*a", "nothing to repeat"},
      {"a{3,2}", "m < n"},
      {"a*+", "possessive"},
      {"\\b", "word boundary"},
      {"[a&&b]", "intersection"},
      {"[[:alpha:]]", "nested character class"},
      {"\\x{110000}", "U+10FFFF"},
      {"a{1000}{1000}", "instructions"},
      {"(?:a{100}){1000}", "instructions"},
      {"a{100001}", "repeat count"},
      {std::string(HfRegex::kMaxPatternBytes + 1, 'a'), "the limit is"},
      {std::string(2000, '(') + std::string(2000, ')'), "nested"},
      {"a\xFF", "invalid UTF-8"},
  };
  for (const Case& c : cases) {
    auto r = HfRegex::compile(c.pattern);
    INFO(c.pattern.substr(0, 40));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == TERN_INVALID_ARGUMENT);
    CHECK_THAT(r.status().message(), Catch::Contains(c.message));
  }
  // A 10 MB pattern is refused by its length before anything is parsed.
  auto r = HfRegex::compile(std::string(10 << 20, 'a'));
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("the limit is"));
}

}  // namespace
