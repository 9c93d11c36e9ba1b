// SPDX-License-Identifier: MIT
// The parser of hf_regex_parse.h: Oniguruma's Ruby syntax (the subset hf_regex.h lists) into a tree of Node, with
// its character classes, \p{..} property names and case-insensitive variants resolved into RegexClass.
#include "text/hf_regex_parse.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

#include "text/unicode_data.h"

namespace tern::hf_regex {
namespace {

using unicode::Category;

constexpr int kMaxNesting = 1000;              // groups and stacked quantifiers: the parser and compiler recurse
constexpr uint32_t kMaxRepeat = 100000;        // Oniguruma's ONIG_MAX_REPEAT_NUM

NodePtr make(Node::Kind kind) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  return n;
}

uint32_t category_bit(Category k) { return 1u << uint32_t(k); }
uint32_t category_range(Category first, Category last) {
  uint32_t bits = 0;
  for (uint32_t k = uint32_t(first); k <= uint32_t(last); ++k) bits |= 1u << k;
  return bits;
}

// \p{name}: a general category or one-letter group, by short or long name, compared as Oniguruma does (case,
// spaces, hyphens and underscores ignored). 0 when unknown.
uint32_t property_categories(std::string name) {
  std::string key;
  for (char ch : name)
    if (ch != ' ' && ch != '-' && ch != '_') key.push_back(char(std::tolower(static_cast<unsigned char>(ch))));
  struct Entry {
    const char* short_name;
    const char* long_name;
    uint32_t bits;
  };
  static const Entry kEntries[] = {
      {"l", "letter", category_range(Category::Lu, Category::Lo)},
      {"lc", "casedletter", category_range(Category::Lu, Category::Lt)},
      {"lu", "uppercaseletter", category_bit(Category::Lu)},
      {"ll", "lowercaseletter", category_bit(Category::Ll)},
      {"lt", "titlecaseletter", category_bit(Category::Lt)},
      {"lm", "modifierletter", category_bit(Category::Lm)},
      {"lo", "otherletter", category_bit(Category::Lo)},
      {"m", "mark", category_range(Category::Mn, Category::Me)},
      {"mn", "nonspacingmark", category_bit(Category::Mn)},
      {"mc", "spacingmark", category_bit(Category::Mc)},
      {"me", "enclosingmark", category_bit(Category::Me)},
      {"n", "number", category_range(Category::Nd, Category::No)},
      {"nd", "decimalnumber", category_bit(Category::Nd)},
      {"nl", "letternumber", category_bit(Category::Nl)},
      {"no", "othernumber", category_bit(Category::No)},
      {"p", "punctuation", category_range(Category::Pc, Category::Po)},
      {"pc", "connectorpunctuation", category_bit(Category::Pc)},
      {"pd", "dashpunctuation", category_bit(Category::Pd)},
      {"ps", "openpunctuation", category_bit(Category::Ps)},
      {"pe", "closepunctuation", category_bit(Category::Pe)},
      {"pi", "initialpunctuation", category_bit(Category::Pi)},
      {"pf", "finalpunctuation", category_bit(Category::Pf)},
      {"po", "otherpunctuation", category_bit(Category::Po)},
      {"s", "symbol", category_range(Category::Sm, Category::So)},
      {"sm", "mathsymbol", category_bit(Category::Sm)},
      {"sc", "currencysymbol", category_bit(Category::Sc)},
      {"sk", "modifiersymbol", category_bit(Category::Sk)},
      {"so", "othersymbol", category_bit(Category::So)},
      {"z", "separator", category_range(Category::Zs, Category::Zp)},
      {"zs", "spaceseparator", category_bit(Category::Zs)},
      {"zl", "lineseparator", category_bit(Category::Zl)},
      {"zp", "paragraphseparator", category_bit(Category::Zp)},
      {"c", "other", category_range(Category::Cc, Category::Cn)},
      {"cc", "control", category_bit(Category::Cc)},
      {"cf", "format", category_bit(Category::Cf)},
      {"cs", "surrogate", category_bit(Category::Cs)},
      {"co", "privateuse", category_bit(Category::Co)},
      {"cn", "unassigned", category_bit(Category::Cn)},
      {"any", "any", category_range(Category::Lu, Category::Cn)},
  };
  if (key == "l&") key = "lc";
  for (const Entry& e : kEntries)
    if (key == e.short_name || key == e.long_name) return e.bits;
  return 0;
}

bool in_ranges(const std::vector<std::pair<char32_t, char32_t>>& ranges, char32_t c) {
  for (const auto& r : ranges)
    if (c >= r.first && c <= r.second) return true;
  return false;
}

// Adds to `ranges` every code point that simple case folding makes equal to one already in them.
void add_case_variants(std::vector<std::pair<char32_t, char32_t>>* ranges) {
  std::vector<char32_t> targets;  // fold targets with a member in the ranges
  for (size_t i = 0; i < unicode::data::kCaseFoldCount; ++i) {
    const unicode::data::CaseFold& f = unicode::data::kCaseFolds[i];
    if (in_ranges(*ranges, f.code_point) || in_ranges(*ranges, f.folded)) targets.push_back(f.folded);
  }
  std::sort(targets.begin(), targets.end());
  for (size_t i = 0; i < unicode::data::kCaseFoldCount; ++i) {
    const unicode::data::CaseFold& f = unicode::data::kCaseFolds[i];
    if (std::binary_search(targets.begin(), targets.end(), f.folded)) {
      ranges->push_back({f.code_point, f.code_point});
      ranges->push_back({f.folded, f.folded});
    }
  }
}

class Parser {
 public:
  Parser(std::string_view pattern, RegexProgram* program) : p_(pattern), program_(program) {}

