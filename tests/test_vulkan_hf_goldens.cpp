// SPDX-License-Identifier: MIT
// The Hugging Face decoder goldens (tests/goldens/hf_*: llama with MHA, GQA and every RoPE scaling, mistral's window,
// qwen2, qwen3's per-head q/k norms, phi3, gemma2's soft-caps, gemma3_text, gpt2) on Vulkan: RMS_NORM, ROTARY,
// GATED_ACTIVATION, scaled embeddings, grouped-query and soft-capped attention end to end. Per golden: the prompt's
// logits within 1e-4 of transformers' and of the CPU path; the cached steps within 1e-4 of the golden (one token a
// call, seven a call, and a state saved and restored), except where the frequencies depend on each call (dynamic
// NTK, LongRoPE), whose steps are checked against the CPU path cut into the same calls; and converted with --weights
// f16, int8 and int4, within 1e-4 of the float32 twin (the compressed values widened) on the CPU.
// test_hf_goldens.cpp is the CPU half.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "convert.h"
#include "generation_golden.h"
#include "npy.h"
#include "op_graph.h"
#include "hf_goldens.h"
#include "test_support.h"

using namespace tern;
namespace fs = std::filesystem;

namespace {

constexpr double kVulkanTolerance = 1e-4;

// True where the golden's RoPE frequencies depend on the call (transformers' "dynamic" and "longrope").
bool per_call_rope(const std::string& dir) {
  const std::string type = test::rope_type(dir);
  return type == "dynamic" || type == "longrope";
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab, const std::string& what) {
  REQUIRE(got.size() == want.size());
  const double err = test::relative_error(got.data(), want.data(), got.size());
  const double row = test::worst_row_error(got, want, vocab);
  INFO(what << ": relative error " << err << ", worst row " << row);
  CHECK(err <= kVulkanTolerance);
  CHECK(row <= kVulkanTolerance);
}

}  // namespace

TEST_CASE("hf goldens on Vulkan: prompt logits and cached steps match transformers and the CPU path", "[model][hf][vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const std::vector<std::string> goldens = test::hf_goldens();
  if (goldens.empty()) {
    WARN("no tests/goldens/hf_* (tools/reference/hf_decoders.py writes them)");
    test::note_skipped();
    return;
  }
  for (const std::string& name : goldens) {
    const std::string dir = test::source_path("tests/goldens/" + name);
    std::vector<int32_t> ids;
    npy::Array logits;
    std::string error;
    INFO(name << ": " << error);
    REQUIRE(cli::read_ids_json(dir + "/ids.json", &ids, &error));
    REQUIRE(npy::read_f32(dir + "/logits.npy", &logits, &error));
    const int64_t vocab = logits.shape[1];
    tern_model* model = test::convert_and_load(dir, "vulkan_hf_golden_" + name, convert::ConvertOptions{true});
    const std::vector<float> got = test::run_on(TERN_BACKEND_VULKAN, model, ids, vocab, 0, 1);
    check_close(got, logits.data, vocab, name + " prompt vs transformers");
    check_close(got, test::run_on(TERN_BACKEND_CPU, model, ids, vocab, 0, 1), vocab, name + " prompt vs CPU");
    if (fs::exists(dir + "/generation.json")) {
      const test::Generation gen = test::load_generation(dir);
      if (!per_call_rope(dir)) {
        test::check_generation(model, gen, name, kVulkanTolerance, TERN_BACKEND_VULKAN);
      } else {
        for (int64_t per_call : {1, 7}) {
          const std::vector<float> steps = test::generate(model, gen, 1, per_call, 0, TERN_BACKEND_VULKAN);
          const std::vector<float> cpu = test::generate(model, gen, 1, per_call, 0, TERN_BACKEND_CPU);
          check_close(steps, cpu, vocab, name + " steps of " + std::to_string(per_call) + " a call vs CPU");
        }
      }
    }
    tern_model_free(model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("hf goldens on Vulkan: f16, int8 and int4 weights match their float32 twin on the CPU",
          "[model][hf][vulkan][compressed]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const std::vector<std::string> goldens = test::hf_goldens();
  if (goldens.empty()) {
    test::note_skipped();
    return;
  }
  const std::pair<const char*, convert::WeightFormat> formats[] = {{"f16", convert::WeightFormat::kF16},
                                                                   {"int8", convert::WeightFormat::kInt8},
                                                                   {"int4", convert::WeightFormat::kInt4}};
  for (const std::string& name : goldens) {
    const std::string dir = test::source_path("tests/goldens/" + name);
    std::vector<int32_t> ids;
    std::string error;
    REQUIRE(cli::read_ids_json(dir + "/ids.json", &ids, &error));
    npy::Array logits;
    REQUIRE(npy::read_f32(dir + "/logits.npy", &logits, &error));
    const int64_t vocab = logits.shape[1];
    const std::string scratch = test::scratch_dir("vulkan_hf_golden_twins_" + name);
    convert::ConvertOptions options{true};
    const std::string f32_path = scratch + "/f32.tern";
    REQUIRE(convert::convert_checkpoint(dir, f32_path, options).ok());
    for (const auto& [format_name, format] : formats) {
      // The CPU path runs int8 / int4 matrices on quantised activations; Vulkan computes q * scale in float32, so its
      // reference is the float32 twin: the compressed values widened (test::write_dequantised_twin).
      options.weights.format = format;
      const std::string packed_path = scratch + "/" + format_name + ".tern", twin_path = packed_path + ".twin.tern";
      REQUIRE(convert::convert_checkpoint(dir, packed_path, options).ok());
      int replaced = 0;
      test::write_dequantised_twin(f32_path, packed_path, twin_path, &replaced);
      CHECK(replaced > 0);
      tern_model* packed = nullptr;
      tern_model* twin = nullptr;
      REQUIRE(tern_model_load(packed_path.c_str(), &packed) == TERN_OK);
      REQUIRE(tern_model_load(twin_path.c_str(), &twin) == TERN_OK);
      check_close(test::run_on(TERN_BACKEND_VULKAN, packed, ids, vocab, 0, 1),
                  test::run_on(TERN_BACKEND_CPU, twin, ids, vocab, 0, 1), vocab,
                  name + " " + format_name + " vs its float32 twin on the CPU");
      tern_model_free(twin);
      tern_model_free(packed);
    }
  }
  CHECK(test::vulkan_validation_messages() == 0);
}
