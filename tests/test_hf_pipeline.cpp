// SPDX-License-Identifier: MIT
// HfTextPipeline (text/hf_pipeline.h) against the `tokenizers` library: the pipelines of tests/fixtures/hf_pipeline.json
// (written by tools/reference/make_hf_pipeline_fixture.js: the normalizers, pre-tokenizers and added tokens of real
// tokenizer.json files and small ones for each kind and flag) are built as fb::HfTokenizer tables, and every text
// must split into the library's added tokens and words, with special tokens split out and kept as text.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "text/hf_pipeline.h"

using nlohmann::json;
namespace fb = tern::fb;

namespace {

constexpr int32_t kFirstAddedId = 256;  // the fixture's reference model has the 256 byte tokens below them

fb::HfSplitBehavior behavior_of(const std::string& s) {
  if (s == "Removed") return fb::HfSplitBehavior::REMOVED;
  if (s == "Isolated") return fb::HfSplitBehavior::ISOLATED;
  if (s == "MergedWithPrevious") return fb::HfSplitBehavior::MERGED_WITH_PREVIOUS;
  if (s == "MergedWithNext") return fb::HfSplitBehavior::MERGED_WITH_NEXT;
  if (s == "Contiguous") return fb::HfSplitBehavior::CONTIGUOUS;
  FAIL("unknown behavior " << s);
  return fb::HfSplitBehavior::REMOVED;
}

void set_pattern(const json& j, fb::HfStepT* step) {
  if (j.contains("Regex")) {
    step->pattern = j.at("Regex").get<std::string>();
    step->pattern_is_regex = true;
  } else {
    step->pattern = j.at("String").get<std::string>();
  }
}

// tokenizer.json's normalizer (a Sequence flattened) as HfSteps.
void add_normalizers(const json& j, std::vector<std::unique_ptr<fb::HfStepT>>* steps) {
  if (j.is_null()) return;
  const std::string type = j.at("type");
  if (type == "Sequence") {
    for (const auto& n : j.at("normalizers")) add_normalizers(n, steps);
    return;
  }
  auto step = std::make_unique<fb::HfStepT>();
  using N = fb::HfNormalizer;
  if (type == "NFC") step->kind = uint8_t(N::NFC);
  else if (type == "NFD") step->kind = uint8_t(N::NFD);
  else if (type == "NFKC") step->kind = uint8_t(N::NFKC);
  else if (type == "NFKD") step->kind = uint8_t(N::NFKD);
  else if (type == "Lowercase") step->kind = uint8_t(N::LOWERCASE);
  else if (type == "StripAccents") step->kind = uint8_t(N::STRIP_ACCENTS);
  else if (type == "Prepend") {
    step->kind = uint8_t(N::PREPEND);
    step->content = j.at("prepend");
  } else if (type == "Replace") {
    step->kind = uint8_t(N::REPLACE);
    set_pattern(j.at("pattern"), step.get());
    step->content = j.at("content");
  } else if (type == "Strip") {
    step->kind = uint8_t(N::STRIP);
    step->left = j.at("strip_left");
    step->right = j.at("strip_right");
  } else {
    FAIL("normalizer " << type << " is not in the fixture's list");
  }
  steps->push_back(std::move(step));
}

void add_pre_tokenizers(const json& j, std::vector<std::unique_ptr<fb::HfStepT>>* steps) {
  if (j.is_null()) return;
  const std::string type = j.at("type");
  if (type == "Sequence") {
    for (const auto& p : j.at("pretokenizers")) add_pre_tokenizers(p, steps);
    return;
  }
  auto step = std::make_unique<fb::HfStepT>();
  using P = fb::HfPreTokenizer;
  if (type == "ByteLevel") {
    step->kind = uint8_t(P::BYTE_LEVEL);
    step->add_prefix_space = j.at("add_prefix_space");
    step->use_regex = j.value("use_regex", true);
  } else if (type == "Split") {
    step->kind = uint8_t(P::SPLIT);
    set_pattern(j.at("pattern"), step.get());
    step->behavior = behavior_of(j.at("behavior"));
    step->invert = j.at("invert");
  } else if (type == "Metaspace") {
    step->kind = uint8_t(P::METASPACE);
    step->content = j.at("replacement");
    const std::string scheme = j.at("prepend_scheme");
    step->prepend_scheme = scheme == "first"   ? fb::HfPrependScheme::FIRST
                           : scheme == "never" ? fb::HfPrependScheme::NEVER
                                               : fb::HfPrependScheme::ALWAYS;
    step->split = j.at("split");
  } else if (type == "Digits") {
    step->kind = uint8_t(P::DIGITS);
    step->individual_digits = j.at("individual_digits");
  } else if (type == "Whitespace") {
    step->kind = uint8_t(P::WHITESPACE);
  } else if (type == "WhitespaceSplit") {
    step->kind = uint8_t(P::WHITESPACE_SPLIT);
  } else if (type == "Punctuation") {
    step->kind = uint8_t(P::PUNCTUATION);
    step->behavior = behavior_of(j.at("behavior"));
  } else {
    FAIL("pre-tokenizer " << type << " is not in the fixture's list");
  }
  steps->push_back(std::move(step));
}

// The finished table's bytes; the table itself is fb::GetRoot<fb::HfTokenizer>(bytes.data()).
std::vector<uint8_t> build_table(const fb::HfTokenizerT& t) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fb::HfTokenizer::Pack(fbb, &t));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

