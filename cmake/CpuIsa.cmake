# SPDX-License-Identifier: MIT
# The CPU backend's hot loops (runtime/src/cpu/isa/) are compiled once per instruction-set variant, and the
# library picks one at run time (cpu/isa.cpp: the widest the CPU supports, or TERN_CPU_ISA's). Each variant is its
# own object library with its own flags and its own namespace, tern::cpu::isa_<name>, so that no code compiled for
# a wider ISA is reachable from a narrower path (tests/layering/check_isa_objects.cmake checks the objects for it).
#
#   x86-64, GCC or Clang: baseline (the target's default ISA: x86-64 SSE2, or whatever CMAKE_CXX_FLAGS ask for),
#                         avx2 (-march=x86-64-v3: AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE),
#                         avx512 (-march=x86-64-v4 -mavx512vnni: x86-64-v3 + AVX-512 F, BW, CD, DQ, VL and VNNI,
#                         which the int8 / int4 weight loops use; a CPU with AVX-512 but not VNNI, e.g.
#                         Skylake-SP, runs avx2)
#   TERN_NATIVE=ON:       one variant, native: everything is already compiled with -march=native
#   aarch64, GCC or Clang: baseline (ARMv8-A: NEON is always there, so auto-vectorisation targets it with no
#                         -march), dotprod (-march=armv8.2-a+dotprod: SDOT, which the int8 / int4 weight loops and
#                         their packed GEMM use; ARMv8.4-A and later have it, and many v8.2 cores), both with
#                         -fno-trapping-math: without it GCC keeps the clamps of exp_approx (fast_math.inc) as
#                         branches and the GELU loops scalar on AArch64. It changes no result, only whether
#                         floating-point exception flags may be raised by a selected-away operand.
#   anything else:        one variant, baseline, with no extra flags
#
# Sets TERN_CPU_ISA_VARIANTS (names, narrowest first). tern_add_cpu_isa_kernels(TARGET...) adds the variants'
# objects to each TARGET, which must be one that links (a static or shared library: an OBJECT library cannot hold
# other objects), and tells cpu/isa.cpp, which picks a variant, the variants built (a definition on that source in
# the first TARGET's directory).
set(TERN_CPU_ISA_VARIANTS "")
if(TERN_NATIVE)
  set(TERN_CPU_ISA_VARIANTS native)
  set(TERN_CPU_ISA_FLAGS_native "")
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|x64)$" AND CMAKE_SIZEOF_VOID_P EQUAL 8
       AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set(TERN_CPU_ISA_VARIANTS baseline avx2 avx512)
  set(TERN_CPU_ISA_FLAGS_baseline "")
  set(TERN_CPU_ISA_FLAGS_avx2 -march=x86-64-v3)
  set(TERN_CPU_ISA_FLAGS_avx512 -march=x86-64-v4 -mavx512vnni)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set(TERN_CPU_ISA_VARIANTS baseline dotprod)
  set(TERN_CPU_ISA_FLAGS_baseline -fno-trapping-math)
  set(TERN_CPU_ISA_FLAGS_dotprod -march=armv8.2-a+dotprod -fno-trapping-math)
else()
  set(TERN_CPU_ISA_VARIANTS baseline)
  set(TERN_CPU_ISA_FLAGS_baseline "")
endif()
message(STATUS "CPU kernel variants: ${TERN_CPU_ISA_VARIANTS}")

function(tern_add_cpu_isa_kernels)
  set(runtime_src ${PROJECT_SOURCE_DIR}/runtime/src)
  list(GET TERN_CPU_ISA_VARIANTS 0 first)
  if(NOT TARGET tern_cpu_isa_${first})  # the first call makes the variants' object libraries
    set(defs "")
    foreach(isa ${TERN_CPU_ISA_VARIANTS})
      add_library(tern_cpu_isa_${isa} OBJECT ${runtime_src}/cpu/isa/kernels.cpp)
      target_include_directories(tern_cpu_isa_${isa} PRIVATE ${runtime_src})
      target_compile_definitions(tern_cpu_isa_${isa} PRIVATE TERN_ISA_NAMESPACE=isa_${isa} TERN_ISA_NAME="${isa}")
      # The hot loops throw nothing and call nothing that does: without exception tables no object refers to the
      # C++ personality routine (a weak DW.ref symbol, shared across variants, that instrumented builds emit).
      target_compile_options(tern_cpu_isa_${isa} PRIVATE ${TERN_CPU_ISA_FLAGS_${isa}} -fno-exceptions)
      # AddressSanitizer's fake stack (detect_stack_use_after_return) aligns frames to 32 bytes only, while the
      # AVX-512 tile kernels keep arrays of 64-byte vectors on the stack and the compiler reaches them with aligned
      # moves: a sanitized build keeps these objects' frames on the real stack (every other check stays on).
      if("address" IN_LIST TERN_SANITIZE)
        if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
          target_compile_options(tern_cpu_isa_${isa} PRIVATE -fsanitize-address-use-after-return=never)
        else()
          target_compile_options(tern_cpu_isa_${isa} PRIVATE --param=asan-use-after-return=0)
        endif()
      endif()
      # Only the library itself calls into the variants.
      set_target_properties(tern_cpu_isa_${isa} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
      string(TOUPPER ${isa} upper)
      list(APPEND defs TERN_CPU_ISA_HAVE_${upper}=1)
    endforeach()
    set_source_files_properties(${runtime_src}/cpu/isa.cpp TARGET_DIRECTORY ${ARGV0} PROPERTIES COMPILE_DEFINITIONS "${defs}")
  endif()
  foreach(target ${ARGN})
    foreach(isa ${TERN_CPU_ISA_VARIANTS})
      target_sources(${target} PRIVATE $<TARGET_OBJECTS:tern_cpu_isa_${isa}>)
    endforeach()
  endforeach()
endfunction()
