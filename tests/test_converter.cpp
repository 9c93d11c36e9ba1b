// SPDX-License-Identifier: MIT
// tern-convert on tiny random reference-family checkpoints: graph, layout, weight bytes, errors, atomicity; the graph
// and decoder builders and the writer on graphs built here.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <flatbuffers/flatbuffers.h>
#include <nlohmann/json.hpp>

#include "convert.h"
#include "graph_builder.h"
#include "importers/decoder_builder.h"
#include "tern_generated.h"
#include "test_support.h"
#include "writer.h"

namespace fs = std::filesystem;
namespace fb = tern::fb;
using nlohmann::json;

namespace {

struct RefSpec {
  int64_t V = 256, d = 16, H = 2, F = 24, N = 2, P = 32;
  bool pre_ln = true, tied = true, bias = true, learned = true, head_bias = false, final_norm = true;
  std::string activation = "gelu";
  std::string dtype = "F32";  // how the checkpoint stores every tensor: F32, F16 or BF16
  int files = 1;              // tensors spread round-robin over this many .safetensors files
};

json make_config(const RefSpec& s) {
  return {{"model_type", "tern-reference"},   {"vocab_size", s.V},
          {"hidden_size", s.d},               {"num_layers", s.N},
          {"num_heads", s.H},                 {"intermediate_size", s.F},
          {"max_position_embeddings", s.P},   {"position_embedding", s.learned ? "learned" : "sinusoidal"},
          {"norm_position", s.pre_ln ? "pre" : "post"}, {"final_norm", s.final_norm},
          {"activation", s.activation},       {"linear_bias", s.bias},
          {"layer_norm_eps", 1e-5},           {"tie_word_embeddings", s.tied},
          {"lm_head_bias", s.head_bias},      {"attention", {{"kind", "dense"}}}};
}

// Parameter table of converter/reference-family.md.
std::map<std::string, std::vector<int64_t>> param_shapes(const RefSpec& s) {
  std::map<std::string, std::vector<int64_t>> p;
  p["embed.weight"] = {s.V, s.d};
  if (s.learned) p["pos_embed.weight"] = {s.P, s.d};
  for (int64_t i = 0; i < s.N; ++i) {
    const std::string l = "layers." + std::to_string(i) + ".";
    for (const char* n : {"attn_norm", "mlp_norm"}) p[l + n + ".weight"] = p[l + n + ".bias"] = {s.d};
    for (const char* n : {"q", "k", "v", "out"}) {
      p[l + "attn." + n + ".weight"] = {s.d, s.d};
      if (s.bias) p[l + "attn." + n + ".bias"] = {s.d};
    }
    p[l + "mlp.fc1.weight"] = {s.F, s.d};
    p[l + "mlp.fc2.weight"] = {s.d, s.F};
    if (s.bias) p[l + "mlp.fc1.bias"] = {s.F}, p[l + "mlp.fc2.bias"] = {s.d};
  }
  if (s.final_norm) p["final_norm.weight"] = p["final_norm.bias"] = {s.d};
  if (!s.tied) p["lm_head.weight"] = {s.V, s.d};
  if (s.head_bias) p["lm_head.bias"] = {s.V};
  return p;
}

// Random values exactly representable in `dtype`, never zero.
std::vector<float> random_values(size_t n, uint32_t seed, const std::string& dtype) {
  if (dtype == "F32") return tern::test::random_floats(n, seed);
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) {
    int k = int(rng() % 255) + 1;                       // 8 significant bits: exact in F16 and BF16
    x = float(rng() & 1 ? k : -k) / 64.0f;              // in [-4, 4]
  }
  return v;
}

std::string encode(const std::vector<float>& v, const std::string& dtype) {
  std::string out;
  for (float f : v) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    if (dtype == "F32") {
      out.append(reinterpret_cast<const char*>(&f), 4);
      continue;
    }
    uint16_t h;
    if (dtype == "BF16") {
      REQUIRE((b & 0xffff) == 0);
      h = uint16_t(b >> 16);
    } else {  // F16, normal range only
      const int e = int((b >> 23) & 0xff) - 127 + 15;
      REQUIRE(((b & 0x1fff) == 0 && e > 0 && e < 31));
      h = uint16_t(((b >> 16) & 0x8000) | uint32_t(e << 10) | ((b >> 13) & 0x3ff));
    }
    out.append(reinterpret_cast<const char*>(&h), 2);
  }
  return out;
}

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
  std::string dtype = "F32";
};
using TensorMap = std::map<std::string, Tensor>;

