// SPDX-License-Identifier: MIT
// The float32 GEMM of the CPU's kernel table (cpu/isa/table.h, cpu/isa/gemm.inc): weights packed into panels, then
// y = x W^T + b against a double-precision reference written here from the table's definition, for every variant
// this CPU runs, on shapes that reach each register tile's row tails, a last partial panel, a sub-matrix starting
// past row 0 and an output wider than the matrix; and the same bits whichever rows and panels a call is given.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "cpu/isa.h"
#include "test_support.h"

using tern::cpu::IsaKernels;

namespace {

struct Packed {
  std::vector<float> panels, bias;
};

Packed pack(const IsaKernels& k, const float* w, const float* bias, int64_t rows, int64_t in) {
  const int64_t panels = (rows + k.gemm_nr - 1) / k.gemm_nr;
  Packed p;
  p.panels.assign(size_t(panels * k.gemm_nr * in), NAN);  // every float the packer owns must be written
  if (bias) p.bias.assign(size_t(panels * k.gemm_nr), NAN);
  k.pack_f32_panels(w, bias, rows, in, p.panels.data(), bias ? p.bias.data() : nullptr);
  return p;
}

// Relative error of each element against the double sum, over the dot product's magnitude sum |x||w|.
void check_against_reference(const std::vector<float>& y, int64_t y_stride, const std::vector<float>& x,
                             const float* w, const float* bias, int64_t n, int64_t in, int64_t rows) {
  int64_t bad = 0;
  double worst = 0;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < y_stride; ++c) {
      const float got = y[size_t(r * y_stride + c)];
      if (c >= rows) {  // beyond the matrix: untouched
        if (!std::isnan(got)) ++bad;
        continue;
      }
      double sum = bias ? double(bias[c]) : 0.0, magnitude = bias ? std::fabs(double(bias[c])) : 0.0;
      for (int64_t i = 0; i < in; ++i) {
        sum += double(x[size_t(r * in + i)]) * double(w[c * in + i]);
        magnitude += std::fabs(double(x[size_t(r * in + i)]) * double(w[c * in + i]));
      }
      const double err = std::fabs(double(got) - sum) / (magnitude + 1e-30);
      worst = std::max(worst, std::isnan(got) ? 1e30 : err);
      if (!(err <= 2e-6 * std::sqrt(double(in) + 1))) ++bad;
    }
  }
  INFO("worst relative error " << worst);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("Float32 GEMM on packed panels matches a double-precision reference in every variant", "[isa][gemm]") {
  const int64_t total_rows = 77;  // W [77, in]: rows a multiple of no panel width
  for (const auto& v : tern::cpu::isa_variants()) {
    if (!v.supported) continue;
    const IsaKernels& k = *v.kernels;
    const int64_t mr = k.gemm_nr == 32 ? 8 : k.gemm_nr == 16 ? 6 : 4;  // the variant's row tile (cpu/isa/gemm.inc)
    for (int64_t in : {1, 7, 32, 768, 1000}) {
      const std::vector<float> w = tern::test::random_floats(size_t(total_rows * in), uint32_t(in));
      const std::vector<float> b = tern::test::random_floats(size_t(total_rows), uint32_t(in + 1));
      for (int64_t n : {int64_t(1), int64_t(2), int64_t(5), mr, mr + 1, int64_t(37), int64_t(300)}) {
        if (in >= 768 && n == 300) continue;  // the reference's time; 300 rows run at in = 32 and 1000 below
        const std::vector<float> x = tern::test::random_floats(size_t(n * in), uint32_t(n * 7 + in));
        // (row0, rows, out_stride): the whole matrix; rows 5.. of it (a partial last panel) into a wider output.
        for (auto [row0, rows, stride] : {std::tuple<int64_t, int64_t, int64_t>{0, total_rows, total_rows},
                                          {5, total_rows - 5, total_rows + 3}}) {
          for (bool with_bias : {false, true}) {
            INFO("variant " << k.name << ", n " << n << ", in " << in << ", rows " << row0 << ".." << row0 + rows
                            << ", out stride " << stride << (with_bias ? ", bias" : ""));
            const float* wr = w.data() + row0 * in;
            const float* br = with_bias ? b.data() + row0 : nullptr;
            const Packed p = pack(k, wr, br, rows, in);
            std::vector<float> y(size_t(n * stride), NAN);
            const int64_t panels = (rows + k.gemm_nr - 1) / k.gemm_nr;
            k.gemm_f32_panels(p.panels.data(), with_bias ? p.bias.data() : nullptr, in, rows, x.data(), n, 0, panels,
                              y.data(), stride);
            check_against_reference(y, stride, x, wr, br, n, in, rows);
          }
        }
      }
    }
  }
  // The last case on a longer row count, once.
  for (const auto& v : tern::cpu::isa_variants()) {
    if (!v.supported) continue;
    const IsaKernels& k = *v.kernels;
    const int64_t n = 300, in = 1000, rows = 40;
    const std::vector<float> w = tern::test::random_floats(size_t(rows * in), 11);
    const std::vector<float> x = tern::test::random_floats(size_t(n * in), 12);
    const Packed p = pack(k, w.data(), nullptr, rows, in);
    std::vector<float> y(size_t(n * rows), NAN);
    k.gemm_f32_panels(p.panels.data(), nullptr, in, rows, x.data(), n, 0, (rows + k.gemm_nr - 1) / k.gemm_nr,
                      y.data(), rows);
    INFO("variant " << k.name << ", n 300, in 1000");
    check_against_reference(y, rows, x, w.data(), nullptr, n, in, rows);
  }
}

TEST_CASE("Float32 GEMM gives the same bits whichever rows and panels a call is given", "[isa][gemm]") {
  for (const auto& v : tern::cpu::isa_variants()) {
    if (!v.supported) continue;
    const IsaKernels& k = *v.kernels;
    INFO("variant " << k.name);
    const int64_t n = 23, in = 129, rows = 5 * k.gemm_nr + 3, panels = 6;
    const std::vector<float> w = tern::test::random_floats(size_t(rows * in), 21);
    const std::vector<float> b = tern::test::random_floats(size_t(rows), 22);
    const std::vector<float> x = tern::test::random_floats(size_t(n * in), 23);
    const Packed p = pack(k, w.data(), b.data(), rows, in);
    std::vector<float> whole(size_t(n * rows), NAN), pieces(size_t(n * rows), NAN);
    k.gemm_f32_panels(p.panels.data(), p.bias.data(), in, rows, x.data(), n, 0, panels, whole.data(), rows);
    // Rows one, then 2, 3, ... at a time (every tile shape), each against panels in groups of 1, 2, 3 ...
    int64_t r = 0;
    for (int64_t step = 1; r < n; r += step, ++step) {
      const int64_t count = std::min(step, n - r);
      for (int64_t p0 = 0, group = 1; p0 < panels; p0 += group, ++group) {
        k.gemm_f32_panels(p.panels.data(), p.bias.data(), in, rows, x.data() + r * in, count, p0,
                          std::min(panels, p0 + group), pieces.data() + r * rows, rows);
      }
    }
    CHECK(std::memcmp(whole.data(), pieces.data(), whole.size() * sizeof(float)) == 0);
  }
}
