// SPDX-License-Identifier: MIT
// The CPU kernels' instruction-set variants (cpu/isa.h, cmake/CpuIsa.cmake): which one a process runs, what a
// session reports, and every variant this CPU runs against the narrowest one on the same random inputs, loop by loop.
// ctest runs this file once more under TERN_CPU_ISA set to each variant and to a name that is none
// (tests/CMakeLists.txt).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "format/half.h"
#include "cpu/isa.h"
#include "op_graph.h"
#include "test_support.h"

using tern::cpu::IsaKernels;

namespace {

const std::vector<tern::cpu::IsaVariant>& variants() {
  static const std::vector<tern::cpu::IsaVariant> v = tern::cpu::isa_variants();
  return v;
}

std::string asked() {
  const char* env = std::getenv("TERN_CPU_ISA");
  return env ? env : "";
}

// Random floats of one test, in [-1, 1) scaled.
std::vector<float> randoms(size_t n, uint32_t seed, float scale = 1.0f) {
  std::vector<float> v = tern::test::random_floats(n, seed);
  for (float& x : v) x *= scale;
  return v;
}

// Runs `fill(kernels, out)` on the narrowest variant and on every other one this CPU runs, and checks each output
// against the narrowest one's within `tolerance` (relative, over the whole output; 0: bit for bit).
template <typename F>
void against_narrowest(size_t size, double tolerance, const F& fill) {
  const IsaKernels& base = *variants().front().kernels;
  std::vector<float> want(size);
  fill(base, want.data());
  for (const auto& v : variants()) {
    if (!v.supported || v.kernels == &base) continue;
    INFO("variant " << v.kernels->name << " against " << base.name);
    std::vector<float> got(size);
    fill(*v.kernels, got.data());
    if (tolerance == 0) {
      CHECK(got == want);
    } else {
      CHECK(tern::test::relative_error(got.data(), want.data(), size) <= tolerance);
    }
  }
}

}  // namespace