std::string safetensors_bytes(const TensorMap& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    const std::string bytes = encode(t.values, t.dtype);
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data += bytes;
  }
  std::string h = header.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(h.size()) >> (8 * i)) & 0xff);
  return out + h + data;
}

TensorMap random_params(const RefSpec& s, uint32_t seed = 11) {
  TensorMap t;
  for (const auto& [name, shape] : param_shapes(s)) {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    t[name] = {shape, random_values(n, seed++, s.dtype), s.dtype};
  }
  return t;
}

void write_checkpoint(const std::string& dir, const json& config, const TensorMap& tensors, int files = 1) {
  tern::test::write_file(dir + "/config.json", config.dump(2));
  std::vector<TensorMap> parts(static_cast<size_t>(files));
  size_t i = 0;
  for (const auto& [name, t] : tensors) parts[i++ % parts.size()][name] = t;
  for (size_t f = 0; f < parts.size(); ++f)
    tern::test::write_file(dir + "/model-" + std::to_string(f + 1) + ".safetensors", safetensors_bytes(parts[f]));
}

// The converted file, verified, with the data segment located.
struct TernFile {
  std::string bytes;
  const fb::Model* model = nullptr;
  uint64_t data_start = 0;

  explicit TernFile(const std::string& path) : bytes(tern::test::read_file(path)) {
    REQUIRE(bytes.size() >= 4);
    uint32_t s;
    std::memcpy(&s, bytes.data(), 4);
    REQUIRE(uint64_t(s) + 4 <= bytes.size());
    flatbuffers::Verifier verifier(reinterpret_cast<const uint8_t*>(bytes.data()), size_t(s) + 4);
    REQUIRE(fb::VerifySizePrefixedModelBuffer(verifier));
    REQUIRE(flatbuffers::BufferHasIdentifier(bytes.data(), "TERN", /*size_prefixed=*/true));
    model = fb::GetSizePrefixedModel(bytes.data());
    data_start = (uint64_t(s) + 4 + model->data_alignment() - 1) / model->data_alignment() * model->data_alignment();
  }
  std::vector<float> floats(const fb::Tensor* t) const {
    std::vector<float> v(size_t(t->size() / 4));
    std::memcpy(v.data(), bytes.data() + data_start + t->offset(), size_t(t->size()));
    return v;
  }
  std::string value_name(int32_t i) const { return model->values()->Get(uint32_t(i))->name()->str(); }
  std::string tensor_name(int32_t i) const { return i < 0 ? "-" : model->tensors()->Get(uint32_t(i))->name()->str(); }
};

// One op as names: "CODE name (inputs) [weights]".
std::string describe(const TernFile& f, const fb::Op* op) {
  std::string s = std::string(fb::EnumNameOpCode(op->code())) + " " + op->name()->str() + " (";
  for (uint32_t i = 0; i < op->inputs()->size(); ++i) s += (i ? "," : "") + f.value_name(op->inputs()->Get(i));
  s += ") -> " + f.value_name(op->outputs()->Get(0)) + " [";
  for (uint32_t i = 0; op->weights() && i < op->weights()->size(); ++i)
    s += (i ? "," : "") + f.tensor_name(op->weights()->Get(i));
  return s + "]";
}