fb::HfTokenizerT table_of(const json& c) {
  fb::HfTokenizerT t;
  add_normalizers(c.at("normalizer"), &t.normalizers);
  add_pre_tokenizers(c.at("pre_tokenizer"), &t.pre_tokenizers);
  int32_t id = kFirstAddedId;
  for (const auto& a : c.at("added_tokens")) {
    auto token = std::make_unique<fb::HfAddedTokenT>();
    token->id = id++;
    token->content = a.at("content");
    token->special = a.at("special");
    token->single_word = a.at("single_word");
    token->lstrip = a.at("lstrip");
    token->rstrip = a.at("rstrip");
    token->normalized = a.at("normalized");
    t.added_tokens.push_back(std::move(token));
  }
  return t;
}

std::unique_ptr<tern::HfTextPipeline> pipeline_of(const fb::HfTokenizerT& t, std::vector<uint8_t>* bytes) {
  *bytes = build_table(t);
  auto p = tern::HfTextPipeline::from_table(*flatbuffers::GetRoot<fb::HfTokenizer>(bytes->data()),
                                            kFirstAddedId + int64_t(t.added_tokens.size()));
  INFO(p.status().message());
  REQUIRE(p.ok());
  return std::move(p).value();
}

std::string show(const std::vector<tern::HfSegment>& segments) {
  json j = json::array();
  for (const auto& s : segments) {
    j.push_back(s.added_id >= 0 ? json{{"added", s.added_id - kFirstAddedId}} : json{{"word", s.word}});
  }
  return j.dump();
}

std::string show_expected(const json& expected) { return expected.dump(); }

const json& fixture() {
  static const json j = json::parse(tern::test::read_file(tern::test::source_path("tests/fixtures/hf_pipeline.json")));
  return j;
}

}  // namespace

