// SPDX-License-Identifier: MIT
// Row-block execution (cpu/row_chains.h): chains of row-wise ops, and of attention that runs in appends, run block by
// block give the results of one pass, and the planner places their inner values in [block, width] instead of
// [n, width]. Dense causal attention chains with the ops around it; routing attention needs the whole call and
// splits the model into two chains.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include <filesystem>

#include "cpu/arena.h"
#include "format/model.h"
#include "op_graph.h"
#include "test_support.h"

using namespace tern;
using tern::test::make_session;
using tern::test::random_floats;
using tern::test::relative_error;

namespace {

constexpr int64_t kD = 24, kFfn = 96, kHeads = 2, kHeadDim = 12, kVocab = 40, kRows = 50;

int32_t linear(test::OpGraph& g, const std::string& name, int32_t x, int64_t in, int64_t out, bool bias, uint32_t seed) {
  const int32_t w = test::add_constant(g, name + ".w", {out, in}, random_floats(size_t(out * in), seed, -0.3f, 0.3f));
  const int32_t b = bias ? test::add_constant(g, name + ".b", {out}, random_floats(size_t(out), seed + 1)) : -1;
  const int32_t y = g.graph.add_value(name, fb::DType::F32, out).value();
  REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, name, {x}, {y}, {w, b}, fb::LinearParamsT{}).ok());
  return y;
}

int32_t layer_norm(test::OpGraph& g, const std::string& name, int32_t x, int64_t d, uint32_t seed) {
  const int32_t gamma = test::add_constant(g, name + ".g", {d}, random_floats(size_t(d), seed, 0.5f, 1.5f));
  const int32_t beta = test::add_constant(g, name + ".b", {d}, random_floats(size_t(d), seed + 1));
  const int32_t y = g.graph.add_value(name, fb::DType::F32, d).value();
  REQUIRE(g.graph.add_op(fb::OpCode::LAYER_NORM, name, {x}, {y}, {gamma, beta}, fb::LayerNormParamsT{}).ok());
  return y;
}

int32_t binary(test::OpGraph& g, fb::OpCode code, const std::string& name, int32_t a, int32_t b, int64_t d) {
  const int32_t y = g.graph.add_value(name, fb::DType::F32, d).value();
  if (code == fb::OpCode::ADD) {
    REQUIRE(g.graph.add_op(code, name, {a, b}, {y}, {}, fb::AddParamsT{}).ok());
  } else {
    REQUIRE(g.graph.add_op(code, name, {a, b}, {y}, {}, fb::ConcatParamsT{}).ok());
  }
  return y;
}

// A pre-LN transformer block and head. With routing attention, which needs the whole call, the chains are
//   1: embedding -> ln1 -> fc1 [n,96] -> gelu [n,96] -> fc2 -> add -> qkv [n,72]  (blocked: ln1, fc1, gelu, fc2)
//   2: out proj -> add -> concat [n,48] -> ln2 -> head [n,40] (the output)          (blocked: proj, z, concat, ln2)
// and x, y, qkv and attn keep full size (in place: res1's output y takes the rows of x, which res1 reads for the
// last time). Dense attention runs in appends over its KV cache, so the whole model is one chain and every value
// but the output is blocked.
enum class Attn { kDense, kRouting };

