// SPDX-License-Identifier: MIT
// LINEAR in every weight form the file stores (float32, float16, int8, int4), with and without bias, at the row
// counts around the switch between the Vulkan matrix-vector shader (calls of a few rows) and the tiled GEMM: n = 1, 2,
// 3, 4, 8 and 9 cover 1, 2, R and R + 1 for R in {2, 4, 8}, and one-token appends run the generation path. in_dim is
// never a multiple of the Vulkan workgroups' width in units, and out 37 leaves a part-filled last workgroup. Each case
// also runs with the device's subgroup arithmetic turned off (the shared-memory reduction) and with W split over a
// lowered maxStorageBufferRange. The reference: ref::linear on the file's values widened (format/dequantize.h,
// value = q * scale), the weights as stored.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "compress.h"
#include "format/dequantize.h"
#include "format/model.h"
#include "op_cases.h"
#include "op_graph.h"
#include "ops/reference.h"
#include "test_support.h"

namespace tern::test {
namespace {

struct Form {
  const char* name;
  convert::WeightFormat format;
  int64_t group;  // -1: the format's default (int8: one scale per row, int4: 32)
  int64_t in;     // not a multiple of 16-byte units times any workgroup width
};

// int8 per-row scales at in 96 and groups of 32 at in 160 (several scales a row); int4 blocks of 32 (its default).
const Form kForms[] = {
    {"float32", convert::WeightFormat::kF32, -1, 37}, {"float32", convert::WeightFormat::kF32, -1, 100},
    {"float16", convert::WeightFormat::kF16, -1, 37}, {"float16", convert::WeightFormat::kF16, -1, 104},
    {"int8", convert::WeightFormat::kInt8, -1, 96},   {"int8", convert::WeightFormat::kInt8, 32, 160},
    {"int4", convert::WeightFormat::kInt4, -1, 96},   {"int4", convert::WeightFormat::kInt4, -1, 160}};

constexpr int64_t kRows = 40, kOut = 37;
const int64_t kCallRows[] = {1, 2, 3, 4, 8, 9};

// The model's tensor `name` widened to float32.
std::vector<float> widened(const Model& model, const std::string& name) {
  for (const TensorInfo& t : model.tensors()) {
    if (t.name != name) continue;
    std::vector<float> storage;
    const float* v = float_values(t, &storage);
    return std::vector<float>(v, v + t.numel());
  }
  FAIL("no tensor '" << name << "' in the model");
  return {};
}

BuiltCase build_linear(const Form& form, bool bias, uint32_t seed) {
  OpGraph g = start_graph(kRows, form.in, seed);
  const int32_t wt = add_constant(g, "w", {kOut, form.in}, random_floats(size_t(kOut * form.in), seed + 1));
  const std::vector<float> b = random_floats(size_t(kOut), seed + 2);
  const int32_t bt = bias ? add_constant(g, "b", {kOut}, b) : -1;
  const int32_t y = g.graph.add_value("y", fb::DType::F32, kOut).value();
  REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, bt}, fb::LinearParamsT{}).ok());
  const std::string path = write_graph(g, y, "linear_" + std::to_string(seed), 64, [&](convert::GraphBuilder& graph) {
    if (form.format == convert::WeightFormat::kF32) return;
    convert::CompressOptions co;
    co.format = form.format;
    co.group = form.group;
    convert::CompressReport report;
    REQUIRE(convert::compress_weights(graph, co, &report).ok());
    REQUIRE(report.compressed == 2);  // the table and W
  });
  auto loaded = Model::load_file(path);
  REQUIRE(loaded.ok());
  const std::vector<float> table = widened(*loaded.value(), "table"), w = widened(*loaded.value(), "w");
  BuiltCase built;
  REQUIRE(tern_model_load(path.c_str(), &built.model) == TERN_OK);
  built.width = kOut;

  auto run_of = [&](int64_t n, int64_t segment, uint32_t ids_seed) {
    CaseRun run;
    run.ids = random_ids(n, kRows, ids_seed);
    run.segment = segment;
    std::vector<float> x(size_t(n * form.in));
    ref::embedding(table.data(), form.in, run.ids.data(), n, x.data());
    run.want.resize(size_t(n * kOut));
    ref::linear(x.data(), n, form.in, w.data(), bias ? b.data() : nullptr, kOut, run.want.data());
    return run;
  };
  // Every call size through one session (both shaders recorded), then one-token appends.
  CaseSession all;
  all.max_tokens = 16;
  all.max_batch = 9;
  for (int64_t n : kCallRows) all.runs.push_back(run_of(n, 0, seed + 10 + uint32_t(n)));
  all.runs.push_back(run_of(6, 1, seed + 30));
  built.sessions.push_back(all);
  // The same without subgroup arithmetic (Vulkan: the shared-memory tree), and with W split over a lowered range
  // (the table, read by EMBEDDING, splits too).
  CaseSession fallback = all;
  fallback.device_env = {{"TERN_VULKAN_NO_SUBGROUP_ARITHMETIC", "1"}};
  fallback.on = On::kDeviceOnly;
  built.sessions.push_back(fallback);
  CaseSession split;
  split.max_tokens = 16;
  split.max_batch = 9;
  split.runs = {run_of(1, 0, seed + 40), run_of(2, 0, seed + 41), run_of(9, 0, seed + 42), run_of(5, 1, seed + 43)};
  // The range holds x and y for 9 rows ([9, in] and [9, 37] floats, plus the alignment a binding may start below
  // its data), so W [37, in] (float32 rows of in * 4 bytes or narrower) takes at least 4 parts.
  const int64_t range = 9 * std::max<int64_t>(form.in, kOut) * 4 + 64;
  split.device_env = {{"TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE", std::to_string(range)}};
  split.on = On::kDeviceOnly;
  built.sessions.push_back(split);
  return built;
}

}  // namespace

void add_linear_cases(std::vector<OpCase>& out) {
  uint32_t seed = 700;
  for (const Form& form : kForms) {
    for (bool bias : {true, false}) {
      OpCase c;
      c.name = std::string("linear ") + form.name + (form.group > 0 ? " group " + std::to_string(form.group) : "") +
               " in=" + std::to_string(form.in) + " out=37 " + (bias ? "with bias" : "without bias");
      c.group = std::string("linear ") + form.name;
      c.tags = "[ops][linear]";
      const bool int_activations =
          form.format == convert::WeightFormat::kInt8 || form.format == convert::WeightFormat::kInt4;
      if (int_activations) {
        // The CPU quantises activation rows to int8 in blocks of 32 (compressed-weights.md): its error is that
        // rounding's, about 2^-8 of each block's largest value. Vulkan widens the weights and sums in float32.
        c.cpu_tolerance = 1e-2;
        c.vulkan_vs_cpu_tolerance = 1e-2;
      }
      c.build = [form, bias, seed] { return build_linear(form, bias, seed); };
      seed += 100;
      out.push_back(c);
    }
  }
}

}  // namespace tern::test
