// SPDX-License-Identifier: MIT
// Converted models that carry a SentencePiece tokenizer, end to end: a spiece.model beside config.json (as HF
// ReformerTokenizer checkpoints ship it) or named by --tokenizer, trained here with libsentencepiece's trainer on
// public-domain text; the C API's ids and text against libsentencepiece's, and tern-run --prompt on both backends.
// The encoder's exactness over a 10,000-line text: test_sentencepiece.cpp.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "convert.h"
#include "run_tool.h"
#include "tern/tern.hpp"
#include "test_support.h"

using namespace tern;

namespace {

const std::string kRun = std::string(TERN_BINARY_DIR) + "/examples/tern-run";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The held-out KJV text lower-cased (38 characters: small vocabularies fit the goldens' 64 and 80 ids).
const std::string& corpus() {
  static const std::string text = [] {
    std::string t = test::read_file(test::source_path("examples/models/kjv-byte/heldout.txt"));
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return t;
  }();
  return text;
}

// Trains a SentencePiece model of `vocab` pieces into dir/spiece.model; its path.
std::string train(const std::string& dir, const std::string& type, int vocab) {
  const std::string input = dir + "/corpus.txt";
  test::write_file(input, corpus());
  const std::string prefix = dir + "/spiece";
  const auto st = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + input + " --model_prefix=" + prefix + " --model_type=" + type +
      " --vocab_size=" + std::to_string(vocab) + " --character_coverage=1.0 --num_threads=1 --minloglevel=2");
  INFO(st.ToString());
  REQUIRE(st.ok());
  return prefix + ".model";
}

// A copy of tests/goldens/<golden> (config.json, model.safetensors) in a scratch directory.
std::string copy_golden(const std::string& golden, const std::string& scratch) {
  const std::string dir = test::scratch_dir(scratch);
  for (const char* f : {"config.json", "model.safetensors"})
    test::write_file(dir + "/" + f, test::read_file(test::source_path("tests/goldens/" + golden + "/" + f)));
  return dir;
}

Status convert_with(const std::string& dir, const std::string& out, const convert::TokenizerChoice& tokenizer = {}) {
  convert::ConvertOptions opts;
  opts.quiet = true;
  opts.tokenizer = tokenizer;
  return convert::convert_checkpoint(dir, out, opts);
}

ModelHandle load(const std::string& path) {
  Error err;
  ModelHandle m = ModelHandle::load(path, &err);
  INFO(err.message);
  REQUIRE_FALSE(err);
  return m;
}

// Every line's ids and text through the C API against libsentencepiece's, for the model file at path.
void check_against_libsentencepiece(const ModelHandle& model, const std::string& spiece) {
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.Load(spiece).ok());
  std::vector<std::string> lines = lines_of(test::read_file(test::source_path("examples/models/kjv-byte/heldout.txt")));
  lines.push_back("  Mixed   CASE, digits 1234 and \xef\xbc\xa1\xef\xbd\x82 full-width\t\xc3\xa9 ");
  lines.push_back("");
  int mismatches = 0;
  for (const std::string& line : lines) {
    std::vector<int> expected;
    REQUIRE(sp.Encode(line, &expected).ok());
    std::vector<int32_t> ids;
    REQUIRE_FALSE(tokenize(model, line, &ids));
    std::string text, expected_text;
    REQUIRE_FALSE(detokenize(model, ids, &text));
    REQUIRE(sp.Decode(expected, &expected_text).ok());
    const bool same = std::vector<int>(ids.begin(), ids.end()) == expected && text == expected_text;
    if (!same && ++mismatches <= 3) UNSCOPED_INFO("line '" << line << "': ids or text differ from libsentencepiece's");
  }
  CHECK(mismatches == 0);
}

// tern-run --json generated `count` ids after `prompt`, and its text is libsentencepiece's decoding of them after
// the prompt's ids.
void check_generated_text(const test::ToolRun& r, const sentencepiece::SentencePieceProcessor& sp,
                          const std::string& prompt, size_t count) {
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json report = nlohmann::json::parse(r.out);
  const std::vector<int> generated = report["generate"]["ids"].get<std::vector<int>>();
  CHECK(generated.size() == count);
  std::vector<int> prompt_ids, all;
  REQUIRE(sp.Encode(prompt, &prompt_ids).ok());
  all = prompt_ids;
  all.insert(all.end(), generated.begin(), generated.end());
  std::string whole, head;
  REQUIRE(sp.Decode(all, &whole).ok());
  REQUIRE(sp.Decode(prompt_ids, &head).ok());
  const std::string text = report["generate"]["text"].get<std::string>();
  CHECK(head + text == whole);
  CHECK_FALSE(text.empty());
}

}  // namespace

