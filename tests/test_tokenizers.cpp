// SPDX-License-Identifier: MIT
// The tokenizer a model file carries (schema/README.md, "Tokenizers") through the C API and tern-run: byte and
// shifted-byte vocabularies, models without one, and a hostile file's vocabulary refused at load by name.
// SentencePiece's encoding against libsentencepiece: test_sentencepiece.cpp and test_sentencepiece_models.cpp.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <sstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert.h"
#include "run_tool.h"
#include "tern/tern.hpp"
#include "tern_generated.h"
#include "test_support.h"

using namespace tern;

namespace {

const std::string kRun = std::string(TERN_BINARY_DIR) + "/examples/tern-run";

struct ModelFile {
  std::string path;
  ModelHandle model;
};

ModelFile load_golden(const std::string& golden) {
  const std::string path = test::convert_golden(golden, "tokenizers_" + golden);
  REQUIRE(!path.empty());
  Error err;
  ModelHandle model = ModelHandle::load(path, &err);
  REQUIRE_FALSE(err);
  return ModelFile{path, std::move(model)};
}

// "cpu", and "vulkan" where this machine has a device (a skip noted where it has none).
std::vector<const char*> backends_here() {
  std::vector<const char*> out = {"cpu"};
  std::string why;
  if (test::vulkan_device(&why)) {
    out.push_back("vulkan");
  } else if (!test::cpu_only_run()) {
    WARN("skipped: no Vulkan device (" << why << ")");
    test::note_skipped();
  }
  return out;
}

test::ToolRun run(const std::vector<std::string>& args) {
  static int count = 0;
  return test::run_tool(kRun, args, test::scratch_dir("tokenizers_run_" + std::to_string(count++)));
}

}  // namespace

TEST_CASE("tokenizers: a byte vocabulary maps each byte to its id and back", "[tokenizers]") {
  ModelFile f = load_golden("pre_untied_nobias_gelutanh");
  CHECK(std::string(tern_model_tokenizer(f.model.get())) == "bytes");
  const std::string text = "In the beginning\n\xc3\xa9\xff";
  std::vector<int32_t> ids;
  REQUIRE_FALSE(tokenize(f.model, text, &ids));
  REQUIRE(ids.size() == text.size());
  for (size_t i = 0; i < text.size(); ++i) CHECK(ids[i] == int32_t(static_cast<unsigned char>(text[i])));
  std::string back;
  REQUIRE_FALSE(detokenize(f.model, ids, &back));
  CHECK(back == text);
  CHECK(tern_model_special_token(f.model.get(), TERN_TOKEN_BOS) == -1);
  // tern-run prints the prompt and what follows it, on each backend.
  for (const char* backend : backends_here()) {
    const test::ToolRun r = run({f.path, "--prompt", "In the beginning", "--tokens", "8", "--backend", backend});
    INFO(backend << ": " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.rfind("In the beginning", 0) == 0);
  }
}

