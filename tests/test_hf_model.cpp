// SPDX-License-Identifier: MIT
// The tokenizer.json models and decoders (text/hf_bpe.h, hf_unigram.h, hf_decoders.h) against the `tokenizers`
// library: tests/fixtures/hf_model_cases.json holds small BPE and Unigram models drawn from a fixed seed, the ids
// tokenizers 0.23.2 gives their texts (each text one word), and decoder chains' texts for id lists, written by
// tools/reference/hf_model_cases.js (its header has the command). Tables are built here as the converter writes
// them; a hostile table is refused with a message naming its field. Last, a whole tokenizer.json (Llama-like:
// Metaspace, byte fallback, a BOS template) in a model file through the C API and tern-run.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <flatbuffers/flatbuffers.h>
#include <nlohmann/json.hpp>

#include "tern/tern.hpp"
#include "tern_generated.h"
#include "test_support.h"
#include "text/hf_bpe.h"
#include "text/hf_decoders.h"
#include "text/hf_unigram.h"
#include "text/hf_utf8.h"
#include "text/hf_vocab.h"

using namespace tern;
using nlohmann::json;

namespace {

json load_cases() {
  std::ifstream in(std::string(TERN_SOURCE_DIR) + "/tests/fixtures/hf_model_cases.json");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str())["cases"];
}

uint8_t decoder_kind(const std::string& name) {
  if (name == "BYTE_LEVEL") return uint8_t(fb::HfDecoder::BYTE_LEVEL);
  if (name == "METASPACE") return uint8_t(fb::HfDecoder::METASPACE);
  if (name == "BYTE_FALLBACK") return uint8_t(fb::HfDecoder::BYTE_FALLBACK);
  if (name == "FUSE") return uint8_t(fb::HfDecoder::FUSE);
  if (name == "STRIP") return uint8_t(fb::HfDecoder::STRIP);
  if (name == "REPLACE") return uint8_t(fb::HfDecoder::REPLACE);
  FAIL("unknown decoder kind " << name);
  return 0;
}

fb::HfPrependScheme scheme(const std::string& name) {
  return name == "FIRST"   ? fb::HfPrependScheme::FIRST
         : name == "NEVER" ? fb::HfPrependScheme::NEVER
                           : fb::HfPrependScheme::ALWAYS;
}

// The fb::HfTokenizer of a case, as tern-convert writes it; edit changes the json first (hostile tables).
std::vector<uint8_t> table_of(const json& c) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<std::string> pieces = c["pieces"].get<std::vector<std::string>>();
  auto pieces_offset = b.CreateVectorOfStrings(pieces);
  flatbuffers::Offset<flatbuffers::Vector<int32_t>> merges;
  if (c.contains("merges")) merges = b.CreateVector(c["merges"].get<std::vector<int32_t>>());
  flatbuffers::Offset<flatbuffers::Vector<double>> scores;
  if (c.contains("scores")) scores = b.CreateVector(c["scores"].get<std::vector<double>>());
  auto prefix = b.CreateString(c.value("continuing_subword_prefix", std::string()));
  auto suffix = b.CreateString(c.value("end_of_word_suffix", std::string()));
  std::vector<flatbuffers::Offset<fb::HfStep>> steps;
  for (const json& s : c.value("steps", json::array())) {
    auto pattern = b.CreateString(s.value("pattern", std::string()));
    auto content = b.CreateString(s.value("content", std::string()));
    steps.push_back(fb::CreateHfStep(b, decoder_kind(s["kind"]), pattern, s.value("regex", false), content,
                                     fb::HfSplitBehavior::REMOVED, false, false, false,
                                     scheme(s.value("prepend_scheme", std::string("ALWAYS"))), false, false, false,
                                     false, s.value("start", 0), s.value("stop", 0)));
  }
  auto steps_offset = b.CreateVector(steps);
  std::vector<flatbuffers::Offset<fb::HfAddedToken>> added;
  for (const json& a : c.value("added", json::array())) {
    added.push_back(fb::CreateHfAddedToken(b, a["id"].get<int32_t>(), b.CreateString(a["content"].get<std::string>()),
                                           a["special"].get<bool>()));
  }
  auto added_offset = b.CreateVector(added);
  fb::HfTokenizerBuilder t(b);
  t.add_model(c["model"] == "UNIGRAM" ? fb::HfModelKind::UNIGRAM : fb::HfModelKind::BPE);
  t.add_pieces(pieces_offset);
  if (!merges.IsNull()) t.add_merges(merges);
  if (!scores.IsNull()) t.add_scores(scores);
  t.add_unk_id(c.value("unk_id", -1));
  t.add_byte_fallback(c.value("byte_fallback", false));
  t.add_ignore_merges(c.value("ignore_merges", false));
  t.add_fuse_unk(c.value("fuse_unk", false));
  t.add_continuing_subword_prefix(prefix);
  t.add_end_of_word_suffix(suffix);
  t.add_decoders(steps_offset);
  t.add_added_tokens(added_offset);
  b.Finish(t.Finish());
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

