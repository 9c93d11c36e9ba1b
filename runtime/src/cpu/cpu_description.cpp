// SPDX-License-Identifier: MIT
// tern_cpu_description (tern.h): the CPU a benchmark ran on, so that results from different phones and laptops can
// be told apart: the chip's name, its cores and logical processors, and the vector features that decide which
// kernels run (Tern's own, picked in cpu/isa.cpp).
#include <cpuinfo.h>

#include <cstdio>
#include <string>

#include "tern/tern.h"

namespace {

struct Feature {
  const char* name;
  bool present;
};

std::string describe() {
  if (!cpuinfo_initialize()) return "unknown CPU (cpuinfo cannot read it)";
  const cpuinfo_package* package = cpuinfo_get_package(0);
  std::string s = package != nullptr && package->name[0] != '\0' ? package->name : "unnamed CPU";
  const uint32_t cores = cpuinfo_get_cores_count(), processors = cpuinfo_get_processors_count();
  s += " (" + std::to_string(cores) + (cores == 1 ? " core, " : " cores, ") + std::to_string(processors) +
       (processors == 1 ? " logical processor" : " logical processors");
#if CPUINFO_ARCH_ARM64 || CPUINFO_ARCH_ARM
  // Linux reports no chip name for most Arm SoCs: the main ID register names the core design exactly.
  if (const cpuinfo_core* core = cpuinfo_get_core(0)) {
    char midr[16];
    std::snprintf(midr, sizeof midr, "%08x", core->midr);
    s += std::string(", MIDR 0x") + midr;
  }
#endif
  s += ")";
  // cpuinfo answers false for the other architecture's features, so one list serves both.
  const Feature features[] = {
      {"sse4.2", cpuinfo_has_x86_sse4_2()},     {"avx", cpuinfo_has_x86_avx()},
      {"avx2", cpuinfo_has_x86_avx2()},         {"fma3", cpuinfo_has_x86_fma3()},
      {"f16c", cpuinfo_has_x86_f16c()},         {"avx512f", cpuinfo_has_x86_avx512f()},
      {"avx512bw", cpuinfo_has_x86_avx512bw()}, {"avx512vl", cpuinfo_has_x86_avx512vl()},
      {"avx512vnni", cpuinfo_has_x86_avx512vnni()}, {"avx512bf16", cpuinfo_has_x86_avx512bf16()},
      {"neon", cpuinfo_has_arm_neon()},         {"fp16", cpuinfo_has_arm_neon_fp16_arith()},
      {"dotprod", cpuinfo_has_arm_neon_dot()},  {"bf16", cpuinfo_has_arm_bf16()},
      {"sve", cpuinfo_has_arm_sve()},           {"sve2", cpuinfo_has_arm_sve2()},
  };
  std::string present;
  for (const Feature& f : features)
    if (f.present) present += std::string(present.empty() ? "" : " ") + f.name;
  return s + ": " + (present.empty() ? "no vector features Tern uses" : present);
}

}  // namespace

extern "C" const char* tern_cpu_description(void) {
  static const std::string description = describe();  // thread-safe initialisation; cpuinfo reads once
  return description.c_str();
}
