# The CPU backend's hot loops (runtime/src/cpu/isa/) are compiled once per instruction-set variant, and the
# library picks one at run time (cpu/isa.cpp: the widest the CPU supports, or TERN_CPU_ISA's). Each variant is its
# own object library with its own flags and its own namespace, tern::cpu::isa_<name>, so that no code compiled for
# a wider ISA is reachable from a narrower path (tests/isa/check_isa_symbols.cmake checks the objects for it).
#
#   x86-64, GCC or Clang: baseline (the target's default ISA: x86-64 SSE2, or whatever CMAKE_CXX_FLAGS ask for),
#                         avx2 (-march=x86-64-v3: AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE),
#                         avx512 (-march=x86-64-v4: x86-64-v3 + AVX-512 F, BW, CD, DQ, VL)
#   TERN_NATIVE=ON:       one variant, native: everything is already compiled with -march=native
#   anything else:        one variant, baseline, with no extra flags (aarch64: NEON is baseline there)
#
# Sets TERN_CPU_ISA_VARIANTS (names, narrowest first); tern_add_cpu_isa_kernels(TARGET) adds the variants' objects
# and the selection code's definitions to TARGET.
set(TERN_CPU_ISA_VARIANTS "")
if(TERN_NATIVE)
  set(TERN_CPU_ISA_VARIANTS native)
  set(TERN_CPU_ISA_FLAGS_native "")
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|x64)$" AND CMAKE_SIZEOF_VOID_P EQUAL 8
       AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set(TERN_CPU_ISA_VARIANTS baseline avx2 avx512)
  set(TERN_CPU_ISA_FLAGS_baseline "")
  set(TERN_CPU_ISA_FLAGS_avx2 -march=x86-64-v3)
  set(TERN_CPU_ISA_FLAGS_avx512 -march=x86-64-v4)
else()
  set(TERN_CPU_ISA_VARIANTS baseline)
  set(TERN_CPU_ISA_FLAGS_baseline "")
endif()
message(STATUS "CPU kernel variants: ${TERN_CPU_ISA_VARIANTS}")

set(TERN_CPU_ISA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/../runtime/src/cpu/isa/kernels.cpp)

function(tern_add_cpu_isa_kernels target)
  set(defs "")
  foreach(isa ${TERN_CPU_ISA_VARIANTS})
    add_library(tern_cpu_isa_${isa} OBJECT ${TERN_CPU_ISA_SOURCES})
    target_include_directories(tern_cpu_isa_${isa} PRIVATE ${PROJECT_SOURCE_DIR}/runtime/src)
    target_compile_definitions(tern_cpu_isa_${isa} PRIVATE TERN_ISA_NAMESPACE=isa_${isa} TERN_ISA_NAME="${isa}")
    target_compile_options(tern_cpu_isa_${isa} PRIVATE ${TERN_CPU_ISA_FLAGS_${isa}})
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:tern_cpu_isa_${isa}>)
    string(TOUPPER ${isa} upper)
    list(APPEND defs TERN_CPU_ISA_HAVE_${upper}=1)
  endforeach()
  set_property(SOURCE ${PROJECT_SOURCE_DIR}/runtime/src/cpu/isa.cpp TARGET_DIRECTORY ${target}
               APPEND PROPERTY COMPILE_DEFINITIONS ${defs})
endfunction()
