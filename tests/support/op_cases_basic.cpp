// SPDX-License-Identifier: MIT
// Cases for the plain ops: embedding, positions (learned, sinusoidal, axial), layer_norm, linear, activations, add,
// log_softmax and concat. Each model is ids -> EMBEDDING(random table) -> op(s); sizes stay small for lavapipe.
#include <catch2/catch.hpp>
#include <string>

#include "op_cases.h"
#include "op_graph.h"
#include "ops/reference.h"
#include "test_support.h"

namespace tern::test {
namespace {

// The embedding's rows for ids: the op's input [n, d].
std::vector<float> gather_rows(const OpGraph& g, const std::vector<int32_t>& ids) {
  std::vector<float> x(ids.size() * size_t(g.d));
  ref::embedding(g.table.data(), g.d, ids.data(), int64_t(ids.size()), x.data());
  return x;
}

// One session per cut, max_tokens n and max_batch the segment, each with the one run: a stateless op gives the
// one-pass reference however it is cut.
std::vector<CaseSession> each_cut(const std::vector<int32_t>& ids, const std::vector<float>& want,
                                  std::vector<int64_t> segments) {
  std::vector<CaseSession> out;
  for (int64_t segment : segments) {
    CaseSession s;
    s.max_tokens = int64_t(ids.size());
    s.max_batch = segment;
    s.runs.push_back({ids, segment, want});
    out.push_back(std::move(s));
  }
  return out;
}

const char* activation_name(fb::ActivationKind kind) {
  switch (kind) {
    case fb::ActivationKind::RELU: return "relu";
    case fb::ActivationKind::GELU_ERF: return "gelu_erf";
    case fb::ActivationKind::GELU_TANH: return "gelu_tanh";
    case fb::ActivationKind::SILU: return "silu";
    case fb::ActivationKind::SOFTCAP: return "softcap";
  }
  return "?";  // a value past the schema's
}

void add_embedding(std::vector<OpCase>& out) {
  OpCase c;
  c.name = "embedding rows=30 d=24";
  c.group = "embedding and positions";
  c.tags = "[ops]";
  c.cpu_tolerance = c.vulkan_tolerance = 0;  // a gather: exact on every backend
  c.build = [] {
    const int64_t rows = 30, d = 24, n = 40;
    OpGraph g = start_graph(rows, d, 14);
    BuiltCase b{finish_and_load(g, g.x, "embedding", n), d, {}};
    std::vector<int32_t> ids = random_ids(n, rows, 16);
    ids[0] = 0;
    ids[1] = int32_t(rows - 1);  // the table's first and last rows
    b.sessions = each_cut(ids, gather_rows(g, ids), {0, 7});
    return b;
  };
  out.push_back(c);
}

void add_positions(std::vector<OpCase>& out) {
  for (auto kind : {fb::PositionKind::LEARNED, fb::PositionKind::SINUSOIDAL}) {
    OpCase c;
    c.name = std::string("position ") + (kind == fb::PositionKind::LEARNED ? "learned" : "sinusoidal") + " d=24";
    c.group = "embedding and positions";
    c.tags = "[ops]";
    c.build = [kind] {
      const int64_t rows = 30, d = 24, n = 40;
      OpGraph g = start_graph(rows, d, 14);
      const std::vector<float> pe = random_floats(size_t(n * d), 15);
      std::vector<int32_t> weights = {-1};  // sinusoidal positions have no table
      if (kind == fb::PositionKind::LEARNED) weights[0] = add_constant(g, "pe", {n, d}, pe);
      const int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
      REQUIRE(g.graph.add_op(fb::OpCode::POSITION, "pos", {g.x}, {y}, weights, fb::PositionParamsT{{}, kind, n}).ok());
      BuiltCase b{finish_and_load(g, y, "position" + std::to_string(int(kind)), n), d, {}};
      const std::vector<int32_t> ids = random_ids(n, rows, 16);
      const std::vector<float> x = gather_rows(g, ids);
      std::vector<float> want(size_t(n * d));
      ref::position(kind, pe.data(), d, 0, n, x.data(), want.data());
      b.sessions = each_cut(ids, want, {0, 7});  // appends of 7: positions continue across calls
      return b;
    };
    out.push_back(c);
  }
  // CONCAT(x, POSITION AXIAL(x)), as Reformer feeds it: ids -> EMBEDDING [n, 12] -> POSITION(AXIAL rows [5, 4],
  // cols [7, 8]) -> p; CONCAT(x, p) -> [n, 24]. Copies and one add: exact.
  OpCase c;
  c.name = "concat with axial positions rows=5x4 cols=7x8";
  c.group = "embedding and positions";
  c.tags = "[ops][reformer]";
  c.cpu_tolerance = c.vulkan_tolerance = 0;
  c.build = [] {
    const int64_t n = 35, table_rows = 30;
    OpGraph g = start_graph(table_rows, 12, 21);
    const std::vector<float> rows = random_floats(5 * 4, 22), cols = random_floats(7 * 8, 23);
    const int32_t r = add_constant(g, "rows", {5, 4}, rows);
    const int32_t k = add_constant(g, "cols", {7, 8}, cols);
    const int32_t p = g.graph.add_value("p", fb::DType::F32, 12).value();
    fb::PositionParamsT pos;
    pos.kind = fb::PositionKind::AXIAL;
    pos.max_positions = 35;
    REQUIRE(g.graph.add_op(fb::OpCode::POSITION, "pos", {g.x}, {p}, {r, k}, pos).ok());
    const int32_t y = g.graph.add_value("y", fb::DType::F32, 24).value();
    REQUIRE(g.graph.add_op(fb::OpCode::CONCAT, "cat", {g.x, p}, {y}, {}, fb::ConcatParamsT{}).ok());
    BuiltCase b{finish_and_load(g, y, "concat_axial", n), 24, {}};
    const std::vector<int32_t> ids = random_ids(n, table_rows, 24);
    const std::vector<float> x = gather_rows(g, ids);
    std::vector<float> pe(size_t(n * 12)), want(size_t(n * 24));
    ref::axial_position(rows.data(), 4, cols.data(), 7, 8, 0, n, x.data(), pe.data());
    ref::concat(x.data(), 12, pe.data(), 12, n, want.data());
    // Appends only (one of all 35, then 6 at a time), in a session of max_tokens n; token by token on the CPU.
    for (int64_t segment : {n, int64_t(6), int64_t(1)}) {
      CaseSession s;
      s.max_tokens = n;
      s.runs.push_back({ids, segment, want});
      if (segment == 1) s.on = On::kCpuOnly;
      b.sessions.push_back(std::move(s));
    }
    return b;
  };
  out.push_back(c);
}

void add_layer_norms(std::vector<OpCase>& out) {
  for (int64_t d : {7, 64, 300}) {
    for (bool beta : {true, false}) {
      OpCase c;
      c.name = "layer_norm d=" + std::to_string(d) + (beta ? " with beta" : " without beta");
      c.group = "layer_norm";
      c.tags = "[ops]";
      c.build = [d, beta] {
        const int64_t rows = 20, n = 33;
        OpGraph g = start_graph(rows, d, 1);
        const std::vector<float> gamma = random_floats(size_t(d), 2, 0.5f, 1.5f), b = random_floats(size_t(d), 3);
        const int32_t gt = add_constant(g, "gamma", {d}, gamma);
        const int32_t bt = beta ? add_constant(g, "beta", {d}, b) : -1;
        const int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
        REQUIRE(g.graph.add_op(fb::OpCode::LAYER_NORM, "ln", {g.x}, {y}, {gt, bt}, fb::LayerNormParamsT{{}, 1e-5f}).ok());
        BuiltCase built{finish_and_load(g, y, "layer_norm", n), d, {}};
        const std::vector<int32_t> ids = random_ids(n, rows, 4);
        const std::vector<float> x = gather_rows(g, ids);
        std::vector<float> want(size_t(n * d));
        ref::layer_norm(x.data(), n, d, gamma.data(), beta ? b.data() : nullptr, 1e-5f, want.data());
        built.sessions = each_cut(ids, want, {0});
        return built;
      };
      out.push_back(c);
    }
  }
}

void add_linears(std::vector<OpCase>& out) {
  // Shapes across the edges of Vulkan's GEMM tiles (64 x 64 blocks of y from 32-wide slices of k; 32 x 32 from 16
  // on small devices): in, out and n none a multiple of a block or slice, in odd or not a multiple of 4 (element
  // loads) and a multiple of 4 (vec4 loads), one token, several token blocks, an out smaller than a thread's
  // columns. {in, out, n, bias}.
  struct Shape {
    int64_t in, out_dim, n;
    bool bias;
  };
  const Shape shapes[] = {{48, 37, 41, true}, {48, 37, 41, false}, {130, 70, 1, true},
                          {96, 130, 150, true}, {50, 3, 67, false}, {37, 65, 64, true}};
  uint32_t seed = 10;
  for (const Shape& shape : shapes) {
    OpCase c;
    c.name = "linear in=" + std::to_string(shape.in) + " out=" + std::to_string(shape.out_dim) +
             " n=" + std::to_string(shape.n) + (shape.bias ? " with bias" : " without bias");
    c.group = "linear";
    c.tags = "[ops]";
    c.build = [shape, seed] {
      const int64_t rows = 50, in = shape.in, out_dim = shape.out_dim, n = shape.n;
      const bool bias = shape.bias;
      OpGraph g = start_graph(rows, in, seed);
      const std::vector<float> w = random_floats(size_t(out_dim * in), seed + 1),
                               b = random_floats(size_t(out_dim), seed + 2);
      const int32_t wt = add_constant(g, "w", {out_dim, in}, w);
      const int32_t bt = bias ? add_constant(g, "b", {out_dim}, b) : -1;
      const int32_t y = g.graph.add_value("y", fb::DType::F32, out_dim).value();
      REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, bt}, fb::LinearParamsT{}).ok());
      BuiltCase built{finish_and_load(g, y, "linear_" + std::to_string(seed), n), out_dim, {}};
      const std::vector<int32_t> ids = random_ids(n, rows, seed + 3);
      const std::vector<float> x = gather_rows(g, ids);
      std::vector<float> want(size_t(n * out_dim));
      ref::linear(x.data(), n, in, w.data(), bias ? b.data() : nullptr, out_dim, want.data());
      built.sessions = each_cut(ids, want, {0});
      return built;
    };
    out.push_back(c);
    seed += 4;
  }
}

