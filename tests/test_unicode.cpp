// SPDX-License-Identifier: MIT
// runtime/src/text/unicode.h against independent implementations: normalization forms, lower case, White_Space and
// Alphabetic against Node's ICU (tests/unicode/node_unicode.js), general categories against Python's unicodedata
// (tests/unicode/python_categories.py), extended grapheme clusters against the UCD's GraphemeBreakTest.txt.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "run_tool.h"
#include "test_support.h"
#include "tern/tern.hpp"
#include "text/unicode.h"

namespace {

using namespace tern;
using unicode::Category;

constexpr const char* kCategoryNames[] = {"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl",
                                          "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc",
                                          "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};

std::string hex_string(std::string_view utf8) {
  std::string out;
  for (size_t pos = 0; pos < utf8.size();) {
    char32_t c;
    pos += unicode::decode_utf8(utf8, pos, &c);
    char buf[16];
    std::snprintf(buf, sizeof buf, "%s%X", out.empty() ? "" : " ", unsigned(c));
    out += buf;
  }
  return out;
}

std::string utf8_of(const std::vector<char32_t>& chars) {
  std::string s;
  for (char32_t c : chars) unicode::append_utf8(c, &s);
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!s.empty() && s.back() == sep) parts.emplace_back();
  return parts;
}

// Runs `interpreter script args...`; false (with a skip note) when the interpreter is missing.
bool run_script(const std::string& interpreter, const std::string& script, const std::vector<std::string>& args,
                const std::string& scratch) {
  std::vector<std::string> argv = {interpreter, test::source_path(script)};
  argv.insert(argv.end(), args.begin(), args.end());
  test::ToolRun run = test::run_build_machine_program("/usr/bin/env", argv, scratch);
  if (run.exit_code == 127) {
    WARN("skipped: no " << interpreter << " to compute the expected values");
    test::note_skipped();
    return false;
  }
  INFO(run.err);
  REQUIRE(!run.timed_out);
  REQUIRE(run.exit_code == 0);
  return true;
}

// Code points DerivedAge.txt does not date to Unicode 9.0 or before (the version of the normalization tables,
// unicode.h): later or unassigned there. Without the UCD's file every code point counts as later (*dated false),
// so no normalization is compared against Node's newer ICU.
std::vector<bool> dated_after_9(bool* dated) {
  std::vector<bool> after(0x110000, true);
  std::ifstream in("/usr/share/unicode/DerivedAge.txt");
  *dated = bool(in);
  if (!in) return after;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    unsigned first = 0, last = 0, major = 0, minor = 0;
    if (std::sscanf(line.c_str(), "%X..%X ; %u.%u", &first, &last, &major, &minor) != 4) {
      if (std::sscanf(line.c_str(), "%X ; %u.%u", &first, &major, &minor) != 3) continue;
      last = first;
    }
    if (major <= 9 && last < after.size())
      for (unsigned c = first; c <= last; ++c) after[c] = false;
  }
  return after;
}

// Strings to normalize: every assigned code point alone, then random sequences of starters, decomposable and
// compatibility characters, Hangul jamo and syllables and combining marks of many classes.
std::vector<std::vector<char32_t>> normalization_cases() {
  std::vector<std::vector<char32_t>> cases;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    Category k = unicode::category(c);
    if (k != Category::Cn && k != Category::Cs) cases.push_back({c});
  }
  const std::vector<char32_t> pool = {
      'A', 'a', 'e', 'o', 'u', 'C', 's', 0xC5, 0xE9, 0x1E0B, 0x1E9B, 0x212B, 0x2126, 0xFB01, 0x3300, 0xFF76,
      0xFF9E, 0x00BD, 0x1100, 0x1161, 0x11A8, 0x11C2, 0xAC00, 0xAC01, 0xD7A3, 0x0300, 0x0301, 0x0308, 0x0323,
      0x0327, 0x031B, 0x0345, 0x0344, 0x0340, 0x05B0, 0x05B7, 0x0F71, 0x0F72, 0x0F74, 0x0F80, 0x0E48, 0x1D165,
      0x1D16E, 0x0B47, 0x0B3E, 0x0B57, 0x0DD9, 0x0DCF, 0x0958, 0x2ADC, 0x0338, 0x003C, 0x1F71, 0x03B1, 0x0313,
      0x0399, 0x3099, 0x304B, 0x30AB, 0x0627, 0x0653, 0x1B05, 0x1B35, 0x0CC6, 0x0CC2, 0x0CD5, 0x1FBF, 0x0020};
  std::mt19937 rng(1234);
  for (int i = 0; i < 4000; ++i) {
    std::vector<char32_t> s(1 + rng() % 7);
    for (char32_t& c : s) c = pool[rng() % pool.size()];
    cases.push_back(s);
  }
  return cases;
}