const fb::HfTokenizer& view(const std::vector<uint8_t>& bytes) {
  return *flatbuffers::GetRoot<fb::HfTokenizer>(bytes.data());
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

template <typename Model>
Model created(const fb::HfTokenizer& table, const HfVocab* vocab) {
  auto model = Model::create(table, vocab);
  REQUIRE(model.ok());
  return std::move(model).value();
}

}  // namespace

TEST_CASE("hf BPE and Unigram give tokenizers' ids for each fixture text", "[hf_model]") {
  int checked = 0;
  for (const json& c : load_cases()) {
    if (c["model"] == "DECODE") continue;
    INFO("case " << c["name"].get<std::string>());
    const std::vector<uint8_t> bytes = table_of(c);
    auto vocab = HfVocab::from_table(view(bytes), int64_t(c["pieces"].size()));
    REQUIRE(vocab.ok());
    const auto& texts = c["texts"];
    const auto& expected = c["ids"];
    if (c["model"] == "BPE") {
      const HfBpe bpe = created<HfBpe>(view(bytes), &vocab.value());
      HfBpe::Scratch scratch;
      for (size_t i = 0; i < texts.size(); ++i) {
        std::vector<int32_t> ids;
        bpe.encode_word(texts[i].get<std::string>(), &scratch, &ids);
        INFO("text " << texts[i].get<std::string>());
        CHECK(show(ids) == show(expected[i].get<std::vector<int32_t>>()));
        ++checked;
      }
    } else {
      const HfUnigram unigram = created<HfUnigram>(view(bytes), &vocab.value());
      HfUnigram::Scratch scratch;
      for (size_t i = 0; i < texts.size(); ++i) {
        std::vector<int32_t> ids;
        REQUIRE(unigram.encode_word(texts[i].get<std::string>(), &scratch, &ids).ok());
        INFO("text " << texts[i].get<std::string>());
        CHECK(show(ids) == show(expected[i].get<std::vector<int32_t>>()));
        ++checked;
      }
    }
  }
  CHECK(checked > 400);
}

TEST_CASE("hf decoders give tokenizers' decode text, with and without special tokens", "[hf_model]") {
  int checked = 0;
  for (const json& c : load_cases()) {
    if (c["model"] != "DECODE") continue;
    INFO("case " << c["name"].get<std::string>());
    const std::vector<uint8_t> bytes = table_of(c);
    auto vocab = HfVocab::from_table(view(bytes), int64_t(c["pieces"].size()));
    REQUIRE(vocab.ok());
    const HfDecoders decoders = created<HfDecoders>(view(bytes), &vocab.value());
    const auto& lists = c["id_lists"];
    for (size_t i = 0; i < lists.size(); ++i) {
      const std::vector<int32_t> ids = lists[i].get<std::vector<int32_t>>();
      INFO("ids " << show(ids));
      CHECK(decoders.decode(ids.data(), ids.size(), false) == c["decoded"][i].get<std::string>());
      CHECK(decoders.decode(ids.data(), ids.size(), true) == c["skipped"][i].get<std::string>());
      ++checked;
    }
  }
  CHECK(checked > 150);
}

