// SPDX-License-Identifier: MIT
// tern_kv_storage F16 on the CPU: keys and values of dense, sliding, chunked, strided and fixed attention kept as
// float16. The definition (tern.h): every key and value is rounded to half once, when a call computes it, and every
// query attends to the rounded ones. Checked three ways: each kernel variant's float16 loops against its float32
// loops on the widened rows; one-op models against a float32 session whose K/V columns the test rounded itself,
// for every pattern, cut and thread count, and against the reference kernel (both to float32 rounding); the
// reference-family goldens against float32 within a stated bound. Also: the state's bytes, save / load, and the
// option's limits.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "attention_cases.h"
#include "cli.h"
#include "convert.h"
#include "format/half.h"
#include "cpu/isa.h"
#include "graph_builder.h"
#include "npy.h"
#include "op_graph.h"
#include "ops/reference.h"
#include "tern/tern.h"
#include "test_support.h"

namespace npy = tern::npy;
using tern::test::relative_error;
using tern::test::round_to_half;

namespace {

// Goldens: every float32 key and value element is rounded once, relative error at most u = 2^-11 (4.9e-4), about
// u/sqrt(3) = 2.8e-4 RMS. A value's error reaches the attention output directly (a convex mix of values: relative
// <= u); a key's changes a score s = q.k by at most u * sum|q_c k_c|, and the softmax weights by that change
// relative, which for these models' large scores (weights drawn N(0, 0.3..0.4), |s| up to ~10) is up to ~10 u
// for the largest scores. The residual stream carries each layer's attention output at a fraction of its norm,
// and LayerNorm and the head neither grow nor shrink relative errors much. First order, per layer: ~u (values)
// + ~u..10u (keys, on the positions with peaked softmax); over 2-3 layers, in the L2 norm of all logits, a few
// u to ~15 u: the bound is 20 u = 9.8e-3. The measured errors (docs/library.md, "Options") sit well inside it.
constexpr double kU = 1.0 / 2048.0;
constexpr double kGoldenTolerance = 20 * kU;
// The float16 kernels against the float32 kernels on the widened rows: the same sums in the same order, but the
// compiler fuses multiply-adds (FMA) in the widening loops where it does not in the scalar tails of the float32
// ones and back, so the last bit of a score or sum may differ: a few float32 ulps (2^-24 relative each).
constexpr double kSameSumsTolerance = 1e-6;
// Cuts of a golden: a one-row call's projections (XNNPACK's GEMV) and a prefill's (GEMM) give keys and values that
// differ in the last float32 bit or so (float32 cuts: 4e-7..1e-6 on the logits), and where such a key or value lies
// that close to the midpoint between two halves, it rounds to the neighbouring half: a 2^-11 jump for that rare
// element. So float16 cuts differ more than float32 cuts, by how many elements flip and where: measured 3e-6..1.4e-5
// in a Release build and up to 7.1e-5 in the sanitized -O1 build (whose code outside the kernels contracts other
// multiply-adds, so other float32 keys land next to a midpoint), against 4.5e-4 for the rounding itself. Bounded by
// u / 2: a cut must stay well under what the rounding costs. (Given the same float32 keys and values, cuts give the
// same rounded ones: the one-op test above checks that to float32 rounding.)
constexpr double kCutTolerance = kU / 2;

struct Golden {
  std::vector<int32_t> ids;
  int64_t vocab = 0;
  tern_model* model = nullptr;
};

Golden load(const std::string& name) {
  Golden g;
  const std::string dir = tern::test::source_path("tests/goldens/" + name);
  std::string error;
  REQUIRE(tern::cli::read_ids_json(dir + "/ids.json", &g.ids, &error));
  npy::Array logits;
  REQUIRE(npy::read_f32(dir + "/logits.npy", &logits, &error));
  g.vocab = logits.shape[1];
  const std::string out = tern::test::scratch_dir("kv_" + name) + "/model.tern";
  tern::convert::ConvertOptions opts;
  opts.quiet = true;
  tern::Status st = tern::convert::convert_checkpoint(dir, out, opts);
  INFO(st.message());
  REQUIRE(st.ok());
  REQUIRE(tern_model_load(out.c_str(), &g.model) == TERN_OK);
  return g;
}

tern_session* session(const tern_model* model, tern_kv_storage kv, int threads, int64_t max_tokens) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = threads;
  so.max_tokens = max_tokens;
  so.kv_storage = kv;
  tern_session* s = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  return s;
}

