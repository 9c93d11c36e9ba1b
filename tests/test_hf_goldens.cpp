// SPDX-License-Identifier: MIT
// The Hugging Face decoder goldens (tests/goldens/hf_*: HF-layout random-init checkpoints of llama, mistral, qwen2,
// qwen3, phi3, gemma2, gemma3_text and gpt2 with the logits of tools/reference/hf_decoders.py): each converts and its
// prompt logits and every cached generation step match within 1e-4 (relative L2) on the CPU; converted with
// --weights f16, int8 and int4 each stays within the bound measured for its format (docs/models-llama.md, "Tests").
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
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

using test::convert_and_load;
using test::hf_goldens;
using test::rope_type;

constexpr double kModelTolerance = 1e-4;

struct Golden {
  std::string dir;
  std::vector<int32_t> ids;
  npy::Array logits;  // [n, vocab]
};

Golden load_golden(const std::string& name) {
  Golden g;
  g.dir = test::source_path("tests/goldens/" + name);
  std::string error;
  INFO(name << ": " << error);
  REQUIRE(cli::read_ids_json(g.dir + "/ids.json", &g.ids, &error));
  REQUIRE(npy::read_f32(g.dir + "/logits.npy", &g.logits, &error));
  REQUIRE(g.logits.shape.size() == 2);
  REQUIRE(g.logits.shape[0] == int64_t(g.ids.size()));
  return g;
}

// Bounds of the compressed formats against the float reference, relative L2 over the prompt's logits: measured on
// these goldens (the largest seen, rounded up about 2x; docs/models-llama.md lists the measurements).
struct Format {
  const char* name;
  convert::WeightFormat format;
  double bound;
};
// Largest measured: f16 1.6e-3, int8 4.4e-2, int4 0.41 (hf_phi3: rows of 32 inputs, one int4 group each).
const Format kFormats[] = {{"f16", convert::WeightFormat::kF16, 4e-3},
                           {"int8", convert::WeightFormat::kInt8, 0.1},
                           {"int4", convert::WeightFormat::kInt4, 0.8}};

// The cached steps of generation.json. Dynamic NTK's frequencies depend on where each call ends (transformers
// computes them from the call's last position and keeps the cached keys as they were), so those goldens are
// checked one token a call only, as they were made. LongRoPE: transformers' generate drops the cache and runs the
// whole sequence again at the step that first passes original_max_position_embeddings; the runtime's cached steps
// match up to there, and each later step is checked as the uncached forward of its sequence.
void check_steps(tern_model* model, const Golden& g, const std::string& name) {
  const test::Generation gen = test::load_generation(g.dir);
  const int64_t vocab = gen.logits.shape[1];
  const std::string rope = rope_type(g.dir);
  const std::vector<float> steps = test::generate(model, gen, 1, 1);
  if (rope != "dynamic" && rope != "longrope") {
    const double err = test::relative_error(steps.data(), gen.logits.data.data(), steps.size());
    std::printf("hf golden %-28s %zu steps rel L2 %.3g (worst step %.3g)\n", name.c_str(), size_t(gen.logits.shape[0]),
                err, test::worst_row_error(steps, gen.logits.data, vocab));
    test::check_generation(model, gen, name, kModelTolerance);
    return;
  }
  const nlohmann::json c = nlohmann::json::parse(test::read_file(g.dir + "/config.json"));
  const int64_t original = c.value("original_max_position_embeddings", c.value("max_position_embeddings", 0));
  double worst = 0;
  for (int threads : {1, 2}) {
    const std::vector<float> got = threads == 1 ? steps : test::generate(model, gen, threads, 1);
    for (int64_t s = 0; s < gen.logits.shape[0]; ++s) {
      const int64_t length = gen.prompt + s;  // the sequence whose last row step s gives
      const float* want = gen.logits.data.data() + s * vocab;
      std::vector<float> row(got.begin() + s * vocab, got.begin() + (s + 1) * vocab);
      if (rope == "longrope" && length > original) {  // transformers recomputed the whole sequence
        const std::vector<int32_t> ids(gen.ids.begin(), gen.ids.begin() + length);
        const std::vector<float> all = test::run_on(TERN_BACKEND_CPU, model, ids, vocab, 0, threads);
        row.assign(all.end() - vocab, all.end());
      }
      const double err = test::relative_error(row.data(), want, size_t(vocab));
      worst = std::max(worst, err);
      INFO(name << ", threads " << threads << ", step " << s << " (length " << length << "): " << err);
      CHECK(err <= kModelTolerance);
    }
  }
  std::printf("hf golden %-28s %zu steps worst step %.3g (%s: one token a call)\n", name.c_str(),
              size_t(gen.logits.shape[0]), worst, rope.c_str());
}

}  // namespace