TEST_CASE("hf piece_text streams what decode gives after a first token", "[hf_model]") {
  // decode([first] + rest) = decode([first]) + the rest's piece texts, for chains whose first-token rules touch the
  // first token only (expected texts are the reference's decode of the whole list).
  for (const json& c : load_cases()) {
    const std::string name = c["name"];
    if (name != "byte_level" && name != "metaspace_first" && name != "llama") continue;
    INFO("case " << name);
    const std::vector<uint8_t> bytes = table_of(c);
    auto vocab = HfVocab::from_table(view(bytes), int64_t(c["pieces"].size()));
    REQUIRE(vocab.ok());
    const HfDecoders decoders = created<HfDecoders>(view(bytes), &vocab.value());
    const auto& lists = c["id_lists"];
    for (size_t i = 0; i < lists.size(); ++i) {
      const std::vector<int32_t> ids = lists[i].get<std::vector<int32_t>>();
      const std::string whole = c["decoded"][i];
      // Lossy text has other bytes; special tokens stream as nothing; an id with no token is no first token.
      bool plain = !ids.empty() && whole.find("\xEF\xBF\xBD") == std::string::npos;
      for (int32_t id : ids) plain = plain && decoders.token(id) && !decoders.is_special_text(*decoders.token(id));
      if (!plain) continue;
      std::string streamed = decoders.decode(ids.data(), 1, false);
      if (streamed.find("\xEF\xBF\xBD") != std::string::npos) continue;  // a first byte token alone
      for (size_t k = 1; k < ids.size(); ++k) streamed += decoders.piece_text(ids[k]);
      INFO("ids " << show(ids));
      CHECK(streamed == whole);
    }
  }
}

TEST_CASE("hf piece_text gives raw bytes for byte tokens and nothing for special ones", "[hf_model]") {
  for (const json& c : load_cases()) {
    if (c["name"] != "llama" && c["name"] != "byte_level") continue;
    const std::vector<uint8_t> bytes = table_of(c);
    auto vocab = HfVocab::from_table(view(bytes), int64_t(c["pieces"].size()));
    REQUIRE(vocab.ok());
    const HfDecoders decoders = created<HfDecoders>(view(bytes), &vocab.value());
    if (c["name"] == "llama") {
      CHECK(decoders.piece_text(4) == "\xC3");    // <0xC3>: half of é
      CHECK(decoders.piece_text(7) == " hello");  // ▁hello, not at the start
      CHECK(decoders.piece_text(1).empty());      // <s>, special
    } else {
      CHECK(decoders.piece_text(2) == "\xC3");    // Ã: byte 0xC3
      CHECK(decoders.piece_text(0) == " hello");  // Ġhello
    }
  }
}

TEST_CASE("hf GPT-2 byte characters invert", "[hf_model]") {
  for (int b = 0; b < 256; ++b) CHECK(hf_byte_level_byte(hf_byte_level_char(uint8_t(b))) == b);
  CHECK(hf_byte_level_char(' ') == U'\u0120');
  CHECK(hf_byte_level_char('\n') == U'\u010A');
  CHECK(hf_byte_level_byte(U'\u0144') == -1);
}