// ids through s after a reset: one forward (segment 0) or appends of `segment` tokens; outputs [n, width].
std::vector<float> run(tern_session* s, const std::vector<int32_t>& ids, int64_t width, int64_t segment = 0) {
  return tern::test::run_ids(s, ids, width, segment);
}

std::vector<float> widened(const std::vector<uint16_t>& h) {
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = tern::half_to_float(h[i]);
  return f;
}

std::vector<uint16_t> random_halves(size_t n, uint32_t seed) {
  std::vector<float> f = tern::test::random_floats(n, seed, -2.0f, 2.0f);
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = tern::float_to_half(f[i]);
  return h;
}

// ids -> EMBEDDING(table [rows, 3*inner]) -> ATTENTION(kind): the op graph of attention_cases.h with a given table.
tern_model* attention_model_with(const tern::test::AttentionKind& kind, int heads, int dh, std::vector<float> table,
                                 int64_t rows, int64_t n, const std::string& name) {
  namespace fb = tern::fb;
  const int64_t inner = int64_t(heads) * dh;
  tern::test::OpGraph g;
  g.d = 3 * inner;
  g.table = table;
  const int32_t ids = g.graph.add_value("ids", fb::DType::I32, 1).value();
  REQUIRE(g.graph.add_input(ids).ok());
  const int32_t t = tern::test::add_constant(g, "table", {rows, 3 * inner}, std::move(table));
  g.x = g.graph.add_value("x", fb::DType::F32, 3 * inner).value();
  REQUIRE(g.graph.add_op(fb::OpCode::EMBEDDING, "embed", {ids}, {g.x}, {t}, tern::fb::EmbeddingParamsT{}).ok());
  const int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
  tern::fb::AttentionParamsT p;
  p.heads = heads;
  p.head_dim = dh;
  p.scale = 0.4f;
  p.kind = kind.fb;
  REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {}, p).ok());
  return tern::test::finish_and_load(g, y, name, n);
}

const char* const kGoldens[] = {"pre_tied_learned_gelu", "post_untied_sinusoidal_relu", "pre_untied_nobias_gelutanh",
                                "tiny_f16", "sliding_w64", "chunked_c128", "strided_merged", "strided_split",
                                "fixed_merged", "fixed_split", "mixed_layers"};

uint32_t saved_entries(const std::vector<uint8_t>& blob) {
  uint32_t entries = 0;
  std::memcpy(&entries, blob.data() + 12, sizeof entries);
  return entries;
}


}  // namespace