TEST_CASE("tokenizers: Reformer's 258-id vocabulary is the bytes shifted by 2", "[tokenizers]") {
  ModelFile f = load_golden("reformer_learned_positions");
  CHECK(std::string(tern_model_tokenizer(f.model.get())) == "bytes+2");
  CHECK(tern_model_special_token(f.model.get(), TERN_TOKEN_PAD) == 0);
  std::vector<int32_t> ids;
  REQUIRE_FALSE(tokenize(f.model, "Hi\xff", &ids));
  CHECK(ids == std::vector<int32_t>{'H' + 2, 'i' + 2, 255 + 2});
  std::string text;
  REQUIRE_FALSE(detokenize(f.model, {0, 'H' + 2, 1, 'i' + 2, 257}, &text));
  CHECK(text == "Hi\xff");  // ids 0 and 1 are special: no text
  std::string piece = "x";
  REQUIRE_FALSE(token_to_text(f.model, 1, &piece));
  CHECK(piece.empty());
  size_t len = 0;
  CHECK(tern_token_to_text(f.model.get(), 258, nullptr, 0, &len) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(tern_last_error(), Catch::Contains("outside the vocabulary [0, 258)"));
  const int32_t bad[] = {3, 300};
  CHECK(tern_detokenize(f.model.get(), bad, 2, nullptr, 0, &len) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(tern_last_error(), Catch::Contains("at index 1"));

  // tern-run generates text through the offset (through the LSH layer's cache, on each backend) and scores bytes.
  for (const char* backend : backends_here()) {
    const test::ToolRun g = run({f.path, "--prompt", "And God said", "--tokens", "8", "--json", "--backend", backend});
    INFO(backend << ": " << g.err);
    REQUIRE(g.exit_code == 0);
    const std::vector<int32_t> generated = nlohmann::json::parse(g.out)["generate"]["ids"].get<std::vector<int32_t>>();
    CHECK(generated.size() == 8);
    for (int32_t id : generated) CHECK((id >= 0 && id < 258));
    const test::ToolRun plain = run({f.path, "--prompt", "And God said", "--tokens", "8", "--backend", backend});
    CHECK(plain.exit_code == 0);
    CHECK(plain.out.rfind("And God said", 0) == 0);
  }
  const std::string scored = test::scratch_dir("tokenizers_score") + "/text.txt";
  test::write_file(scored, "In the beginning God created the heaven and the earth.\n");
  const test::ToolRun s = run({f.path, "--score", scored, "--json"});
  INFO(s.err);
  CHECK(s.exit_code == 0);
  CHECK_THAT(s.out, Catch::Contains("bits_per_byte"));
}

TEST_CASE("tokenizers: a model file without a tokenizer says so and names the way out", "[tokenizers]") {
  ModelFile f = load_golden("transfo_xl_plain");
  CHECK(std::string(tern_model_tokenizer(f.model.get())).empty());
  int64_t n = 0;
  CHECK(tern_tokenize(f.model.get(), "a", 1, nullptr, 0, &n) == TERN_UNSUPPORTED);
  CHECK_THAT(tern_last_error(), Catch::Contains("carries no tokenizer"));
  const test::ToolRun r = run({f.path, "--prompt", "hello"});
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("--prompt needs a model file that carries a tokenizer"));
  CHECK_THAT(r.err, Catch::Contains("--ids"));
}

TEST_CASE("tokenizers: a hostile vocabulary is refused at load by name", "[tokenizers]") {
  const std::string src = test::read_file(test::convert_golden("pre_untied_nobias_gelutanh", "tokenizers_hostile"));
  struct Case {
    const char* name;
    std::function<void(fb::VocabularyT&)> mutate;
    const char* words;
  };
  const auto sp_table = [](int64_t n) {
    auto sp = std::make_unique<fb::SentencePieceT>();
    for (int64_t i = 0; i < n; ++i) {
      sp->pieces.push_back("p" + std::to_string(i));
      sp->scores.push_back(-float(i));
      sp->types.push_back(i == 0 ? 2 : 1);
    }
    return sp;
  };
  const Case cases[] = {
      {"bos out of range", [](fb::VocabularyT& v) { v.bos_id = 256; }, "bos_id 256 is outside"},
      {"pad negative", [](fb::VocabularyT& v) { v.pad_id = -7; }, "pad_id -7 is outside"},
      {"offset negative",
       [](fb::VocabularyT& v) {
         v.kind = fb::VocabKind::SHIFTED_BYTES;
         v.byte_offset = -1;
       },
       "byte_offset -1"},
      {"sentencepiece without table", [](fb::VocabularyT& v) { v.kind = fb::VocabKind::SENTENCEPIECE; },
       "without its table"},
      {"too few pieces",
       [&](fb::VocabularyT& v) {
         v.kind = fb::VocabKind::SENTENCEPIECE;
         v.sentencepiece = sp_table(255);
       },
       "255 pieces"},
      {"bad piece type",
       [&](fb::VocabularyT& v) {
         v.kind = fb::VocabKind::SENTENCEPIECE;
         v.sentencepiece = sp_table(256);
         v.sentencepiece->types[9] = 9;
       },
       "piece 9 has type 9"},
  };
  for (const Case& c : cases) {
    const std::string bytes = test::rebuild_model(src, [&](fb::ModelT& m) { c.mutate(*m.metadata->vocab); });
    const std::string path = test::scratch_dir(std::string("tokenizers_hostile_") + c.name) + "/model.tern";
    test::write_file(path, bytes);
    tern_model* model = nullptr;
    const tern_status st = tern_model_load(path.c_str(), &model);
    INFO(c.name << ": " << tern_last_error());
    CHECK(st == TERN_INVALID_MODEL);
    CHECK_THAT(tern_last_error(), Catch::Contains(c.words));
    tern_model_free(model);
  }
  // A kind this library does not know loads as ids only: a newer file is not misread.
  const std::string newer = test::rebuild_model(src, [](fb::ModelT& m) { m.metadata->vocab->kind = fb::VocabKind(77); });
  const std::string path = test::scratch_dir("tokenizers_newer_kind") + "/model.tern";
  test::write_file(path, newer);
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(path.c_str(), &model) == TERN_OK);
  CHECK(std::string(tern_model_tokenizer(model)).empty());
  int64_t n = 0;
  CHECK(tern_tokenize(model, "a", 1, nullptr, 0, &n) == TERN_UNSUPPORTED);
  tern_model_free(model);
}