TEST_CASE("hf model tables from a hostile file are refused, naming the field", "[hf_model]") {
  json bpe_case, unigram_case, decode_case;
  for (const json& c : load_cases()) {
    if (c["name"] == "bpe_unk") bpe_case = c;
    if (c["name"] == "unigram_unk") unigram_case = c;
    if (c["name"] == "llama") decode_case = c;
  }
  const auto bpe_error = [](json c) {
    const std::vector<uint8_t> bytes = table_of(c);
    auto vocab = HfVocab::from_table(view(bytes), int64_t(c["pieces"].size()));
    if (!vocab.ok()) return vocab.status().message();
    auto bpe = HfBpe::create(view(bytes), &vocab.value());
    return bpe.ok() ? std::string() : bpe.status().message();
  };
  CHECK(bpe_error(bpe_case).empty());
  json c = bpe_case;
  c["merges"].push_back(1);
  CHECK_THAT(bpe_error(c), Catch::Contains("hf_tokenizer.merges") && Catch::Contains("multiple of 3"));
  c = bpe_case;
  c["merges"][4] = 1 << 30;
  CHECK_THAT(bpe_error(c), Catch::Contains("hf_tokenizer.merges entry 1"));
  c = bpe_case;
  c["merges"][0] = -1;
  CHECK_THAT(bpe_error(c), Catch::Contains("hf_tokenizer.merges entry 0"));
  c = bpe_case;
  c["unk_id"] = int(c["pieces"].size());
  CHECK_THAT(bpe_error(c), Catch::Contains("hf_tokenizer.unk_id"));
  c = bpe_case;
  c["pieces"][3] = c["pieces"][2];
  CHECK_THAT(bpe_error(c), Catch::Contains("hf_tokenizer.pieces 2 and 3"));
  c = bpe_case;
  c["pieces"][3] = std::string(1025, 'x');  // a trie walk's bound (text/token_limits.h)
  CHECK_THAT(bpe_error(c), Catch::Contains("hf_tokenizer.pieces 3 is 1025 bytes long; a token may be at most 1024"));
  {
    const std::vector<uint8_t> bytes = table_of(bpe_case);
    auto vocab = HfVocab::from_table(view(bytes), int64_t(bpe_case["pieces"].size()) + 1);
    REQUIRE_FALSE(vocab.ok());
    CHECK_THAT(vocab.status().message(), Catch::Contains("hf_tokenizer.pieces has"));
  }

  const auto unigram_error = [](json c) {
    const std::vector<uint8_t> bytes = table_of(c);
    auto vocab = HfVocab::from_table(view(bytes), int64_t(c["pieces"].size()));
    REQUIRE(vocab.ok());
    auto model = HfUnigram::create(view(bytes), &vocab.value());
    return model.ok() ? std::string() : model.status().message();
  };
  CHECK(unigram_error(unigram_case).empty());
  c = unigram_case;
  c["scores"].erase(0);
  CHECK_THAT(unigram_error(c), Catch::Contains("hf_tokenizer.scores has"));
  {
    // A NaN score: json has no NaN, so the table is written directly.
    json n = unigram_case;
    std::vector<uint8_t> bytes = table_of(n);
    auto* scores = const_cast<flatbuffers::Vector<double>*>(view(bytes).scores());
    scores->Mutate(2, std::numeric_limits<double>::quiet_NaN());
    auto vocab = HfVocab::from_table(view(bytes), int64_t(n["pieces"].size()));
    REQUIRE(vocab.ok());
    auto model = HfUnigram::create(view(bytes), &vocab.value());
    REQUIRE_FALSE(model.ok());
    CHECK_THAT(model.status().message(), Catch::Contains("hf_tokenizer.scores 2 is not finite"));
  }

  const auto decoder_error = [](json c) {
    const std::vector<uint8_t> bytes = table_of(c);
    auto vocab = HfVocab::from_table(view(bytes), int64_t(c["pieces"].size()));
    REQUIRE(vocab.ok());
    auto d = HfDecoders::create(view(bytes), &vocab.value());
    return d.ok() ? std::string() : d.status().message();
  };
  CHECK(decoder_error(decode_case).empty());
  c = decode_case;
  c["steps"][3]["content"] = "ab";
  CHECK_THAT(decoder_error(c), Catch::Contains("hf_tokenizer.decoders[3]") && Catch::Contains("not one character"));
  c = decode_case;
  c["steps"][3]["stop"] = -1;
  CHECK_THAT(decoder_error(c), Catch::Contains("hf_tokenizer.decoders[3]"));
  c = decode_case;
  c["steps"][0]["pattern"] = "(a";
  c["steps"][0]["regex"] = true;
  CHECK_THAT(decoder_error(c), Catch::Contains("hf_tokenizer.decoders[0]: Replace pattern"));
  c = decode_case;
  c["added"][0]["id"] = 99;
  CHECK_THAT(decoder_error(c), Catch::Contains("hf_tokenizer.added_tokens[0].id 99"));
}