TEST_CASE("float16 KV: each kernel variant's float16 loops match its float32 loops on the widened rows",
          "[kv][isa]") {
  constexpr int64_t B = tern::cpu::kAttentionKeyBlock;
  for (const tern::cpu::IsaVariant& v : tern::cpu::isa_variants()) {
    if (!v.supported) continue;
    const tern::cpu::IsaKernels& k = *v.kernels;
    for (int dh : {8, 20, 32, 40, 64, 72, 128}) {  // vector tails of every width, and whole 64-column blocks
      INFO(k.name << ", dh " << dh);
      const std::vector<uint16_t> kh = random_halves(size_t(B * dh), 31), vh = random_halves(size_t(B * dh), 32);
      const std::vector<float> kf = widened(kh), vf = widened(vh);
      const std::vector<float> q = tern::test::random_floats(size_t(8 * dh), 33);
      std::vector<const float*> keys_f, values_f;
      std::vector<const uint16_t*> keys_h, values_h;
      for (int64_t t = 0; t < B; ++t) {
        keys_f.push_back(kf.data() + t * dh), values_f.push_back(vf.data() + t * dh);
        keys_h.push_back(kh.data() + t * dh), values_h.push_back(vh.data() + t * dh);
      }
      // One row (generation): two updates of 17 and 44 keys; [acc | m | l].
      std::vector<float> of(size_t(dh) + 2, 0.0f), oh(size_t(dh) + 2, 0.0f);
      of[size_t(dh)] = oh[size_t(dh)] = -INFINITY;
      k.attend_keys(q.data(), 1, 1, keys_f.data(), values_f.data(), 17, dh, &of[size_t(dh)], &of[size_t(dh) + 1],
                    of.data(), 0.0f);
      k.attend_keys(q.data(), 1, 1, keys_f.data() + 20, values_f.data() + 20, 44, dh, &of[size_t(dh)],
                    &of[size_t(dh) + 1], of.data(), 0.0f);
      k.attend_keys_f16(q.data(), 1, 1, keys_h.data(), values_h.data(), 17, dh, &oh[size_t(dh)], &oh[size_t(dh) + 1],
                        oh.data(), 0.0f);
      k.attend_keys_f16(q.data(), 1, 1, keys_h.data() + 20, values_h.data() + 20, 44, dh, &oh[size_t(dh)],
                        &oh[size_t(dh) + 1], oh.data(), 0.0f);
      CHECK(relative_error(oh.data(), of.data(), of.size()) <= kSameSumsTolerance);
      // A tile of 7 rows with their own key ranges (one seeing none), keys transposed as float32 (widened).
      std::vector<float> kt(size_t(dh * B));
      for (int64_t t = 0; t < B; ++t)
        for (int c = 0; c < dh; ++c) kt[size_t(c * B + t)] = kf[size_t(t * dh + c)];
      const int64_t rows = 7, lo[rows] = {3, 0, 10, 63, 5, 0, 40}, hi[rows] = {50, 64, 10, 64, 6, 1, 64};
      std::vector<float> af(size_t(rows * dh), 0.0f), ah(af), mf(rows, -INFINITY), mh(mf), lf(rows, 0.0f), lh(lf);
      k.attend_tile(q.data(), rows, kt.data(), values_f.data(), lo, hi, dh, mf.data(), lf.data(), af.data(), 0.0f);
      k.attend_tile_f16(q.data(), rows, kt.data(), values_h.data(), lo, hi, dh, mh.data(), lh.data(), ah.data(), 0.0f);
      CHECK(relative_error(ah.data(), af.data(), af.size()) <= kSameSumsTolerance);
      CHECK(relative_error(lh.data(), lf.data(), lf.size()) <= kSameSumsTolerance);
      CHECK(mf == mh);
    }
  }
}

TEST_CASE("float16 KV: one-op models match float32 on keys and values the test rounded for every pattern and cut "
          "and thread count", "[kv][attention]") {
  struct Shape {
    int heads, dh;
    int64_t n;
  };
  std::vector<tern::test::AttentionKind> kinds = tern::test::pattern_attention_kinds();
  for (const tern::test::AttentionKind& kind : kinds) {
    // 2 x 16 over 150 tokens (several key blocks, windows and rings); dense also 1 x 40 over 600 tokens, where a
    // 2-thread generation step splits the keys of its one head (split-K).
    std::vector<Shape> shapes = {{2, 16, 150}};
    if (kind.pattern.kind == tern::PatternKind::kDense) shapes.push_back({1, 40, 600});
    for (const Shape& sh : shapes) {
      if (kind.pattern.split && sh.heads % 2 != 0) continue;
      INFO(kind.name << ", heads " << sh.heads << " x " << sh.dh << ", n " << sh.n);
      const int64_t inner = int64_t(sh.heads) * sh.dh, rows = 64;
      std::vector<float> table = tern::test::random_floats(size_t(rows * 3 * inner), 41, -2.0f, 2.0f);
      std::vector<float> rounded = table;  // q as it is, k | v rounded to half
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = inner; c < 3 * inner; ++c) rounded[size_t(r * 3 * inner + c)] = round_to_half(rounded[size_t(r * 3 * inner + c)]);
      tern_model* m16 = attention_model_with(kind, sh.heads, sh.dh, table, rows, sh.n, "kv_f16_op");
      tern_model* m32 = attention_model_with(kind, sh.heads, sh.dh, rounded, rows, sh.n, "kv_f32_rounded_op");
      std::vector<int32_t> ids(size_t(sh.n));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 37 + 11) % size_t(rows));
      // The reference kernel on the rounded rows.
      std::vector<float> qkv(size_t(sh.n * 3 * inner)), want(size_t(sh.n * inner));
      tern::ref::embedding(rounded.data(), 3 * inner, ids.data(), sh.n, qkv.data());
      tern::AttentionPattern pattern = kind.pattern;
      pattern.heads = sh.heads;
      tern::ref::attention(qkv.data(), 3 * inner, qkv.data() + inner, qkv.data() + 2 * inner, 3 * inner, sh.n, 0,
                           sh.heads, sh.dh, 0.4f, pattern, want.data());
      for (int threads : {1, 2}) {
        tern_session* s16 = session(m16, TERN_KV_STORAGE_F16, threads, sh.n);
        tern_session* s32 = session(m32, TERN_KV_STORAGE_F32, threads, sh.n);
        for (int64_t segment : {int64_t(0), int64_t(1), int64_t(13)}) {
          INFO("threads " << threads << ", segment " << segment);
          const std::vector<float> half = run(s16, ids, inner, segment);
          const std::vector<float> rounded_f32 = run(s32, ids, inner, segment);
          CHECK(relative_error(half.data(), rounded_f32.data(), half.size()) <= kSameSumsTolerance);
          CHECK(relative_error(half.data(), want.data(), want.size()) <= 1e-5);
        }
        tern_session_free(s16);
        tern_session_free(s32);
      }
      tern_model_free(m16);
      tern_model_free(m32);
    }
  }
}

