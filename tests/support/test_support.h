// SPDX-License-Identifier: MIT
// Helpers shared by the test executables.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tern/tern.h"
#include "tern_generated.h"

namespace tern::test {

// Whether the process's resident memory is the library's and the test's: AddressSanitizer's shadow and fake stacks
// grow it on their own (GCC says so with __SANITIZE_ADDRESS__, clang, the sanitized tree's compiler, with
// __has_feature), and memory checks then say nothing.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRssIsTern = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kRssIsTern = false;
#else
constexpr bool kRssIsTern = true;
#endif
#else
constexpr bool kRssIsTern = true;
#endif

// The .tern file `bytes` re-serialised after `mutate` changes its graph (object API); the data segment is kept as
// it was, at the same 64-byte alignment after the new graph. For hostile-file tests.
std::string rebuild_model(const std::string& bytes, const std::function<void(fb::ModelT&)>& mutate);

// Absolute path of a file in the source tree, e.g. source_path("tests/goldens/x/config.json").
std::string source_path(const std::string& relative);
// A fresh, empty directory under the build tree for one test process's scratch files.
std::string scratch_dir(const std::string& name);
// ||a - ref|| / ||ref|| over n floats; infinity if any value is NaN or ref is all zeros.
double relative_error(const float* a, const float* ref, size_t n);
// float -> the nearest IEEE float16 value (ties to even) -> float, computed by scaling (independent of the runtime's
// bit-level conversions); beyond the largest half, inf.
float round_to_half(float f);
// Uniform floats in [lo, hi), deterministic in seed.
std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
// n random token ids in [0, rows).
std::vector<int32_t> random_ids(int64_t n, int64_t rows, uint32_t seed);
std::string read_file(const std::string& path);
// tests/goldens/<golden> converted (quietly) into <scratch_dir(scratch)>/model.tern; its path, or "" on failure.
std::string convert_golden(const std::string& golden, const std::string& scratch);
// Whether a Vulkan device can run this library's shaders here; *why says what is missing when not.
bool vulkan_device(std::string* why);
// Messages the Vulkan validation layer has reported in this process (0 without the layer or the backend).
uint64_t vulkan_validation_messages();
// tern_session_count_dispatches for a call of n tokens after `position`: each op's count and the total (REQUIREs OK).
struct DispatchCounts {
  std::vector<uint64_t> per_op;
  uint64_t total = 0;
};
DispatchCounts dispatch_counts(const tern_session* s, int64_t n, int64_t position);
void write_file(const std::string& path, const std::string& bytes);
// Recomputes a saved session state's checksum (core/session_state.cpp: FNV-1a over 8-byte words, then the tail
// bytes) after a test changed its bytes, so that the forgery reaches the checks behind the checksum.
void reseal_state(std::vector<uint8_t>* blob);
// The session's state as tern_session_save_state writes it (the size query, then the blob).
std::vector<uint8_t> saved_state(const tern_session* s);
// "CPU" or "Vulkan", for the messages of a test that runs on each backend.
const char* backend_name(tern_backend backend);
// The bound of one backend's fp32 output against the reference (DESIGN.md, Numerics): the CPU's own bound, 1e-4 on
// Vulkan.
double backend_tolerance(tern_backend backend, double cpu_tolerance);

// Under TERN_CPU_ISA (the ctest entries that run the CPU cases once per kernel variant, tests/CMakeLists.txt):
// whether the CPU kernels in use are the variant it names; *why says what runs instead when not (this CPU lacks it).
// True without TERN_CPU_ISA.
bool cpu_kernels_as_asked(std::string* why);

// Exit status of a test run that skipped part of itself (no Vulkan device) and had no failure.
constexpr int kSkipExitCode = 77;
// Records that this run skipped something; tests/main.cpp then exits with kSkipExitCode unless a test failed.
void note_skipped();
bool skipped_any();
// Whether the environment's TERN_TESTS_CPU_ONLY is set (non-empty, not 0): a run that asks for the CPU's halves of
// the test cases alone, where no Vulkan device can exist (a cross build's suite under qemu, tools/cross/aarch64.sh).
bool cpu_only_run();

// Sets an environment variable for what runs in its scope (sessions read TERN_VULKAN_* at creation), then restores
// what was there.
class EnvOverride {
 public:
  EnvOverride(const char* name, const std::string& value);
  ~EnvOverride();
  EnvOverride(const EnvOverride&) = delete;
  EnvOverride& operator=(const EnvOverride&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// The float32 "twin" of a compressed model: the float32 file f32_path (the same checkpoint converted without
// --weights) with every tensor that compressed_path stores compressed overwritten by its dequantised values
// (format/dequantize.h), written to out; *replaced counts the tensors. What a compressed model computes is defined
// as what its twin computes.
void write_dequantised_twin(const std::string& f32_path, const std::string& compressed_path, const std::string& out,
                            int* replaced);

}  // namespace tern::test

// Ends the test case (or, under GENERATE, this backend's run of it) as a visible skip where `backend` is Vulkan and no
// Vulkan device exists: the warning names it, and the process exits with kSkipExitCode if nothing failed
// (tests/main.cpp), which ctest reports as skipped (SKIP_RETURN_CODE in tests/CMakeLists.txt), not as passed. A
// failure anywhere else in the run (the CPU half of a test case) still fails it. The CPU needs no device. In a
// run that asked for the CPU alone (cpu_only_run) the Vulkan half is left out as asked, not skipped: the case passes
// on its CPU half. (Vulkan-only test cases are left out of such a run by name: tools/cross/aarch64.sh.)
#define TERN_SKIP_BACKEND_WITHOUT_DEVICE(backend)                             \
  do {                                                                        \
    std::string why_no_vulkan;                                                \
    if ((backend) == TERN_BACKEND_VULKAN && !::tern::test::vulkan_device(&why_no_vulkan)) { \
      if (::tern::test::cpu_only_run()) {                                     \
        WARN("Vulkan half not run: TERN_TESTS_CPU_ONLY (" << why_no_vulkan << ")"); \
        return;                                                               \
      }                                                                       \
      WARN("skipped: no Vulkan device (" << why_no_vulkan << ")");            \
      ::tern::test::note_skipped();                                           \
      return;                                                                 \
    }                                                                         \
  } while (0)

#define TERN_SKIP_WITHOUT_VULKAN() TERN_SKIP_BACKEND_WITHOUT_DEVICE(TERN_BACKEND_VULKAN)

// Runs the rest of the test case once per backend (Catch2 GENERATE), the backend named in every failure's message;
// the Vulkan run is a visible skip without a device. Op and model-family tests use it so that each lives once and
// every backend runs it (DESIGN.md: the reference, the CPU path and the Vulkan path on the same random input).
#define TERN_EACH_BACKEND(backend)                                            \
  const tern_backend backend = GENERATE(TERN_BACKEND_CPU, TERN_BACKEND_VULKAN); \
  TERN_SKIP_BACKEND_WITHOUT_DEVICE(backend);                                  \
  INFO("backend: " << ::tern::test::backend_name(backend))