tern_model* block_model(const std::string& name, Attn kind) {
  test::OpGraph g = test::start_graph(kRows, kD, 91);
  const int32_t x = g.x;  // [n, 24]
  const int32_t h1 = layer_norm(g, "ln1", x, kD, 92);
  const int32_t f1 = linear(g, "fc1", h1, kD, kFfn, true, 93);
  const int32_t act = g.graph.add_value("gelu", fb::DType::F32, kFfn).value();
  REQUIRE(g.graph.add_op(fb::OpCode::ACTIVATION, "gelu", {f1}, {act}, {},
                         fb::ActivationParamsT{{}, fb::ActivationKind::GELU_ERF}).ok());
  const int32_t f2 = linear(g, "fc2", act, kFfn, kD, true, 95);
  const int32_t y = binary(g, fb::OpCode::ADD, "res1", x, f2, kD);  // [n, 24], read again by res2
  const int32_t qkv = linear(g, "qkv", y, kD, 3 * kHeads * kHeadDim, false, 97);
  const int32_t att = g.graph.add_value("attn", fb::DType::F32, kHeads * kHeadDim).value();
  fb::AttentionParamsT p;
  p.heads = int32_t(kHeads);
  p.head_dim = int32_t(kHeadDim);
  p.scale = 0.3f;
  int32_t centroids = -1;
  if (kind == Attn::kDense) {
    p.kind.Set(fb::DenseT{});
  } else {
    p.kind.Set(fb::RoutingT{{}, 4, 16, 1, 8});  // 4 clusters of 16, one routing head and one local head
    centroids = test::add_constant(g, "centroids", {1, 4, kHeadDim}, random_floats(size_t(4 * kHeadDim), 98, -1.f, 1.f));
  }
  REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {qkv}, {att}, {centroids}, p).ok());
  const int32_t o = linear(g, "proj", att, kHeads * kHeadDim, kD, false, 99);
  const int32_t z = binary(g, fb::OpCode::ADD, "res2", y, o, kD);
  const int32_t cat = binary(g, fb::OpCode::CONCAT, "cat", y, z, 2 * kD);
  const int32_t h2 = layer_norm(g, "ln2", cat, 2 * kD, 101);
  const int32_t logits = linear(g, "head", h2, 2 * kD, kVocab, true, 103);
  return test::finish_and_load(g, logits, name, 0);
}

std::vector<int32_t> random_ids(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(size_t(n), 0);
  for (auto& id : ids) id = int32_t(rng() % uint32_t(kRows));
  return ids;
}

std::vector<float> forward(tern_session* s, const std::vector<int32_t>& ids) {
  std::vector<float> out(ids.size() * size_t(kVocab));
  INFO(tern_session_last_error(s));
  REQUIRE(tern_session_forward(s, ids.data(), int64_t(ids.size()), out.data()) == TERN_OK);
  return out;
}

}  // namespace

TEST_CASE("row blocks: chains run in blocks match one pass over all rows", "[session][rowblock]") {
  const Attn kind = GENERATE(Attn::kDense, Attn::kRouting);
  INFO((kind == Attn::kDense ? "dense attention (one chain through it)" : "routing attention (two chains)"));
  tern_model* model = block_model(kind == Attn::kDense ? "row_blocks_dense" : "row_blocks_routing", kind);
  const int64_t one_block = int64_t(1) << 30;  // larger than any call: every chain runs as one block
  for (int threads : {1, 2}) {
    tern_session* whole = make_session(model, threads, 3000, 0, one_block);
    // 2500 rows: the session's own blocks (1024 rows for these narrow chains: 1024 + 1024 + 452), and blocks of
    // 7 and 64 rows, none dividing n; 5 rows: fewer than one block.
    for (int64_t block : {int64_t(0), int64_t(7), int64_t(64)}) {
      tern_session* blocked = make_session(model, threads, 3000, 0, block);
      for (int64_t n : {int64_t(2500), int64_t(5)}) {
        const std::vector<int32_t> ids = random_ids(n, uint32_t(n + block));
        const std::vector<float> want = forward(whole, ids), got = forward(blocked, ids);
        INFO("threads " << threads << ", block " << block << ", n " << n);
        CHECK(relative_error(got.data(), want.data(), got.size()) <= 1e-6);
      }
      tern_session_free(blocked);
    }
    tern_session_free(whole);
  }
  tern_model_free(model);
}