TEST_CASE("float16 KV: golden models near float32 in prefill and token by token at 1 and 2 threads", "[kv][model]") {
  for (const char* name : kGoldens) {
    Golden g = load(name);
    const int64_t n = int64_t(g.ids.size());
    for (int threads : {1, 2}) {
      tern_session* s32 = session(g.model, TERN_KV_STORAGE_F32, threads, n);
      tern_session* s16 = session(g.model, TERN_KV_STORAGE_F16, threads, n);
      const std::vector<float> prefill16 = run(s16, g.ids, g.vocab);
      const std::vector<float> prefill32 = run(s32, g.ids, g.vocab);
      const std::vector<float> token16 = run(s16, g.ids, g.vocab, 1);
      const std::vector<float> token32 = run(s32, g.ids, g.vocab, 1);
      const double e_prefill = relative_error(prefill16.data(), prefill32.data(), prefill32.size());
      const double e_token = relative_error(token16.data(), token32.data(), token32.size());
      const double e_cut = relative_error(token16.data(), prefill16.data(), prefill16.size());
      const double e_cut32 = relative_error(token32.data(), prefill32.data(), prefill32.size());
      INFO(name << " threads " << threads << ": f16 vs f32 prefill " << e_prefill << ", token by token "
                         << e_token << "; f16 token vs prefill " << e_cut << " (f32 " << e_cut32 << ")");
      CHECK(e_prefill > 0.0);  // the rounding happened
      CHECK(e_prefill <= kGoldenTolerance);
      CHECK(e_token <= kGoldenTolerance);
      CHECK(e_cut <= kCutTolerance);  // the same rounded keys however the sequence is cut
      tern_session_free(s32);
      tern_session_free(s16);
    }
    tern_model_free(g.model);
  }
}

TEST_CASE("float16 KV: the state is half the bytes in the plan and once allocated while other kinds keep float32",
          "[kv][plan]") {
  Golden g = load("pre_tied_learned_gelu");  // dense attention only
  const int64_t n = int64_t(g.ids.size());
  tern_session* s32 = session(g.model, TERN_KV_STORAGE_F32, 2, n);
  tern_session* s16 = session(g.model, TERN_KV_STORAGE_F16, 2, n);
  for (int64_t tokens : {int64_t(1), int64_t(100), n}) {
    tern_memory_plan p32{}, p16{};
    REQUIRE(tern_session_plan(s32, tokens, &p32) == TERN_OK);
    REQUIRE(tern_session_plan(s16, tokens, &p16) == TERN_OK);
    CHECK(p16.state_bytes > 0);
    CHECK(2 * p16.state_bytes == p32.state_bytes);
  }
  tern_memory_plan a32{}, a16{};
  REQUIRE(tern_session_memory(s32, &a32) == TERN_OK);
  REQUIRE(tern_session_memory(s16, &a16) == TERN_OK);
  CHECK(2 * a16.state_bytes == a32.state_bytes);
  tern_session_free(s32);
  tern_session_free(s16);
  tern_model_free(g.model);

  // Transformer-XL keeps its memory in float32 under F16: same bytes, same logits.
  Golden xl = load("transfo_xl_plain");
  tern_session* x32 = session(xl.model, TERN_KV_STORAGE_F32, 2, 64);
  tern_session* x16 = session(xl.model, TERN_KV_STORAGE_F16, 2, 64);
  tern_memory_plan p32{}, p16{};
  REQUIRE(tern_session_plan(x32, 64, &p32) == TERN_OK);
  REQUIRE(tern_session_plan(x16, 64, &p16) == TERN_OK);
  CHECK(p16.state_bytes == p32.state_bytes);
  const std::vector<int32_t> ids(xl.ids.begin(), xl.ids.begin() + 32);
  CHECK(run(x16, ids, xl.vocab) == run(x32, ids, xl.vocab));
  tern_session_free(x32);
  tern_session_free(x16);
  tern_model_free(xl.model);
}