TEST_CASE("sentencepiece models: a Reformer checkpoint with spiece.model carries its tokenizer", "[sentencepiece]") {
  const std::string dir = copy_golden("reformer_mixed_factorized", "sp_models_reformer");  // vocab_size 80
  const std::string spiece = train(dir, "unigram", 80);
  REQUIRE(spiece == dir + "/spiece.model");  // found beside config.json, no flag
  const std::string out = dir + "/model.tern";
  const Status st = convert_with(dir, out);
  INFO(st.message());
  REQUIRE(st.ok());
  ModelHandle model = load(out);
  CHECK(std::string(tern_model_tokenizer(model.get())) == "sentencepiece-unigram");
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.Load(spiece).ok());
  CHECK(tern_model_special_token(model.get(), TERN_TOKEN_UNK) == sp.unk_id());
  CHECK(tern_model_special_token(model.get(), TERN_TOKEN_EOS) == sp.eos_id());
  check_against_libsentencepiece(model, spiece);

  // tern-run --prompt generates through the LSH layers' cache (Hugging Face's cached generation), on each backend.
  const test::ToolRun r = test::run_tool(kRun, {out, "--prompt", "and god said", "--tokens", "6", "--seed", "3", "--json"},
                                         test::scratch_dir("sp_models_reformer_prompt"));
  check_generated_text(r, sp, "and god said", 6);
  std::string why;
  if (test::vulkan_device(&why)) {
    const test::ToolRun v = test::run_tool(
        kRun, {out, "--prompt", "and god said", "--tokens", "6", "--seed", "3", "--json", "--backend", "vulkan"},
        test::scratch_dir("sp_models_reformer_prompt_vulkan"));
    check_generated_text(v, sp, "and god said", 6);
  }
}

TEST_CASE("sentencepiece models: --tokenizer attaches a BPE model and tern-run generates text", "[sentencepiece]") {
  const std::string dir = copy_golden("chunked_c128", "sp_models_reference");  // vocab_size 64, no tokenizer file
  const std::string spiece = train(test::scratch_dir("sp_models_bpe64"), "bpe", 64);
  const std::string out = dir + "/model.tern";
  convert::TokenizerChoice choice;
  choice.path = spiece;
  const Status st = convert_with(dir, out, choice);
  INFO(st.message());
  REQUIRE(st.ok());
  ModelHandle model = load(out);
  CHECK(std::string(tern_model_tokenizer(model.get())) == "sentencepiece-bpe");
  check_against_libsentencepiece(model, spiece);
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.Load(spiece).ok());
  for (const char* backend : {"cpu", "vulkan"}) {
    if (std::string(backend) == "vulkan") {
      std::string why;
      if (!test::vulkan_device(&why)) {
        if (!test::cpu_only_run()) {
          WARN("skipped: no Vulkan device (" << why << ")");
          test::note_skipped();
        }
        continue;
      }
    }
    INFO("backend " << backend);
    const std::string prompt = "and god said";
    const test::ToolRun r = test::run_tool(kRun, {out, "--prompt", prompt, "--tokens", "20", "--seed", "5",
                                                  "--backend", backend, "--json"},
                                           test::scratch_dir(std::string("sp_models_run_") + backend));
    check_generated_text(r, sp, prompt, 20);
  }
  // Without --json the prompt and the generated text are printed as text.
  const test::ToolRun plain = test::run_tool(kRun, {out, "--prompt", "and god said", "--tokens", "12"},
                                             test::scratch_dir("sp_models_plain"));
  CHECK(plain.exit_code == 0);
  CHECK(plain.out.rfind("and god said", 0) == 0);
}

TEST_CASE("sentencepiece models: a tokenizer that does not fit the model is refused by name", "[sentencepiece]") {
  const std::string spiece = train(test::scratch_dir("sp_models_unigram80"), "unigram", 80);
  const std::string dir = copy_golden("chunked_c128", "sp_models_mismatch");
  convert::TokenizerChoice choice;
  choice.path = spiece;
  Status st = convert_with(dir, dir + "/model.tern", choice);
  CHECK_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("holds 80 pieces; the model's vocabulary has 64 tokens"));
  choice.path = dir + "/missing.model";
  st = convert_with(dir, dir + "/model.tern", choice);
  CHECK_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("missing.model"));
  test::write_file(dir + "/garbage.model", "not a sentencepiece model");
  choice.path = dir + "/garbage.model";
  st = convert_with(dir, dir + "/model.tern", choice);
  CHECK_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("garbage.model"));
  // A spiece.model beside a byte-level model's config.json is not taken without --tokenizer.
  const std::string bytes_dir = copy_golden("pre_untied_nobias_gelutanh", "sp_models_bytes");
  test::write_file(bytes_dir + "/spiece.model", test::read_file(spiece));
  REQUIRE(convert_with(bytes_dir, bytes_dir + "/model.tern").ok());
  CHECK(std::string(tern_model_tokenizer(load(bytes_dir + "/model.tern").get())) == "bytes");
}