TEST_CASE("hf BPE on a long word of one repeated pair stays linear and exact", "[hf_model]") {
  // a, b, ab, abab with merges (a b), (ab ab): "ab" * 10000 is 5000 abab tokens in tokenizers 0.23.2 (checked with
  // the Node binding: BPE vocab {a:0, b:1, ab:2, abab:3}, merges [[a, b], [ab, ab]]).
  json c = {{"model", "BPE"}, {"pieces", {"a", "b", "ab", "abab"}}, {"merges", {0, 1, 2, 2, 2, 3}}};
  const std::vector<uint8_t> bytes = table_of(c);
  auto vocab = HfVocab::from_table(view(bytes), 4);
  REQUIRE(vocab.ok());
  const HfBpe bpe = created<HfBpe>(view(bytes), &vocab.value());
  std::string word;
  for (int i = 0; i < 10000; ++i) word += "ab";
  HfBpe::Scratch scratch;
  std::vector<int32_t> ids;
  bpe.encode_word(word, &scratch, &ids);
  REQUIRE(ids.size() == 5000);
  for (int32_t id : ids) REQUIRE(id == 3);
}

namespace {

// A Llama-like tokenizer.json on a 256-id golden model. tokenizers 0.23.2 (Node binding) built from
//   vocab {"<s>":0, "</s>":1, "<unk>":2, "▁":3, h:4, i:5, hi:6, "▁hi":7, "<0xC3>":8, "<0xA9>":9}, merges [h i], [▁ hi],
//   BPE unk_token "<unk>", fuse_unk, byte_fallback; added tokens <s> (0) and </s> (1), special, not normalized;
//   pre_tokenizer Metaspace(▁, prepend_scheme first, split false); TemplateProcessing single "<s> $A";
//   decoder Sequence[Replace ▁ -> " ", ByteFallback, Fuse, Strip(" ", 1, 0)]
// gives, for "hi hi<s>é</s>xhi": encode(add_special_tokens=false) [7,7,0,8,9,1,2,6], with true [0,7,7,0,8,9,1,2,6],
// and without the added tokens (= specials as text) [7,7,8,9,2,6] (the unknown "<s>" waits behind é's byte tokens
// and fuses with "</s>x"); decode([0,7,7,0,8,9,1,2,6]) "<s> hi hi<s>é</s><unk>hi", skipping specials "hi hié<unk>hi".
std::unique_ptr<fb::HfTokenizerT> llama_like_table() {
  auto t = std::make_unique<fb::HfTokenizerT>();
  t->model = fb::HfModelKind::BPE;
  const char* pieces[] = {"<s>", "</s>", "<unk>", "\u2581", "h", "i", "hi", "\u2581hi", "<0xC3>", "<0xA9>"};
  for (int i = 0; i < 256; ++i) t->pieces.push_back(i < 10 ? pieces[i] : "");
  t->merges = {4, 5, 6, 3, 6, 7};
  t->unk_id = 2;
  t->fuse_unk = true;
  t->byte_fallback = true;
  auto step = [](fb::HfDecoder kind) {
    auto s = std::make_unique<fb::HfStepT>();
    s->kind = uint8_t(kind);
    return s;
  };
  auto meta = std::make_unique<fb::HfStepT>();
  meta->kind = uint8_t(fb::HfPreTokenizer::METASPACE);
  meta->content = "\u2581";
  meta->prepend_scheme = fb::HfPrependScheme::FIRST;
  t->pre_tokenizers.push_back(std::move(meta));
  t->decoders.push_back(step(fb::HfDecoder::REPLACE));
  t->decoders.back()->pattern = "\u2581";
  t->decoders.back()->content = " ";
  t->decoders.push_back(step(fb::HfDecoder::BYTE_FALLBACK));
  t->decoders.push_back(step(fb::HfDecoder::FUSE));
  t->decoders.push_back(step(fb::HfDecoder::STRIP));
  t->decoders.back()->content = " ";
  t->decoders.back()->start = 1;
  for (int id : {0, 1}) {
    auto a = std::make_unique<fb::HfAddedTokenT>();
    a->id = id;
    a->content = pieces[id];
    a->special = true;
    t->added_tokens.push_back(std::move(a));
  }
  t->prefix_ids = {0};
  return t;
}

std::string model_with(const std::string& name, const std::function<void(fb::HfTokenizerT&)>& edit) {
  const std::string src = test::read_file(test::convert_golden("pre_untied_nobias_gelutanh", "hf_model_src"));
  const std::string bytes = test::rebuild_model(src, [&](fb::ModelT& m) {
    fb::VocabularyT& v = *m.metadata->vocab;
    v.kind = fb::VocabKind::HF_TOKENIZER;
    v.bos_id = 0;
    v.eos_id = 1;
    v.hf_tokenizer = llama_like_table();
    edit(*v.hf_tokenizer);
  });
  const std::string path = test::scratch_dir("hf_model_" + name) + "/model.tern";
  test::write_file(path, bytes);
  return path;
}

}  // namespace