  Status parse(NodePtr* root) {
    TERN_RETURN_IF_ERROR(parse_alternation(root, 0));
    if (pos_ < p_.size()) return error("unmatched ')'");
    return Status::Ok();
  }

 private:
  Status error(const std::string& what) const {
    return InvalidArgument("regular expression: " + what + " at offset " + std::to_string(pos_));
  }
  bool at_end() const { return pos_ >= p_.size(); }
  char peek() const { return p_[pos_]; }
  bool lookahead(const char* s) const { return p_.substr(pos_, std::strlen(s)) == s; }

  Status next_char(char32_t* c) {
    size_t n = unicode::decode_utf8(p_, pos_, c);
    if (*c == 0xFFFD && p_.substr(pos_, 3) != "\xEF\xBF\xBD") return error("invalid UTF-8");
    pos_ += n;
    return Status::Ok();
  }

  Status parse_alternation(NodePtr* out, int depth) {
    if (depth > kMaxNesting) return error("groups nested more than " + std::to_string(kMaxNesting) + " deep");
    NodePtr alt = make(Node::Alt);
    for (;;) {
      NodePtr concat;
      TERN_RETURN_IF_ERROR(parse_concat(&concat, depth));
      alt->children.push_back(std::move(concat));
      if (at_end() || peek() != '|') break;
      ++pos_;
    }
    *out = alt->children.size() == 1 ? std::move(alt->children[0]) : std::move(alt);
    return Status::Ok();
  }

  Status parse_concat(NodePtr* out, int depth) {
    NodePtr concat = make(Node::Concat);
    while (!at_end() && peek() != '|' && peek() != ')') {
      NodePtr atom;
      TERN_RETURN_IF_ERROR(parse_atom(&atom, depth));
      if (!atom) continue;  // a flag group such as (?i)
      TERN_RETURN_IF_ERROR(parse_quantifiers(&atom, depth));
      concat->children.push_back(std::move(atom));
    }
    *out = concat->children.size() == 1 ? std::move(concat->children[0]) : std::move(concat);
    return Status::Ok();
  }

  // A quantifier's number, or false (pos_ unchanged) when none starts here.
  bool read_number(uint32_t* v) {
    size_t start = pos_;
    uint64_t n = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      n = std::min<uint64_t>(n * 10 + uint64_t(peek() - '0'), uint64_t(kMaxRepeat) + 1);
      ++pos_;
    }
    *v = uint32_t(n);
    return pos_ > start;
  }

