// SPDX-License-Identifier: MIT
// Compressed weights (tern-convert --weights f16|int8|int4) on every golden checkpoint of every family, on each
// backend. What a compressed model computes is defined as the float32 model whose weights are the dequantised ones
// (format/dequantize.h: value = q * scale): each case runs the compressed model and that twin (the float32 conversion
// with the dequantised values written over its tensors) and compares their logits. Float16 weights and the Vulkan
// shaders (which widen weights, activations stay float32) match the twin to float32 rounding; the CPU's int8 and
// int4 kernels also round activations to int8 in blocks of 32 (their arithmetic is checked exactly against a
// double reference in test_quant_kernels), which the tolerance covers. The error against the float32 model (the
// quantisation itself) is a property of the format, measured on the shipped model in docs/compressed-weights.md's table.
#include <catch2/catch.hpp>

#include <filesystem>

#include "cli.h"
#include "convert.h"
#include "op_graph.h"
#include "tern/tern.h"
#include "test_support.h"

using tern::test::relative_error;

namespace {

// Every golden with its ids (capped so that lavapipe's runs stay short); all families.
const char* const kCases[] = {
    "pre_tied_learned_gelu", "post_untied_sinusoidal_relu", "pre_untied_nobias_gelutanh", "tiny_f16",
    "sliding_w64", "chunked_c128", "strided_merged", "strided_split", "fixed_merged", "fixed_split", "mixed_layers",
    "adaptive_span_fixed_span", "adaptive_span_learned", "adaptive_span_long_block", "compressive_conv_mean",
    "compressive_max_conv_post", "reformer_hashes_int", "reformer_learned_positions", "reformer_mixed_factorized",
    "reformer_short_unchunked", "reformer_wrapping_rounds", "routing_mixed", "routing_only", "transfo_xl_adaptive",
    "transfo_xl_div1_proj", "transfo_xl_plain", "groups_strided_fixed", "groups_routing_sliding"};
constexpr int64_t kMaxTokens = 256;

std::string convert(const std::string& dir, const std::string& out, tern::convert::WeightFormat format) {
  tern::convert::ConvertOptions opts;
  opts.quiet = true;
  opts.weights.format = format;
  const tern::Status st = tern::convert::convert_checkpoint(dir, out, opts);
  INFO(out << ": " << st.message());
  REQUIRE(st.ok());
  return out;
}

std::vector<float> forward(tern_backend backend, const std::string& path, const std::vector<int32_t>& ids,
                           int threads) {
  tern_model* model = nullptr;
  INFO(path << ": " << tern_last_error());
  REQUIRE(tern_model_load(path.c_str(), &model) == TERN_OK);
  const auto n = int64_t(ids.size());
  // forward_only: Vulkan runs the routing families on whole sequences only.
  tern_session* s = tern::test::make_forward_session_on(backend, model, threads, n, n);
  const int64_t vocab = tern_session_vocab_size(s);
  std::vector<float> logits(size_t(n * vocab));
  INFO(tern_session_last_error(s));
  REQUIRE(tern_session_forward(s, ids.data(), n, logits.data()) == TERN_OK);
  tern_session_free(s);
  tern_model_free(model);
  return logits;
}

}  // namespace

TEST_CASE("compressed weights: every family and format runs as its dequantised float32 twin", "[compressed][vulkan]") {
  TERN_EACH_BACKEND(backend);
  using tern::convert::WeightFormat;
  for (const char* name : kCases) {
    const std::string dir = tern::test::source_path(std::string("tests/goldens/") + name);
    const std::string scratch = tern::test::scratch_dir(std::string("compressed_") + name);
    std::vector<int32_t> ids;
    std::string error;
    REQUIRE(tern::cli::read_ids_json(dir + "/ids.json", &ids, &error));
    if (int64_t(ids.size()) > kMaxTokens) ids.resize(size_t(kMaxTokens));
    const std::string f32 = convert(dir, scratch + "/f32.tern", WeightFormat::kF32);
    const std::vector<float> plain = forward(TERN_BACKEND_CPU, f32, ids, 1);
    double int8_weight_error = 0;  // the int8 model against the float32 one: what int8 rounding costs here
    for (WeightFormat format : {WeightFormat::kF16, WeightFormat::kInt8, WeightFormat::kInt4}) {
      const std::string fname = tern::convert::weight_format_name(format);
      const std::string comp = convert(dir, scratch + "/" + fname + ".tern", format);
      int changed = 0;
      const std::string twin = scratch + "/" + fname + "_twin.tern";
      tern::test::write_dequantised_twin(f32, comp, twin, &changed);
      CHECK(changed > 0);  // every case has matrices large enough to compress
      const std::vector<float> want = forward(TERN_BACKEND_CPU, twin, ids, 1);
      if (format == WeightFormat::kInt8) int8_weight_error = relative_error(want.data(), plain.data(), want.size());
      // The CPU's int8 and int4 kernels round activations to int8 in blocks of 32, at least as finely as int8
      // weights are rounded per row: their error against the twin stays of the order of the int8 weights' own
      // (measured above on the same case), which a wrong scale, row or group would exceed many times over.
      const bool int_activations = backend == TERN_BACKEND_CPU && format != WeightFormat::kF16;
      const double tolerance = int_activations ? 1.5 * int8_weight_error : 1e-4;
      for (int threads : {1, 2}) {
        if (backend == TERN_BACKEND_VULKAN && threads == 2) break;
        const std::vector<float> got = forward(backend, comp, ids, threads);
        const double vs_twin = relative_error(got.data(), want.data(), got.size());
        const double vs_f32 = relative_error(got.data(), plain.data(), got.size());
        INFO(name << " " << fname << " threads " << threads << ": " << changed << " tensors compressed; vs twin "
                  << vs_twin << " (tolerance " << tolerance << "), vs float32 model " << vs_f32);
        CHECK(vs_twin <= tolerance);
      }
    }
  }
}