// The graph the spec prescribes, written out independently of the importer.
std::vector<std::string> expected_ops(const RefSpec& s) {
  std::vector<std::string> ops = {"EMBEDDING embed (ids) -> embed [embed.weight]",
                                  std::string("POSITION pos (embed) -> pos [") + (s.learned ? "pos_embed.weight" : "-") + "]"};
  std::string x = "pos";
  for (int64_t i = 0; i < s.N; ++i) {
    const std::string l = "layers." + std::to_string(i) + ".";
    auto lin = [&](const std::string& name, const std::string& in, const std::string& w) {
      ops.push_back("LINEAR " + l + name + " (" + in + ") -> " + l + name + " [" + l + w + ".weight," +
                    (s.bias ? l + w + ".bias" : "-") + "]");
    };
    auto ln = [&](const std::string& name, const std::string& in) {
      ops.push_back("LAYER_NORM " + l + name + " (" + in + ") -> " + l + name + " [" + l + name + ".weight," + l + name +
                    ".bias]");
    };
    auto op = [&](const std::string& code, const std::string& name, const std::string& in) {
      ops.push_back(code + " " + l + name + " (" + in + ") -> " + l + name + " []");
    };
    if (s.pre_ln) ln("attn_norm", x);
    lin("qkv", s.pre_ln ? l + "attn_norm" : x, "attn.qkv");
    op("ATTENTION", "attn", l + "qkv");
    lin("attn_out", l + "attn", "attn.out");
    op("ADD", "resid_attn", x + "," + l + "attn_out");
    const std::string h = s.pre_ln ? l + "resid_attn" : l + "attn_norm";
    if (s.pre_ln) {
      ln("mlp_norm", l + "resid_attn");
    } else {
      ln("attn_norm", l + "resid_attn");
    }
    lin("fc1", s.pre_ln ? l + "mlp_norm" : l + "attn_norm", "mlp.fc1");
    op("ACTIVATION", "act", l + "fc1");
    lin("fc2", l + "act", "mlp.fc2");
    op("ADD", "resid_mlp", h + "," + l + "fc2");
    x = l + "resid_mlp";
    if (!s.pre_ln) {
      ln("mlp_norm", x);
      x = l + "mlp_norm";
    }
  }
  if (s.final_norm) {
    ops.push_back("LAYER_NORM final_norm (" + x + ") -> final_norm [final_norm.weight,final_norm.bias]");
    x = "final_norm";
  }
  ops.push_back("LINEAR logits (" + x + ") -> logits [" + std::string(s.tied ? "embed.weight" : "lm_head.weight") + "," +
                (s.head_bias ? "lm_head.bias" : "-") + "]");
  return ops;
}

