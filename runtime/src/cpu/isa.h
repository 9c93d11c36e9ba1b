// SPDX-License-Identifier: MIT
// Which variant of the CPU kernels' hot loops (cpu/isa/table.h) this process runs: picked once, on first use, as
// the widest variant built into the library (cmake/CpuIsa.cmake) that the CPU supports. The environment variable
// TERN_CPU_ISA (baseline | avx2 | avx512) asks for a narrower one, for tests and diagnosis; it never gets one the
// CPU lacks (then the widest the CPU has below it runs, and the description says why).
#pragma once

#include <string>
#include <vector>

#include "cpu/isa/table.h"

namespace tern::cpu {

// The kernels in use.
const IsaKernels& isa();
// What users see (tern_backend_info.driver on the CPU): "kernels: avx512", with a note where TERN_CPU_ISA asked
// for something else, e.g. "kernels: avx2 (TERN_CPU_ISA=avx512: this CPU lacks x86-64-v4 and AVX-512 VNNI ...)".
const std::string& isa_description();

// Every variant built into this library, narrowest first, with whether this CPU runs it (white-box tests).
struct IsaVariant {
  const IsaKernels* kernels;
  bool supported;
};
std::vector<IsaVariant> isa_variants();

}  // namespace tern::cpu