  Status parse_quantifiers(NodePtr* atom, int depth) {
    while (!at_end()) {
      const size_t start = pos_;
      uint32_t min, max;
      char q = peek();
      if (q == '*' || q == '+' || q == '?') {
        ++pos_;
        min = q == '+' ? 1 : 0;
        max = q == '?' ? 1 : kUnbounded;
      } else if (q == '{') {
        // {n} {n,} {n,m} {,m}; anything else is a literal '{' (Oniguruma's Ruby syntax).
        ++pos_;
        bool has_min = read_number(&min);
        if (!has_min) min = 0;
        bool comma = !at_end() && peek() == ',';
        if (comma) ++pos_;
        bool has_max = comma && read_number(&max);
        if (!comma) max = min;
        if (comma && !has_max) max = kUnbounded;
        if (at_end() || peek() != '}' || (!has_min && !has_max)) {
          pos_ = start;
          return Status::Ok();
        }
        ++pos_;
        if (min > kMaxRepeat || (max != kUnbounded && max > kMaxRepeat))
          return error("repeat count above " + std::to_string(kMaxRepeat));
        if (max < min) return error("repeat range {n,m} with m < n");
      } else {
        return Status::Ok();
      }
      if ((*atom)->kind == Node::Assert) return error("quantifier on an assertion");
      if (++depth > kMaxNesting) return error("quantifiers stacked more than " + std::to_string(kMaxNesting) + " deep");
      NodePtr rep = make(Node::Repeat);
      rep->min = min;
      rep->max = max;
      if (!at_end() && peek() == '?') {
        rep->greedy = false;
        ++pos_;
      } else if (!at_end() && peek() == '+' && q != '{') {
        return error("possessive quantifier is not supported");
      }
      rep->children.push_back(std::move(*atom));
      *atom = std::move(rep);
    }
    return Status::Ok();
  }

  Status literal(char32_t c, NodePtr* out) {
    if (icase_) {
      RegexClass k;
      k.ranges.push_back({c, c});
      add_case_variants(&k.ranges);
      k.finish();
      if (k.ranges.size() > 1 || k.ranges[0].first != k.ranges[0].second) return add_class(std::move(k), out);
    }
    *out = make(Node::Char);
    (*out)->c = c;
    return Status::Ok();
  }

  Status add_class(RegexClass k, NodePtr* out) {
    k.finish();
    *out = make(Node::Class);
    (*out)->index = uint32_t(program_->classes.size());
    program_->classes.push_back(std::move(k));
    return Status::Ok();
  }

  Status parse_atom(NodePtr* out, int depth) {
    const size_t start = pos_;
    char ch = peek();
    switch (ch) {
      case '(':
        return parse_group(out, depth);
      case '[': {
        RegexClass k;
        TERN_RETURN_IF_ERROR(parse_class(&k));
        return add_class(std::move(k), out);
      }
      case '.':
        ++pos_;
        *out = make(Node::Any);
        (*out)->dot_all = dot_all_;
        return Status::Ok();
      case '^':
      case '$':
        ++pos_;
        *out = make(Node::Assert);
        (*out)->assert_kind = ch == '^' ? RegexAssert::BeginLine : RegexAssert::EndLine;
        return Status::Ok();
      case '*':
      case '+':
      case '?':
        return error("quantifier with nothing to repeat");
      case '\\':
        return parse_escape(out);
      default: {
        char32_t c;
        TERN_RETURN_IF_ERROR(next_char(&c));
        (void)start;
        return literal(c, out);
      }
    }
  }

  Status parse_group(NodePtr* out, int depth) {
    const size_t open = pos_;
    ++pos_;  // '('
    bool is_lookahead = false, negative = false;
    const bool saved_icase = icase_, saved_dot_all = dot_all_;
    if (lookahead("?")) {
      ++pos_;
      if (at_end()) return error("unterminated group");
      char k = peek();
      if (k == ':') {
        ++pos_;
      } else if (k == '=' || k == '!') {
        ++pos_;
        is_lookahead = true;
        negative = k == '!';
      } else if (lookahead("<=") || lookahead("<!")) {
        return error("lookbehind is not supported");
      } else if (k == '<' || k == '\'') {
        // A named group: matched as a plain group (captures are not reported).
        char close = k == '<' ? '>' : '\'';
        size_t end = p_.find(close, pos_ + 1);
        if (end == std::string_view::npos) return error("unterminated group name");
        pos_ = end + 1;
      } else if (k == '>') {
        return error("atomic group is not supported");
      } else if (k == '#') {
        return error("comment group is not supported");
      } else {
        // Flags: (?imx-imx) for the rest of the enclosing group, (?imx-imx:...) for this one.
        bool on = true, icase = icase_, dot_all = dot_all_;
        while (!at_end() && peek() != ':' && peek() != ')') {
          char f = peek();
          if (f == '-') {
            on = false;
          } else if (f == 'i') {
            icase = on;
          } else if (f == 'm') {
            dot_all = on;
          } else {
            return error(std::string("group option '") + f + "' is not supported");
          }
          ++pos_;
        }
        if (at_end()) return error("unterminated group options");
        icase_ = icase;
        dot_all_ = dot_all;
        if (peek() == ')') {
          ++pos_;
          out->reset();  // applies from here to the end of the enclosing group
          return Status::Ok();
        }
        ++pos_;  // ':'
      }
    }
    NodePtr body;
    TERN_RETURN_IF_ERROR(parse_alternation(&body, depth + 1));
    icase_ = saved_icase;
    dot_all_ = saved_dot_all;
    if (at_end() || peek() != ')') {
      pos_ = open;
      return error("unmatched '('");
    }
    ++pos_;
    if (!is_lookahead) {
      *out = std::move(body);
      return Status::Ok();
    }
    // The lookahead body must be one character, class or '.', checked against the next character only.
    uint32_t index;
    if (body->kind == Node::Class) {
      index = body->index;
    } else if (body->kind == Node::Char || body->kind == Node::Any) {
      RegexClass k;
      if (body->kind == Node::Char) {
        k.ranges.push_back({body->c, body->c});
      } else {
        k.ranges.push_back({0, 0x10FFFF});
        if (!body->dot_all) k.ranges = {{0, 9}, {11, 0x10FFFF}};
      }
      NodePtr cls;
      TERN_RETURN_IF_ERROR(add_class(std::move(k), &cls));
      index = cls->index;
    } else {
      pos_ = open;
      return error("lookahead whose body is not one character or character class is not supported");
    }
    *out = make(Node::Assert);
    (*out)->assert_kind = negative ? RegexAssert::NegLookAhead : RegexAssert::LookAhead;
    (*out)->index = index;
    return Status::Ok();
  }