void add_activations(std::vector<OpCase>& out) {
  for (auto kind : {fb::ActivationKind::RELU, fb::ActivationKind::GELU_ERF, fb::ActivationKind::GELU_TANH}) {
    OpCase c;
    c.name = std::string("activation ") + activation_name(kind) + " d=50";
    c.group = "activation";
    c.tags = "[ops]";
    c.build = [kind] {
      const int64_t rows = 40, d = 50, n = 37;
      OpGraph g = start_graph(rows, d, 5);
      const int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
      REQUIRE(g.graph.add_op(fb::OpCode::ACTIVATION, "act", {g.x}, {y}, {}, fb::ActivationParamsT{{}, kind}).ok());
      BuiltCase b{finish_and_load(g, y, "activation", n), d, {}};
      const std::vector<int32_t> ids = random_ids(n, rows, 6);
      const std::vector<float> x = gather_rows(g, ids);
      std::vector<float> want(x.size());
      ref::activation(kind, x.data(), int64_t(x.size()), want.data());
      b.sessions = each_cut(ids, want, {0});
      return b;
    };
    out.push_back(c);
  }
}

void add_softmaxes(std::vector<OpCase>& out) {
  OpCase single;
  single.name = "log_softmax d=50";
  single.group = "add and log_softmax";
  single.tags = "[ops]";
  single.rows_are_log_probabilities = true;
  single.build = [] {
    const int64_t rows = 20, d = 50, n = 33;
    OpGraph g = start_graph(rows, d, 18);
    const int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
    REQUIRE(g.graph.add_op(fb::OpCode::LOG_SOFTMAX, "log_softmax", {g.x}, {y}, {}, fb::LogSoftmaxParamsT{}).ok());
    BuiltCase b{finish_and_load(g, y, "log_softmax", n), d, {}};
    const std::vector<int32_t> ids = random_ids(n, rows, 19);
    const std::vector<float> x = gather_rows(g, ids);
    std::vector<float> want(size_t(n * d));
    ref::log_softmax(x.data(), n, d, want.data());
    b.sessions = each_cut(ids, want, {0});
    return b;
  };
  out.push_back(single);
  // ADD of two embeddings (the second table's values in [-20, 20]: large logits), then LOG_SOFTMAX.
  for (int64_t d : {7, 300}) {
    OpCase c;
    c.name = "add then log_softmax d=" + std::to_string(d);
    c.group = "add and log_softmax";
    c.tags = "[ops]";
    c.rows_are_log_probabilities = true;
    c.build = [d] {
      const int64_t rows = 25, n = 31;
      OpGraph g = start_graph(rows, d, 7);
      const std::vector<float> table2 = random_floats(size_t(rows * d), 8, -20, 20);
      const int32_t t2 = add_constant(g, "table2", {rows, d}, table2);
      const int32_t x2 = g.graph.add_value("x2", fb::DType::F32, d).value();
      const int32_t sum = g.graph.add_value("sum", fb::DType::F32, d).value();
      const int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
      const int32_t ids_value = 0;  // start_graph's first value
      REQUIRE(g.graph.add_op(fb::OpCode::EMBEDDING, "embed2", {ids_value}, {x2}, {t2}, fb::EmbeddingParamsT{}).ok());
      REQUIRE(g.graph.add_op(fb::OpCode::ADD, "add", {g.x, x2}, {sum}, {}, fb::AddParamsT{}).ok());
      REQUIRE(g.graph.add_op(fb::OpCode::LOG_SOFTMAX, "lsm", {sum}, {y}, {}, fb::LogSoftmaxParamsT{}).ok());
      BuiltCase b{finish_and_load(g, y, "add_log_softmax", n), d, {}};
      const std::vector<int32_t> ids = random_ids(n, rows, 9);
      const std::vector<float> x = gather_rows(g, ids);
      std::vector<float> x2_rows(x.size()), s(x.size()), want(x.size());
      ref::embedding(table2.data(), d, ids.data(), n, x2_rows.data());
      ref::add(x.data(), x2_rows.data(), int64_t(x.size()), s.data());
      ref::log_softmax(s.data(), n, d, want.data());
      b.sessions = each_cut(ids, want, {0});
      return b;
    };
    out.push_back(c);
  }
}

}  // namespace

void add_basic_cases(std::vector<OpCase>& out) {
  add_embedding(out);
  add_positions(out);
  add_layer_norms(out);
  add_linears(out);
  add_activations(out);
  add_softmaxes(out);
}

}  // namespace tern::test