TEST_CASE("CPU kernels: the widest variant this CPU runs is used unless TERN_CPU_ISA names a narrower one", "[isa]") {
  REQUIRE(!variants().empty());
  CHECK(variants().front().supported);  // the narrowest runs everywhere
  size_t widest = 0;
  for (size_t i = 0; i < variants().size(); ++i) {
    if (variants()[i].supported) widest = i;
  }
  const IsaKernels& used = tern::cpu::isa();
  const std::string description = tern::cpu::isa_description();
  const std::string name = asked();
  INFO("TERN_CPU_ISA='" << name << "', " << description);
  size_t want = widest;
  size_t named = variants().size();
  for (size_t i = 0; i < variants().size(); ++i) {
    if (name == variants()[i].kernels->name) named = i;
  }
  if (named < variants().size()) {
    want = 0;
    for (size_t i = 0; i <= named; ++i) {
      if (variants()[i].supported) want = i;
    }
  }
  CHECK(std::string(used.name) == variants()[want].kernels->name);
  const std::string plain = std::string("kernels: ") + used.name;
  if (name.empty() || (named < variants().size() && want == named)) {
    CHECK(description == plain);
  } else if (named < variants().size()) {
    CHECK(description.rfind(plain + " (TERN_CPU_ISA=" + name + ": this CPU lacks ", 0) == 0);
  } else {
    CHECK(description.rfind(plain + " (TERN_CPU_ISA=" + name + " is not a variant of this library (", 0) == 0);
  }

  // What a session reports: the same, as tern_backend_info.driver.
  tern::test::OpGraph g = tern::test::start_graph(8, 16, 1);
  tern_model* model = tern::test::finish_and_load(g, g.x, "isa_embedding", 8);
  tern_session* s = tern::test::make_session(model, 1);
  tern_backend_info info{};
  REQUIRE(tern_session_get_backend(s, &info) == TERN_OK);
  CHECK(std::string(info.driver) == description);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("CPU kernels: row-wise loops agree across variants", "[isa]") {
  const int64_t rows = 7, d = 83;  // d not a multiple of any vector width
  const std::vector<float> x = randoms(size_t(rows * d), 1, 3.0f), y = randoms(size_t(rows * d), 2);
  const std::vector<float> gamma = randoms(size_t(d), 3), beta = randoms(size_t(d), 4);
  const size_t n = x.size();
  against_narrowest(n, 1e-6, [&](const IsaKernels& k, float* out) {
    k.layer_norm(x.data(), rows, d, gamma.data(), beta.data(), 1e-5f, out);
  });
  against_narrowest(n, 1e-6, [&](const IsaKernels& k, float* out) {
    k.layer_norm(x.data(), rows, d, gamma.data(), nullptr, 1e-5f, out);
  });
  against_narrowest(n, 0, [&](const IsaKernels& k, float* out) { k.relu(x.data(), int64_t(n), out); });
  against_narrowest(n, 1e-6, [&](const IsaKernels& k, float* out) { k.gelu_erf(x.data(), int64_t(n), out); });
  against_narrowest(n, 1e-6, [&](const IsaKernels& k, float* out) { k.gelu_tanh(x.data(), int64_t(n), out); });
  against_narrowest(n, 0, [&](const IsaKernels& k, float* out) { k.add(x.data(), y.data(), int64_t(n), out); });
  against_narrowest(1, 1e-6, [&](const IsaKernels& k, float* out) { *out = k.dot(x.data(), y.data(), int(d)); });
}

TEST_CASE("CPU kernels: float16 conversions are exact and the same in every variant", "[isa][half]") {
  // Normal, subnormal, tiny, huge (rounding to inf) and exactly representable values, and ties.
  std::vector<float> x = randoms(1001, 5, 70000.0f);
  for (float v : {0.0f, -0.0f, 1e-8f, -3e-6f, 6.1e-5f, 65504.0f, 65520.0f, 1.0f + 1.0f / 2048, INFINITY, -INFINITY}) {
    x.push_back(v);
  }
  for (int i = 0; i < 200; ++i) x.push_back(std::ldexp(float(i % 37) - 18.0f, -(i % 30)));
  const int64_t n = int64_t(x.size());
  for (const auto& v : variants()) {
    if (!v.supported) continue;
    INFO("variant " << v.kernels->name);
    std::vector<uint16_t> halves(static_cast<size_t>(n));
    v.kernels->floats_to_halves(x.data(), n, halves.data());
    std::vector<float> back(static_cast<size_t>(n));
    v.kernels->halves_to_floats(halves.data(), n, back.data());
    size_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (halves[size_t(i)] != tern::float_to_half(x[size_t(i)])) ++wrong;
      if (back[size_t(i)] != tern::test::round_to_half(x[size_t(i)])) ++wrong;
    }
    CHECK(wrong == 0);
    // x (as halves) += y, rounded once.
    const std::vector<float> y = randoms(size_t(n), 6, 10.0f);
    std::vector<uint16_t> sum = halves;
    v.kernels->add_into_halves(sum.data(), y.data(), n);
    wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (sum[size_t(i)] != tern::float_to_half(tern::half_to_float(halves[size_t(i)]) + y[size_t(i)])) ++wrong;
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("CPU kernels: one query row against keys in place agrees across variants at head sizes of whole vectors",
          "[isa][attention]") {
  // dh 64: no column tail in any variant (the test above has one); counts of 17, 39 and a whole block cover the
  // groups of a vector's width of keys (4, 8 or 16) and the single keys after them.
  const int dh = 64;
  constexpr int64_t B = tern::cpu::kAttentionKeyBlock;
  const std::vector<float> q = randoms(size_t(dh), 30), rows = randoms(size_t(2 * B * dh), 31);
  std::vector<const float*> keys, values;
  for (int64_t t = 0; t < B; ++t) {
    keys.push_back(rows.data() + t * dh);
    values.push_back(rows.data() + (B + t) * dh);
  }
  against_narrowest(size_t(dh) + 2, 1e-6, [&](const IsaKernels& k, float* out) {
    for (int c = 0; c < dh; ++c) out[c] = 0.0f;
    out[dh] = -INFINITY;
    out[dh + 1] = 0.0f;
    for (const int64_t count : {int64_t(17), int64_t(39), B}) {
      k.attend_keys(q.data(), 1, 1, keys.data(), values.data(), count, dh, out + dh, out + dh + 1, out, 0.0f);
    }
  });
}

TEST_CASE("CPU kernels: query rows that share keys, attended together, each get what they get alone",
          "[isa][attention]") {
  // Generation attends the query heads of one KV head together (attend_keys with rows > 1): the values' sums of
  // up to four rows share each value row loaded. Every row must still compute exactly what it computes alone, in
  // every variant: head sizes with and without column tails, row counts below, at and above one register block,
  // rows spread with a stride as in a tile, two updates (the second rescales the first).
  constexpr int64_t B = tern::cpu::kAttentionKeyBlock;
  for (const tern::cpu::IsaVariant& v : tern::cpu::isa_variants()) {
    if (!v.supported) continue;
    const IsaKernels& k = *v.kernels;
    for (const int dh : {40, 64, 128}) {
      const std::vector<float> rows = randoms(size_t(2 * B * dh), 41);
      std::vector<const float*> keys, values;
      for (int64_t t = 0; t < B; ++t) {
        keys.push_back(rows.data() + t * dh);
        values.push_back(rows.data() + (B + t) * dh);
      }
      for (const int64_t count : {int64_t(1), int64_t(3), int64_t(5), int64_t(6)}) {
        INFO(k.name << ", dh " << dh << ", " << count << " rows");
        const int64_t stride = 3;  // row r's state at r * stride rows
        const size_t n = size_t(count * stride);
        const std::vector<float> q = randoms(n * size_t(dh), 42, 0.125f);
        auto fresh = [&](std::vector<float>& acc, std::vector<float>& m, std::vector<float>& l) {
          acc.assign(n * size_t(dh), 0.0f);
          m.assign(n, -INFINITY);
          l.assign(n, 0.0f);
        };
        std::vector<float> acc, m, l, acc1, m1, l1;
        fresh(acc, m, l);
        fresh(acc1, m1, l1);
        for (const auto& [first, width] : {std::pair<int64_t, int64_t>{0, 17}, {20, 44}}) {
          k.attend_keys(q.data(), count, stride, keys.data() + first, values.data() + first, width, dh, m.data(),
                        l.data(), acc.data(), 0.0f);
          for (int64_t r = 0; r < count; ++r) {
            const int64_t o = r * stride;
            k.attend_keys(q.data() + o * dh, 1, 1, keys.data() + first, values.data() + first, width, dh, &m1[o],
                          &l1[o], acc1.data() + o * dh, 0.0f);
          }
        }
        CHECK(std::memcmp(acc.data(), acc1.data(), acc.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(m.data(), m1.data(), m.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(l.data(), l1.data(), l.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("CPU kernels: attention's inner loops agree across variants", "[isa][attention]") {
  const int dh = 40;  // a multiple of 8 but not of 16: the vector loops' tails run
  constexpr int64_t B = tern::cpu::kAttentionKeyBlock;
  // kt: one key block and a float more, so that a second block can start one column on
  const std::vector<float> q = randoms(size_t(dh), 10), kt = randoms(size_t(dh * B + 1), 11);
  const std::vector<float> rows = randoms(size_t(B * 3 * dh), 12);  // keys, values, position terms: [B, dh] each
  std::vector<const float*> keys, values;
  for (int64_t t = 0; t < B; ++t) {
    keys.push_back(rows.data() + t * dh);
    values.push_back(rows.data() + (B + t) * dh);
  }
  // One row's online softmax after two updates, as [acc | m | l].
  const size_t row = size_t(dh) + 2;
  auto start = [&](float* out) {
    for (int c = 0; c < dh; ++c) out[c] = 0.0f;
    out[dh] = -INFINITY;
    out[dh + 1] = 0.0f;
  };
  // A tile of 7 query rows (a whole register block of rows and single rows after it), each with its own keys of
  // the block, one row seeing none of them, after a first block that every row sees whole: [acc | m | l] per row.
  const int64_t tile_rows = 7;
  const std::vector<float> tq = randoms(size_t(tile_rows * dh), 17);
  const int64_t lo[tile_rows] = {3, 0, 10, 63, 5, 0, 40}, hi[tile_rows] = {50, 64, 10, 64, 6, 1, 64};
  const int64_t whole_lo[tile_rows] = {}, whole_hi[tile_rows] = {B, B, B, B, B, B, B};
  against_narrowest(size_t(tile_rows) * row, 1e-6, [&](const IsaKernels& k, float* out) {
    float* acc = out;
    float* m = out + tile_rows * dh;
    float* l = m + tile_rows;
    for (int c = 0; c < tile_rows * dh; ++c) acc[c] = 0.0f;
    for (int64_t r = 0; r < tile_rows; ++r) m[r] = -INFINITY, l[r] = 0.0f;
    k.attend_tile(tq.data(), tile_rows, kt.data(), values.data(), whole_lo, whole_hi, dh, m, l, acc, 0.0f);
    k.attend_tile(tq.data(), tile_rows, kt.data() + 1, values.data(), lo, hi, dh, m, l, acc, 0.0f);
  });
  against_narrowest(row, 1e-6, [&](const IsaKernels& k, float* out) {
    start(out);
    k.attend_keys(q.data(), 1, 1, keys.data(), values.data(), 17, dh, out + dh, out + dh + 1, out, 0.0f);
    k.attend_keys(q.data(), 1, 1, keys.data() + 20, values.data() + 20, 44, dh, out + dh, out + dh + 1, out, 0.0f);
  });

  // LSH: a window of 100 keys at scattered positions, the query at position 50.
  const int64_t W = 128, count = 100;
  const std::vector<float> window = randoms(size_t(dh * W), 13);
  std::vector<int32_t> wpos;
  for (int64_t w = 0; w < count; ++w) wpos.push_back(int32_t((w * 37) % 101));
  const std::vector<float> vrows = randoms(size_t(101 * 2 * dh), 14);
  against_narrowest(size_t(count) + 2 + size_t(dh), 1e-6, [&](const IsaKernels& k, float* out) {
    const tern::cpu::RowSoftmax sm =
        k.lsh_softmax_row(q.data(), window.data(), W, wpos.data(), count, dh, 50, -1e5f, out);
    out[count] = sm.m;
    out[count + 1] = sm.lse;
    k.lsh_weigh_values(out, wpos.data(), count, std::exp(sm.m - sm.lse), vrows.data() + dh, 2 * dh, dh,
                       out + count + 2);
  });

  // Routing: 30 visible keys of a tile of 48.
  const int64_t K = 48;
  const std::vector<float> rkt = randoms(size_t(dh * K), 15), rvalues = randoms(size_t(K * dh), 16);
  against_narrowest(size_t(dh), 1e-6, [&](const IsaKernels& k, float* out) {
    std::vector<float> s(static_cast<size_t>(K));
    k.routing_attend(rkt.data(), K, rvalues.data(), dh, q.data(), 0.3f, 30, s.data(), out);
  });

  // Adaptive span: 40 keys from distance 45 down, the first two zero (before position 0), the mask ramping.
  const std::vector<float> pe = randoms(size_t(64 * dh), 17);
  std::vector<float> mask(64);
  for (size_t d = 0; d < mask.size(); ++d) mask[d] = std::min(1.0f, float(64 - d) / 20.0f);
  std::vector<const float*> span_keys = keys, span_values = values;
  span_keys[0] = span_keys[1] = nullptr;
  span_values[0] = span_values[1] = nullptr;
  against_narrowest(size_t(dh) + 3, 1e-6, [&](const IsaKernels& k, float* out) {
    std::vector<float> s(static_cast<size_t>(B));
    for (int c = 0; c < dh; ++c) out[c] = 0.0f;
    out[dh] = -INFINITY;
    out[dh + 1] = out[dh + 2] = 0.0f;
    k.span_update_row(q.data(), dh, span_keys.data(), span_values.data(), 40, 45, pe.data(), mask.data(), s.data(),
                      out + dh, out + dh + 1, out + dh + 2, out);
  });

  // Transformer-XL and compressive: keys and values interleaved in rows of 2 * dh, as the kernels keep them.
  std::vector<int64_t> pos;
  for (int64_t t = 0; t < 30; ++t) pos.push_back(std::min<int64_t>(40 - t, 32));  // clamped at 32
  const std::vector<float> r = randoms(size_t(33 * dh), 18), uk = randoms(30, 19), vr = randoms(33, 20);
  against_narrowest(row, 1e-6, [&](const IsaKernels& k, float* out) {
    std::vector<float> s(static_cast<size_t>(B));
    start(out);
    k.xl_update_row(q.data(), dh, rows.data(), 2 * dh, dh, r.data(), dh, uk.data(), 1, vr.data(), 1, pos.data(), 30,
                    s.data(), out + dh, out + dh + 1, out);
  });
  against_narrowest(row, 1e-6, [&](const IsaKernels& k, float* out) {
    std::vector<float> s(static_cast<size_t>(B));
    start(out);
    k.strided_update_row(q.data(), dh, rows.data(), 2 * dh, dh, 30, s.data(), out + dh, out + dh + 1, out);
    k.strided_update_row(q.data(), dh, rows.data() + 60 * dh, 2 * dh, dh, 20, s.data(), out + dh, out + dh + 1, out);
  });
}