  // After a backslash: \x{H..} \xHH \uHHHH, or an octal \0oo. False when none starts here.
  Status parse_code_escape(char e, bool* matched, char32_t* c) {
    *matched = true;
    auto hex_digits = [&](size_t max_digits, bool exact) -> Status {
      uint64_t v = 0;
      size_t n = 0;
      while (n < max_digits && !at_end() && std::isxdigit(static_cast<unsigned char>(peek()))) {
        v = v * 16 + uint64_t(std::isdigit(static_cast<unsigned char>(peek())) ? peek() - '0'
                                                                               : (std::tolower(peek()) - 'a' + 10));
        if (v > 0x10FFFF) return error("code point above U+10FFFF");
        ++pos_;
        ++n;
      }
      if (n == 0 || (exact && n != max_digits)) return error("invalid hexadecimal escape");
      *c = char32_t(v);
      return Status::Ok();
    };
    if (e == 'x') {
      if (lookahead("{")) {
        ++pos_;
        TERN_RETURN_IF_ERROR(hex_digits(8, false));
        if (at_end() || peek() != '}') return error("unterminated \\x{...}");
        ++pos_;
        return Status::Ok();
      }
      return hex_digits(2, false);
    }
    if (e == 'u') return hex_digits(4, true);
    if (e == '0') {
      uint32_t v = 0;
      for (int n = 0; n < 2 && !at_end() && peek() >= '0' && peek() <= '7'; ++n) v = v * 8 + uint32_t(peek() - '0'), ++pos_;
      *c = v;
      return Status::Ok();
    }
    static const char kControls[] = "t\tn\nr\rf\fv\va\ae\x1B";
    for (size_t i = 0; kControls[i] != 0; i += 2)
      if (kControls[i] == e) {
        *c = char32_t(static_cast<unsigned char>(kControls[i + 1]));
        return Status::Ok();
      }
    *matched = false;
    return Status::Ok();
  }

  // \s \S \d \D \w \W \h \H \p{..} \P{..} into k (positively), or false when e is none of them.
  Status parse_set_escape(char e, RegexClass* k, bool* matched) {
    *matched = true;
    const uint32_t word = category_range(Category::Lu, Category::Me) | category_bit(Category::Nd) |
                          category_bit(Category::Pc);
    switch (e) {
      case 's': k->white_space = true; return Status::Ok();
      case 'S': k->white_space_not = true; return Status::Ok();
      case 'd': k->categories |= category_bit(Category::Nd); return Status::Ok();
      case 'D': k->exclude_categories(category_bit(Category::Nd)); return Status::Ok();
      case 'w': k->categories |= word; return Status::Ok();
      case 'W': k->exclude_categories(word); return Status::Ok();
      case 'h': k->ranges.insert(k->ranges.end(), {{'0', '9'}, {'A', 'F'}, {'a', 'f'}}); return Status::Ok();
      case 'H': return error("\\H is not supported");
      case 'p':
      case 'P': {
        if (!lookahead("{")) return error(std::string("\\") + e + " without {name}");
        size_t end = p_.find('}', pos_);
        if (end == std::string_view::npos) return error("unterminated \\p{...}");
        std::string name(p_.substr(pos_ + 1, end - pos_ - 1));
        bool negate = e == 'P';
        if (!name.empty() && name[0] == '^') {
          negate = !negate;
          name.erase(0, 1);
        }
        uint32_t bits = property_categories(name);
        if (bits == 0) return error("unknown property name \\p{" + name + "}");
        pos_ = end + 1;
        if (negate)
          k->exclude_categories(bits);
        else
          k->categories |= bits;
        return Status::Ok();
      }
      default:
        *matched = false;
        return Status::Ok();
    }
  }

