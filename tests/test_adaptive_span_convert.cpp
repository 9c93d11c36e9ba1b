// SPDX-License-Identifier: MIT
// tern-convert on tiny random facebookresearch/adaptive-span checkpoints (converter/adaptive-span.md): the graph, the
// parameter names with and without the DataParallel "module." prefix, and the errors for bad configs and tensors.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert.h"
#include "tern/tern.h"
#include "tern_generated.h"
#include "test_support.h"

namespace fb = tern::fb;
using nlohmann::json;

namespace {

struct SpanSpec {
  int64_t V = 40, d = 16, H = 2, F = 24, N = 2, L = 12, R = 4, M = 8;
  bool adaptive = true, cache = true;
  std::string prefix = "module.";
};

json make_config(const SpanSpec& s) {
  return {{"model_type", "adaptive-span"},
          {"vocab_size", s.V},
          {"model_params",
           {{"hidden_size", s.d}, {"inner_hidden_size", s.F}, {"nb_layers", s.N}, {"block_size", s.M},
            {"nb_heads", s.H}, {"attn_span", s.L}, {"dropout", 0.3}}},
          {"adapt_span_params",
           {{"adapt_span_enabled", s.adaptive}, {"adapt_span_ramp", s.R}, {"adapt_span_cache", s.cache},
            {"adapt_span_loss", 2e-6}}}};
}

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
using TensorMap = std::map<std::string, Tensor>;

// The parameters of the reference codebase's TransformerSeq, as its state_dict() names them.
TensorMap random_params(const SpanSpec& s) {
  std::map<std::string, std::vector<int64_t>> shapes;
  shapes["in_emb.weight"] = shapes["out_emb.weight"] = {s.V, s.d};
  shapes["out_emb.bias"] = {s.V};
  shapes["key_pe"] = {1, s.d / s.H, s.L};
  for (int64_t i = 0; i < s.N; ++i) {
    const std::string l = "layers." + std::to_string(i) + ".";
    for (const char* p : {"proj_query", "proj_key", "proj_val", "proj_out"}) shapes[l + "attn." + p + ".weight"] = {s.d, s.d};
    if (s.adaptive) shapes[l + "attn.attn.adaptive_span._mask.current_val"] = {s.H, 1, 1};
    for (const char* n : {"norm1", "norm2"}) shapes[l + n + ".weight"] = shapes[l + n + ".bias"] = {s.d};
    shapes[l + "ff.fc1.weight"] = {s.F, s.d};
    shapes[l + "ff.fc1.bias"] = {s.F};
    shapes[l + "ff.fc2.weight"] = {s.d, s.F};
    shapes[l + "ff.fc2.bias"] = {s.d};
  }
  TensorMap t;
  uint32_t seed = 70;
  for (const auto& [name, shape] : shapes) {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    t[s.prefix + name] = {shape, tern::test::random_floats(n, seed++, name.find("current_val") != std::string::npos ? 0.0f : -1.0f, 1.0f)};
  }
  for (int64_t i = 0; s.adaptive && i < s.N; ++i) {  // the mask's buffer: linspace(1 - L, 0, L)
    Tensor& m = t[s.prefix + "layers." + std::to_string(i) + ".attn.attn.adaptive_span._mask.mask_template"];
    m.shape = {s.L};
    for (int64_t l = 0; l < s.L; ++l) m.values.push_back(float(1 - s.L + l));
  }
  return t;
}

std::string safetensors_bytes(const TensorMap& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + 4 * t.values.size()}}};
    data.append(reinterpret_cast<const char*>(t.values.data()), 4 * t.values.size());
  }
  std::string h = header.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(h.size()) >> (8 * i)) & 0xff);
  return out + h + data;
}

// Writes the checkpoint under a fresh scratch directory and converts it to <dir>/model.tern; returns the status.
tern::Status convert_with(const std::string& name, const json& config, const TensorMap& tensors,
                          tern::convert::ConvertReport* report = nullptr, std::string* out_path = nullptr) {
  const std::string dir = tern::test::scratch_dir("adaptive_span_convert_" + name);
  tern::test::write_file(dir + "/config.json", config.dump(2));
  tern::test::write_file(dir + "/model.safetensors", safetensors_bytes(tensors));
  if (out_path) *out_path = dir + "/model.tern";
  return tern::convert::convert_checkpoint(dir, dir + "/model.tern", {true}, report);
}

std::vector<float> tensor_floats(const std::string& file, const fb::Model* m, int32_t index) {
  const uint32_t fb_size = *reinterpret_cast<const uint32_t*>(file.data());
  const uint64_t data_start = (uint64_t(fb_size) + 4 + m->data_alignment() - 1) / m->data_alignment() * m->data_alignment();
  const fb::Tensor* t = m->tensors()->Get(uint32_t(index));
  std::vector<float> v(size_t(t->size() / 4));
  std::memcpy(v.data(), file.data() + data_start + t->offset(), size_t(t->size()));
  return v;
}

}  // namespace