TEST_CASE("row blocks: the planner gives chain-inner values block rows, so the arena shrinks", "[planner][rowblock]") {
  tern_model* model = block_model("row_blocks_plan", Attn::kRouting);
  tern_session* blocked = make_session(model, 1, 4096);
  tern_session* whole = make_session(model, 1, 4096, 0, int64_t(1) << 30);
  tern_memory_plan b16{}, b64{}, w64{}, small{};
  REQUIRE(tern_session_plan(blocked, 16384, &b16) == TERN_OK);
  REQUIRE(tern_session_plan(blocked, 65536, &b64) == TERN_OK);
  REQUIRE(tern_session_plan(whole, 65536, &w64) == TERN_OK);
  REQUIRE(tern_session_plan(blocked, 1000, &small) == TERN_OK);
  // Both chains pay: chain 1's [n, 96] values become [1024, 96], chain 2's [n, 48] ones (concat, ln2) [1024, 48].
  CHECK(b64.row_chains == 2);
  CHECK(b64.row_block_rows == 1024);
  CHECK(w64.row_chains == 0);
  CHECK(small.row_chains == 0);  // 1000 rows are one block: nothing runs blocked
  INFO("arena: blocked " << b16.arena_bytes << " at 16k, " << b64.arena_bytes << " at 64k; one block " << w64.arena_bytes);
  // One pass needs x, fc1 and gelu alive together: 216 floats a row. In blocks, the full-size values are x, y, qkv
  // and attn (144 floats a row at most together), and the inner ones take 1024 rows.
  const uint64_t n = 65536;
  CHECK(w64.arena_bytes >= n * (2 * kFfn + kD) * sizeof(float));
  CHECK(b64.arena_bytes <= n * (2 * kD + 4 * kHeads * kHeadDim) * sizeof(float) + (uint64_t(8) << 20));
  // What grows with n is only the full-size values: 4x the tokens adds at most 3x the 16k arena.
  CHECK(b64.arena_bytes < 4 * b16.arena_bytes);
  tern_session_free(whole);
  tern_session_free(blocked);
  tern_model_free(model);
}

TEST_CASE("row blocks: weights dropped after packing are read back from the file", "[session][rowblock]") {
  // The first session packs the linears' weights and drops their pages of the mapping; the second packs them
  // again from the same mapping, which faults them back in from the file: both must give the same logits.
  tern_model* model = block_model("row_blocks_release", Attn::kRouting);
  const std::vector<int32_t> ids = random_ids(300, 7);
  tern_session* first = make_session(model, 1, 400);
  const std::vector<float> a = forward(first, ids);
  tern_session* second = make_session(model, 1, 400);
  const std::vector<float> b = forward(second, ids);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  tern_session_free(second);
  tern_session_free(first);
  tern_model_free(model);
}

TEST_CASE("row blocks: a model whose attention runs in appends is one chain, and its arena does not grow with n",
          "[planner][rowblock]") {
  tern_model* model = block_model("row_blocks_one_chain", Attn::kDense);
  tern_session* s = make_session(model, 1, 65536);
  tern_memory_plan p4{}, p16{}, p64{};
  REQUIRE(tern_session_plan(s, 4096, &p4) == TERN_OK);
  REQUIRE(tern_session_plan(s, 16384, &p16) == TERN_OK);
  REQUIRE(tern_session_plan(s, 65536, &p64) == TERN_OK);
  INFO("arena: " << p4.arena_bytes << " at 4k, " << p16.arena_bytes << " at 16k, " << p64.arena_bytes << " at 64k");
  CHECK(p64.row_chains == 1);
  // Every value but the caller's logits holds one block of rows: at most 1024 rows of the widest values together.
  CHECK(p64.arena_bytes == p4.arena_bytes);
  CHECK(p16.arena_bytes == p4.arena_bytes);
  CHECK(p64.arena_bytes <= uint64_t(1024) * (2 * kFfn + 2 * kD + 3 * kHeads * kHeadDim) * sizeof(float) + (uint64_t(1) << 20));
  // The KV cache (dense attention's definition) is what grows: K and V of every token.
  CHECK(p64.state_bytes == 16 * p4.state_bytes);
  tern_session_free(s);
  tern_model_free(model);
}

