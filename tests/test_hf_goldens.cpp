// The Hugging Face decoder goldens (tests/goldens/hf_*: HF-layout random-init checkpoints of llama, mistral, qwen2,
// qwen3, phi3, gemma2, gemma3_text and gpt2 with the logits of tools/reference/hf_decoders.py): each converts and its
// prompt logits and every cached generation step match within 1e-4 (relative L2) on the CPU; converted with
// --weights f16, int8 and int4 each stays within the bound measured for its format (docs/models-llama.md, "Tests").
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli.h"
#include "convert.h"
#include "generation_golden.h"
#include "npy.h"
#include "op_graph.h"
#include "test_support.h"

using namespace tern;
namespace fs = std::filesystem;

namespace {

constexpr double kModelTolerance = 1e-4;

// Every tests/goldens/hf_* directory, sorted.
std::vector<std::string> hf_goldens() {
  std::vector<std::string> out;
  const fs::path root = test::source_path("tests/goldens");
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("hf_", 0) == 0 && fs::exists(e.path() / "config.json")) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

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

tern_model* convert_and_load(const std::string& dir, const std::string& name, convert::ConvertOptions options) {
  const std::string out = test::scratch_dir("hf_golden_" + name) + "/model.tern";
  const Status st = convert::convert_checkpoint(dir, out, options);
  INFO(name << ": " << st.message());
  REQUIRE(st.ok());
  tern_model* model = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
  return model;
}

// Bounds of the compressed formats against the float reference, relative L2 over the prompt's logits: measured on
// these goldens (the largest seen, rounded up about 2x; docs/models-llama.md lists the measurements).
struct Format {
  const char* name;
  convert::WeightFormat format;
  double bound;
};
const Format kFormats[] = {{"f16", convert::WeightFormat::kF16, 2e-3},
                           {"int8", convert::WeightFormat::kInt8, 2e-2},
                           {"int4", convert::WeightFormat::kInt4, 2e-1}};

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
    tern_model* model = convert_and_load(g.dir, name, convert::ConvertOptions{true});
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
    if (fs::exists(g.dir + "/generation.json")) {
      const test::Generation gen = test::load_generation(g.dir);
      const std::vector<float> steps = test::generate(model, gen, 1, 1);
      const double err = test::relative_error(steps.data(), gen.logits.data.data(), steps.size());
      std::printf("hf golden %-28s %zu steps rel L2 %.3g (worst step %.3g)\n", name.c_str(),
                  size_t(gen.logits.shape[0]), err,
                  test::worst_row_error(steps, gen.logits.data, gen.logits.shape[1]));
      test::check_generation(model, gen, name, kModelTolerance);
    }
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
      tern_model* model = convert_and_load(g.dir, name + "_" + f.name, options);
      const std::vector<float> got = test::run_on(TERN_BACKEND_CPU, model, g.ids, vocab);
      const double err = test::relative_error(got.data(), g.logits.data.data(), got.size());
      std::printf("hf golden %-28s %-5s rel L2 %.3g\n", name.c_str(), f.name, err);
      INFO(name << " " << f.name << ": relative error " << err << ", bound " << f.bound);
      CHECK(err <= f.bound);
      tern_model_free(model);
    }
  }
}
