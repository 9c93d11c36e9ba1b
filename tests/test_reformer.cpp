// SPDX-License-Identifier: MIT
// Hugging Face Reformer checkpoints (converter/reformer.md): the goldens of tools/reference/make_reformer_goldens.py
// (logits from reformer_model.py, HF's eval forward) converted and run in one forward; generation continuing a prompt
// step by step as HF's cached path does (tools/reference/reformer_cached.py); rotations drawn from the hash seed when
// the checkpoint has none; malformed configs fail at conversion.
// The goldens run on each backend, Vulkan also against the CPU path.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <tuple>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "convert.h"
#include "npy.h"
#include "generation_golden.h"
#include "op_graph.h"
#include "test_support.h"

using namespace tern;
using tern::test::relative_error;

using tern::test::make_session;
using tern::test::Generation;
using tern::test::load_generation;
using tern::test::worst_row_error;

namespace {

constexpr double kModelTolerance = 1e-4;

const char* const kGoldens[] = {"reformer_mixed_factorized", "reformer_hashes_int", "reformer_learned_positions",
                                "reformer_short_unchunked", "reformer_wrapping_rounds"};

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

tern_model* convert_and_load(const std::string& dir, const std::string& name, convert::ConvertOptions options = {true}) {
  const std::string out = test::scratch_dir("reformer_" + name) + "/model.tern";
  Status st = convert::convert_checkpoint(dir, out, options);
  INFO(st.message());
  REQUIRE(st.ok());
  tern_model* model = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
  return model;
}

std::vector<float> forward(tern_model* model, int threads, const std::vector<int32_t>& ids, int64_t vocab,
                           int64_t row_block_rows = 0) {
  tern_session* s = make_session(model, threads, int64_t(ids.size()), 0, row_block_rows);
  std::vector<float> out(ids.size() * size_t(vocab));
  INFO(tern_session_last_error(s));
  REQUIRE(tern_session_forward(s, ids.data(), int64_t(ids.size()), out.data()) == TERN_OK);
  tern_session_free(s);
  return out;
}

// The largest relative error of one position's logits.

// A copy of a golden checkpoint whose config.json and tensors the caller may change.
std::string copy_golden(const std::string& name, const std::string& as) {
  const std::string dir = test::scratch_dir("reformer_copy_" + as);
  for (const auto& e : std::filesystem::directory_iterator(test::source_path("tests/goldens/" + name))) {
    std::filesystem::copy_file(e.path(), dir + "/" + e.path().filename().string(),
                               std::filesystem::copy_options::overwrite_existing);
  }
  return dir;
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json config = nlohmann::json::parse(test::read_file(dir + "/config.json"));
  edit(config);
  test::write_file(dir + "/config.json", config.dump(2));
}

}  // namespace