namespace {

// choose_row_chains as first written: for every op of a chain, the bytes of every value of the model alive there,
// in one pass and in blocks (quadratic in a long chain; the library's sweeps the lifetimes once).
std::vector<RowChain> choose_row_chains_per_op(const Model& model, const std::vector<bool>& run_op, int64_t rows,
                                               const std::vector<RowChain>& candidates) {
  const auto& values = model.values();
  std::vector<int> first, last;
  value_lifetimes(model, run_op, &first, &last);
  auto bytes = [&](size_t v, int64_t r) { return uint64_t(r) * uint64_t(values[v].width) * dtype_size(values[v].dtype); };
  std::vector<RowChain> chosen;
  for (const RowChain& chain : candidates) {
    if (rows <= chain.block_rows) continue;
    std::vector<int8_t> role(values.size(), 0);
    for (int v : chain.blocked) role[size_t(v)] = 1;
    for (int v : chain.full) role[size_t(v)] = 2;
    for (auto [x, y] : chain.in_place) role[size_t(y)] = 3;
    uint64_t whole = 0, blocked = 0;
    for (int k = chain.first_op; k <= chain.last_op; ++k) {
      if (!run_op[size_t(k)]) continue;
      uint64_t w = 0, b = 0;
      for (size_t v = 0; v < values.size(); ++v) {
        if (int(v) == model.input_value() || int(v) == model.output_value() || first[v] < 0) continue;
        const bool live = first[v] <= k && k <= std::max(last[v], first[v]);
        if (live) w += bytes(v, rows);
        if (role[v] == 2) b += bytes(v, rows);
        else if (role[v] == 1 && live) b += bytes(v, std::min(rows, chain.block_rows));
        else if (role[v] == 0 && live) b += bytes(v, rows);
      }
      whole = std::max(whole, w);
      blocked = std::max(blocked, b);
    }
    if (blocked < whole) chosen.push_back(chain);
  }
  return chosen;
}

}  // namespace

TEST_CASE("row blocks: the chains kept are those a per-op count over every value keeps", "[planner][rowblock]") {
  namespace fs = std::filesystem;
  std::vector<std::string> models;
  for (const auto& dir : fs::directory_iterator(test::source_path("tests/goldens"))) {
    if (!fs::exists(dir.path() / "config.json")) continue;
    const std::string name = dir.path().filename().string();
    models.push_back(test::convert_golden(name, "row_chains_" + name));
  }
  int compared = 0, kept = 0;
  for (const std::string& path : models) {
    INFO(path);
    REQUIRE(!path.empty());
    auto loaded = Model::load_file(path);
    REQUIRE(loaded.ok());
    const Model& model = *loaded.value();
    const std::vector<bool> run_op(model.nodes().size(), true);
    for (int64_t block_rows : {int64_t(0), int64_t(64), int64_t(256)}) {
      const std::vector<RowChain> candidates = find_row_chains(model, run_op, block_rows);
      for (int64_t rows : {int64_t(65), int64_t(300), int64_t(1025), int64_t(4096), int64_t(65536)}) {
        const auto expected = choose_row_chains_per_op(model, run_op, rows, candidates);
        const auto got = choose_row_chains(model, run_op, rows, candidates);
        REQUIRE(got.size() == expected.size());
        for (size_t c = 0; c < got.size(); ++c) CHECK(got[c].first_op == expected[c].first_op);
        ++compared;
        kept += int(got.size());
      }
    }
  }
  INFO(compared << " comparisons, " << kept << " chains kept");
  CHECK(compared >= 400);
  CHECK(kept > 0);  // some chains pay at these sizes, so the comparison covers both answers
}