TEST_CASE("HfTextPipeline splits as the tokenizers library does", "[hf_pipeline]") {
  const json& cases = fixture().at("cases");
  REQUIRE(cases.size() >= 30);
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    DYNAMIC_SECTION(name) {
      std::vector<uint8_t> bytes;
      const auto pipeline = pipeline_of(table_of(c), &bytes);
      const bool plain = c.at("added_tokens").empty() && c.at("pre_tokenizer").is_null();
      for (const auto& row : c.at("texts")) {
        const std::string text = row.at("text");
        INFO(name << ": text " << json(text).dump());
        std::vector<tern::HfSegment> split, kept;
        REQUIRE(pipeline->split(text, true, &split).ok());
        REQUIRE(pipeline->split(text, false, &kept).ok());
        CHECK(show(split) == show_expected(row.at("split_specials")));
        if (!row.at("specials_as_text").is_null()) CHECK(show(kept) == show_expected(row.at("specials_as_text")));
        // Without added tokens or pre-tokenizer, the one word is the normalized text.
        if (plain) CHECK(pipeline->normalize(text).value() == (split.empty() ? std::string() : split[0].word));
      }
    }
  }
}

TEST_CASE("HfTextPipeline refuses bad tables by name", "[hf_pipeline]") {
  auto refused = [](const fb::HfTokenizerT& t, int64_t vocab_size) {
    const std::vector<uint8_t> bytes = build_table(t);
    auto p = tern::HfTextPipeline::from_table(*flatbuffers::GetRoot<fb::HfTokenizer>(bytes.data()), vocab_size);
    REQUIRE_FALSE(p.ok());
    return p.status().message();
  };
  auto step = [](uint8_t kind) {
    auto s = std::make_unique<fb::HfStepT>();
    s->kind = kind;
    return s;
  };
  auto token = [](int32_t id, std::string content) {
    auto a = std::make_unique<fb::HfAddedTokenT>();
    a->id = id;
    a->content = std::move(content);
    return a;
  };
  {
    fb::HfTokenizerT t;
    t.normalizers.push_back(step(200));
    CHECK_THAT(refused(t, 10), Catch::Contains("normalizer 0 has unknown kind 200"));
  }
  {
    fb::HfTokenizerT t;
    t.pre_tokenizers.push_back(step(uint8_t(fb::HfPreTokenizer::WHITESPACE)));
    t.pre_tokenizers.push_back(step(uint8_t(fb::HfPreTokenizer::SPLIT)));
    t.pre_tokenizers.back()->pattern = "(a";
    t.pre_tokenizers.back()->pattern_is_regex = true;
    CHECK_THAT(refused(t, 10), Catch::Contains("pre-tokenizer 1 (Split)'s regex"));
  }
  {
    fb::HfTokenizerT t;
    t.normalizers.push_back(step(uint8_t(fb::HfNormalizer::REPLACE)));
    t.normalizers.back()->pattern = "\xC3";
    t.normalizers.back()->content = "x";
    CHECK_THAT(refused(t, 10), Catch::Contains("normalizer 0 (Replace)'s pattern is not valid UTF-8"));
  }
  {
    fb::HfTokenizerT t;
    t.pre_tokenizers.push_back(step(uint8_t(fb::HfPreTokenizer::METASPACE)));
    t.pre_tokenizers.back()->content = "ab";
    CHECK_THAT(refused(t, 10), Catch::Contains("replacement must be one character"));
  }
  {
    fb::HfTokenizerT t;
    t.added_tokens.push_back(token(10, "<x>"));
    CHECK_THAT(refused(t, 10), Catch::Contains("added token 0 has id 10, outside the vocabulary of 10"));
  }
  {
    fb::HfTokenizerT t;
    t.added_tokens.push_back(token(3, "<x>"));
    t.added_tokens.push_back(token(3, "<y>"));
    CHECK_THAT(refused(t, 10), Catch::Contains("added token 1 has id 3, the id of added token 0"));
  }
  {
    fb::HfTokenizerT t;
    t.normalizers.push_back(step(uint8_t(fb::HfNormalizer::LOWERCASE)));
    t.added_tokens.push_back(token(3, "A"));
    t.added_tokens.back()->normalized = true;
    t.added_tokens.push_back(token(4, "a"));
    t.added_tokens.back()->normalized = true;
    CHECK_THAT(refused(t, 10), Catch::Contains("\"A\" and \"a\" normalize to the same string"));
  }
}

