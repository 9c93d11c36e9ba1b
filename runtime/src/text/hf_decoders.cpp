// SPDX-License-Identifier: MIT
#include "text/hf_decoders.h"

#include <algorithm>

#include "text/hf_steps.h"
#include "text/hf_utf8.h"

namespace tern {

struct HfDecoders::Step {
  fb::HfDecoder kind;
  std::string content;
  char32_t character = 0;  // METASPACE, STRIP: content's one character
  fb::HfPrependScheme prepend_scheme = fb::HfPrependScheme::ALWAYS;
  int32_t start = 0, stop = 0;
  hf::Pattern pattern;  // REPLACE: a literal or a regular expression, matched as the pipeline's Replace and Split
};

namespace {

std::string_view view(const flatbuffers::String* s) {
  return s ? std::string_view(s->data(), s->size()) : std::string_view();
}

// The characters of s (bad bytes read as U+FFFD, one byte each) with their byte offsets.
void characters(std::string_view s, std::vector<char32_t>* chars, std::vector<size_t>* offsets) {
  chars->clear();
  offsets->clear();
  for (size_t pos = 0; pos < s.size();) {
    size_t length;
    char32_t c;
    if (!hf_utf8_sequence(s, pos, &length, &c)) c = 0xFFFD;
    chars->push_back(c);
    offsets->push_back(pos);
    pos += length;
  }
  offsets->push_back(s.size());
}

bool one_character(std::string_view s, char32_t* c) {
  size_t length;
  return !s.empty() && hf_utf8_sequence(s, 0, &length, c) && length == s.size();
}

// The byte of a "<0xNN>" token as Rust's u8::from_str_radix(token[3..5], 16) reads it (a leading '+' included).
int fallback_byte(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  const auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int high = digit(token[3]), low = digit(token[4]);
  if (token[3] == '+' && low >= 0) return low;
  if (high < 0 || low < 0) return -1;
  return high * 16 + low;
}

bool is_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    size_t length;
    char32_t c;
    if (!hf_utf8_sequence(s, pos, &length, &c)) return false;
    pos += length;
  }
  return true;
}

}  // namespace

HfDecoders::HfDecoders() = default;
HfDecoders::HfDecoders(HfDecoders&&) noexcept = default;
HfDecoders& HfDecoders::operator=(HfDecoders&&) noexcept = default;
HfDecoders::~HfDecoders() = default;

Result<HfDecoders> HfDecoders::create(const fb::HfTokenizer& table, const HfVocab* vocab) {
  HfDecoders d;
  d.vocab_ = vocab;
  const int64_t vocab_size = int64_t(vocab->pieces.size());
  if (const auto* added = table.added_tokens()) {
    for (flatbuffers::uoffset_t i = 0; i < added->size(); ++i) {
      const fb::HfAddedToken* token = added->Get(i);
      const std::string where = "vocabulary: hf_tokenizer.added_tokens[" + std::to_string(i) + "]";
      if (token->id() < 0 || token->id() >= vocab_size) {
        return InvalidModel(where + ".id " + std::to_string(token->id()) + " is outside [0, " +
                            std::to_string(vocab_size) + ")");
      }
      const std::string_view content = view(token->content());
      if (content.empty()) return InvalidModel(where + ".content is empty");
      if (!d.added_.emplace(token->id(), content).second) {
        return InvalidModel(where + ".id " + std::to_string(token->id()) + " is another added token's id too");
      }
      if (token->special()) {
        d.special_texts_.insert(content);
        d.special_ids_.insert(token->id());
      }
    }
  }
  if (const auto* steps = table.decoders()) {
    if (steps->size() > 64) return InvalidModel("vocabulary: hf_tokenizer.decoders has more than 64 steps");
    for (flatbuffers::uoffset_t i = 0; i < steps->size(); ++i) {
      const fb::HfStep* s = steps->Get(i);
      const std::string where = "vocabulary: hf_tokenizer.decoders[" + std::to_string(i) + "]";
      Step step;
      step.kind = fb::HfDecoder(s->kind());
      step.content = std::string(view(s->content()));
      switch (step.kind) {
        case fb::HfDecoder::BYTE_LEVEL:
        case fb::HfDecoder::BYTE_FALLBACK:
        case fb::HfDecoder::FUSE: break;
        case fb::HfDecoder::METASPACE:
          if (!one_character(step.content, &step.character))
            return InvalidModel(where + ": Metaspace content is not one character");
          if (s->prepend_scheme() > fb::HfPrependScheme::MAX)
            return InvalidModel(where + ": prepend_scheme is not ALWAYS, FIRST or NEVER");
          step.prepend_scheme = s->prepend_scheme();
          break;
        case fb::HfDecoder::STRIP:
          if (!one_character(step.content, &step.character))
            return InvalidModel(where + ": Strip content is not one character");
          if (s->start() < 0 || s->stop() < 0) return InvalidModel(where + ": Strip start or stop is negative");
          step.start = s->start();
          step.stop = s->stop();
          break;
        case fb::HfDecoder::REPLACE: {
          TERN_ASSIGN_OR_RETURN(step.pattern, hf::Pattern::from_step(*s, where + ": Replace pattern"));
          break;
        }
        default:
          return InvalidModel(where + ": decoder kind " + std::to_string(s->kind()) + " is not one this library knows");
      }
      d.steps_.push_back(std::move(step));
    }
  }
  return d;
}

