// SPDX-License-Identifier: MIT
// Hugging Face llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text and gpt2 checkpoints (docs/models-llama.md,
// models-gemma.md, models-gpt2.md): the RoPE tables against transformers' numbers (tests/fixtures/rope_tables.json,
// written by tools/reference/rope_tables.py with PyTorch); the graph each family's tiny random checkpoint becomes;
// malformed checkpoints refused naming the key or tensor, leaving no file; sharded checkpoints' index.
// The goldens of tools/reference/hf_decoders.py (tests/goldens/hf_*) run in test_hf_goldens.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint.h"
#include "convert.h"
#include "graph_builder.h"
#include "importers/importers.h"
#include "importers/rope_tables.h"
#include "run_tool.h"
#include "test_support.h"

namespace fs = std::filesystem;
namespace fb = tern::fb;
using nlohmann::json;
using namespace tern;

namespace {

// ---- RoPE tables ----------------------------------------------------------------------------------------------

double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-30); }

TEST_CASE("rope tables: every rope type matches transformers' inv_freq and attention_factor", "[converter][rope]") {
  const json fixture = json::parse(test::read_file(test::source_path("tests/fixtures/rope_tables.json")));
  REQUIRE(fixture.at("cases").size() >= 10);
  for (const json& c : fixture.at("cases")) {
    const std::string name = c.at("name");
    INFO(name);
    convert::RopeConfig rope;
    rope.theta = c.at("rope_theta");
    rope.head_dim = c.at("head_dim");
    rope.partial_rotary_factor = c.value("partial_rotary_factor", 1.0);
    rope.max_position_embeddings = c.at("max_position_embeddings");
    if (c.contains("original_max_position_embeddings"))
      rope.original_max_position_embeddings = c.at("original_max_position_embeddings").get<int64_t>();
    if (c.contains("scaling")) rope.scaling = &c.at("scaling");
    auto t = convert::rope_tables(rope);
    INFO(t.status().message());
    REQUIRE(t.ok());
    const std::vector<double> want = c.at("inv_freq");
    REQUIRE(t->inv_freq.size() == want.size());
    CHECK(t->rotary_dim == int64_t(2 * want.size()));
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, rel(t->inv_freq[i], want[i]));
    CHECK(worst <= 1e-6);  // float32 steps as transformers takes them; pow may differ by an ulp
    CHECK(rel(t->attention_factor, c.at("attention_factor").get<double>()) <= 1e-6);
    if (c.contains("long_inv_freq")) {
      const std::vector<double> lw = c.at("long_inv_freq");
      REQUIRE(t->long_inv_freq.size() == lw.size());
      for (size_t i = 0; i < lw.size(); ++i) CHECK(rel(t->long_inv_freq[i], lw[i]) <= 1e-6);
      CHECK(t->scaling == fb::RotaryScaling::LONGROPE);
      CHECK(t->original_max_positions == c.value("original_max_position_embeddings",
                                                 c.at("scaling").value("original_max_position_embeddings", 0)));
    } else {
      CHECK(t->long_inv_freq.empty());
    }
    if (name == "dynamic") {
      CHECK(t->scaling == fb::RotaryScaling::DYNAMIC_NTK);
      CHECK(t->base == 10000.0);
      CHECK(t->factor == 4.0);
      CHECK(t->original_max_positions == 2048);
    }
  }
}

std::string rope_error(const json& scaling, int64_t head_dim = 64, double prf = 1.0) {
  convert::RopeConfig rope;
  rope.head_dim = head_dim;
  rope.partial_rotary_factor = prf;
  rope.max_position_embeddings = 4096;
  rope.scaling = &scaling;
  auto t = convert::rope_tables(rope);
  REQUIRE(!t.ok());
  return t.status().message();
}

