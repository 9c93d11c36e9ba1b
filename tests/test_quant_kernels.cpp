// SPDX-License-Identifier: MIT
// The compressed-weight kernels of the CPU's kernel table (cpu/isa/table.h, cpu/isa/quant.inc): int8 activations,
// I8, I4 and F16 matrix-vector / small-GEMM loops, each against a double-precision reference written here from the
// table's definitions, for the variant this process runs (ctest runs this file once per variant via TERN_CPU_ISA,
// tests/CMakeLists.txt), the packed prefill GEMM (cpu/isa/quant_gemm.inc) likewise, and the activations'
// quantization bit for bit in every variant this CPU runs.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "format/half.h"
#include "cpu/isa.h"
#include "test_support.h"

using tern::cpu::IsaKernels;

namespace {

constexpr int64_t kBlock = 32;

std::vector<float> randoms(size_t n, uint32_t seed, float scale = 1.0f) {
  std::vector<float> v = tern::test::random_floats(n, seed);
  for (float& x : v) x *= scale;
  return v;
}

// The definition: per block of 32, amax = max |x|; below 2^-100 a zero block; else s = amax / 127 and
// q = x * (127 / amax) rounded to nearest, ties to even.
void reference_quantize(const std::vector<float>& x, int64_t rows, int64_t in, std::vector<int8_t>& q,
                        std::vector<float>& s) {
  q.assign(size_t(rows * in), 0);
  s.assign(size_t(rows * in / kBlock), 0.0f);
  for (int64_t b = 0; b < rows * in / kBlock; ++b) {
    float amax = 0.0f;
    for (int64_t k = 0; k < kBlock; ++k) amax = std::max(amax, std::fabs(x[size_t(b * kBlock + k)]));
    if (!(amax >= 0x1p-100f)) continue;
    s[size_t(b)] = amax / 127.0f;
    const float inv = 127.0f / amax;
    for (int64_t k = 0; k < kBlock; ++k) {
      const float v = x[size_t(b * kBlock + k)] * inv;
      q[size_t(b * kBlock + k)] = int8_t(std::nearbyint(v));  // the default mode: nearest, ties to even
    }
  }
}

std::vector<int8_t> random_int8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = int8_t(d(rng));
  return v;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = uint8_t(d(rng));
  return v;
}

std::vector<uint16_t> halves(const std::vector<float>& f) {
  std::vector<uint16_t> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = tern::float_to_half(f[i]);
  return h;
}

// I4 element c of row o (format/dequantize.cpp's layout).
int i4_at(const std::vector<uint8_t>& w, int64_t in, int64_t o, int64_t c) {
  const int64_t block = c / kBlock, k = c % kBlock;
  const uint8_t byte = w[size_t((o * in + block * kBlock) / 2 + k % 16)];
  return (k < 16 ? (byte & 15) : (byte >> 4)) - 8;
}

// The output slots outside [o0, o1) and past `out` in each row of y keep their sentinel.
constexpr float kSentinel = 12345.0f;

struct Shape {
  int64_t rows, in, group, out, o0, o1, y_stride;
  bool bias;
};

std::vector<Shape> shapes() {
  std::vector<Shape> v;
  for (int64_t rows : {1, 2, 3, 4, 5, 9}) {
    // in: 1 to 16 blocks, whole steps of the 512-bit loops (2 or 4 blocks) and not; groups of 1 to 4 blocks and
    // one a row, within a step, of whole steps and not (96: 3 blocks)
    for (int64_t in : {32, 64, 96, 160, 384, 512}) {
      std::vector<int64_t> groups = {32, 64, 96, 128};
      if (in > 128) groups.push_back(in);
      for (int64_t group : groups) {
        if (in % group != 0) continue;
        const bool bias = (rows + in / 32 + group / 32) % 2 == 0;
        // out 13: o range [3, 12) (odd lengths, not starting at 0, so every tile shape and its remainder runs)
        v.push_back({rows, in, group, 13, 3, 12, 17, bias});
      }
    }
  }
  v.push_back({70, 64, 32, 11, 1, 11, 11, true});   // more rows than one chunk of the kernels' row loop
  v.push_back({4, 512, 512, 40, 0, 40, 40, false});  // whole range
  return v;
}