  Status parse_escape(NodePtr* out) {
    ++pos_;  // '\\'
    if (at_end()) return error("pattern ends with '\\'");
    char e = peek();
    ++pos_;
    RegexClass k;
    bool matched;
    TERN_RETURN_IF_ERROR(parse_set_escape(e, &k, &matched));
    if (matched) return add_class(std::move(k), out);
    char32_t c;
    TERN_RETURN_IF_ERROR(parse_code_escape(e, &matched, &c));
    if (matched) return literal(c, out);
    switch (e) {
      case 'A': case 'z': case 'Z':
        *out = make(Node::Assert);
        (*out)->assert_kind = e == 'A' ? RegexAssert::BeginText : e == 'z' ? RegexAssert::EndText
                                                                           : RegexAssert::EndTextOrFinalNewline;
        return Status::Ok();
      case 'b': case 'B': return error("word boundary \\" + std::string(1, e) + " is not supported");
      case 'k': case 'g': return error("backreference or subexpression call \\" + std::string(1, e) + " is not supported");
      case 'G': case 'K': case 'R': case 'X': case 'N': case 'O': case 'y': case 'Y':
        return error("escape \\" + std::string(1, e) + " is not supported");
      default:
        break;
    }
    if (e >= '1' && e <= '9') return error("backreference \\" + std::string(1, e) + " is not supported");
    --pos_;  // any other escaped character stands for itself
    TERN_RETURN_IF_ERROR(next_char(&c));
    return literal(c, out);
  }

  // One endpoint of a class item: a literal or escaped character.
  Status parse_class_char(char32_t* c, bool* is_set, RegexClass* k) {
    *is_set = false;
    if (peek() != '\\') return next_char(c);
    ++pos_;
    if (at_end()) return error("pattern ends with '\\'");
    char e = peek();
    ++pos_;
    bool matched;
    TERN_RETURN_IF_ERROR(parse_set_escape(e, k, &matched));
    if (matched) {
      *is_set = true;
      return Status::Ok();
    }
    TERN_RETURN_IF_ERROR(parse_code_escape(e, &matched, c));
    if (matched) return Status::Ok();
    if (e == 'b') {
      *c = 0x08;
      return Status::Ok();
    }
    if ((e >= '1' && e <= '9') || std::isalpha(static_cast<unsigned char>(e)))
      return error("escape \\" + std::string(1, e) + " in a character class is not supported");
    --pos_;
    return next_char(c);
  }

  Status parse_class(RegexClass* k) {
    const size_t open = pos_;
    ++pos_;  // '['
    if (lookahead("^")) {
      k->negated = true;
      ++pos_;
    }
    bool first = true;
    for (;;) {
      if (at_end()) {
        pos_ = open;
        return error("unterminated character class");
      }
      if (peek() == ']' && !first) break;
      first = false;
      if (peek() == '[') return error("nested character class or POSIX bracket is not supported");
      if (lookahead("&&")) return error("character class intersection is not supported");
      char32_t lo;
      bool is_set;
      TERN_RETURN_IF_ERROR(parse_class_char(&lo, &is_set, k));
      if (is_set) continue;
      char32_t hi = lo;
      if (lookahead("-") && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        if (peek() == '[') return error("nested character class or POSIX bracket is not supported");
        TERN_RETURN_IF_ERROR(parse_class_char(&hi, &is_set, k));
        if (is_set) return error("character class range ending in a set escape");
        if (hi < lo) return error("empty character class range");
      }
      k->ranges.push_back({lo, hi});
    }
    ++pos_;  // ']'
    if (icase_) add_case_variants(&k->ranges);
    return Status::Ok();
  }

  std::string_view p_;
  size_t pos_ = 0;
  RegexProgram* program_;
  bool icase_ = false;
  bool dot_all_ = false;
};

}  // namespace

Status parse_regex(std::string_view pattern, RegexProgram* program, NodePtr* root) {
  return Parser(pattern, program).parse(root);
}

}  // namespace tern::hf_regex