TEST_CASE("convert adaptive-span: graph, shared key_pe, learned spans, names with and without module.",
          "[converter][adaptive_span]") {
  for (bool adaptive : {true, false}) {
    for (std::string prefix : {"", "module."}) {
      SpanSpec s;
      s.adaptive = adaptive;
      s.prefix = prefix;
      const TensorMap params = random_params(s);
      const std::string name = std::string(adaptive ? "learned" : "fixed") + (prefix.empty() ? "" : "_module");
      tern::convert::ConvertReport report;
      std::string path;
      tern::Status st = convert_with(name, make_config(s), params, &report, &path);
      INFO(name << ": " << st.message());
      REQUIRE(st.ok());
      CHECK(report.unused_tensors.empty());  // mask_template is read (and checked) too

      tern_model* loaded = nullptr;
      INFO(tern_last_error());
      REQUIRE(tern_model_load(path.c_str(), &loaded) == TERN_OK);
      tern_model_free(loaded);
      const std::string file = tern::test::read_file(path);
      const fb::Model* m = fb::GetSizePrefixedModel(file.data());
      CHECK(m->metadata()->architecture()->str() == "adaptive-span");
      CHECK(m->metadata()->vocab()->kind() == fb::VocabKind::EXTERNAL);
      CHECK(m->metadata()->vocab()->size() == s.V);
      CHECK(m->metadata()->max_context() == 0);

      // in_emb, then per layer qkv, attn, attn_out, resid, norm1, fc1, relu, fc2, resid, norm2; out_emb, log-softmax.
      std::vector<fb::OpCode> codes;
      for (const fb::Op* op : *m->ops()) codes.push_back(op->code());
      std::vector<fb::OpCode> want = {fb::OpCode::EMBEDDING};
      for (int64_t i = 0; i < s.N; ++i) {
        for (fb::OpCode c : {fb::OpCode::LINEAR, fb::OpCode::ATTENTION, fb::OpCode::LINEAR, fb::OpCode::ADD,
                             fb::OpCode::LAYER_NORM, fb::OpCode::LINEAR, fb::OpCode::ACTIVATION, fb::OpCode::LINEAR,
                             fb::OpCode::ADD, fb::OpCode::LAYER_NORM})
          want.push_back(c);
      }
      want.push_back(fb::OpCode::LINEAR);
      want.push_back(fb::OpCode::LOG_SOFTMAX);
      CHECK(codes == want);

      int32_t key_pe = -1;
      for (int64_t i = 0; i < s.N; ++i) {
        const fb::Op* attn = m->ops()->Get(uint32_t(2 + 10 * i));
        const auto* p = attn->params_as_AttentionParams();
        REQUIRE(p->kind_type() == fb::AttentionKind::AdaptiveSpan);
        CHECK(p->kind_as_AdaptiveSpan()->max_span() == s.L);
        CHECK(p->kind_as_AdaptiveSpan()->ramp() == (adaptive ? s.R : 0));
        CHECK(p->heads() == s.H);
        CHECK(p->scale() == Approx(1.0 / std::sqrt(double(s.d / s.H))));
        REQUIRE(attn->weights()->size() == 2);
        if (i == 0) key_pe = attn->weights()->Get(0);
        CHECK(attn->weights()->Get(0) == key_pe);  // one key_pe for every layer, stored once
        const std::string z = prefix + "layers." + std::to_string(i) + ".attn.attn.adaptive_span._mask.current_val";
        if (adaptive) {
          REQUIRE(attn->weights()->Get(1) >= 0);
          CHECK(m->tensors()->Get(uint32_t(attn->weights()->Get(1)))->name()->str() == z);
          CHECK(tensor_floats(file, m, attn->weights()->Get(1)) == params.at(z).values);
        } else {
          CHECK(attn->weights()->Get(1) == -1);
        }
      }
      const fb::Tensor* pe = m->tensors()->Get(uint32_t(key_pe));
      CHECK(std::vector<int64_t>(pe->shape()->begin(), pe->shape()->end()) == std::vector<int64_t>{s.d / s.H, s.L});
      CHECK(tensor_floats(file, m, key_pe) == params.at(prefix + "key_pe").values);
      // qkv.weight is proj_query, proj_key, proj_val stacked by rows.
      const fb::Op* qkv = m->ops()->Get(1);
      std::vector<float> stacked;
      for (const char* part : {"proj_query", "proj_key", "proj_val"}) {
        const auto& v = params.at(prefix + "layers.0.attn." + part + ".weight").values;
        stacked.insert(stacked.end(), v.begin(), v.end());
      }
      CHECK(tensor_floats(file, m, qkv->weights()->Get(0)) == stacked);
    }
  }
}

