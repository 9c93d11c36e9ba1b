// Helpers shared by the test executables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tern::test {

// Absolute path of a file in the source tree, e.g. source_path("tests/goldens/x/config.json").
std::string source_path(const std::string& relative);
// A fresh, empty directory under the build tree for one test process's scratch files.
std::string scratch_dir(const std::string& name);
// ||a - ref|| / ||ref|| over n floats; infinity if any value is NaN or ref is all zeros.
double relative_error(const float* a, const float* ref, size_t n);
// Uniform floats in [lo, hi), deterministic in seed.
std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
// n random token ids in [0, rows).
std::vector<int32_t> random_ids(int64_t n, int64_t rows, uint32_t seed);
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace tern::test
