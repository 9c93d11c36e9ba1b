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
// Whether a Vulkan device can run this library's shaders here; *why says what is missing when not.
bool vulkan_device(std::string* why);
// Messages the Vulkan validation layer has reported in this process (0 without the layer or the backend).
uint64_t vulkan_validation_messages();
void write_file(const std::string& path, const std::string& bytes);

}  // namespace tern::test

// Ends the test case as a visible skip where no Vulkan device exists: the warning names it, and ctest reports the
// test as skipped (SKIP_REGULAR_EXPRESSION in tests/CMakeLists.txt), not as passed.
#define TERN_SKIP_WITHOUT_VULKAN()                                            \
  do {                                                                        \
    std::string why_no_vulkan;                                                \
    if (!::tern::test::vulkan_device(&why_no_vulkan)) {                       \
      WARN("skipped: no Vulkan device (" << why_no_vulkan << ")");            \
      return;                                                                 \
    }                                                                         \
  } while (0)
