# SPDX-License-Identifier: MIT
# Fails when an object of a CPU kernel variant (cpu/isa/kernels.cpp compiled for one instruction set, see
# cmake/CpuIsa.cmake) defines an external symbol outside that variant's namespace, tern::cpu::<NAMESPACE>. Such a
# symbol, above all a weak one (an inline function or template instantiation, nm types W, V, u), could be the copy
# the linker keeps for every caller: code built for AVX-512 reached from the baseline path, an illegal instruction on
# a CPU without it. A symbol belongs to the variant when its mangled name holds the namespace (a function, a table,
# a template instantiated on a type of it, a sanitizer's record of one). Data that holds no code is allowed:
# sanitizers' bookkeeping (__asan_*, __sancov_*, ...) and type_info objects and names (_ZTI*, _ZTS*: clang's
# -fsanitize=function emits them for function types). The variant's table must be there: a check that finds nothing
# is blind.
#   cmake -DNM=<nm> -DOBJECTS=<a.o|b.o> -DNAMESPACE=isa_avx2 -P check_isa_objects.cmake
string(LENGTH "${NAMESPACE}" len)
set(token "4tern3cpu${len}${NAMESPACE}")  # tern::cpu::<NAMESPACE> in a mangled name
string(REPLACE "|" ";" objects "${OBJECTS}")
set(bad "")
set(checked 0)
set(table_found OFF)
foreach(obj ${objects})
  execute_process(COMMAND "${NM}" "${obj}" OUTPUT_VARIABLE symbols RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} ${obj} failed: ${err}")
  endif()
  string(REGEX MATCHALL "[^\n]+" lines "${symbols}")
  foreach(line ${lines})
    # "<value> <type> <name>" for definitions, "<spaces> U <name>" for references.
    if(NOT line MATCHES "^[0-9a-fA-F]* *([A-Za-z?]) (.+)$")
      continue()
    endif()
    set(type "${CMAKE_MATCH_1}")
    set(name "${CMAKE_MATCH_2}")
    # External definitions: upper-case types but U (undefined), plus u (unique global) and i (indirect function).
    if(NOT type MATCHES "^[A-TV-Zui]$")
      continue()
    endif()
    math(EXPR checked "${checked} + 1")
    if(name MATCHES "^_ZN${token}8kKernelsE$")
      set(table_found ON)
    endif()
    string(FIND "${name}" "${token}" at)
    if(at EQUAL -1 AND NOT name MATCHES "^(_*(asan|sancov|odr_asan|ubsan|tsan|msan|sanitizer)|_ZT[IS])")
      list(APPEND bad "${type} ${name}")
    endif()
  endforeach()
endforeach()
if(NOT table_found)
  message(FATAL_ERROR "no tern::cpu::${NAMESPACE}::kKernels in ${OBJECTS} (${checked} external symbols): the check is blind")
endif()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "the ${NAMESPACE} kernel objects define symbols outside tern::cpu::${NAMESPACE} (weak ones may "
                      "replace other variants' copies at link time):\n  ${text}")
endif()
message(STATUS "${NAMESPACE}: ${checked} external symbols, all in tern::cpu::${NAMESPACE}")