TEST_CASE("unicode: normalization forms, lower case, White_Space and Alphabetic match Node's ICU", "[unicode]") {
  const std::string scratch = test::scratch_dir("unicode_node");
  const std::vector<std::vector<char32_t>> cases = normalization_cases();
  {
    std::ofstream in(scratch + "/in.txt");
    for (const auto& s : cases) in << hex_string(utf8_of(s)) << "\n";
  }
  if (!run_script("node", "tests/unicode/node_unicode.js", {scratch + "/in.txt", scratch + "/out.txt"}, scratch))
    return;
  std::ifstream out(scratch + "/out.txt");
  std::string line, icu_version;
  std::getline(out, icu_version);
  // The per-character facts follow Unicode 16.0 and later (unicode.h): an older ICU (Debian's own Node.js has 15.0)
  // would disagree on characters added or changed since.
  unsigned icu_major = 0;
  std::sscanf(icu_version.c_str(), "%u", &icu_major);
  const bool per_character = icu_major >= 16;
  if (!per_character) {
    WARN("lower case, White_Space and Alphabetic not compared: Node's ICU has Unicode " << icu_version
         << ", older than the tables' 16.0");
    test::note_skipped();
  }
  // The normalization forms follow Unicode 9.0 and Node's ICU a newer version: strings with a later character are
  // left to the test below, whose expected values come from the tokenizers library itself.
  bool dated = false;
  const std::vector<bool> after_9 = dated_after_9(&dated);
  if (!dated) {
    WARN("normalization not compared: no /usr/share/unicode/DerivedAge.txt to tell Unicode 9.0's characters "
         "(apt-get install unicode-data; tools/install-deps.sh installs it)");
    test::note_skipped();
  }
  size_t i = 0, lower_checked = 0, normalization_checked = 0;
  for (; std::getline(out, line) && i < cases.size(); ++i) {
    const std::vector<std::string> expected = split(line, '|');
    REQUIRE(expected.size() == 7);
    const std::string text = utf8_of(cases[i]);
    INFO("input " << hex_string(text));
    bool old = true;
    for (char32_t c : cases[i]) old = old && !after_9[c];
    if (old) {
      CHECK(hex_string(unicode::normalize(text, unicode::Form::NFC)) == expected[0]);
      CHECK(hex_string(unicode::normalize(text, unicode::Form::NFD)) == expected[1]);
      CHECK(hex_string(unicode::normalize(text, unicode::Form::NFKC)) == expected[2]);
      CHECK(hex_string(unicode::normalize(text, unicode::Form::NFKD)) == expected[3]);
      ++normalization_checked;
    }
    if (per_character && cases[i].size() == 1) {
      // Per character, so Final_Sigma's context never applies.
      CHECK(hex_string(unicode::to_lower(text)) == expected[4]);
      CHECK(unicode::is_white_space(cases[i][0]) == (expected[5] == "1"));
      // Node's ICU (Unicode 17) and the tables (16.0) agree on Alphabetic.
      CHECK(unicode::is_alphanumeric(cases[i][0]) == (expected[6] == "1" || unicode::is_number(cases[i][0])));
      ++lower_checked;
    }
  }
  CHECK(i == cases.size());
  if (per_character) CHECK(lower_checked > 100000);
  if (dated) CHECK(normalization_checked > 100000);
}

TEST_CASE("unicode: general categories match Python's unicodedata where its version assigns the code point",
          "[unicode]") {
  const std::string scratch = test::scratch_dir("unicode_python");
  if (!run_script("python3", "tests/unicode/python_categories.py", {scratch + "/categories.txt"}, scratch)) return;
  std::ifstream in(scratch + "/categories.txt");
  std::string version, line;
  std::getline(in, version);
  INFO("Python's Unicode " << version << ", the tables' " << unicode::kUnicodeVersion);
  size_t checked = 0;
  while (std::getline(in, line)) {
    unsigned cp = 0;
    char name[4] = {};
    REQUIRE(std::sscanf(line.c_str(), "%X %2s", &cp, name) == 2);
    INFO("U+" << line);
    if (cp == 0x1171E) continue;  // AHOM SIGN MEDIAL RA: Mn until Unicode 15.1, Mc in the tables' 16.0
    CHECK(std::string(kCategoryNames[size_t(unicode::category(char32_t(cp)))]) == name);
    ++checked;
  }
  CHECK(checked > 250000);
  CHECK(unicode::category(0x110000) == Category::Cn);
  CHECK(unicode::category(0xFFFFFFFF) == Category::Cn);
}

