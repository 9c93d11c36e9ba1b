// SPDX-License-Identifier: MIT
#include "json_text.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include <unordered_set>
#include <vector>

namespace tern::convert {
namespace {

using nlohmann::json;

// nlohmann's own DOM builder behind a depth limit. Not the callback parser: its end_object() scans the whole parent
// object for discarded members, which made a header of n tensors parse in O(n^2) (200k tensors: minutes).
class BoundedDomParser {
 public:
  BoundedDomParser(json& root, std::string* duplicate_key) : dom_(root, /*allow_exceptions=*/false), duplicate_(duplicate_key) {}
  // Every object's keys are noted (one set per open object), and the first key seen twice in any object stops it.
  void check_every_object() { every_object_ = true; }

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    if (serde_floats_ && !serde_json_f64(s, &v)) {
      out_of_range_ = s;
      return false;
    }
    return dom_.number_float(v, s);
  }
  // Numbers with a fraction or exponent read as serde_json reads them (serde_json_f64).
  void read_floats_as_serde() { serde_floats_ = true; }
  const std::string& out_of_range() const { return out_of_range_; }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    if (every_object_) open_keys_.emplace_back();
    return enter() && dom_.start_object(n);
  }
  bool end_object() {
    if (every_object_) open_keys_.pop_back();
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return enter() && dom_.start_array(n); }
  bool end_array() { --depth_; return dom_.end_array(); }
  bool key(json::string_t& k) {
    if (depth_ == 1) {
      ++top_keys_seen_;
      if (duplicate_ && duplicate_->empty() && !top_keys_.insert(k).second) *duplicate_ = k;
    }
    if (every_object_ && !open_keys_.back().insert(k).second) {
      repeated_key_ = k;
      repeated_ = true;
      return false;
    }
    return dom_.key(k);
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& /*token*/, const Exception& /*ex*/) {
    syntax_error_at_ = position;
    return false;
  }

  bool too_deep() const { return too_deep_; }
  bool repeated() const { return repeated_; }
  const std::string& repeated_key() const { return repeated_key_; }
  size_t top_keys_seen() const { return top_keys_seen_; }
  std::size_t syntax_error_at() const { return syntax_error_at_; }

 private:
  bool enter() {
    if (++depth_ > kMaxJsonDepth) too_deep_ = true;
    return !too_deep_;
  }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::string* duplicate_;
  std::unordered_set<std::string> top_keys_;
  bool every_object_ = false;
  bool serde_floats_ = false;
  std::string out_of_range_;  // a number serde_json refuses as out of range
  std::vector<std::unordered_set<std::string>> open_keys_;  // [open objects], innermost last
  std::string repeated_key_;
  bool repeated_ = false;
  size_t top_keys_seen_ = 0;
  int depth_ = 0;
  bool too_deep_ = false;
  std::size_t syntax_error_at_ = 0;
};

// Appends the compact JSON form of `v` to `out`, stopping once `out` holds more than `limit` characters.
void append_snippet(const json& v, std::string& out, size_t limit, int depth) {
  if (out.size() > limit) return;
  if (depth > kMaxJsonDepth) {
    out += "...";
    return;
  }
  auto append_string = [&](const std::string& s) {
    // Only the part that can still show; the escapes nlohmann writes keep the snippet valid JSON text.
    const size_t room = limit - out.size() + 1;
    out += json(s.size() > room ? s.substr(0, room) : s).dump(-1, ' ', false, json::error_handler_t::replace);
  };
  switch (v.type()) {
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it) {
        if (!first) out += ',';
        first = false;
        append_string(it.key());
        out += ':';
        append_snippet(*it, out, limit, depth + 1);
      }
      out += '}';
      return;
    }
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it) {
        if (!first) out += ',';
        first = false;
        append_snippet(*it, out, limit, depth + 1);
      }
      out += ']';
      return;
    }
    case json::value_t::string:
      append_string(v.get_ref<const std::string&>());
      return;
    case json::value_t::binary:
      out += "<binary>";
      return;
    default:  // null, boolean, numbers, discarded: short
      out += v.dump();
      return;
  }
}

// The longest prefix of s[0, n) that ends on a UTF-8 character boundary.
size_t utf8_prefix(std::string_view s, size_t n) {
  if (n >= s.size()) return s.size();
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

}  // namespace

Result<nlohmann::json> parse_json(std::string_view text, std::string* duplicate_key) {
  if (duplicate_key) duplicate_key->clear();
  json root;
  BoundedDomParser sax(root, nullptr);
  const bool ok = json::sax_parse(text.data(), text.data() + text.size(), &sax, json::input_format_t::json,
                                  /*strict=*/true, /*ignore_comments=*/false);
  if (sax.too_deep())
    return InvalidModel("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels of arrays and objects");
  if (!ok) return InvalidModel("not valid JSON (syntax error at byte " + std::to_string(sax.syntax_error_at()) + ")");
  // Fewer members than keys means a key came twice; only then parse again, noting keys, to name it.
  if (duplicate_key && root.is_object() && root.size() != sax.top_keys_seen()) {
    json again;
    BoundedDomParser named(again, duplicate_key);
    (void)json::sax_parse(text.data(), text.data() + text.size(), &named, json::input_format_t::json, true, false);
  }
  return root;
}