TEST_CASE("hf goldens: the prompt's logits and every cached step match transformers on the CPU", "[model][hf]") {
  const std::vector<std::string> goldens = hf_goldens();
  if (goldens.empty()) {
    WARN("no tests/goldens/hf_* (tools/reference/hf_decoders.py writes them)");
    test::note_skipped();
    return;
  }
  for (const std::string& name : goldens) {
    Golden g = load_golden(name);
    tern_model* model = convert_and_load(g.dir, "hf_golden_" + name, convert::ConvertOptions{true});
    const int64_t vocab = g.logits.shape[1];
    for (int threads : {1, 2}) {
      const std::vector<float> got = test::run_on(TERN_BACKEND_CPU, model, g.ids, vocab, 0, threads);
      const double err = test::relative_error(got.data(), g.logits.data.data(), got.size());
      const double row = test::worst_row_error(got, g.logits.data, vocab);
      INFO(name << ", threads " << threads << ": relative error " << err << ", worst position " << row);
      CHECK(err <= kModelTolerance);
      CHECK(row <= kModelTolerance);
      if (threads == 1) std::printf("hf golden %-28s prompt  rel L2 %.3g (worst row %.3g)\n", name.c_str(), err, row);
    }
    if (fs::exists(g.dir + "/generation.json")) check_steps(model, g, name);
    tern_model_free(model);
  }
}

TEST_CASE("hf goldens: f16, int8 and int4 weights stay within their measured bounds", "[model][hf][compressed]") {
  const std::vector<std::string> goldens = hf_goldens();
  if (goldens.empty()) {
    test::note_skipped();
    return;
  }
  for (const std::string& name : goldens) {
    Golden g = load_golden(name);
    const int64_t vocab = g.logits.shape[1];
    for (const Format& f : kFormats) {
      convert::ConvertOptions options{true};
      options.weights.format = f.format;
      tern_model* model = convert_and_load(g.dir, "hf_golden_" + name + "_" + f.name, options);
      const std::vector<float> got = test::run_on(TERN_BACKEND_CPU, model, g.ids, vocab);
      const double err = test::relative_error(got.data(), g.logits.data.data(), got.size());
      std::printf("hf golden %-28s %-5s rel L2 %.3g\n", name.c_str(), f.name, err);
      INFO(name << " " << f.name << ": relative error " << err << ", bound " << f.bound);
      CHECK(err <= f.bound);
      tern_model_free(model);
    }
  }
}

// Generation as an app runs it, through tern_generator: the prompt, then each golden token appended. Every model's
// rows match transformers' generate, LongRoPE's included: the generator feeds the sequence again whole at the step
// that first passes original_max_position_embeddings, as generate drops its cache there.
TEST_CASE("hf goldens: tern_generator's logits at every step match transformers' generate", "[model][hf]") {
  const std::vector<std::string> goldens = hf_goldens();
  if (goldens.empty()) {
    test::note_skipped();
    return;
  }
  for (const std::string& name : goldens) {
    const std::string dir = test::source_path("tests/goldens/" + name);
    if (!fs::exists(dir + "/generation.json")) continue;
    const test::Generation gen = test::load_generation(dir);
    const int64_t vocab = gen.logits.shape[1], n = int64_t(gen.ids.size());
    tern_model* model = convert_and_load(dir, "hf_golden_" + name + "_generator", convert::ConvertOptions{true});
    tern_session* s = test::make_session_on(TERN_BACKEND_CPU, model, 1, n);
    tern_generator_options go;
    tern_generator_options_init(&go);
    tern_generator* g = nullptr;
    REQUIRE(tern_generator_create(s, &go, &g) == TERN_OK);
    INFO(name << ": " << tern_generator_last_error(g));
    REQUIRE(tern_generator_prompt(g, gen.ids.data(), gen.prompt, nullptr) == TERN_OK);
    double worst = 0;
    for (int64_t step = 0; gen.prompt + step <= n; ++step) {
      if (step > 0) REQUIRE(tern_generator_append(g, gen.ids.data() + gen.prompt + step - 1, 1) == TERN_OK);
      int64_t width = 0;
      const float* logits = tern_generator_logits(g, &width);
      REQUIRE(logits != nullptr);
      REQUIRE(width == vocab);
      const double err = test::relative_error(logits, gen.logits.data.data() + step * vocab, size_t(vocab));
      worst = std::max(worst, err);
      INFO(name << ", step " << step << ": relative error " << err);
      CHECK(err <= kModelTolerance);
    }
    std::printf("hf golden %-28s generator worst step %.3g\n", name.c_str(), worst);
    tern_generator_free(g);
    tern_session_free(s);
    tern_model_free(model);
  }
}