namespace {

// A copy of tests/goldens/<golden> with `vocab` as its tern_vocab.json, converted; the model file's path.
std::string with_symbols(const std::string& golden, const nlohmann::json& vocab, Status* status = nullptr) {
  const std::string dir = test::scratch_dir("tokenizers_symbols_" + golden);
  for (const char* f : {"config.json", "model.safetensors"})
    test::write_file(dir + "/" + f, test::read_file(test::source_path("tests/goldens/" + golden + "/" + f)));
  test::write_file(dir + "/tern_vocab.json", vocab.dump());
  convert::ConvertOptions opts;
  opts.quiet = true;
  const Status st = convert::convert_checkpoint(dir, dir + "/model.tern", opts);
  if (status) *status = st;
  return st.ok() ? dir + "/model.tern" : "";
}

ModelHandle load_path(const std::string& path) {
  Error err;
  ModelHandle m = ModelHandle::load(path, &err);
  INFO(err.message);
  REQUIRE_FALSE(err);
  return m;
}

}  // namespace

TEST_CASE("tokenizers: a word list takes text on a Transformer-XL model", "[tokenizers]") {
  // 96 ids (transfo_xl_plain): <eos>, <unk> and the first 94 distinct words of the KJV text.
  std::vector<std::string> words = {"<eos>", "<unk>"};
  std::istringstream in(test::read_file(test::source_path("examples/models/kjv-byte/heldout.txt")));
  for (std::string w; words.size() < 96 && in >> w;)
    if (std::find(words.begin(), words.end(), w) == words.end()) words.push_back(w);
  REQUIRE(words.size() == 96);
  const std::string path = with_symbols("transfo_xl_plain", {{"unit", "words"}, {"symbols", words}, {"eos", "<eos>"}, {"unk", "<unk>"}});
  REQUIRE(!path.empty());
  ModelHandle model = load_path(path);
  CHECK(std::string(tern_model_tokenizer(model.get())) == "words");
  CHECK(tern_model_special_token(model.get(), TERN_TOKEN_EOS) == 0);
  const auto id_of = [&](const std::string& w) {
    const auto it = std::find(words.begin(), words.end(), w);
    return it == words.end() ? 1 : int32_t(it - words.begin());
  };
  const std::string text = "  " + words[5] + "\t" + words[9] + " zzzz\n" + words[2] + "\n";
  std::vector<int32_t> ids;
  REQUIRE_FALSE(tokenize(model, text, &ids));
  CHECK(ids == std::vector<int32_t>{id_of(words[5]), id_of(words[9]), 1, 0, id_of(words[2]), 0});
  std::string back;
  REQUIRE_FALSE(detokenize(model, ids, &back));
  CHECK(back == words[5] + " " + words[9] + " <unk>\n" + words[2] + "\n");
  std::string piece;
  REQUIRE_FALSE(token_to_text(model, ids[0], &piece));
  CHECK(piece == " " + words[5]);

  for (const char* backend : backends_here()) {
    const test::ToolRun r = run({path, "--prompt", words[5] + " " + words[9], "--tokens", "12", "--backend", backend, "--json"});
    INFO(backend << ": " << r.err);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json report = nlohmann::json::parse(r.out);
    const std::vector<int32_t> generated = report["generate"]["ids"].get<std::vector<int32_t>>();
    CHECK(generated.size() == 12);
    std::string expected;  // each word with a space before it, a line end as a newline
    for (int32_t id : generated) expected += id == 0 ? std::string("\n") : " " + words[size_t(id)];
    CHECK(report["generate"]["text"].get<std::string>() == expected);
  }
}