TEST_CASE("HfTextPipeline reads invalid UTF-8 as U+FFFD and long texts in linear time", "[hf_pipeline]") {
  fb::HfTokenizerT t;
  add_pre_tokenizers(json::parse(R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})"),
                     &t.pre_tokenizers);
  std::vector<uint8_t> bytes;
  const auto pipeline = pipeline_of(t, &bytes);
  std::vector<tern::HfSegment> out;
  REQUIRE(pipeline->split("a\xC3(", true, &out).ok());
  // "a\uFFFD(" : ByteLevel maps U+FFFD's bytes EF BF BD to ï ¿ ½.
  CHECK(show(out) == R"([{"word":"a"},{"word":"ï¿½("}])");
  out.clear();
  const std::string long_text(1 << 20, 'x');
  REQUIRE(pipeline->split(long_text, true, &out).ok());
  REQUIRE(out.size() == 1);
  CHECK(out[0].word == long_text);
}

TEST_CASE("HfTextPipeline bounds what normalizers write and what added tokens hold", "[hf_pipeline][hostile]") {
  auto refused = [](const fb::HfTokenizerT& t) {
    const std::vector<uint8_t> bytes = build_table(t);
    auto p = tern::HfTextPipeline::from_table(*flatbuffers::GetRoot<fb::HfTokenizer>(bytes.data()),
                                              kFirstAddedId + int64_t(t.added_tokens.size()));
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().code() == TERN_INVALID_MODEL);
    return p.status().message();
  };
  auto replace_a = [](const std::string& content) {
    fb::HfTokenizerT t;
    add_normalizers(json{{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", content}}, &t.normalizers);
    return t;
  };
  CHECK_THAT(refused(replace_a(std::string(129, 'b'))),
             Catch::Contains("normalizer 0 (Replace)'s content is 129 bytes long; a normalization rule may write at "
                             "most 128"));
  fb::HfTokenizerT prepend;
  add_normalizers(json{{"type", "Prepend"}, {"prepend", std::string(129, 'b')}}, &prepend.normalizers);
  CHECK_THAT(refused(prepend), Catch::Contains("(Prepend)'s content is 129 bytes long"));
  fb::HfTokenizerT long_added;
  auto token = std::make_unique<fb::HfAddedTokenT>();
  token->id = kFirstAddedId;
  token->content = std::string(1025, 'x');
  long_added.added_tokens.push_back(std::move(token));
  CHECK_THAT(refused(long_added),
             Catch::Contains("added token 0's content is 1025 bytes long; a token may be at most 1024 bytes"));

  // Each 'a' to 128 b's, three Replace steps over each other: the first that passes 16 times the text stops.
  fb::HfTokenizerT chain = replace_a(std::string(128, 'b'));
  for (int i = 0; i < 2; ++i) {
    add_normalizers(json{{"type", "Replace"}, {"pattern", {{"String", "b"}}}, {"content", std::string(128, 'c')}},
                    &chain.normalizers);
  }
  std::vector<uint8_t> bytes;
  const auto pipeline = pipeline_of(chain, &bytes);
  std::vector<tern::HfSegment> out;
  const tern::Status st = pipeline->split(std::string(1000, 'a'), true, &out);
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == TERN_INVALID_ARGUMENT);
  CHECK_THAT(st.message(), Catch::Contains("normalizing the text (1000 bytes) makes more than 16128 bytes"));
  CHECK_FALSE(pipeline->normalize("a").ok());  // 128 x 128 x 128 bytes
  // Text the rules do not touch, or touch within the bound, goes through.
  REQUIRE(pipeline->split("xyz", true, &out).ok());
  std::vector<uint8_t> once_bytes;
  const auto once = pipeline_of(replace_a(std::string(16, 'b')), &once_bytes);
  CHECK(once->normalize(std::string(1000, 'a')).value() == std::string(16000, 'b'));
}
