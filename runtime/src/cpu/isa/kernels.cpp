// SPDX-License-Identifier: MIT
// One instruction-set variant of the CPU kernels' hot loops (cpu/isa/table.h). cmake/CpuIsa.cmake compiles this
// file once per variant, with the variant's flags (e.g. -march=x86-64-v3) and TERN_ISA_NAMESPACE = isa_<name>;
// auto-vectorisation under those flags does the rest.
//
// The one-definition rule is what keeps a wider variant's code off a narrower path: an inline function or template
// instantiation emitted here as a weak symbol outside this variant's namespace could be the copy the linker keeps
// for every caller, on every CPU. So everything here lives in an anonymous namespace inside tern::cpu::isa_<name>,
// the included loops (*.inc) use builtins and their own helpers instead of std::, and the headers included here
// bring only types, C functions and always-inline intrinsics. The only external symbol is the variant's table;
// tests/isa/check_isa_symbols.cmake checks each variant's object for any other.
#include <cmath>
#include <cstdint>

#include "cpu/isa/table.h"

#if defined(__F16C__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>  // the x86-64 baseline: cvtss2si, rounding as the wider variants do (cpu/isa/quant.inc)
#elif defined(__aarch64__)
#include <arm_neon.h>  // AArch64 always has NEON and its float16 <-> float32 conversions (FCVTL, FCVTN)
#endif

#if !defined(TERN_ISA_NAMESPACE) || !defined(TERN_ISA_NAME)
#error "compile through cmake/CpuIsa.cmake: TERN_ISA_NAMESPACE and TERN_ISA_NAME name the variant"
#endif

namespace tern::cpu::TERN_ISA_NAMESPACE {
namespace {

#include "format/half_bits.inc"
#include "cpu/isa/fast_math.inc"
#include "cpu/isa/rows.inc"
#include "cpu/isa/attention.inc"
#include "cpu/isa/attention_tile.inc"
#include "cpu/isa/attention_half.inc"
#include "cpu/isa/quant.inc"
#include "cpu/isa/quant_gemm.inc"
#include "cpu/isa/gemm.inc"

}  // namespace

extern const IsaKernels kKernels;
const IsaKernels kKernels = {
    TERN_ISA_NAME,
    layer_norm,
    relu,
    gelu_erf,
    gelu_tanh,
    silu,
    add,
    halves_to_floats,
    floats_to_halves,
    add_into_halves,
    dot,
    attend_tile,
    attend_keys,
    attend_tile_f16,
    attend_keys_f16,
    lsh_softmax_row,
    lsh_weigh_values,
    routing_attend,
    span_update_row,
    xl_update_row,
    strided_update_row,
    quantize_rows_q8,
    linear_i8,
    linear_i4,
    linear_f16,
    kQgemmNR,
    kQgemmMinRowsI8,
    kQgemmMinRowsI4,
    qgemm_panel_bytes,
    pack_i8_panels,
    pack_i4_panels,
    qgemm_activation_sums,
    qgemm_panels,
    kGemmNR,
    pack_f32_panels,
    gemm_f32_panels,
};

}  // namespace tern::cpu::TERN_ISA_NAMESPACE