TEST_CASE("tokenizers: characters and decimal bytes as adaptive-span's corpora number them", "[tokenizers]") {
  // text8-like: 64 ids of characters with "_" for a space.
  std::vector<std::string> chars = {"<eos>", "_"};
  for (char c = 'a'; c <= 'z'; ++c) chars.push_back(std::string(1, c));
  for (char c = '0'; c <= '9'; ++c) chars.push_back(std::string(1, c));
  for (char c = 'A'; c <= 'Z'; ++c) chars.push_back(std::string(1, c));
  REQUIRE(chars.size() == 64);
  const std::string path = with_symbols("adaptive_span_fixed_span",
                                        {{"unit", "characters"}, {"symbols", chars}, {"eos", "<eos>"}, {"space", "_"}});
  REQUIRE(!path.empty());
  ModelHandle model = load_path(path);
  CHECK(std::string(tern_model_tokenizer(model.get())) == "characters");
  std::vector<int32_t> ids;
  REQUIRE_FALSE(tokenize(model, "ab c\n", &ids));
  CHECK(ids == std::vector<int32_t>{2, 3, 1, 4, 0});
  std::string back;
  REQUIRE_FALSE(detokenize(model, ids, &back));
  CHECK(back == "ab c\n");
  int64_t n = 0;
  CHECK(tern_tokenize(model.get(), "a!", 2, nullptr, 0, &n) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(tern_last_error(), Catch::Contains("'!' at offset 1 is not in the model's vocabulary"));
  for (const char* backend : backends_here()) {
    const test::ToolRun r = run({path, "--prompt", "in the beginning", "--tokens", "16", "--backend", backend});
    INFO(backend << ": " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.rfind("in the beginning", 0) == 0);
  }

  // enwik8-like: bytes in decimal, newline as <eos>.
  std::vector<std::string> bytes = {"<eos>"};
  for (int b = 32; bytes.size() < 64; ++b) bytes.push_back(std::to_string(b));
  const std::string decimal = with_symbols("adaptive_span_learned", {{"unit", "bytes-decimal"}, {"symbols", bytes}, {"eos", "<eos>"}});
  REQUIRE(!decimal.empty());
  ModelHandle dm = load_path(decimal);
  CHECK(std::string(tern_model_tokenizer(dm.get())) == "bytes-decimal");
  ids.clear();
  REQUIRE_FALSE(tokenize(dm, "A \n!", &ids));
  CHECK(ids == std::vector<int32_t>{'A' - 31, 1, 0, '!' - 31});
  REQUIRE_FALSE(detokenize(dm, ids, &back));
  CHECK(back == "A \n!");
  CHECK(tern_tokenize(dm.get(), "~", 1, nullptr, 0, &n) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(tern_last_error(), Catch::Contains("'126' at offset 0"));
}

TEST_CASE("tokenizers: a symbol list that does not fit is refused by name", "[tokenizers]") {
  std::vector<std::string> s;
  for (int i = 0; i < 95; ++i) s.push_back("w" + std::to_string(i));
  Status st;
  CHECK(with_symbols("transfo_xl_plain", {{"unit", "words"}, {"symbols", s}}, &st).empty());
  CHECK_THAT(st.message(), Catch::Contains("holds 95 symbols; the model's vocabulary has 96 tokens"));
  s.push_back("w3");
  CHECK(with_symbols("transfo_xl_plain", {{"unit", "words"}, {"symbols", s}}, &st).empty());
  CHECK_THAT(st.message(), Catch::Contains("symbols[95] repeats symbols[3] ('w3')"));
  s.back() = "w95";
  CHECK(with_symbols("transfo_xl_plain", {{"unit", "bpe"}, {"symbols", s}}, &st).empty());
  CHECK_THAT(st.message(), Catch::Contains("\"unit\" must be words, characters or bytes-decimal"));
  CHECK(with_symbols("transfo_xl_plain", {{"unit", "words"}, {"symbols", s}, {"eos", "<eos>"}}, &st).empty());
  CHECK_THAT(st.message(), Catch::Contains("\"eos\" names '<eos>', which is not among the symbols"));
  CHECK(with_symbols("transfo_xl_plain", {{"unit", "characters"}, {"symbols", s}}, &st).empty());
  CHECK_THAT(st.message(), Catch::Contains("\"space\""));
}