// y checked against ref within 1e-5 of the sum of |terms| of each output; the rest of y untouched.
void check_outputs(const Shape& sh, const std::vector<float>& y, const std::vector<double>& ref,
                   const std::vector<double>& mag) {
  size_t wrong = 0, touched = 0;
  for (int64_t r = 0; r < sh.rows; ++r) {
    for (int64_t o = 0; o < sh.y_stride; ++o) {
      const size_t i = size_t(r * sh.y_stride + o);
      if (o >= sh.o0 && o < sh.o1) {
        const size_t k = size_t(r * sh.out + o);
        if (!(std::fabs(double(y[i]) - ref[k]) <= 1e-5 * mag[k] + 1e-30)) {
          if (wrong < 5) UNSCOPED_INFO("row " << r << " out " << o << ": " << y[i] << " want " << ref[k]);
          ++wrong;
        }
      } else if (y[i] != kSentinel) {
        ++touched;
      }
    }
  }
  CHECK(wrong == 0);
  CHECK(touched == 0);
}

}  // namespace

TEST_CASE("Compressed weights: int8 activations are the definition's, bit for bit, in every variant", "[isa][quant]") {
  const int64_t rows = 5, in = 512;
  std::vector<float> x = randoms(size_t(rows * in), 101, 4.0f);
  // Block 1 of row 0: zeros; block 2: one huge value among small ones; block 3: all tiny (a zero block);
  // block 4: one negative huge value; block 5: halves of the scale, where rounding ties can arise; block 6: tiny.
  for (int64_t k = 0; k < kBlock; ++k) x[size_t(32 + k)] = 0.0f;
  x[size_t(64 + 7)] = 3e30f;
  for (int64_t k = 0; k < kBlock; ++k) x[size_t(96 + k)] = 1e-33f * float(k + 1);
  x[size_t(128 + 31)] = -2.5e38f;
  for (int64_t k = 0; k < kBlock; ++k) x[size_t(160 + k)] = float(k - 16) * 0.5f;
  x[size_t(160)] = 127.0f;  // amax 127: inv 1, q = x rounded with exact ties (.5)
  for (int64_t k = 0; k < kBlock; ++k) x[size_t(192 + k)] = 1e-29f * float(k - 5);  // tiny but above 2^-100
  std::vector<int8_t> want_q;
  std::vector<float> want_s;
  reference_quantize(x, rows, in, want_q, want_s);
  CHECK(want_s[1] == 0.0f);
  CHECK(want_s[3] == 0.0f);
  CHECK(want_q[size_t(64 + 7)] == 127);
  CHECK(want_q[size_t(128 + 31)] == -127);
  CHECK(want_q[size_t(160 + 1)] == -8);  // -7.5 -> -8 (even)
  CHECK(want_q[size_t(160 + 3)] == -6);  // -6.5 -> -6
  CHECK(want_s[6] > 0.0f);
  CHECK(want_q[size_t(192 + 31)] == 127);

  const auto& used = tern::cpu::isa();
  for (const auto& v : tern::cpu::isa_variants()) {
    if (!v.supported) continue;
    INFO("variant " << v.kernels->name << (v.kernels == &used ? " (in use)" : ""));
    std::vector<int8_t> q(size_t(rows * in), 99);
    std::vector<float> s(size_t(rows * in / kBlock), -1.0f);
    v.kernels->quantize_rows_q8(x.data(), rows, in, q.data(), s.data());
    CHECK(q == want_q);
    CHECK(std::memcmp(s.data(), want_s.data(), s.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("Compressed weights: I8 and I4 kernels match the definition", "[isa][quant]") {
  const IsaKernels& k = tern::cpu::isa();
  INFO("kernels " << k.name);
  uint32_t seed = 200;
  for (const Shape& sh : shapes()) {
    INFO("rows " << sh.rows << " in " << sh.in << " group " << sh.group << " o [" << sh.o0 << ", " << sh.o1
                 << ") bias " << sh.bias);
    const int64_t nb = sh.in / kBlock, groups = sh.in / sh.group;
    const std::vector<float> x = randoms(size_t(sh.rows * sh.in), ++seed, 3.0f);
    std::vector<int8_t> q;
    std::vector<float> s;
    reference_quantize(x, sh.rows, sh.in, q, s);
    const std::vector<float> bias = randoms(size_t(sh.out), ++seed);
    const float* b = sh.bias ? bias.data() : nullptr;
    // Scales of both signs and magnitudes; F16 ones as the format stores them.
    const std::vector<float> ws = randoms(size_t(sh.out * groups), ++seed, 0.05f);
    const std::vector<uint16_t> ws16 = halves(ws);

    // The definition in double: y = bias + sum over groups and blocks of scale * s * (exact int dot), with the sum
    // of |terms| for the tolerance. weight(o, c) is the stored integer, scale(o, g) the group's scale.
    std::vector<double> ref(size_t(sh.rows * sh.out)), mag(ref.size());
    auto reference = [&](auto weight, auto scale_of) {
      for (int64_t r = 0; r < sh.rows; ++r) {
        for (int64_t o = 0; o < sh.out; ++o) {
          double sum = b ? b[o] : 0.0, m = b ? std::fabs(b[o]) : 0.0;
          for (int64_t g = 0; g < groups; ++g) {
            const double scale = scale_of(o, g);
            for (int64_t blk = g * sh.group / kBlock; blk < (g + 1) * sh.group / kBlock; ++blk) {
              int64_t dot = 0, dot_abs = 0;
              for (int64_t c = blk * kBlock; c < (blk + 1) * kBlock; ++c) {
                const int64_t p = int64_t(weight(o, c)) * q[size_t(r * sh.in + c)];
                dot += p;
                dot_abs += std::abs(p);
              }
              const double sb = s[size_t(r * nb + blk)];
              sum += scale * sb * double(dot);
              m += std::fabs(scale * sb) * double(dot_abs);
            }
          }
          ref[size_t(r * sh.out + o)] = sum;
          mag[size_t(r * sh.out + o)] = m;
        }
      }
    };

    // I8, every int8 value including -128.
    const std::vector<int8_t> w8 = random_int8(size_t(sh.out * sh.in), ++seed);
    reference([&](int64_t o, int64_t c) { return w8[size_t(o * sh.in + c)]; },
              [&](int64_t o, int64_t g) { return double(ws[size_t(o * groups + g)]); });
    {
      std::vector<float> y(size_t(sh.rows * sh.y_stride), kSentinel);
      k.linear_i8(w8.data(), ws.data(), sh.in, sh.group, q.data(), s.data(), sh.rows, b, sh.o0, sh.o1, y.data(),
                  sh.y_stride);
      INFO("I8");
      check_outputs(sh, y, ref, mag);
    }

    // I4: random bytes cover every nibble.
    const std::vector<uint8_t> w4 = random_bytes(size_t(sh.out * sh.in / 2), ++seed);
    reference([&](int64_t o, int64_t c) { return i4_at(w4, sh.in, o, c); },
              [&](int64_t o, int64_t g) { return double(tern::half_to_float(ws16[size_t(o * groups + g)])); });
    std::vector<float> y(size_t(sh.rows * sh.y_stride), kSentinel);
    k.linear_i4(w4.data(), ws16.data(), sh.in, sh.group, q.data(), s.data(), sh.rows, b, sh.o0, sh.o1, y.data(),
                sh.y_stride);
    INFO("I4");
    check_outputs(sh, y, ref, mag);
  }
}

TEST_CASE("Compressed weights: the F16 kernel matches the definition", "[isa][quant]") {
  const IsaKernels& k = tern::cpu::isa();
  INFO("kernels " << k.name);
  uint32_t seed = 300;
  std::vector<Shape> all = shapes();
  for (int64_t in : {7, 40, 100}) all.push_back({5, in, in, 13, 3, 12, 17, true});  // in not a multiple of 32
  for (const Shape& sh : all) {
    if (sh.group != sh.in) continue;  // no groups in F16
    INFO("rows " << sh.rows << " in " << sh.in << " o [" << sh.o0 << ", " << sh.o1 << ") bias " << sh.bias);
    const std::vector<float> x = randoms(size_t(sh.rows * sh.in), ++seed, 3.0f);
    const std::vector<uint16_t> w = halves(randoms(size_t(sh.out * sh.in), ++seed, 0.5f));
    const std::vector<float> bias = randoms(size_t(sh.out), ++seed);
    const float* b = sh.bias ? bias.data() : nullptr;
    std::vector<double> ref(size_t(sh.rows * sh.out)), mag(ref.size());
    for (int64_t r = 0; r < sh.rows; ++r) {
      for (int64_t o = 0; o < sh.out; ++o) {
        double sum = b ? b[o] : 0.0, m = b ? std::fabs(b[o]) : 0.0;
        for (int64_t c = 0; c < sh.in; ++c) {
          const double t = double(x[size_t(r * sh.in + c)]) * tern::half_to_float(w[size_t(o * sh.in + c)]);
          sum += t;
          m += std::fabs(t);
        }
        ref[size_t(r * sh.out + o)] = sum;
        mag[size_t(r * sh.out + o)] = m;
      }
    }
    std::vector<float> y(size_t(sh.rows * sh.y_stride), kSentinel);
    k.linear_f16(w.data(), sh.in, x.data(), sh.rows, b, sh.o0, sh.o1, y.data(), sh.y_stride);
    check_outputs(sh, y, ref, mag);
  }
}

TEST_CASE("Compressed weights: the packed I8 and I4 GEMM matches the definition", "[isa][quant]") {
  const IsaKernels& k = tern::cpu::isa();
  INFO("kernels " << k.name << ", panels of " << k.qgemm_nr);
  if (k.qgemm_nr == 0) return;
  uint32_t seed = 400;
  std::vector<Shape> all;
  // Outputs: under one panel, a partial last panel, whole panels in odd and even counts (the 2-panel tiles and the
  // 4-panel one-row tile with their remainders); rows: every remainder of the 4-row tiles, and several row tiles.
  for (const Shape& sh : shapes()) {
    for (int64_t out : {13, 40, 72}) all.push_back({sh.rows, sh.in, sh.group, out, 0, out, out + 3, sh.bias});
  }
  for (int64_t rows : {6, 7, 11, 70}) all.push_back({rows, 160, 32, 50, 0, 50, 53, true});
  for (const Shape& sh : all) {
    INFO("rows " << sh.rows << " in " << sh.in << " group " << sh.group << " out " << sh.out << " bias " << sh.bias);
    const int64_t nb = sh.in / kBlock, groups = sh.in / sh.group;
    const std::vector<float> x = randoms(size_t(sh.rows * sh.in), ++seed, 3.0f);
    std::vector<int8_t> q;
    std::vector<float> s;
    reference_quantize(x, sh.rows, sh.in, q, s);
    std::vector<int32_t> sums(size_t(sh.rows * nb), 0x5A5A5A5A);
    k.qgemm_activation_sums(q.data(), sh.rows, sh.in, sums.data());
    const std::vector<float> bias = randoms(size_t(sh.out), ++seed);
    const float* b = sh.bias ? bias.data() : nullptr;
    const std::vector<float> ws = randoms(size_t(sh.out * groups), ++seed, 0.05f);
    const std::vector<uint16_t> ws16 = halves(ws);
    const int64_t panels = (sh.out + k.qgemm_nr - 1) / k.qgemm_nr;

    // The definition in double, as in the in-place kernels' test.
    std::vector<double> ref(size_t(sh.rows * sh.out)), mag(ref.size());
    auto reference = [&](auto weight, auto scale_of) {
      for (int64_t r = 0; r < sh.rows; ++r) {
        for (int64_t o = 0; o < sh.out; ++o) {
          double sum = b ? b[o] : 0.0, m = b ? std::fabs(b[o]) : 0.0;
          for (int64_t c = 0; c < sh.in; ++c) {
            const double t = scale_of(o, c / sh.group) * s[size_t(r * nb + c / kBlock)] * double(weight(o, c)) *
                             q[size_t(r * sh.in + c)];
            sum += t;
            m += std::fabs(t);
          }
          ref[size_t(r * sh.out + o)] = sum;
          mag[size_t(r * sh.out + o)] = m;
        }
      }
    };
    // Packed into a 64-byte aligned buffer; run in two calls (panels [0, 1) and [1, panels)), as threads split it.
    auto run = [&](const char* what, int bits, auto pack) {
      const uint64_t panel_bytes = k.qgemm_panel_bytes(sh.in, sh.group, bits);
      REQUIRE(panel_bytes % 64 == 0);
      std::vector<uint8_t> storage(size_t(uint64_t(panels) * panel_bytes) + 64, 0xA5);
      uint8_t* packed = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
      pack(packed);
      std::vector<float> y(size_t(sh.rows * sh.y_stride), kSentinel);
      k.qgemm_panels(packed, sh.in, sh.group, bits, sh.out, q.data(), s.data(), sums.data(), sh.rows, 0, 1, y.data(),
                     sh.y_stride);
      k.qgemm_panels(packed, sh.in, sh.group, bits, sh.out, q.data(), s.data(), sums.data(), sh.rows, 1, panels,
                     y.data(), sh.y_stride);
      INFO(what);
      check_outputs(sh, y, ref, mag);
    };

    const std::vector<int8_t> w8 = random_int8(size_t(sh.out * sh.in), ++seed);
    reference([&](int64_t o, int64_t c) { return w8[size_t(o * sh.in + c)]; },
              [&](int64_t o, int64_t g) { return double(ws[size_t(o * groups + g)]); });
    run("I8", 8, [&](uint8_t* p) { k.pack_i8_panels(w8.data(), ws.data(), b, sh.out, sh.in, sh.group, p); });

    const std::vector<uint8_t> w4 = random_bytes(size_t(sh.out * sh.in / 2), ++seed);
    reference([&](int64_t o, int64_t c) { return i4_at(w4, sh.in, o, c); },
              [&](int64_t o, int64_t g) { return double(tern::half_to_float(ws16[size_t(o * groups + g)])); });
    run("I4", 4, [&](uint8_t* p) { k.pack_i4_panels(w4.data(), ws16.data(), b, sh.out, sh.in, sh.group, p); });
  }
}