// Converts a random checkpoint for `spec` and checks the whole file against the spec and the source weights.
void check_conversion(const RefSpec& s, const std::string& name) {
  const std::string dir = tern::test::scratch_dir("converter_" + name);
  const TensorMap params = random_params(s);
  write_checkpoint(dir, make_config(s), params, s.files);
  tern::convert::ConvertReport report;
  tern::Status st = tern::convert::convert_checkpoint(dir, dir + "/model.tern", {/*quiet=*/true}, &report);
  INFO(st.message());
  REQUIRE(st.ok());
  CHECK(report.unused_tensors.empty());

  TernFile f(dir + "/model.tern");
  const fb::Model* m = f.model;
  CHECK(m->format_version() == 1);
  CHECK(m->data_alignment() == 64);
  CHECK(m->metadata()->architecture()->str() == "tern-reference");
  CHECK(m->metadata()->producer()->str() == "tern-convert 0.1.0");
  CHECK(m->metadata()->vocab()->kind() == fb::VocabKind::BYTES);
  CHECK(m->metadata()->vocab()->size() == s.V);
  CHECK(m->metadata()->max_context() == s.P);
  CHECK_THAT(m->metadata()->description()->str(), Catch::Contains(std::string(s.pre_ln ? "pre-LN" : "post-LN")));

  std::vector<std::string> ops;
  for (const fb::Op* op : *m->ops()) ops.push_back(describe(f, op));
  CHECK(ops == expected_ops(s));
  REQUIRE(m->inputs()->size() == 1);
  const fb::Value* ids = m->values()->Get(uint32_t(m->inputs()->Get(0)));
  CHECK((ids->name()->str() == "ids" && ids->dtype() == fb::DType::I32 && ids->width() == 1));
  REQUIRE(m->outputs()->size() == 1);
  CHECK(f.value_name(m->outputs()->Get(0)) == "logits");
  // A tied head reads the embedding table itself; the `seen` count below checks it is stored once.
  const fb::Op* head = m->ops()->Get(m->ops()->size() - 1);
  CHECK((head->weights()->Get(0) == m->ops()->Get(0)->weights()->Get(0)) == s.tied);

  // Widths and params.
  for (const fb::Op* op : *m->ops()) {
    const fb::Value* out = m->values()->Get(uint32_t(op->outputs()->Get(0)));
    const std::string n = out->name()->str();
    int64_t want = s.d;
    if (n.find("qkv") != std::string::npos) want = 3 * s.d;
    if (n.find("fc1") != std::string::npos || n.find(".act") != std::string::npos) want = s.F;
    if (n == "logits") want = s.V;
    CHECK(out->width() == want);
    CHECK(out->dtype() == fb::DType::F32);
    if (auto* a = op->params_as_AttentionParams()) {
      CHECK((a->heads() == s.H && a->head_dim() == s.d / s.H && a->causal()));
      CHECK(a->scale() == Approx(1.0 / std::sqrt(double(s.d / s.H))));
      CHECK(a->kind_type() == fb::AttentionKind::Dense);
    }
    if (auto* p = op->params_as_PositionParams()) {
      CHECK(p->kind() == (s.learned ? fb::PositionKind::LEARNED : fb::PositionKind::SINUSOIDAL));
      CHECK(p->max_positions() == s.P);
    }
    if (auto* a = op->params_as_ActivationParams())
      CHECK(a->kind() == (s.activation == "relu"        ? fb::ActivationKind::RELU
                          : s.activation == "gelu_tanh" ? fb::ActivationKind::GELU_TANH
                                                        : fb::ActivationKind::GELU_ERF));
    if (auto* ln = op->params_as_LayerNormParams()) CHECK(ln->eps() == Approx(1e-5));
  }

  // Layout and bytes: every tensor aligned, sized, and equal to the checkpoint (fused qkv = q|k|v rows).
  std::map<std::string, int> seen;
  uint64_t end = 0;
  for (const fb::Tensor* t : *m->tensors()) {
    const std::string n = t->name()->str();
    INFO("tensor " << n);
    CHECK(++seen[n] == 1);
    CHECK(t->dtype() == fb::DType::F32);
    CHECK(t->offset() % 64 == 0);
    int64_t numel = 1;
    for (int64_t d : *t->shape()) numel *= d;
    CHECK(t->size() == uint64_t(numel) * 4);
    end = std::max(end, t->offset() + t->size());
    std::vector<float> want;
    const size_t fused = n.find("attn.qkv.");
    if (fused != std::string::npos) {
      const std::string l = n.substr(0, fused), suffix = n.substr(fused + 9);
      for (const char* part : {"q", "k", "v"}) {
        const auto& v = params.at(l + "attn." + part + "." + suffix).values;
        want.insert(want.end(), v.begin(), v.end());
      }
    } else {
      REQUIRE(params.count(n));
      want = params.at(n).values;
      CHECK(std::vector<int64_t>(t->shape()->begin(), t->shape()->end()) == params.at(n).shape);
    }
    CHECK(f.floats(t) == want);
  }
  CHECK(m->data_size() == end);
  CHECK(f.bytes.size() == f.data_start + m->data_size());
  // Every checkpoint tensor is in the file once, except q/k/v, which are fused, and nothing else is.
  size_t expected_tensors = params.size() - size_t(s.N) * (s.bias ? 4 : 2);
  CHECK(m->tensors()->size() == expected_tensors);
  CHECK(report.tensors == expected_tensors);
}

tern::Status convert_with(const std::string& name, const json& config, const TensorMap& params) {
  const std::string dir = tern::test::scratch_dir("converter_err_" + name);
  write_checkpoint(dir, config, params);
  return tern::convert::convert_checkpoint(dir, dir + "/model.tern", {/*quiet=*/true});
}

}  // namespace

TEST_CASE("convert: pre-LN, tied head stored once, learned positions", "[converter]") {
  RefSpec s;
  check_conversion(s, "pre_tied");
}

