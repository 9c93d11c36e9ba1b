// SPDX-License-Identifier: MIT
// Hugging Face Transformer-XL checkpoints (converter/transfo-xl.md): goldens of tools/reference/
// make_transfo_xl_goldens.py converted and streamed segment by segment with the memory, the state that stays
// mem_len x d_model per layer for any number of segments, tied weights stored once, and the importer's errors. The
// goldens run on each backend: on Vulkan with the memory on the device, also against the CPU path.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "convert.h"
#include "npy.h"
#include "tern/tern.h"
#include "tern_generated.h"
#include "op_graph.h"
#include "test_support.h"

using tern::test::relative_error;
using nlohmann::json;

using tern::test::make_session;

namespace {

constexpr double kModelTolerance = 1e-4;

tern::convert::ConvertOptions quiet() {
  tern::convert::ConvertOptions o;
  o.quiet = true;
  return o;
}

struct XlGolden {
  std::string dir;
  json config;
  std::vector<int32_t> ids;
  tern::npy::Array log_probs;  // [n, V]
  std::string tern_path;
  tern::convert::ConvertReport report;
  tern_model* model = nullptr;
  int64_t tgt_len() const { return config["tgt_len"].get<int64_t>(); }
  int64_t vocab() const { return config["vocab_size"].get<int64_t>(); }
  uint64_t state_bytes() const {
    return uint64_t(config["n_layer"].get<int64_t>()) * uint64_t(config["mem_len"].get<int64_t>()) *
           uint64_t(config["d_model"].get<int64_t>()) * sizeof(float);
  }
};

XlGolden load_golden(const std::string& name) {
  XlGolden g;
  g.dir = tern::test::source_path("tests/goldens/" + name);
  std::string error;
  INFO(name << ": " << error);
  REQUIRE(tern::cli::read_ids_json(g.dir + "/ids.json", &g.ids, &error));
  REQUIRE(tern::npy::read_f32(g.dir + "/logits.npy", &g.log_probs, &error));
  g.config = json::parse(tern::test::read_file(g.dir + "/config.json"));
  REQUIRE(g.log_probs.shape == std::vector<int64_t>{int64_t(g.ids.size()), g.vocab()});
  REQUIRE(int64_t(g.ids.size()) >= 3 * g.tgt_len());  // at least three segments with memory
  g.tern_path = tern::test::scratch_dir("golden_" + name) + "/model.tern";
  tern::Status st = tern::convert::convert_checkpoint(g.dir, g.tern_path, quiet(), &g.report);
  INFO(st.message());
  REQUIRE(st.ok());
  REQUIRE(tern_model_load(g.tern_path.c_str(), &g.model) == TERN_OK);
  return g;
}

// Feeds ids `segment` at a time from the session's current state; returns the log-probabilities [n, V].
std::vector<float> stream(tern_session* s, const std::vector<int32_t>& ids, int64_t segment, int64_t vocab) {
  const auto n = int64_t(ids.size());
  std::vector<float> out(size_t(n * vocab));
  for (int64_t pos = 0; pos < n; pos += segment) {
    const int64_t len = std::min(segment, n - pos);
    INFO(tern_session_last_error(s));
    REQUIRE(tern_session_append(s, ids.data() + pos, len, out.data() + pos * vocab) == TERN_OK);
  }
  return out;
}

const char* const kGoldens[] = {"transfo_xl_adaptive", "transfo_xl_plain", "transfo_xl_div1_proj"};

}  // namespace