const std::string_view* HfDecoders::token(int32_t id) const {
  auto it = added_.find(id);
  if (it != added_.end()) return &it->second;
  if (id < 0 || size_t(id) >= vocab_->pieces.size() || vocab_->pieces[size_t(id)].empty()) return nullptr;
  return &vocab_->pieces[size_t(id)];
}

void HfDecoders::run(std::vector<std::string>* tokens, bool streamed) const {
  std::vector<char32_t> chars;
  std::vector<size_t> offsets;
  bool fused = false;  // a step made the tokens one (the whole text, when not streamed)
  for (const Step& step : steps_) {
    std::vector<std::string>& in = *tokens;
    switch (step.kind) {
      case fb::HfDecoder::BYTE_LEVEL: {
        std::string bytes;
        for (const std::string& t : in) {
          const size_t mark = bytes.size();
          bool all = true;
          for (size_t pos = 0; pos < t.size() && all;) {
            size_t length;
            char32_t c;
            const int b = hf_utf8_sequence(t, pos, &length, &c) ? hf_byte_level_byte(c) : -1;
            if (b < 0)
              all = false;
            else
              bytes.push_back(char(b));
            pos += length;
          }
          if (!all) {
            bytes.resize(mark);
            bytes += t;
          }
        }
        in.assign(1, std::string());
        if (streamed)
          in[0] = std::move(bytes);
        else
          hf_append_utf8_lossy(bytes, &in[0]);
        fused = true;
        break;
      }
      case fb::HfDecoder::METASPACE:
        for (size_t i = 0; i < in.size(); ++i) {
          const bool drop = !streamed && i == 0 && step.prepend_scheme != fb::HfPrependScheme::NEVER;
          characters(in[i], &chars, &offsets);
          std::string out;
          for (size_t k = 0; k < chars.size(); ++k) {
            if (chars[k] == step.character) {
              if (!drop) out.push_back(' ');
            } else {
              out.append(in[i], offsets[k], offsets[k + 1] - offsets[k]);
            }
          }
          in[i] = std::move(out);
        }
        break;
      case fb::HfDecoder::BYTE_FALLBACK: {
        std::vector<std::string> out;
        std::string run;
        size_t run_tokens = 0;
        const auto flush = [&] {
          if (run_tokens == 0) return;
          if (streamed || is_utf8(run)) {
            out.push_back(run);
          } else {
            for (size_t k = 0; k < run_tokens; ++k) out.emplace_back("\xEF\xBF\xBD");
          }
          run.clear();
          run_tokens = 0;
        };
        for (std::string& t : in) {
          const int b = fallback_byte(t);
          if (b >= 0) {
            run.push_back(char(b));
            ++run_tokens;
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        in = std::move(out);
        break;
      }
      case fb::HfDecoder::FUSE: {
        std::string all;
        for (const std::string& t : in) all += t;
        in.assign(1, std::move(all));
        fused = true;
        break;
      }
      case fb::HfDecoder::STRIP:
        if (streamed && fused) break;  // it strips the whole text's ends, which a streamed token is not at
        for (std::string& t : in) {
          characters(t, &chars, &offsets);
          size_t start_cut = 0;
          for (size_t k = 0; k < chars.size() && k < size_t(step.start) && chars[k] == step.character; ++k)
            start_cut = k + 1;
          size_t stop_cut = chars.size();
          for (size_t k = 0; k < size_t(step.stop) && k < chars.size() && chars[chars.size() - 1 - k] == step.character;
               ++k) {
            stop_cut = chars.size() - 1 - k;
          }
          t = stop_cut > start_cut ? t.substr(offsets[start_cut], offsets[stop_cut] - offsets[start_cut])
                                   : std::string();
        }
        break;
      case fb::HfDecoder::REPLACE:
        for (std::string& t : in) {
          std::string out;
          for (const hf::Span& span : step.pattern.find_matches(t)) {
            if (span.match) {
              out += step.content;
            } else {
              out.append(t, span.begin, span.end - span.begin);
            }
          }
          t = std::move(out);
        }
        break;
      default: break;
    }
  }
}

std::string HfDecoders::decode(const int32_t* ids, size_t n, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string_view* t = token(ids[i]);
    if (t == nullptr || (skip_special && is_special_text(*t))) continue;
    tokens.emplace_back(*t);
  }
  std::string text;
  if (steps_.empty()) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) text.push_back(' ');
      text += tokens[i];
    }
    return text;
  }
  run(&tokens, false);
  for (const std::string& t : tokens) text += t;
  return text;
}

std::string HfDecoders::piece_text(int32_t id) const {
  auto added = added_.find(id);
  if (added != added_.end()) return special_ids_.count(id) ? std::string() : std::string(added->second);
  const std::string_view* t = token(id);
  if (t == nullptr) return std::string();
  std::vector<std::string> tokens(1, std::string(*t));
  if (steps_.empty()) return " " + tokens[0];  // tokens are joined by spaces
  run(&tokens, true);
  std::string text;
  for (const std::string& s : tokens) text += s;
  return text;
}

}  // namespace tern