TEST_CASE("convert: post-LN, untied head with bias, sinusoidal, relu, no linear bias", "[converter]") {
  RefSpec s;
  s.pre_ln = false, s.tied = false, s.head_bias = true, s.learned = false, s.bias = false, s.final_norm = false;
  s.activation = "relu";
  check_conversion(s, "post_untied");
}

TEST_CASE("convert: F16 and BF16 checkpoints over several files, tied head with bias", "[converter]") {
  RefSpec s;
  s.activation = "gelu_tanh";
  s.head_bias = true;  // tied head with its own bias: lm_head.bias next to embed.weight
  s.files = 3;
  s.dtype = GENERATE(std::string("F16"), std::string("BF16"));
  check_conversion(s, "half_" + s.dtype);
}

TEST_CASE("convert: unused checkpoint tensors are reported", "[converter]") {
  RefSpec s;
  TensorMap params = random_params(s);
  params["extra.weight"] = {{3}, tern::test::random_floats(3, 9)};
  const std::string dir = tern::test::scratch_dir("converter_unused");
  write_checkpoint(dir, make_config(s), params);
  tern::convert::ConvertReport report;
  REQUIRE(tern::convert::convert_checkpoint(dir, dir + "/m.tern", {true}, &report).ok());
  CHECK(report.unused_tensors == std::vector<std::string>{"extra.weight"});
}