Result<nlohmann::json> parse_json_unique_keys(std::string_view text) {
  json root;
  BoundedDomParser sax(root, nullptr);
  sax.check_every_object();
  sax.read_floats_as_serde();
  const bool ok = json::sax_parse(text.data(), text.data() + text.size(), &sax, json::input_format_t::json,
                                  /*strict=*/true, /*ignore_comments=*/false);
  if (sax.too_deep())
    return InvalidModel("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels of arrays and objects");
  if (sax.repeated())
    return InvalidModel("the key \"" + clip(sax.repeated_key()) + "\" appears twice in one object");
  if (!sax.out_of_range().empty())
    return InvalidModel("the number " + clip(sax.out_of_range(), 40) + " is out of a double's range");
  if (!ok) return InvalidModel("not valid JSON (syntax error at byte " + std::to_string(sax.syntax_error_at()) + ")");
  return root;
}

std::string json_snippet(const nlohmann::json& value, size_t max_chars) {
  if (max_chars < 4) max_chars = 4;
  std::string s;
  append_snippet(value, s, max_chars, 0);
  if (s.size() <= max_chars) return s;
  return s.substr(0, utf8_prefix(s, max_chars - 3)) + "...";
}

std::string clip(std::string_view s, size_t max_chars) {
  if (max_chars < 4) max_chars = 4;
  if (s.size() <= max_chars) return std::string(s);
  return std::string(s.substr(0, utf8_prefix(s, max_chars - 3))) + "...";
}

namespace {

// serde_json's POW10: the double nearest each power of ten, as Rust's `1eN` literals are (strtod rounds the same).
const std::vector<double>& powers_of_ten() {
  static const std::vector<double> table = [] {
    std::vector<double> t(309);
    for (int i = 0; i <= 308; ++i) t[size_t(i)] = std::strtod(("1e" + std::to_string(i)).c_str(), nullptr);
    return t;
  }();
  return table;
}

// serde_json's overflow! check for `value * 10 + digit` against `limit`.
template <class T>
bool overflows(T value, T digit, T limit) {
  return value >= limit / 10 && (value > limit / 10 || digit > limit % 10);
}

// f64_from_parts: false where serde_json reports NumberOutOfRange.
bool f64_from_parts(bool positive, uint64_t significand, int64_t exponent, double* out) {
  const auto& pow10 = powers_of_ten();
  double f = double(significand);
  for (;;) {
    const uint64_t magnitude = exponent < 0 ? uint64_t(-exponent) : uint64_t(exponent);
    if (magnitude < pow10.size()) {
      if (exponent >= 0) {
        f *= pow10[magnitude];
        if (std::isinf(f)) return false;
      } else {
        f /= pow10[magnitude];
      }
      break;
    }
    if (f == 0.0) break;
    if (exponent >= 0) return false;
    f /= 1e308;
    exponent += 308;
  }
  *out = positive ? f : -f;
  return true;
}

}  // namespace

bool serde_json_f64(std::string_view text, double* value) {
  size_t i = 0;
  const bool positive = !(i < text.size() && text[i] == '-');
  if (!positive) ++i;
  const auto digit_at = [&](size_t k) { return k < text.size() && text[k] >= '0' && text[k] <= '9'; };
  uint64_t significand = 0;
  int64_t exponent = 0;
  // The integer part; past u64's range its digits only scale (parse_long_integer).
  for (; digit_at(i); ++i) {
    const uint64_t digit = uint64_t(text[i] - '0');
    if (exponent > 0 || overflows<uint64_t>(significand, digit, UINT64_MAX)) {
      ++exponent;
    } else {
      significand = significand * 10 + digit;
    }
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    // The fraction's digits, until one would overflow: it and the rest are dropped (parse_decimal_overflow).
    bool dropping = false;
    for (; digit_at(i); ++i) {
      const uint64_t digit = uint64_t(text[i] - '0');
      if (dropping || overflows<uint64_t>(significand, digit, UINT64_MAX)) {
        dropping = true;
        continue;
      }
      significand = significand * 10 + digit;
      --exponent;
    }
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool positive_exp = true;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) positive_exp = text[i++] == '+';
    int32_t exp = 0;
    for (; digit_at(i); ++i) {
      const int32_t digit = text[i] - '0';
      if (overflows<int32_t>(exp, digit, INT32_MAX)) {  // parse_exponent_overflow
        if (significand != 0 && positive_exp) return false;
        *value = positive ? 0.0 : -0.0;
        return true;
      }
      exp = exp * 10 + digit;
    }
    // starting_exp.saturating_add / saturating_sub in i32.
    const int64_t e = positive_exp ? exponent + exp : exponent - exp;
    exponent = std::max<int64_t>(INT32_MIN, std::min<int64_t>(INT32_MAX, e));
  }
  return f64_from_parts(positive, significand, exponent, value);
}

}  // namespace tern::convert