TEST_CASE("hf tokenizer in a model file: tern_tokenize_with's flags and tern_detokenize as tokenizers gives them",
          "[hf_model]") {
  Error err;
  ModelHandle model = ModelHandle::load(model_with("llama_like", [](fb::HfTokenizerT&) {}), &err);
  REQUIRE_FALSE(err);
  CHECK(std::string(tern_model_tokenizer(model.get())) == "hf-bpe");
  const std::string text = "hi hi<s>\xC3\xA9</s>xhi";
  std::vector<int32_t> ids;
  REQUIRE_FALSE(tokenize(model, text, &ids));
  CHECK(ids == std::vector<int32_t>{7, 7, 0, 8, 9, 1, 2, 6});
  REQUIRE_FALSE(tokenize(model, text, &ids, TERN_TOKENIZE_ADD_SPECIAL));
  CHECK(ids == std::vector<int32_t>{0, 7, 7, 0, 8, 9, 1, 2, 6});
  REQUIRE_FALSE(tokenize(model, text, &ids, TERN_TOKENIZE_SPECIALS_AS_TEXT));
  CHECK(ids == std::vector<int32_t>{7, 7, 8, 9, 2, 6});
  int64_t n = 0;
  CHECK(tern_tokenize_with(model.get(), "a", 1, 1u << 7, nullptr, 0, &n) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(tern_last_error(), Catch::Contains("flags"));
  std::string back;
  REQUIRE_FALSE(detokenize(model, {0, 7, 7, 0, 8, 9, 1, 2, 6}, &back));
  CHECK(back == "<s> hi hi<s>\xC3\xA9</s><unk>hi");
  // Streaming: é arrives as two byte tokens; Utf8Stream holds the first back.
  Utf8Stream stream;
  std::string piece, streamed;
  for (int32_t id : {7, 8, 9, 7}) {
    REQUIRE_FALSE(token_to_text(model, id, &piece));
    const std::string ready = stream.push(piece);
    if (id == 8) CHECK(ready.empty());
    streamed += ready;
  }
  streamed += stream.flush();
  CHECK(streamed == " hi\xC3\xA9 hi");
}

TEST_CASE("hf tokenizer in a model file: a hostile table is refused at load by field", "[hf_model]") {
  struct Case {
    const char* name;
    std::function<void(fb::HfTokenizerT&)> edit;
    const char* words;
  };
  const Case cases[] = {
      {"pieces", [](fb::HfTokenizerT& t) { t.pieces.pop_back(); }, "hf_tokenizer.pieces has 255"},
      {"merges", [](fb::HfTokenizerT& t) { t.merges.push_back(300); }, "hf_tokenizer.merges"},
      {"merge_id", [](fb::HfTokenizerT& t) { t.merges[2] = 200; }, "hf_tokenizer.merges entry 0"},
      {"unk", [](fb::HfTokenizerT& t) { t.unk_id = 100; }, "hf_tokenizer.unk_id 100"},
      {"prefix", [](fb::HfTokenizerT& t) { t.prefix_ids = {256}; }, "hf_tokenizer.prefix_ids id 256"},
      {"model", [](fb::HfTokenizerT& t) { t.model = fb::HfModelKind(9); }, "hf_tokenizer.model 9"},
      {"decoder", [](fb::HfTokenizerT& t) { t.decoders[0]->kind = 99; }, "hf_tokenizer.decoders[0]"},
      {"scores", [](fb::HfTokenizerT& t) { t.model = fb::HfModelKind::UNIGRAM; }, "hf_tokenizer.scores has 0"},
  };
  for (const Case& c : cases) {
    tern_model* model = nullptr;
    const tern_status st = tern_model_load(model_with(std::string("hostile_") + c.name, c.edit).c_str(), &model);
    INFO(c.name << ": " << tern_last_error());
    CHECK(st == TERN_INVALID_MODEL);
    CHECK_THAT(tern_last_error(), Catch::Contains(c.words));
    tern_model_free(model);
  }
}