TEST_CASE("rope tables: an unknown type or a value transformers cannot use is refused by its key", "[converter][rope]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(rope_error({{"rope_type", "foo"}}),
             Contains("'rope_scaling.rope_type' 'foo' is not supported") && Contains("known: default, linear"));
  CHECK_THAT(rope_error({{"type", "mrope"}}), Contains("'rope_scaling.type' 'mrope'"));
  CHECK_THAT(rope_error({{"rope_type", "linear"}}), Contains("'rope_scaling.factor' is missing"));
  CHECK_THAT(rope_error({{"rope_type", "linear"}, {"factor", -2}}), Contains("'rope_scaling.factor'"));
  CHECK_THAT(rope_error({{"rope_type", "llama3"}, {"factor", 8}, {"low_freq_factor", 4}, {"high_freq_factor", 4}}),
             Contains("'rope_scaling.high_freq_factor'"));
  CHECK_THAT(rope_error({{"rope_type", "longrope"}, {"short_factor", {1, 1}}, {"long_factor", {1, 1}}}),
             Contains("'rope_scaling.short_factor' must be a list of 32 numbers"));
  CHECK_THAT(rope_error({{"rope_type", "yarn"}, {"factor", 4}, {"truncate", "yes"}}), Contains("'rope_scaling.truncate'"));
  CHECK_THAT(rope_error(json::object(), 6, 0.5), Contains("must be even"));
}

// ---- tiny checkpoints -----------------------------------------------------------------------------------------

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
using TensorMap = std::map<std::string, Tensor>;

std::string safetensors_bytes(const TensorMap& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    const std::string bytes(reinterpret_cast<const char*>(t.values.data()), t.values.size() * 4);
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data += bytes;
  }
  std::string h = header.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(h.size()) >> (8 * i)) & 0xff);
  return out + h + data;
}

// A tiny model of one family: its config.json and every tensor its transformers class has, by HF name.
struct Tiny {
  json config;
  std::map<std::string, std::vector<int64_t>> shapes;
};

Tiny tiny(const std::string& type) {
  const int64_t V = 64, d = 32, H = 4, KV = 2, dh = 8, I = 48, L = 2;
  Tiny t;
  t.config = {{"model_type", type},        {"vocab_size", V},          {"hidden_size", d},
              {"intermediate_size", I},    {"num_hidden_layers", L},   {"num_attention_heads", H},
              {"num_key_value_heads", KV}, {"head_dim", dh},           {"max_position_embeddings", 128},
              {"rms_norm_eps", 1e-6},      {"tie_word_embeddings", false}};
  if (type == "gpt2") {
    t.config = {{"model_type", "gpt2"}, {"vocab_size", V}, {"n_positions", 64}, {"n_embd", d}, {"n_layer", L},
                {"n_head", H}, {"n_inner", nullptr}, {"eos_token_id", 7}};
    auto& s = t.shapes;
    s["transformer.wte.weight"] = {V, d};
    s["transformer.wpe.weight"] = {64, d};
    for (int64_t i = 0; i < L; ++i) {
      const std::string p = "transformer.h." + std::to_string(i) + ".";
      for (const char* n : {"ln_1", "ln_2"}) s[p + n + ".weight"] = s[p + n + ".bias"] = {d};
      s[p + "attn.c_attn.weight"] = {d, 3 * d}, s[p + "attn.c_attn.bias"] = {3 * d};
      s[p + "attn.c_proj.weight"] = {d, d}, s[p + "attn.c_proj.bias"] = {d};
      s[p + "mlp.c_fc.weight"] = {d, 4 * d}, s[p + "mlp.c_fc.bias"] = {4 * d};
      s[p + "mlp.c_proj.weight"] = {4 * d, d}, s[p + "mlp.c_proj.bias"] = {d};
    }
    s["transformer.ln_f.weight"] = s["transformer.ln_f.bias"] = {d};
    return t;
  }
  const bool gemma = type == "gemma2" || type == "gemma3_text";
  const bool phi3 = type == "phi3";
  if (gemma) t.config["tie_word_embeddings"] = true;
  if (type == "qwen3" || type == "gemma3_text") t.config["sliding_window"] = 16;
  auto& s = t.shapes;
  s["model.embed_tokens.weight"] = {V, d};
  s["model.norm.weight"] = {d};
  if (!gemma) s["lm_head.weight"] = {V, d};
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    s[p + "input_layernorm.weight"] = s[p + "post_attention_layernorm.weight"] = {d};
    if (gemma) s[p + "pre_feedforward_layernorm.weight"] = s[p + "post_feedforward_layernorm.weight"] = {d};
    if (phi3) {
      s[p + "self_attn.qkv_proj.weight"] = {(H + 2 * KV) * dh, d};
      s[p + "mlp.gate_up_proj.weight"] = {2 * I, d};
    } else {
      s[p + "self_attn.q_proj.weight"] = {H * dh, d};
      s[p + "self_attn.k_proj.weight"] = s[p + "self_attn.v_proj.weight"] = {KV * dh, d};
      s[p + "mlp.gate_proj.weight"] = s[p + "mlp.up_proj.weight"] = {I, d};
    }
    if (type == "qwen2") {
      s[p + "self_attn.q_proj.bias"] = {H * dh};
      s[p + "self_attn.k_proj.bias"] = s[p + "self_attn.v_proj.bias"] = {KV * dh};
    }
    if (type == "qwen3" || type == "gemma3_text") s[p + "self_attn.q_norm.weight"] = s[p + "self_attn.k_norm.weight"] = {dh};
    s[p + "self_attn.o_proj.weight"] = {d, H * dh};
    s[p + "mlp.down_proj.weight"] = {d, I};
  }
  return t;
}

