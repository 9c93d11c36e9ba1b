// SPDX-License-Identifier: MIT
#include "cpu/isa.h"

#include <cpuinfo.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

// Each variant cmake/CpuIsa.cmake built defines TERN_CPU_ISA_HAVE_<NAME> for this file, and its table in its own
// namespace (cpu/isa/kernels.cpp).
#define TERN_DECLARE_ISA(name) \
  namespace tern::cpu::isa_##name { extern const IsaKernels kKernels; }
#if TERN_CPU_ISA_HAVE_BASELINE
TERN_DECLARE_ISA(baseline)
#endif
#if TERN_CPU_ISA_HAVE_AVX2
TERN_DECLARE_ISA(avx2)
#endif
#if TERN_CPU_ISA_HAVE_AVX512
TERN_DECLARE_ISA(avx512)
#endif
#if TERN_CPU_ISA_HAVE_DOTPROD
TERN_DECLARE_ISA(dotprod)
#endif
#if TERN_CPU_ISA_HAVE_NATIVE
TERN_DECLARE_ISA(native)
#endif

namespace tern::cpu {
namespace {

// What a variant needs of the CPU besides the baseline, for messages, and whether this CPU has it (cpuinfo checks
// that the OS saves the vector registers too).
struct Requirement {
  const char* what;
  bool met;
};

#if TERN_CPU_ISA_HAVE_AVX2 || TERN_CPU_ISA_HAVE_AVX512
bool has_x86_64_v3() {
  return cpuinfo_has_x86_avx() && cpuinfo_has_x86_avx2() && cpuinfo_has_x86_fma3() && cpuinfo_has_x86_f16c() &&
         cpuinfo_has_x86_bmi() && cpuinfo_has_x86_bmi2() && cpuinfo_has_x86_lzcnt() && cpuinfo_has_x86_movbe();
}
#endif

std::vector<std::pair<const IsaKernels*, Requirement>> built() {
  // cpuinfo_initialize fails only where it cannot read the CPU: then nothing beyond the baseline runs.
  [[maybe_unused]] const bool known = cpuinfo_initialize();
  std::vector<std::pair<const IsaKernels*, Requirement>> v;
#if TERN_CPU_ISA_HAVE_BASELINE
  v.push_back({&isa_baseline::kKernels, {"", true}});
#endif
#if TERN_CPU_ISA_HAVE_AVX2
  v.push_back({&isa_avx2::kKernels, {"x86-64-v3 (AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE)", known && has_x86_64_v3()}});
#endif
#if TERN_CPU_ISA_HAVE_AVX512
  v.push_back({&isa_avx512::kKernels,
               {"x86-64-v4 and AVX-512 VNNI (x86-64-v3 and AVX-512 F, BW, CD, DQ, VL, VNNI)",
                known && has_x86_64_v3() && cpuinfo_has_x86_avx512f() && cpuinfo_has_x86_avx512bw() &&
                    cpuinfo_has_x86_avx512cd() && cpuinfo_has_x86_avx512dq() && cpuinfo_has_x86_avx512vl() &&
                    cpuinfo_has_x86_avx512vnni()}});
#endif
#if TERN_CPU_ISA_HAVE_DOTPROD
  v.push_back({&isa_dotprod::kKernels,
               {"the Armv8 dot product instructions (SDOT)", known && cpuinfo_has_arm_neon_dot()}});
#endif
#if TERN_CPU_ISA_HAVE_NATIVE
  v.push_back({&isa_native::kKernels, {"the build machine's CPU (TERN_NATIVE)", true}});
#endif
  return v;
}

struct Choice {
  const IsaKernels* kernels = nullptr;
  std::string description;
};

Choice choose() {
  const auto variants = built();
  // The widest variant this CPU runs at or below index `limit`.
  auto widest = [&](size_t limit) {
    size_t best = 0;
    for (size_t i = 0; i <= limit && i < variants.size(); ++i) {
      if (variants[i].second.met) best = i;
    }
    return best;
  };
  size_t pick = widest(variants.size() - 1);
  std::string note;
  const char* env = std::getenv("TERN_CPU_ISA");
  const std::string asked = env ? env : "";
  if (!asked.empty()) {
    size_t i = 0;
    while (i < variants.size() && asked != variants[i].first->name) ++i;
    std::string names;
    for (const auto& v : variants) names += std::string(names.empty() ? "" : ", ") + v.first->name;
    if (i == variants.size()) {
      note = "TERN_CPU_ISA=" + asked + " is not a variant of this library (" + names + ")";
    } else if (!variants[i].second.met) {
      pick = widest(i);
      note = "TERN_CPU_ISA=" + asked + ": this CPU lacks " + variants[i].second.what;
    } else {
      pick = i;
    }
  }
  Choice c;
  c.kernels = variants[pick].first;
  c.description = std::string("kernels: ") + c.kernels->name + (note.empty() ? "" : " (" + note + ")");
  return c;
}

const Choice& choice() {
  static const Choice c = choose();
  return c;
}

}  // namespace

const IsaKernels& isa() { return *choice().kernels; }

const std::string& isa_description() { return choice().description; }

std::vector<IsaVariant> isa_variants() {
  std::vector<IsaVariant> out;
  for (const auto& v : built()) out.push_back({v.first, v.second.met});
  return out;
}

}  // namespace tern::cpu
