// SPDX-License-Identifier: MIT
// Transformer-XL's ops: the loader's checks of ATTENTION of kind RelativeXL (ops/relative_xl.h) and of
// ADAPTIVE_LOG_SOFTMAX (ops/adaptive.h). The ops against their reference kernels (RelativeXL segment after segment
// with the memory carried and its state; ADAPTIVE_EMBEDDING with ADAPTIVE_LOG_SOFTMAX, ids outside the vocabulary
// refused) are cases of the op case table (support/op_cases.h, test_backend_ops), on every backend.
#include <catch2/catch.hpp>
#include <functional>

#include "op_graph.h"
#include "test_support.h"
#include "writer.h"

using namespace tern;
using tern::test::random_floats;

TEST_CASE("relative XL and adaptive ops: the loader checks their weights and params", "[transfo_xl]") {
  struct Case {
    std::string what, message;
    std::function<void(test::OpGraph&, int32_t ids)> build;  // adds the op under test, output value "y"
  };
  auto xl = [](int32_t mem_len, bool same_length, std::vector<int64_t> r_shape) {
    return [=](test::OpGraph& g, int32_t) {
      const int32_t qkv = test::add_constant(g, "qkv", {48, 16}, random_floats(48 * 16, 1));
      const int64_t r_count = r_shape[0] * r_shape[1];
      const int32_t r = test::add_constant(g, "r_net", r_shape, random_floats(size_t(r_count), 2));
      const int32_t b = test::add_constant(g, "bias", {2, 8}, random_floats(16, 3));
      const int32_t y = g.graph.add_value("y", fb::DType::F32, 16).value();
      const fb::AttentionParamsT p = convert::attention_params(2, 8, 0.35f, fb::RelativeXLT{{}, mem_len, 0, same_length, 1e-5f});
      REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {qkv, r, b, b}, p).ok());
      REQUIRE(g.graph.add_output(y).ok());
    };
  };
  auto softmax = [](std::vector<int64_t> cutoffs, int64_t V, std::vector<int64_t> w1_shape) {
    return [=](test::OpGraph& g, int32_t) {
      const int32_t cw = test::add_constant(g, "cw", {1, 16}, random_floats(16, 4));
      const int32_t w0 = test::add_constant(g, "w0", {10, 16}, random_floats(160, 5));
      const int32_t w1 = test::add_constant(g, "w1", w1_shape, random_floats(size_t(w1_shape[0] * w1_shape[1]), 6));
      const int32_t y = g.graph.add_value("y", fb::DType::F32, V).value();
      REQUIRE(g.graph.add_op(fb::OpCode::ADAPTIVE_LOG_SOFTMAX, "sm", {g.x}, {y}, {cw, -1, w0, -1, -1, w1, -1, -1},
                             fb::AdaptiveLogSoftmaxParamsT{{}, cutoffs}).ok());
      REQUIRE(g.graph.add_output(y).ok());
    };
  };
  const std::vector<Case> cases = {
      {"r_net shape", "has shape [16, 15], expected [16, 16]", xl(4, false, {16, 15})},
      {"same_length without memory", "same_length without memory", xl(0, true, {16, 16})},
      {"cutoffs order", "cutoffs must increase strictly", softmax({10, 10}, 20, {10, 16})},
      {"tail weight rows", "expected [10 or 20, width]", softmax({10}, 20, {9, 16})},
      {"tail width without projection", "has width 8 and no projection", softmax({10}, 20, {10, 8})},
  };
  for (const Case& c : cases) {
    test::OpGraph g = test::start_graph(10, 16, 7);
    c.build(g, 0);
    g.graph.metadata().architecture = "op-test";
    g.graph.metadata().vocab_kind = fb::VocabKind::EXTERNAL;
    g.graph.metadata().vocab_size = g.graph.values()[size_t(g.graph.outputs()[0])].width;
    const std::string path = test::scratch_dir("transfo_xl_bad") + "/model.tern";
    REQUIRE(convert::write_model(g.graph, path, {true}).ok());
    tern_model* model = nullptr;
    INFO(c.what);
    CHECK(tern_model_load(path.c_str(), &model) != TERN_OK);
    CHECK_THAT(std::string(tern_last_error()), Catch::Contains(c.message));
    CHECK(model == nullptr);
  }
}