void write_tiny(const std::string& dir, const Tiny& t) {
  fs::create_directories(dir);
  test::write_file(dir + "/config.json", t.config.dump());
  TensorMap m;
  uint32_t seed = 1;
  for (const auto& [name, shape] : t.shapes) {
    size_t n = 1;
    for (int64_t x : shape) n *= size_t(x);
    m[name] = {shape, test::random_floats(n, seed++)};
  }
  test::write_file(dir + "/model.safetensors", safetensors_bytes(m));
}

const char* const kTypes[] = {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text", "gpt2"};

// The importer's graph of `dir`, or its error.
Result<convert::GraphBuilder> import_dir(const std::string& dir) {
  TERN_ASSIGN_OR_RETURN(auto ck, convert::Checkpoint::open(dir));
  TERN_ASSIGN_OR_RETURN(const convert::Importer* imp, convert::find_importer(ck->config()));
  convert::GraphBuilder g;
  TERN_RETURN_IF_ERROR(imp->import(*ck, g));
  if (!ck->unused().empty()) return InvalidModel(convert::describe_unused(ck->unused()));
  return g;
}

const convert::OpSpec* op_named(const convert::GraphBuilder& g, const std::string& name) {
  for (const auto& op : g.ops())
    if (op.name == name) return &op;
  return nullptr;
}

TEST_CASE("hf importers: each family's tiny checkpoint becomes its decoder graph", "[converter][hf]") {
  const std::string root = test::scratch_dir("hf_tiny");
  for (const char* type : kTypes) {
    INFO(type);
    const std::string dir = root + "/" + type;
    write_tiny(dir, tiny(type));
    auto g = import_dir(dir);
    INFO(g.status().message());
    REQUIRE(g.ok());
    CHECK(g->metadata().architecture == type);
    CHECK(g->metadata().vocab_kind == fb::VocabKind::EXTERNAL);
    CHECK(g->values()[size_t(g->outputs().at(0))].name == "logits");
    if (std::string(type) == "gpt2") {
      CHECK(g->metadata().eos_id == 7);
      CHECK(g->metadata().bos_id == -1);  // GPT2Config's 50256, past this vocabulary: no special token
      CHECK(g->metadata().max_context == 64);
      const auto* attn = op_named(g.value(), "transformer.h.0.attn");
      REQUIRE(attn);
      CHECK(attn->params.AsAttentionParams()->heads == 4);
      CHECK(g->tensors()[size_t(op_named(g.value(), "transformer.h.0.attn.c_attn")->weights[0])].shape ==
            std::vector<int64_t>{96, 32});  // Conv1D [in, out] stored as [out, in]
      continue;
    }
    const std::string t = type;
    const bool gemma = t == "gemma2" || t == "gemma3_text";
    const auto* attn = op_named(g.value(), "model.layers.0.self_attn");
    REQUIRE(attn);
    const auto* p = attn->params.AsAttentionParams();
    CHECK(p->kv_heads == 2);
    CHECK(attn->version == 2);  // kv_heads != heads
    CHECK(p->scale == Approx(gemma ? 1.0 / 16.0 : 1.0 / std::sqrt(8.0)));  // query_pre_attn_scalar 256
    CHECK(p->logit_softcap == (t == "gemma2" ? 50.0f : 0.0f));
    const auto* rot = op_named(g.value(), "model.layers.0.self_attn.rotary");
    REQUIRE(rot);
    CHECK(rot->params.AsRotaryParams()->heads == 6);
    CHECK(rot->params.AsRotaryParams()->rotary_dim == 8);
    const auto* embed = op_named(g.value(), "model.embed_tokens");
    CHECK(embed->params.AsEmbeddingParams()->scale == (gemma ? float(std::sqrt(32.0)) : 1.0f));
    CHECK(embed->version == (gemma ? 2 : 1));
    CHECK(op_named(g.value(), "model.layers.0.input_layernorm")->params.AsRmsNormParams()->weight_offset ==
          (gemma ? 1.0f : 0.0f));
    CHECK((op_named(g.value(), "model.layers.0.post_attention_layernorm") != nullptr) == gemma);
    CHECK((op_named(g.value(), "model.layers.0.self_attn.qk_norm") != nullptr) == (t == "qwen3" || t == "gemma3_text"));
    CHECK(op_named(g.value(), "model.layers.0.mlp.act")->code == fb::OpCode::GATED_ACTIVATION);
    CHECK((op_named(g.value(), "logits")->code == fb::OpCode::ACTIVATION) == (t == "gemma2"));
    // Windows: Mistral's default 4096 on every layer; Gemma 2's even layers, Gemma 3's all but every 6th (both
    // layers here slide); Qwen's only with use_sliding_window; Llama and Phi-3 (sliding_window absent) none.
    const auto* kind1 = op_named(g.value(), "model.layers.1.self_attn")->params.AsAttentionParams();
    if (t == "mistral") CHECK(p->kind.AsSlidingWindow()->window == 4096);
    if (t == "gemma2") {
      CHECK(p->kind.AsSlidingWindow()->window == 4096);
      CHECK(kind1->kind.AsDense());
    }
    if (t == "gemma3_text") CHECK(kind1->kind.AsSlidingWindow()->window == 16);
    if (t == "llama" || t == "phi3" || t == "qwen2" || t == "qwen3") CHECK(p->kind.AsDense());
  }
}

// Writes `type`'s tiny checkpoint changed by `edit`, converts it, and returns the error (nothing may be written).
std::string refused(const std::string& type, const std::function<void(Tiny&)>& edit) {
  const std::string dir = test::scratch_dir("hf_bad_" + type);
  Tiny t = tiny(type);
  edit(t);
  write_tiny(dir + "/ckpt", t);
  const std::string out = dir + "/model.tern";
  const Status st = convert::convert_checkpoint(dir + "/ckpt", out, {true});
  REQUIRE(!st.ok());
  CHECK(!fs::exists(out));
  for (const auto& e : fs::directory_iterator(dir)) CHECK(e.path().filename() == "ckpt");  // no temporary left
  return st.message();
}

TEST_CASE("hf importers: malformed checkpoints are refused naming the key or tensor, no file left",
          "[converter][hf]") {
  using Catch::Matchers::Contains;
  for (const char* type : kTypes) {
    const std::string t = type;
    INFO(t);
    const bool gpt2 = t == "gpt2";
    const std::string embed = gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight";
    const std::string o = gpt2 ? "transformer.h.1.attn.c_proj.weight" : "model.layers.1.self_attn.o_proj.weight";
    CHECK_THAT(refused(t, [&](Tiny& m) { m.shapes.erase(o); }), Contains("missing tensor '" + o + "'"));
    CHECK_THAT(refused(t, [&](Tiny& m) { m.shapes[embed] = {64, 31}; }),
               Contains("tensor '" + embed + "' has shape [64, 31], expected [64, 32]"));
    CHECK_THAT(refused(t, [&](Tiny& m) {
                 m.config["tie_word_embeddings"] = false;
                 m.shapes.erase("lm_head.weight");
               }),
               Contains("'lm_head.weight'") && Contains("tie_word_embeddings"));
    // Counts that would size tables before any tensor is read: refused by key, allocating nothing.
    const std::string layers = gpt2 ? "n_layer" : "num_hidden_layers";
    CHECK_THAT(refused(t, [&](Tiny& m) { m.config[layers] = 2000000000; }),
               Contains("'" + layers + "' 2000000000 layers, but the checkpoint holds"));
    if (!gpt2)
      CHECK_THAT(refused(t, [](Tiny& m) { m.config["head_dim"] = 1 << 30; }),
                 Contains("'head_dim' 1073741824 is above the 4096 head size supported"));
    if (gpt2) {
      CHECK_THAT(refused(t, [](Tiny& m) { m.config["n_head"] = 5; }), Contains("'n_head'"));
      CHECK_THAT(refused(t, [](Tiny& m) { m.config["reorder_and_upcast_attn"] = true; }),
                 Contains("'reorder_and_upcast_attn'"));
      CHECK_THAT(refused(t, [](Tiny& m) { m.config["activation_function"] = "gelu_fast"; }),
                 Contains("'activation_function'"));
      continue;
    }
    CHECK_THAT(refused(t, [](Tiny& m) { m.config["rope_scaling"] = {{"rope_type", "foo"}, {"factor", 2}}; }),
               Contains("'rope_scaling.rope_type' 'foo' is not supported"));
    CHECK_THAT(refused(t, [](Tiny& m) { m.config["num_key_value_heads"] = 3; }),
               Contains("'num_key_value_heads' 3 must divide num_attention_heads 4"));
    const std::string act = t.rfind("gemma", 0) == 0 ? "hidden_activation" : "hidden_act";
    CHECK_THAT(refused(t, [&](Tiny& m) { m.config[act] = "quick_gelu"; }), Contains("'" + act + "'"));
    if (t == "mistral" || t == "phi3")
      CHECK_THAT(refused(t, [](Tiny& m) { m.config["attention_bias"] = true; }), Contains("'attention_bias'"));
  }
}

TEST_CASE("hf importers: eos ids from config.json and generation_config.json, the list's rest as extra ids",
          "[converter][hf]") {
  const std::string dir = test::scratch_dir("hf_eos") + "/ckpt";
  Tiny t = tiny("llama");
  t.config["eos_token_id"] = {5, 7};
  write_tiny(dir, t);
  auto g = import_dir(dir);
  REQUIRE(g.ok());
  CHECK(g->metadata().eos_id == 5);
  CHECK(g->metadata().extra_eos_ids == std::vector<int32_t>{7});
  CHECK(g->metadata().bos_id == 1);  // LlamaConfig's default
  test::write_file(dir + "/generation_config.json", R"({"bos_token_id": 3, "eos_token_id": [9, 10, 11]})");
  auto g2 = import_dir(dir);
  REQUIRE(g2.ok());
  CHECK(g2->metadata().bos_id == 3);
  CHECK(g2->metadata().eos_id == 9);
  CHECK(g2->metadata().extra_eos_ids == std::vector<int32_t>{10, 11});
}

TEST_CASE("checkpoint: a sharded checkpoint's index must list every tensor where it is", "[converter][hf]") {
  using Catch::Matchers::Contains;
  const std::string dir = test::scratch_dir("hf_shards") + "/ckpt";
  fs::create_directories(dir);
  test::write_file(dir + "/config.json", R"({"model_type": "llama"})");
  test::write_file(dir + "/model-00001-of-00002.safetensors", safetensors_bytes({{"a", {{2}, {1, 2}}}}));
  test::write_file(dir + "/model-00002-of-00002.safetensors", safetensors_bytes({{"b", {{2}, {3, 4}}}}));
  auto index = [&](const json& map) {
    test::write_file(dir + "/model.safetensors.index.json", json{{"weight_map", map}}.dump());
    auto ck = convert::Checkpoint::open(dir);
    return ck.ok() ? std::string() : ck.status().message();
  };
  CHECK(index({{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}}).empty());
  CHECK_THAT(index({{"a", "model-00001-of-00002.safetensors"}}), Contains("does not list tensor 'b'"));
  CHECK_THAT(index({{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00001-of-00002.safetensors"}}),
             Contains("puts 'b' in 'model-00001-of-00002.safetensors', but it is in 'model-00002"));
  CHECK_THAT(index({{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"},
                    {"c", "model-00003-of-00003.safetensors"}}),
             Contains("'model-00003-of-00003.safetensors', which is not a .safetensors file"));
  CHECK_THAT(index({{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"},
                    {"c", "model-00002-of-00002.safetensors"}}),
             Contains("lists tensor 'c'"));
}

}  // namespace

// tern-run --plan on converted checkpoints: a Mistral model (every layer a sliding window of 256) keeps the same
// state at 2,048 and at 65,536 tokens, a ring of its window per layer; a Llama model with 2 key/value heads of 4
// plans half the state of the same model with 4.
TEST_CASE("hf importers: tern-run --plan shows sliding rings constant and grouped-query state at kv_heads/heads",
          "[converter][hf][planner]") {
  const std::string root = test::scratch_dir("hf_plan");
  const std::string run = std::string(TERN_BINARY_DIR) + "/examples/tern-run";
  auto state_at = [&](const std::string& name, Tiny t) {
    const std::string dir = root + "/" + name, out = root + "/" + name + ".tern";
    t.config["max_position_embeddings"] = 131072;
    write_tiny(dir, t);
    const Status st = convert::convert_checkpoint(dir, out, convert::ConvertOptions{true});
    INFO(name << ": " << st.message());
    REQUIRE(st.ok());
    const test::ToolRun r =
        test::run_tool(run, {out, "--plan", "2048,65536", "--json"}, test::scratch_dir("hf_plan_run_" + name));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json plan = json::parse(r.out).at("plan");
    REQUIRE(plan.size() == 2);
    return std::pair<uint64_t, uint64_t>{plan[0].at("state_bytes").get<uint64_t>(),
                                         plan[1].at("state_bytes").get<uint64_t>()};
  };
  Tiny mistral = tiny("mistral");
  mistral.config["sliding_window"] = 256;
  const auto [m2k, m64k] = state_at("mistral", mistral);
  // 2 layers x k and v x 2 kv heads x head_dim 8 x float32 x the ring (the window less the query's own key).
  CHECK(m2k == 2ull * 2 * 2 * 8 * 4 * 255);
  CHECK(m64k == m2k);

  Tiny grouped = tiny("llama");
  Tiny full = tiny("llama");
  full.config["num_key_value_heads"] = 4;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
    full.shapes[p + "k_proj.weight"] = full.shapes[p + "v_proj.weight"] = {4 * 8, 32};
  }
  const auto [g2k, g64k] = state_at("llama_gqa", grouped);
  const auto [f2k, f64k] = state_at("llama_mha", full);
  CHECK(g2k * 2 == f2k);
  CHECK(g64k * 2 == f64k);
  CHECK(g64k == 32 * g2k);  // a full-context layer's cache grows with the sequence
}