TEST_CASE("transfo-xl goldens: segment by segment with memory matches HF's TransfoXLLMHeadModel (CPU and Vulkan)",
          "[model][transfo_xl][vulkan]") {
  TERN_EACH_BACKEND(backend);
  for (const char* name : kGoldens) {
    XlGolden g = load_golden(name);
    const int64_t n = int64_t(g.ids.size()), V = g.vocab(), T = g.tgt_len();
    CHECK(g.report.unused_tensors.empty());  // tied copies and HF's inv_freq buffer are read, not left over
    if (backend == TERN_BACKEND_VULKAN) {
      // The memory on the device, segment by segment.
      tern_session* s = tern::test::make_session_on(backend, g.model, 1, 1 << 20, T);
      for (int pass = 0; pass < 2; ++pass) {  // the second pass after a reset: the memory starts from zeros again
        REQUIRE(tern_session_reset(s) == TERN_OK);
        const std::vector<float> got = stream(s, g.ids, T, V);
        for (int64_t pos = 0; pos < n; pos += T) {
          const size_t off = size_t(pos * V), count = size_t(std::min(T, n - pos) * V);
          const double err = relative_error(got.data() + off, g.log_probs.data.data() + off, count);
          INFO(name << ", pass " << pass << ", segment at " << pos << ": relative error " << err);
          CHECK(err <= kModelTolerance);
        }
      }
      tern_memory_plan allocated{}, far{};
      REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
      REQUIRE(tern_session_plan(s, 1000 * T, &far) == TERN_OK);
      CHECK(allocated.state_bytes == g.state_bytes());
      CHECK(far.state_bytes == g.state_bytes());
      tern_session_free(s);
      // One forward of the whole sequence, and other cuts, against the CPU path cut the same way.
      for (int64_t segment : {n, T / 2}) {
        const std::vector<float> a = tern::test::run_on(backend, g.model, g.ids, V, segment, 1);
        const std::vector<float> b = tern::test::run_on(TERN_BACKEND_CPU, g.model, g.ids, V, segment);
        const double err = relative_error(a.data(), b.data(), a.size());
        INFO(name << ", segment " << segment << ": Vulkan vs CPU " << err);
        CHECK(err <= kModelTolerance);
      }
      tern_model_free(g.model);
      continue;
    }
    for (int threads : {1, 2}) {
      tern_session* s = make_session(g.model, threads, 1 << 20, T);
      for (int pass = 0; pass < 2; ++pass) {  // the second pass after a reset: the memory starts from zeros again
        REQUIRE(tern_session_reset(s) == TERN_OK);
        std::vector<float> got = stream(s, g.ids, T, V);
        const double err = relative_error(got.data(), g.log_probs.data.data(), got.size());
        INFO(name << ", threads " << threads << ", pass " << pass << ": relative error " << err);
        CHECK(err <= kModelTolerance);
        // Per segment too, so that a later segment's error is not hidden by the total.
        for (int64_t pos = 0; pos < n; pos += T) {
          const size_t off = size_t(pos * V), count = size_t(std::min(T, n - pos) * V);
          INFO("segment at " << pos);
          CHECK(relative_error(got.data() + off, g.log_probs.data.data() + off, count) <= kModelTolerance);
        }
      }
      tern_session_free(s);
    }
    // Cut into other segments: with same_length every query sees exactly the mem_len stream positions before it
    // (the memory holds the last mem_len layer inputs whatever the cut), so the outputs stay the same, one token at
    // a time included; without it a query sees the whole memory plus its segment's prefix, so they change.
    tern_session* s = make_session(g.model, 2, 1 << 20, 2 * T);
    for (int64_t segment : {T / 2, int64_t(1), 2 * T}) {
      REQUIRE(tern_session_reset(s) == TERN_OK);
      std::vector<float> other = stream(s, g.ids, segment, V);
      const double err = relative_error(other.data(), g.log_probs.data.data(), other.size());
      INFO(name << ", segment " << segment << ": relative error " << err);
      if (g.config["same_length"].get<bool>()) {
        CHECK(err <= kModelTolerance);
      } else {
        CHECK(err > 1e-3);
      }
    }
    tern_session_free(s);
    tern_model_free(g.model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(tern::test::vulkan_validation_messages() == 0);
}

TEST_CASE("transfo-xl state: mem_len x d_model per layer after 2 segments and after 1,000", "[model][transfo_xl][streaming]") {
  for (const char* name : kGoldens) {
    XlGolden g = load_golden(name);
    const int64_t T = g.tgt_len(), V = g.vocab();
    const int64_t segments = 1000;
    tern_session* s = make_session(g.model, 2, segments * T, T);
    tern_memory_plan two{}, thousand{}, before{}, after{};
    REQUIRE(tern_session_plan(s, 2 * T, &two) == TERN_OK);
    REQUIRE(tern_session_plan(s, segments * T, &thousand) == TERN_OK);
    REQUIRE(tern_session_memory(s, &before) == TERN_OK);
    INFO(name);
    CHECK(two.state_bytes == g.state_bytes());
    CHECK(thousand.state_bytes == two.state_bytes);
    CHECK(before.state_bytes == g.state_bytes());
    std::vector<float> lp(size_t(T * V));
    std::vector<int32_t> seg(static_cast<size_t>(T));
    for (int64_t k = 0; k < segments; ++k) {
      for (int64_t i = 0; i < T; ++i) seg[size_t(i)] = g.ids[size_t((k * T + i) % int64_t(g.ids.size()))];
      if (tern_session_append(s, seg.data(), T, lp.data()) != TERN_OK) FAIL(tern_session_last_error(s));
    }
    CHECK(tern_session_position(s) == segments * T);
    REQUIRE(tern_session_memory(s, &after) == TERN_OK);
    CHECK(after.state_bytes == before.state_bytes);
    CHECK(after.arena_bytes == before.arena_bytes);
    for (float v : lp) REQUIRE(std::isfinite(v));
    tern_session_free(s);
    tern_model_free(g.model);
  }
}

TEST_CASE("transfo-xl conversion stores tied weights once", "[converter][transfo_xl]") {
  for (const char* name : kGoldens) {
    XlGolden g = load_golden(name);
    const std::string file = tern::test::read_file(g.tern_path);
    const auto* m = tern::fb::GetSizePrefixedModel(file.data());
    std::set<std::string> names;
    uint64_t bytes = 0;
    for (const auto* t : *m->tensors()) {
      names.insert(t->name()->str());
      bytes += t->size();
    }
    const bool tied = g.config["tie_word_embeddings"].get<bool>();
    INFO(name);
    for (const std::string& t : names) {
      const bool tied_copy = t.find("crit.out_layers") != std::string::npos && t.find(".weight") != std::string::npos;
      if (tied) CHECK(!tied_copy);
    }
    // Every stored tensor is a distinct checkpoint tensor: the weight bytes never exceed the checkpoint's.
    uint64_t checkpoint_bytes = 0;
    for (const auto& entry : std::filesystem::directory_iterator(g.dir))
      if (entry.path().extension() == ".safetensors") checkpoint_bytes += entry.file_size();
    CHECK(bytes < checkpoint_bytes);
    if (std::string(name) == "transfo_xl_div1_proj") {
      CHECK(names.count("crit.out_projs.1") == 0);  // tied to emb_projs.0, although the file has a copy
      CHECK(names.count("transformer.word_emb.emb_projs.0") == 1);
      CHECK(names.count("crit.out_projs.2") == 1);
    }
    tern_model_free(g.model);
  }
}

TEST_CASE("transfo-xl importer: config errors name the field", "[converter][transfo_xl]") {
  const std::string golden = tern::test::source_path("tests/goldens/transfo_xl_adaptive");
  struct Case {
    std::string what;
    std::function<void(json&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"attn_type", [](json& c) { c["attn_type"] = 1; }, "field 'attn_type' must be 0"},
      {"sampled softmax", [](json& c) { c["sample_softmax"] = 100; }, "sampled softmax"},
      {"tie_projs length", [](json& c) { c["tie_projs"] = {false, true}; }, "field 'tie_projs' must list 4 booleans"},
      {"cutoffs order", [](json& c) { c["cutoffs"] = {30, 20, 160}; }, "field 'cutoffs' must increase strictly"},
      {"cutoffs beyond vocab", [](json& c) { c["cutoffs"] = {30, 80, 250}; }, "field 'cutoffs' must increase strictly"},
      {"d_model odd", [](json& c) { c["d_model"] = 33; }, "field 'd_model' must be even"},
      {"shape", [](json& c) { c["d_inner"] = 65; }, "pos_ff.CoreNet.0.weight' has shape [64, 32], expected [65, 32]"},
      {"untie_r false needs shared biases", [](json& c) { c["untie_r"] = false; }, "missing tensor 'transformer.r_w_bias'"},
  };
  for (const Case& c : cases) {
    const std::string dir = tern::test::scratch_dir("transfo_xl_bad_config");
    std::filesystem::copy_file(golden + "/model.safetensors", dir + "/model.safetensors");
    json config = json::parse(tern::test::read_file(golden + "/config.json"));
    c.edit(config);
    tern::test::write_file(dir + "/config.json", config.dump(2));
    tern::Status st = tern::convert::convert_checkpoint(dir, dir + "/model.tern", quiet());
    INFO(c.what << ": " << st.message());
    CHECK(!st.ok());
    CHECK_THAT(st.message(), Catch::Contains(c.message));
    CHECK(!std::filesystem::exists(dir + "/model.tern"));
  }
}