TEST_CASE("convert adaptive-span: config errors name the field", "[converter][adaptive_span]") {
  SpanSpec s;
  const TensorMap params = random_params(s);
  const json good = make_config(s);
  auto with = [&](const std::string& group, const std::string& key, const json& v) {
    json c = good;
    json& target = group.empty() ? c : c[group];
    if (v.is_discarded()) target.erase(key); else target[key] = v;
    return c;
  };
  const json drop = json(json::value_t::discarded);
  const std::vector<std::pair<json, std::string>> cases = {
      {with("", "model_params", drop), "config.json: field 'model_params' is missing"},
      {with("", "adapt_span_params", drop), "config.json: field 'adapt_span_params' is missing"},
      {with("", "adapt_span_params", 3), "field 'adapt_span_params' must be an object, got 3"},
      {with("", "vocab_size", drop), "field 'vocab_size' is missing"},
      {with("model_params", "hidden_size", drop), "field 'model_params.hidden_size' is missing"},
      {with("model_params", "attn_span", 0), "field 'model_params.attn_span' must be a positive integer"},
      {with("model_params", "nb_layers", "2"), "field 'model_params.nb_layers' must be a positive integer"},
      {with("model_params", "nb_heads", 3), "field 'model_params.nb_heads' 3 does not divide hidden_size 16"},
      {with("adapt_span_params", "adapt_span_enabled", "yes"), "field 'adapt_span_params.adapt_span_enabled' must be true or false"},
      {with("adapt_span_params", "adapt_span_ramp", drop), "field 'adapt_span_params.adapt_span_ramp' is missing"},
      {with("adapt_span_params", "adapt_span_ramp", -4), "field 'adapt_span_params.adapt_span_ramp' must be a positive integer"},
      {with("", "pers_mem_params", {{"pers_mem_size", 16}}), "persistent memory (pers_mem_params.pers_mem_size > 0) is not supported"},
      {with("", "adapt_io_params", {{"adapt_io_enabled", true}}), "adaptive input/output (adapt_io_params.adapt_io_enabled) is not supported"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    tern::Status st = convert_with("config" + std::to_string(i), cases[i].first, params);
    INFO("case " << i << ": " << st.message());
    REQUIRE_FALSE(st.ok());
    CHECK_THAT(st.message(), Catch::Contains(cases[i].second));
  }
}

TEST_CASE("convert adaptive-span: missing and misshapen tensors are named, with and without module.",
          "[converter][adaptive_span]") {
  for (std::string prefix : {"", "module."}) {
    SpanSpec s;
    s.prefix = prefix;
    const json config = make_config(s);
    INFO("prefix '" << prefix << "'");

    TensorMap missing = random_params(s);
    missing.erase(prefix + "layers.1.attn.proj_key.weight");
    CHECK_THAT(convert_with("missing", config, missing).message(),
               Catch::Equals("missing tensor '" + prefix + "layers.1.attn.proj_key.weight'"));

    TensorMap no_span = random_params(s);
    no_span.erase(prefix + "layers.0.attn.attn.adaptive_span._mask.current_val");
    CHECK_THAT(convert_with("no_span", config, no_span).message(),
               Catch::Equals("missing tensor '" + prefix + "layers.0.attn.attn.adaptive_span._mask.current_val'"));

    TensorMap pe = random_params(s);
    pe[prefix + "key_pe"] = {{1, 8, 11}, tern::test::random_floats(88, 3)};
    CHECK_THAT(convert_with("key_pe", config, pe).message(),
               Catch::Contains("tensor '" + prefix + "key_pe' has shape [1, 8, 11], expected [1, 8, 12]"));

    TensorMap heads = random_params(s);
    heads[prefix + "layers.1.attn.attn.adaptive_span._mask.current_val"] = {{3, 1, 1}, {0.1f, 0.2f, 0.3f}};
    CHECK_THAT(convert_with("heads", config, heads).message(),
               Catch::Contains("has shape [3, 1, 1], expected [2, 1, 1]"));

    TensorMap templ = random_params(s);
    templ[prefix + "layers.0.attn.attn.adaptive_span._mask.mask_template"].values[3] += 0.5f;
    CHECK_THAT(convert_with("template", config, templ).message(),
               Catch::Contains("mask_template' is not linspace(1 - attn_span, 0, attn_span)"));
  }
  // Prefixed and bare names are not mixed: module.in_emb.weight decides for every tensor.
  SpanSpec s;
  TensorMap mixed = random_params(s);
  mixed["layers.0.norm1.weight"] = mixed.at("module.layers.0.norm1.weight");
  mixed.erase("module.layers.0.norm1.weight");
  CHECK_THAT(convert_with("mixed", make_config(s), mixed).message(),
             Catch::Equals("missing tensor 'module.layers.0.norm1.weight'"));
}
