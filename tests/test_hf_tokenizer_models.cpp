// SPDX-License-Identifier: MIT
// A converted model whose tokenizer is a Hugging Face tokenizer.json, end to end: the shipped kjv-llama (a Llama
// checkpoint with both a tokenizer.json and the SentencePiece tokenizer.model it was written from) takes its
// tokenizer.json by default; its ids equal libsentencepiece's for the same text, and tern-run --prompt prints the same
// text through it on both backends as through the SentencePiece twin. The id-for-id check against the tokenizers
// library itself, over a 10,240-line text and six real tokenizer files: tools/reference/compare_tokenizers.sh.
#include <sentencepiece_processor.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
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
const std::string kKjvLlama = test::source_path("examples/models/kjv-llama");

ModelHandle convert_and_load(const std::string& out, const std::string& tokenizer) {
  convert::ConvertOptions opts;
  opts.quiet = true;
  opts.tokenizer.path = tokenizer;
  const Status st = convert::convert_checkpoint(kKjvLlama, out, opts);
  INFO(st.message());
  REQUIRE(st.ok());
  Error err;
  ModelHandle m = ModelHandle::load(out, &err);
  INFO(err.message);
  REQUIRE_FALSE(err);
  return m;
}

// tern-run --json's generated ids and text for a greedy continuation of `prompt`.
std::pair<std::vector<int>, std::string> generate(const std::string& model, const std::string& backend,
                                                  const std::string& scratch) {
  const test::ToolRun r =
      test::run_tool(kRun, {model, "--prompt", "And God said", "--tokens", "24", "--temperature", "0", "--json",
                            "--ignore-eos", "--backend", backend},
                     test::scratch_dir(scratch));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json report = nlohmann::json::parse(r.out);
  return {report["generate"]["ids"].get<std::vector<int>>(), report["generate"]["text"].get<std::string>()};
}

}  // namespace

TEST_CASE("tokenizer.json models: kjv-llama's tokenizer.json encodes as its tokenizer.model, and tern-run prints text "
          "through it on both backends",
          "[tokenizer][hf]") {
  const std::string dir = test::scratch_dir("hf_tokenizer_kjv_llama");
  ModelHandle hf = convert_and_load(dir + "/hf.tern", "");  // tokenizer.json is taken before tokenizer.model
  ModelHandle spm = convert_and_load(dir + "/spm.tern", kKjvLlama + "/tokenizer.model");
  CHECK(std::string(tern_model_tokenizer(hf.get())) == "hf-bpe");
  CHECK(std::string(tern_model_tokenizer(spm.get())) == "sentencepiece-bpe");
  CHECK(tern_model_adds_bos(hf.get()) == 1);  // the post-processor's template is "<s> $A"
  CHECK(tern_model_special_token(hf.get(), TERN_TOKEN_BOS) == tern_model_special_token(spm.get(), TERN_TOKEN_BOS));
  CHECK(tern_model_special_token(hf.get(), TERN_TOKEN_EOS) == tern_model_special_token(spm.get(), TERN_TOKEN_EOS));

  // Every held-out line: the same ids as libsentencepiece's, and the same text back.
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.Load(kKjvLlama + "/tokenizer.model").ok());
  std::istringstream in(test::read_file(test::source_path("examples/models/kjv-byte/heldout.txt")));
  int lines = 0, mismatches = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    std::vector<int> expected;
    REQUIRE(sp.Encode(line, &expected).ok());
    std::vector<int32_t> ids;
    REQUIRE_FALSE(tokenize(hf, line, &ids));
    std::string text;
    REQUIRE_FALSE(detokenize(hf, ids, &text));
    if (std::vector<int>(ids.begin(), ids.end()) != expected || text != line) {
      if (++mismatches <= 3) UNSCOPED_INFO("line " << lines << " '" << line << "' differs");
    }
  }
  CHECK(lines > 1000);
  CHECK(mismatches == 0);

  const auto spm_cpu = generate(dir + "/spm.tern", "cpu", "hf_tokenizer_kjv_llama_spm");
  const auto hf_cpu = generate(dir + "/hf.tern", "cpu", "hf_tokenizer_kjv_llama_cpu");
  CHECK(hf_cpu.first.size() == 24);
  CHECK(hf_cpu.first == spm_cpu.first);
  CHECK(hf_cpu.second == spm_cpu.second);
  CHECK(hf_cpu.second.find("unto") != std::string::npos);  // words, not ids or pieces
  std::string why;
  if (!test::vulkan_device(&why)) {
    if (!test::cpu_only_run()) {
      WARN("Vulkan half skipped: no Vulkan device (" << why << ")");
      test::note_skipped();
    }
    return;
  }
  const auto hf_vulkan = generate(dir + "/hf.tern", "vulkan", "hf_tokenizer_kjv_llama_vulkan");
  CHECK(hf_vulkan.first == hf_cpu.first);
  CHECK(hf_vulkan.second == hf_cpu.second);
}