TEST_CASE("float16 KV: a saved state round-trips and does not load under the other kv_storage", "[kv][state]") {
  Golden g = load("pre_untied_nobias_gelutanh");
  const int64_t n = int64_t(g.ids.size()), cut = 100;
  tern_session* a = session(g.model, TERN_KV_STORAGE_F16, 2, n);
  // The first `cut` tokens in one call, saved; then token by token, in this session and in a fresh one that
  // loaded the state: the same logits.
  REQUIRE(tern_session_append(a, g.ids.data(), cut, nullptr) == TERN_OK);
  const std::vector<uint8_t> blob16 = tern::test::saved_state(a);
  std::vector<float> whole(size_t(n * g.vocab));
  for (int64_t i = cut; i < n; ++i) {
    REQUIRE(tern_session_append(a, g.ids.data() + i, 1, whole.data() + i * g.vocab) == TERN_OK);
  }
  tern_session* b = session(g.model, TERN_KV_STORAGE_F16, 2, n);
  INFO(tern_session_last_error(b));
  REQUIRE(tern_session_load_state(b, blob16.data(), blob16.size()) == TERN_OK);
  std::vector<float> rest(size_t((n - cut) * g.vocab));
  for (int64_t i = cut; i < n; ++i) {
    REQUIRE(tern_session_append(b, g.ids.data() + i, 1, rest.data() + (i - cut) * g.vocab) == TERN_OK);
  }
  CHECK(std::vector<float>(whole.begin() + cut * g.vocab, whole.end()) == rest);

  // The float32 state of the same tokens: twice the payload.
  tern_session* c = session(g.model, TERN_KV_STORAGE_F32, 2, n);
  REQUIRE(tern_session_append(c, g.ids.data(), cut, nullptr) == TERN_OK);
  const std::vector<uint8_t> blob32 = tern::test::saved_state(c);
  const size_t header = 48 + 16 * size_t(saved_entries(blob16));
  CHECK(saved_entries(blob16) == saved_entries(blob32));
  CHECK(2 * (blob16.size() - header) == blob32.size() - header);

  // Either into a session of the other storage: refused, naming both, and the session is unchanged.
  CHECK(tern_session_load_state(c, blob16.data(), blob16.size()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(c)), Catch::Contains("saved with float16 keys and values (kv_storage F16)") &&
                                                          Catch::Contains("kv_storage F32"));
  CHECK(tern_session_position(c) == cut);
  CHECK(tern_session_load_state(b, blob32.data(), blob32.size()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(b)), Catch::Contains("saved with float32 keys and values (kv_storage F32)"));
  tern_session_free(a);
  tern_session_free(b);
  tern_session_free(c);
  tern_model_free(g.model);
}

TEST_CASE("float16 KV: a CPU option that the Vulkan backend refuses", "[kv]") {
  Golden g = load("tiny_f16");
  tern_session_options so;
  tern_session_options_init(&so);
  CHECK(so.kv_storage == TERN_KV_STORAGE_F32);
  so.max_tokens = int64_t(g.ids.size());
  so.backend = TERN_BACKEND_VULKAN;
  so.kv_storage = TERN_KV_STORAGE_F16;
  tern_session* s = nullptr;
  CHECK(tern_session_create(g.model, &so, &s) == TERN_UNSUPPORTED);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("kv_storage F16 is a CPU option"));
  so.backend = TERN_BACKEND_CPU;
  const int bad = 7;
  std::memcpy(&so.kv_storage, &bad, sizeof bad);
  CHECK(tern_session_create(g.model, &so, &s) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("unknown kv_storage 7"));
  CHECK(s == nullptr);
  tern_model_free(g.model);
}