// The Unicode version of each group of facts (unicode.h), pinned by what the tokenizers library makes of the
// characters of blocks that Unicode 8.0 .. 17.0 added to (tests/fixtures/unicode_versions.txt, written by
// tools/reference/make_unicode_versions_fixture.js; the line layout is there).
TEST_CASE("unicode: each group of facts follows the tokenizers library's Unicode version", "[unicode]") {
  std::ifstream in(test::source_path("tests/fixtures/unicode_versions.txt"));
  REQUIRE(in);
  const auto chars = [](const std::string& field) {
    std::vector<char32_t> out;
    if (field == "-") return out;
    for (const std::string& h : split(field, ' ')) out.push_back(char32_t(std::stoul(h, nullptr, 16)));
    return out;
  };
  std::string line;
  size_t checked = 0;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split(line, '|');
    REQUIRE(f.size() == 12);
    INFO(line);
    const char32_t c = char32_t(std::stoul(f[0], nullptr, 16));
    const std::string text = utf8_of({c});
    CHECK(kCategoryNames[size_t(unicode::category(c))] == f[1]);
    CHECK(unicode::is_white_space(c) == (f[2] == "1"));
    CHECK(unicode::normalize(text, unicode::Form::NFC) == utf8_of(chars(f[3])));
    CHECK(unicode::normalize(text, unicode::Form::NFD) == utf8_of(chars(f[4])));
    CHECK(unicode::normalize(text, unicode::Form::NFKC) == utf8_of(chars(f[5])));
    CHECK(unicode::normalize(text, unicode::Form::NFKD) == utf8_of(chars(f[6])));
    CHECK(unicode::to_lower(text) == utf8_of(chars(f[7])));
    CHECK(unicode::is_combining_mark_unicode9(c) == (f[8] == "-"));
    CHECK(unicode::is_punctuation_unicode8(c) == (f[9] == "1"));
    CHECK(unicode::normalize(utf8_of({'a', c, 0x334}), unicode::Form::NFD) == utf8_of(chars(f[10])));
    CHECK(unicode::normalize(utf8_of({'a', 0x301, c}), unicode::Form::NFD) == utf8_of(chars(f[11])));
    ++checked;
  }
  CHECK(checked > 1800);
}

TEST_CASE("unicode: grapheme cluster starts match GraphemeBreakTest.txt", "[unicode]") {
  const std::string path = "/usr/share/unicode/auxiliary/GraphemeBreakTest.txt";
  std::ifstream in(path);
  if (!in) {
    WARN("skipped: no " << path << " (apt-get install unicode-data)");
    test::note_skipped();
    return;
  }
  std::string line;
  size_t checked = 0;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    // "÷ 0020 × 0308 ÷": ÷ a boundary before the next character, × none.
    std::istringstream words(line);
    std::string word, text;
    std::vector<size_t> expected;
    bool boundary = false;
    while (words >> word) {
      if (word == "\xC3\xB7") {
        boundary = true;
      } else if (word == "\xC3\x97") {
        boundary = false;
      } else {
        if (boundary) expected.push_back(text.size());
        unicode::append_utf8(char32_t(std::stoul(word, nullptr, 16)), &text);
      }
    }
    INFO(line);
    CHECK(unicode::grapheme_starts(text) == expected);
    ++checked;
  }
  CHECK(checked >= 600);  // 602 lines in Unicode 15.0's file
  CHECK(unicode::grapheme_starts("").empty());
}

TEST_CASE("unicode: UTF-8 decoding reads each malformed byte as U+FFFD and holds back only a cut-short tail",
          "[unicode]") {
  struct Case {
    std::string bytes;
    char32_t c;
    size_t length;
  };
  const std::vector<Case> cases = {
      {"a", 'a', 1},           {"\xC3\xA9", 0xE9, 2},     {"\xE2\x82\xAC", 0x20AC, 3}, {"\xF0\x9F\x98\x80", 0x1F600, 4},
      {"\xC0\x80", 0xFFFD, 1}, {"\xE0\x80\x80", 0xFFFD, 1}, {"\xED\xA0\x80", 0xFFFD, 1}, {"\xF4\x90\x80\x80", 0xFFFD, 1},
      {"\x80", 0xFFFD, 1},     {"\xE2\x82", 0xFFFD, 1},     {"\xFF", 0xFFFD, 1},         {"\xEF\xBF\xBD", 0xFFFD, 3}};
  for (const Case& k : cases) {
    char32_t c = 0;
    INFO(hex_string(k.bytes));
    CHECK(unicode::decode_utf8(k.bytes, 0, &c) == k.length);
    CHECK(c == k.c);
  }
  char32_t c;
  CHECK(unicode::decode_utf8("ab", 2, &c) == 0);
  // tern.hpp's Utf8Stream releases what is whole and holds back only a character cut short.
  const auto released = [](const std::string& bytes) { return tern::Utf8Stream().push(bytes).size(); };
  CHECK(released("ab\xE2\x82") == 2);
  CHECK(released("ab\xF0") == 2);
  CHECK(released("ab\xF0\x9F\x98") == 2);
  CHECK(released("ab\xF0\x9F\x98\x80") == 6);
  CHECK(released("ab\x80") == 3);      // a stray continuation byte is whole (U+FFFD)
  CHECK(released("ab\xE0\x80") == 4);  // can never become valid
  CHECK(released("") == 0);
  std::string s;
  unicode::append_utf8(0xD800, &s);
  unicode::append_utf8(0x110000, &s);
  CHECK(s == "\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