TEST_CASE("reformer goldens: one forward reproduces HF's logits (and, on Vulkan, the CPU path)", "[model][reformer][lsh][vulkan]") {
  TERN_EACH_BACKEND(backend);
  for (const char* name : kGoldens) {
    Golden g = load_golden(name);
    tern_model* model = convert_and_load(g.dir, name);
    const int64_t vocab = g.logits.shape[1];
    if (backend == TERN_BACKEND_VULKAN) {
      const std::vector<float> got = test::run_on(backend, model, g.ids, vocab, 0, 1);
      const std::vector<float> cpu = test::run_on(TERN_BACKEND_CPU, model, g.ids, vocab);
      const double err = relative_error(got.data(), g.logits.data.data(), got.size());
      const double row = worst_row_error(got, g.logits.data, vocab);
      const double vs_cpu = relative_error(got.data(), cpu.data(), got.size());
      INFO(name << ": Vulkan vs HF " << err << " (worst position " << row << "), vs CPU " << vs_cpu);
      CHECK(err <= kModelTolerance);
      CHECK(row <= kModelTolerance);
      CHECK(vs_cpu <= kModelTolerance);
    }
    // Block 0: the session's own choice (one block at these lengths); 37 rows: every chain of row-wise ops (the
    // feed-forward, the projections, the final norm and head) runs in many blocks, the last one short.
    for (auto [threads, block] : {std::pair{1, 0}, std::pair{2, 0}, std::pair{2, 37}}) {
      if (backend != TERN_BACKEND_CPU) break;
      std::vector<float> got = forward(model, threads, g.ids, vocab, block);
      const double err = relative_error(got.data(), g.logits.data.data(), got.size());
      const double row = worst_row_error(got, g.logits.data, vocab);
      INFO(name << ", threads " << threads << ", row block " << block << ": relative error " << err
                << ", worst position " << row);
      CHECK(err <= kModelTolerance);
      CHECK(row <= kModelTolerance);  // position 0 too, where every round sees only the query itself
    }
    tern_model_free(model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("reformer: an LSH layer's norm, projections and residual add run inside its attention op on the CPU",
          "[model][reformer][lsh][memory]") {
  // cpu/lsh_fold.h: the attention normalises x2 and projects one head at a time, and adds each head's share of
  // the output projection into x1, so the LAYER_NORM, both LINEARs and the ADD never run and their values take no
  // arena. The goldens above check the result; this checks that the fold happened in the LSH layers and only
  // there. The model's layers are [local, lsh, local, lsh].
  Golden g = load_golden("reformer_mixed_factorized");
  tern_model* model = convert_and_load(g.dir, "fold");
  tern_session* s = make_session(model, 1, int64_t(g.ids.size()));
  REQUIRE(tern_session_set_profiling(s, 1) == TERN_OK);
  std::vector<float> logits(g.ids.size() * size_t(g.logits.shape[1]));
  REQUIRE(tern_session_forward(s, g.ids.data(), int64_t(g.ids.size()), logits.data()) == TERN_OK);
  size_t count = 0;
  REQUIRE(tern_session_get_profile(s, nullptr, 0, &count) == TERN_OK);
  std::vector<tern_op_profile> ops(count);
  REQUIRE(tern_session_get_profile(s, ops.data(), count, &count) == TERN_OK);
  std::vector<std::string> not_run;
  for (const tern_op_profile& op : ops) {
    if (op.calls == 0) not_run.push_back(op.name);
    if (std::string(op.kind) == "ATTENTION") CHECK(op.calls == 1);
  }
  std::vector<std::string> folded;
  for (const char* layer : {"reformer.encoder.layers.1.", "reformer.encoder.layers.3."}) {
    for (const char* op : {"attention.layer_norm", "attention.projection", "attention.output", "stream1"}) {
      folded.push_back(std::string(layer) + op);
    }
  }
  CHECK(not_run == folded);
  tern_session_free(s);
  tern_model_free(model);
}


TEST_CASE("reformer generation: each step matches HF's cached path (the PyTorch port) within 1e-4 (CPU and Vulkan)",
          "[model][reformer][lsh][streaming][vulkan]") {
  TERN_EACH_BACKEND(backend);
  for (const char* name : kGoldens) {
    const std::string dir = test::source_path(std::string("tests/goldens/") + name);
    const Generation gen = load_generation(dir);
    tern_model* model = convert_and_load(dir, std::string("gen_") + name);
    // One token a call (as HF generates) and several (each still runs alone, in order).
    test::check_generation(model, gen, name, test::backend_tolerance(backend, kModelTolerance), backend);
    tern_model_free(model);
  }
}

TEST_CASE("reformer generation: the cache is the planner's state, a forged saved bucket is refused, forward_only keeps none",
          "[model][reformer][lsh][streaming]") {
  const std::string dir = test::source_path("tests/goldens/reformer_hashes_int");
  const Generation gen = load_generation(dir);
  tern_model* model = convert_and_load(dir, "gen_state");
  const nlohmann::json config = nlohmann::json::parse(test::read_file(dir + "/config.json"));
  const int64_t heads = config["num_attention_heads"], dh = config["attention_head_size"], hashes = config["num_hashes"];
  const int64_t lsh_layers = 3, n = int64_t(gen.ids.size()), vocab = gen.logits.shape[1];
  tern_session* s = make_session(model, 1, n);
  tern_memory_plan plan{}, used{};
  REQUIRE(tern_session_plan(s, n, &plan) == TERN_OK);
  REQUIRE(tern_session_memory(s, &used) == TERN_OK);
  // Every position's qk | v and one bucket per round, per head and LSH layer: linear in max_tokens.
  const uint64_t want = uint64_t(lsh_layers * n * heads * (2 * dh + hashes) * 4);
  CHECK(plan.state_bytes == want);
  CHECK(used.state_bytes == want);
  std::vector<float> out(size_t(n * vocab));
  REQUIRE(tern_session_forward(s, gen.ids.data(), gen.prompt, out.data()) == TERN_OK);
  std::vector<uint8_t> blob = test::saved_state(s);
  // Every layer is LSH: the payload (after the 48-byte header and one 16-byte entry per layer) starts with the first
  // layer's header (hashed = 1, 0), then head 0's round 0 buckets. Put position 0's outside round 0's range.
  const size_t first = 48 + size_t(lsh_layers) * 16;
  int32_t head[3];
  std::memcpy(head, blob.data() + first, 12);
  REQUIRE(head[0] == 1);
  REQUIRE(head[1] == 0);
  REQUIRE(head[2] >= 0);
  const int32_t bad = 1 << 20;
  std::memcpy(blob.data() + first + 8, &bad, 4);
  test::reseal_state(&blob);
  tern_session* other = make_session(model, 1, n);
  CHECK(tern_session_load_state(other, blob.data(), blob.size()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(other)), Catch::Contains("saved LSH bucket 1048576"));
  tern_session_free(other);
  tern_session_free(s);

  // forward_only: no cache planned or kept, the same logits, and a continuation refused by name.
  tern_session_options so;
  tern_session_options_init(&so);
  so.weight_storage = TERN_WEIGHT_STORAGE_F32;
  so.threads = 1;
  so.max_tokens = n;
  so.forward_only = 2;
  CHECK(tern_session_create(model, &so, &s) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(tern_last_error(), Catch::Contains("forward_only must be 0 or 1"));
  test::check_forward_only(model, gen, out);
  tern_model_free(model);
}

TEST_CASE("reformer generation: the Vulkan cache saves as the CPU's: a state moves between backends mid-generation, "
          "and a forged bucket is refused",
          "[model][reformer][lsh][streaming][vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const std::string dir = test::source_path("tests/goldens/reformer_hashes_int");
  const Generation gen = load_generation(dir);
  tern_model* model = convert_and_load(dir, "gen_cross");
  const int64_t n = int64_t(gen.ids.size()), vocab = gen.logits.shape[1], half = 20;
  std::vector<float> out(size_t(n * vocab));
  // The prompt and `half` steps on one backend, saved; the rest on the other, from the blob.
  for (auto [from, to] : {std::pair{TERN_BACKEND_VULKAN, TERN_BACKEND_CPU}, std::pair{TERN_BACKEND_CPU, TERN_BACKEND_VULKAN}}) {
    INFO(test::backend_name(from) << " -> " << test::backend_name(to));
    tern_session* s = test::make_session_on(from, model, 1, n);
    REQUIRE(tern_session_forward(s, gen.ids.data(), gen.prompt, out.data()) == TERN_OK);
    REQUIRE(tern_session_append(s, gen.ids.data() + gen.prompt, half, out.data()) == TERN_OK);
    size_t size = 0;
    REQUIRE(tern_session_save_state(s, nullptr, &size) == TERN_OK);
    std::vector<uint8_t> blob(size);
    REQUIRE(tern_session_save_state(s, blob.data(), &size) == TERN_OK);
    tern_session_free(s);
    s = test::make_session_on(to, model, 1, n);
    INFO(tern_session_last_error(s));
    REQUIRE(tern_session_load_state(s, blob.data(), blob.size()) == TERN_OK);
    const int64_t rest = n - gen.prompt - half;
    REQUIRE(tern_session_append(s, gen.ids.data() + gen.prompt + half, rest, out.data()) == TERN_OK);
    const float* want = gen.logits.data.data() + (1 + half) * vocab;
    CHECK(relative_error(out.data(), want, size_t(rest * vocab)) <= kModelTolerance);
    tern_session_free(s);
  }
  // A bucket outside its round's range is refused by the Vulkan session before anything is loaded.
  tern_session* s = make_session(model, 1, n);
  REQUIRE(tern_session_forward(s, gen.ids.data(), gen.prompt, out.data()) == TERN_OK);
  size_t size = 0;
  REQUIRE(tern_session_save_state(s, nullptr, &size) == TERN_OK);
  std::vector<uint8_t> blob(size);
  REQUIRE(tern_session_save_state(s, blob.data(), &size) == TERN_OK);
  tern_session_free(s);
  const size_t first = 48 + 3 * 16;  // the first LSH layer's header (hashed, 0), then its buckets
  const int32_t bad = 1 << 20;
  std::memcpy(blob.data() + first + 8, &bad, 4);
  test::reseal_state(&blob);
  s = test::make_session_on(TERN_BACKEND_VULKAN, model, 1, n);
  CHECK(tern_session_load_state(s, blob.data(), blob.size()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("saved LSH bucket 1048576"));
  tern_session_free(s);
  // forward_only: no cache on the device either.
  tern_session_options so;
  tern_session_options_init(&so);
  so.weight_storage = TERN_WEIGHT_STORAGE_F32;
  so.backend = TERN_BACKEND_VULKAN;
  so.max_tokens = n;
  so.forward_only = 1;
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  tern_memory_plan used{};
  REQUIRE(tern_session_memory(s, &used) == TERN_OK);
  CHECK(used.state_bytes == 0);
  tern_session_free(s);
  tern_model_free(model);
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("reformer: rotations drawn from the hash seed when the checkpoint has none", "[model][reformer][lsh]") {
  // The golden without its rotation tensors: the converter draws one tensor from the seed for every LSH layer.
  const std::string dir = copy_golden("reformer_mixed_factorized", "no_rotations");
  Golden full = load_golden("reformer_mixed_factorized");
  {
    // Rewrite model.safetensors without the rotations (the other tensors as they are).
    const std::string path = dir + "/model.safetensors";
    const std::string bytes = test::read_file(path);
    uint64_t header_len = 0;
    std::memcpy(&header_len, bytes.data(), 8);
    nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_len));
    for (auto it = header.begin(); it != header.end();) {
      if (it.key().find(".rotations") != std::string::npos) it = header.erase(it); else ++it;
    }
    std::string h = header.dump();
    h.append((8 - h.size() % 8) % 8, ' ');
    std::string rewritten(8, '\0');
    const uint64_t len = h.size();
    std::memcpy(rewritten.data(), &len, 8);
    test::write_file(path, rewritten + h + bytes.substr(8 + header_len));
  }
  const int64_t vocab = full.logits.shape[1];
  convert::ConvertOptions seed7{true};
  seed7.hash_seed = 7;
  tern_model* a = convert_and_load(dir, "seed7a", seed7);
  tern_model* b = convert_and_load(dir, "seed7b", seed7);
  convert::ConvertOptions seed8{true};
  seed8.hash_seed = 8;
  tern_model* c = convert_and_load(dir, "seed8", seed8);
  tern_model* d = convert_and_load(dir, "config_seed");  // config.json's hash_seed (11)
  tern_model_info info_a{}, info_d{};
  REQUIRE(tern_model_get_info(a, &info_a) == TERN_OK);
  REQUIRE(tern_model_get_info(d, &info_d) == TERN_OK);
  CHECK_THAT(std::string(info_a.description), Catch::Contains("rotations drawn from seed 7"));
  CHECK_THAT(std::string(info_d.description), Catch::Contains("rotations drawn from seed 11"));
  const std::vector<float> la = forward(a, 2, full.ids, vocab), lb = forward(b, 2, full.ids, vocab),
                           lc = forward(c, 2, full.ids, vocab), ld = forward(d, 2, full.ids, vocab);
  CHECK(la == lb);  // the same seed gives the same rotations
  CHECK(relative_error(lc.data(), la.data(), la.size()) > 1e-3);
  CHECK(relative_error(la.data(), full.logits.data.data(), la.size()) > 1e-3);  // not the golden's rotations
  CHECK(std::all_of(ld.begin(), ld.end(), [](float v) { return std::isfinite(v); }));
  tern_model_free(a);
  tern_model_free(b);
  tern_model_free(c);
  tern_model_free(d);
}

TEST_CASE("reformer: malformed configs and checkpoints are conversion errors", "[converter][reformer]") {
  struct Case {
    std::string what;
    std::function<void(nlohmann::json&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"missing hidden_size", [](nlohmann::json& c) { c.erase("hidden_size"); }, "field 'hidden_size' is missing"},
      {"missing num_hashes", [](nlohmann::json& c) { c.erase("num_hashes"); }, "field 'num_hashes' is missing"},
      {"unknown layer", [](nlohmann::json& c) { c["attn_layers"][1] = "dense"; }, "entry 1 is \"dense\"; only \"lsh\" and \"local\""},
      {"odd buckets", [](nlohmann::json& c) { c["num_buckets"] = {4, 7}; }, "must hold even bucket counts"},
      {"null buckets", [](nlohmann::json& c) { c["num_buckets"] = nullptr; }, "num_buckets' is missing or null"},
      {"too many buckets", [](nlohmann::json& c) { c["num_buckets"] = {8192, 4096}; }, "more than 2^24 buckets"},
      {"chunks after", [](nlohmann::json& c) { c["lsh_num_chunks_after"] = 1; }, "lsh_num_chunks_after' must be 0"},
      {"not a decoder", [](nlohmann::json& c) { c["is_decoder"] = false; }, "is_decoder is false"},
      {"tied embeddings", [](nlohmann::json& c) { c["tie_word_embeddings"] = true; }, "tie_word_embeddings is true"},
      {"axial dims", [](nlohmann::json& c) { c["axial_pos_embds_dim"] = {16, 40}; }, "must sum to hidden_size 64"},
      {"layer count", [](nlohmann::json& c) { c["num_hidden_layers"] = 3; }, "attn_layers lists 4 layers"},
      {"activation", [](nlohmann::json& c) { c["hidden_act"] = "swish"; }, "hidden_act"},
      {"lsh window", [](nlohmann::json& c) { c["lsh_attn_chunk_length"] = 1 << 24; }, "LSH window"},
      {"wrong head size", [](nlohmann::json& c) { c["attention_head_size"] = 16; }, "has shape [64, 64], expected [64, 32]"},
  };
  for (const Case& c : cases) {
    const std::string dir = copy_golden("reformer_mixed_factorized", "bad");
    edit_config(dir, c.edit);
    const std::string out = test::scratch_dir("reformer_bad_out") + "/model.tern";
    Status st = convert::convert_checkpoint(dir, out, {true});
    INFO(c.what << ": " << st.message());
    CHECK(!st.ok());
    CHECK_THAT(st.message(), Catch::Contains(c.message));
    CHECK(!std::filesystem::exists(out));
  }
}