TEST_CASE("convert: config errors name the field", "[converter]") {
  RefSpec s;
  const TensorMap params = random_params(s);
  const json good = make_config(s);
  auto with = [&](const std::string& key, const json& v) {
    json c = good;
    if (v.is_discarded()) c.erase(key); else c[key] = v;
    return c;
  };
  const json drop = json(json::value_t::discarded);
  const std::vector<std::pair<json, std::string>> cases = {
      {with("hidden_size", drop), "config.json: field 'hidden_size' is missing"},
      {with("hidden_size", "abc"), "config.json: field 'hidden_size' must be a positive integer"},
      {with("num_layers", 0), "field 'num_layers' must be a positive integer"},
      {with("vocab_size", 2.5), "field 'vocab_size' must be a positive integer"},
      {with("norm_position", "mid"), "field 'norm_position' must be one of \"pre\", \"post\""},
      {with("activation", "swish"), "field 'activation' must be one of"},
      {with("final_norm", 1), "field 'final_norm' must be true or false"},
      {with("layer_norm_eps", -1), "field 'layer_norm_eps' must be a positive number"},
      {with("model_type", "x"), "config.json: unknown model_type 'x' (known: tern-reference, "},
      {with("model_type", drop), "field 'model_type' is missing"},
      {with("num_heads", 3), "num_heads 3 does not divide hidden_size 16"},
      {with("attention", json::array({{{"kind", "dense"}}})), "field 'attention' lists 1 layers, but num_layers is 2"},
      {with("attention", json::array({{{"kind", "dense"}}, {{"kind", "lsh"}}})),
       "field 'attention[1].kind' must be one of \"dense\", \"sliding\", \"chunked\", \"strided\", \"fixed\", \"compressive\", \"routing\", \"groups\"; got \"lsh\""},
      {with("attention", {{"kind", "sliding"}}), "field 'attention.window' is missing"},
      {with("attention", {{"kind", "sliding"}, {"window", 0}}), "field 'attention.window' must be a positive integer"},
      {with("attention", {{"kind", "chunked"}, {"chunk", 4}, {"chunks_before", -1}}),
       "field 'attention.chunks_before' must be an integer >= 0"},
      {with("attention", {{"kind", "fixed"}, {"block", 4}, {"summary", 5}}), "field 'attention.summary' 5 exceeds block 4"},
      {with("attention", {{"kind", "strided"}, {"stride", 4}, {"heads", "both"}}),
       "field 'attention.heads' must be one of \"merged\", \"split\""},
      {with("attention", {{"kind", 4}}), "field 'attention.kind' must be a string"},
      {with("attention", "dense"), "field 'attention' must be an object or a list"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    tern::Status st = convert_with("config" + std::to_string(i), cases[i].first, params);
    INFO("case " << i << ": " << st.message());
    REQUIRE_FALSE(st.ok());
    CHECK_THAT(st.message(), Catch::Contains(cases[i].second));
  }
}

TEST_CASE("convert: missing and misshapen tensors are named", "[converter]") {
  RefSpec s;
  const json config = make_config(s);
  TensorMap missing = random_params(s);
  missing.erase("layers.1.attn.q.weight");
  tern::Status st = convert_with("missing", config, missing);
  CHECK_THAT(st.message(), Catch::Equals("missing tensor 'layers.1.attn.q.weight'"));

  TensorMap wrong = random_params(s);
  wrong["embed.weight"] = {{256, 8}, tern::test::random_floats(256 * 8, 5)};
  st = convert_with("shape", config, wrong);
  CHECK_THAT(st.message(), Catch::Contains("tensor 'embed.weight' has shape [256, 8], expected [256, 16]"));

  TensorMap bias = random_params(s);
  bias["layers.0.mlp.fc2.bias"] = {{s.F}, tern::test::random_floats(size_t(s.F), 6)};
  st = convert_with("bias_shape", config, bias);
  CHECK_THAT(st.message(), Catch::Contains("'layers.0.mlp.fc2.bias' has shape [24], expected [16]"));

  TensorMap untied = random_params(s);
  st = convert_with("untied_missing_head", make_config([&] { RefSpec u = s; u.tied = false; return u; }()), untied);
  CHECK_THAT(st.message(), Catch::Contains("missing tensor 'lm_head.weight'"));
}

TEST_CASE("convert: a failed conversion leaves no file and keeps an existing one", "[converter]") {
  RefSpec s;
  TensorMap params = random_params(s);
  params.erase("final_norm.bias");
  const std::string dir = tern::test::scratch_dir("converter_atomic");
  write_checkpoint(dir, make_config(s), params);
  const std::string out = dir + "/out/model.tern";
  fs::create_directories(dir + "/out");

  CHECK_FALSE(tern::convert::convert_checkpoint(dir, out, {true}).ok());
  CHECK(fs::is_empty(dir + "/out"));

  tern::test::write_file(out, "previous model");
  CHECK_FALSE(tern::convert::convert_checkpoint(dir, out, {true}).ok());
  CHECK(tern::test::read_file(out) == "previous model");
  CHECK(std::distance(fs::directory_iterator(dir + "/out"), fs::directory_iterator()) == 1);

  // A success replaces it.
  write_checkpoint(dir, make_config(s), random_params(s));
  REQUIRE(tern::convert::convert_checkpoint(dir, out, {true}).ok());
  TernFile f(out);
  CHECK(std::distance(fs::directory_iterator(dir + "/out"), fs::directory_iterator()) == 1);

  // Into a directory that does not exist: an I/O error, nothing created.
  tern::Status st = tern::convert::convert_checkpoint(dir, dir + "/nowhere/model.tern", {true});
  CHECK(st.code() == TERN_IO_ERROR);
  CHECK_FALSE(fs::exists(dir + "/nowhere"));
}

TEST_CASE("writer: a tensor that fails while being written leaves nothing behind", "[converter]") {
  namespace cv = tern::convert;
  cv::GraphBuilder g;
  auto ids = g.add_value("ids", fb::DType::I32, 1);
  REQUIRE(g.add_input(ids.value()).ok());
  auto good = g.add_tensor("good", fb::DType::F32, {4, 2}, [](uint8_t* dst, size_t n) {
    std::memset(dst, 0x3f, n);
    return tern::Status::Ok();
  });
  REQUIRE(g.add_tensor("bad", fb::DType::F32, {3}, [](uint8_t*, size_t) { return tern::IoError("disk on fire"); }).ok());
  auto x = g.add_value("x", fb::DType::F32, 2);
  REQUIRE(g.add_op(fb::OpCode::EMBEDDING, "x", {ids.value()}, {x.value()}, {good.value()}, fb::EmbeddingParamsT{}).ok());
  REQUIRE(g.add_output(x.value()).ok());
  g.metadata().architecture = "test";

  const std::string dir = tern::test::scratch_dir("writer_fill_failure");
  tern::test::write_file(dir + "/m.tern", "keep me");
  tern::Status st = cv::write_model(g, dir + "/m.tern", {true});
  CHECK_THAT(st.message(), Catch::Contains("tensor 'bad'") && Catch::Contains("disk on fire"));
  CHECK(tern::test::read_file(dir + "/m.tern") == "keep me");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
}

TEST_CASE("graph builder: rejects inconsistent graphs", "[converter]") {
  namespace cv = tern::convert;
  auto fill = [](uint8_t*, size_t) { return tern::Status::Ok(); };
  cv::GraphBuilder g;
  auto ids = g.add_value("ids", fb::DType::I32, 1);
  auto x = g.add_value("x", fb::DType::F32, 4);
  auto y = g.add_value("y", fb::DType::F32, 4);
  auto w = g.add_tensor("w", fb::DType::F32, {4, 4}, fill);
  REQUIRE((ids.ok() && x.ok() && y.ok() && w.ok()));
  CHECK_FALSE(g.add_value("x", fb::DType::F32, 4).ok());                  // duplicate name
  CHECK_FALSE(g.add_value("z", fb::DType::F32, 0).ok());                  // zero width
  CHECK_FALSE(g.add_tensor("w", fb::DType::F32, {1}, fill).ok());          // duplicate tensor
  CHECK_FALSE(g.add_tensor("neg", fb::DType::F32, {-1}, fill).ok());       // bad shape
  // Reads x before anything writes it.
  CHECK_FALSE(g.add_op(fb::OpCode::LINEAR, "y", {x.value()}, {y.value()}, {w.value(), -1}, fb::LinearParamsT{}).ok());
  REQUIRE(g.add_input(ids.value()).ok());
  CHECK_FALSE(g.add_op(fb::OpCode::EMBEDDING, "e", {ids.value()}, {x.value()}, {7}, fb::EmbeddingParamsT{}).ok());
  CHECK_FALSE(g.add_op(fb::OpCode::EMBEDDING, "e", {ids.value()}, {x.value()}, {-1}, fb::EmbeddingParamsT{}).ok());
  CHECK_FALSE(g.add_op(fb::OpCode::EMBEDDING, "e", {ids.value()}, {x.value()}, {w.value()}, fb::AddParamsT{}).ok());
  REQUIRE(g.add_op(fb::OpCode::EMBEDDING, "e", {ids.value()}, {x.value()}, {w.value()}, fb::EmbeddingParamsT{}).ok());
  CHECK_FALSE(g.add_op(fb::OpCode::ADD, "a", {x.value(), x.value()}, {x.value()}, {}, fb::AddParamsT{}).ok());  // x twice
  CHECK_FALSE(g.add_op(fb::OpCode::ADD, "e", {x.value(), x.value()}, {y.value()}, {}, fb::AddParamsT{}).ok());  // op name
  REQUIRE(g.add_output(y.value()).ok());
  CHECK_FALSE(g.finish().ok());  // y is never written
}

TEST_CASE("decoder builder: a layer's ops follow its norm placement, widths taken from the weights", "[converter]") {
  namespace cv = tern::convert;
  auto fill = [](uint8_t*, size_t) { return tern::Status::Ok(); };
  for (cv::NormAt at : {cv::NormAt::kBefore, cv::NormAt::kAfter}) {
    cv::GraphBuilder g;
    cv::DecoderBuilder b(g);
    auto tensor = [&](const std::string& name, std::vector<int64_t> shape) {
      return g.add_tensor(name, fb::DType::F32, std::move(shape), fill).value();
    };
    const int32_t x = b.embedding("embed", b.ids().value(), tensor("embed", {10, 8})).value();
    cv::DecoderLayer layer;
    layer.norm_at = at;
    layer.attn_norm = {tensor("n1.w", {8}), tensor("n1.b", {8}), 1e-5f};
    layer.attn_out = {tensor("out.w", {8, 8}), -1};
    layer.mlp_norm = {tensor("n2.w", {8}), tensor("n2.b", {8}), 1e-5f};
    layer.mlp = {{tensor("up.w", {12, 8}), -1}, {tensor("down.w", {8, 12}), -1}, fb::ActivationKind::RELU};
    // 2 heads of 4: q | k | v [24, 8] -> ATTENTION [n, 8].
    const cv::AttentionOp attn{cv::attention_params(2, 4, 0.5f, fb::DenseT{}), {tensor("qkv.w", {24, 8}), -1}, {}};
    const cv::LayerNames names{"n1", "out", "r1", "n2", "up", "act", "down", "r2"};
    REQUIRE(b.layer("l.", names, layer, x, [&](int32_t in) { return b.attention("l.qkv", "l.attn", in, attn); }).ok());
    std::vector<std::string> ops;  // name:width, in order
    for (const cv::OpSpec& op : g.ops())
      ops.push_back(op.name + ":" + std::to_string(g.values()[size_t(op.outputs[0])].width));
    const std::vector<std::string> pre = {"embed:8", "l.n1:8",  "l.qkv:24", "l.attn:8", "l.out:8", "l.r1:8",
                                          "l.n2:8",  "l.up:12", "l.act:12", "l.down:8", "l.r2:8"};
    const std::vector<std::string> post = {"embed:8", "l.qkv:24", "l.attn:8", "l.out:8",  "l.r1:8", "l.n1:8",
                                           "l.up:12", "l.act:12", "l.down:8", "l.r2:8", "l.n2:8"};
    CHECK(ops == (at == cv::NormAt::kBefore ? pre : post));
  }
}

TEST_CASE("writer: a one-cluster adaptive embedding keeps its empty cutoffs, as files always had them", "[converter]") {
  // The object API's Pack leaves an empty vector out; the writer keeps it, so converted files stay byte-identical.
  namespace cv = tern::convert;
  cv::GraphBuilder g;
  cv::DecoderBuilder b(g);
  auto fill = [](uint8_t* dst, size_t n) {
    std::memset(dst, 0, n);
    return tern::Status::Ok();
  };
  const int32_t table = g.add_tensor("table", fb::DType::F32, {10, 8}, fill).value();
  const int32_t x = b.embedding("embed", b.ids().value(), table, -1, 2.0f).value();  // scaled: ADAPTIVE_EMBEDDING
  REQUIRE(b.output(x).ok());
  g.metadata().architecture = "test";
  const std::string path = tern::test::scratch_dir("writer_empty_cutoffs") + "/m.tern";
  REQUIRE(cv::write_model(g, path, {true}).ok());
  TernFile f(path);
  const auto* p = f.model->ops()->Get(0)->params_as_AdaptiveEmbeddingParams();
  REQUIRE(p != nullptr);
  CHECK(p->scale() == 2.0f);
  REQUIRE(p->cutoffs() != nullptr);
  CHECK(p->cutoffs()->size() == 0);
}

TEST_CASE("convert: every golden checkpoint converts to a valid file", "[converter]") {
  const fs::path goldens = tern::test::source_path("tests/goldens");
  if (!fs::is_directory(goldens)) return;  // generated by tools/reference/make_goldens.py
  for (const auto& entry : fs::directory_iterator(goldens)) {
    if (!fs::exists(entry.path() / "config.json")) continue;
    const std::string name = entry.path().filename().string();
    const std::string out = tern::test::scratch_dir("converter_golden_" + name) + "/model.tern";
    tern::convert::ConvertReport report;
    tern::Status st = tern::convert::convert_checkpoint(entry.path().string(), out, {true}, &report);
    INFO(name << ": " << st.message());
    REQUIRE(st.ok());
    CHECK(report.unused_tensors.empty());  // the importer reads every parameter the reference model has
    TernFile f(out);
    // Every importer names the architecture after the model_type it reads.
    const json config = json::parse(tern::test::read_file((entry.path() / "config.json").string()));
    CHECK(f.model->metadata()->architecture()->str() == config.at("model_type").get<std::string>());
    CHECK(f.value_name(f.model->outputs()->Get(0)) == "logits");
  }
}
