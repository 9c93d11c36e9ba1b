# SPDX-License-Identifier: MIT
# Fails when CONVERTER (tern-convert) links code of a backend's dependencies: XNNPACK, pthreadpool, cpuinfo or Tern's
# Vulkan backend. RUNTIME (the static libtern.a), which holds the backends and calls into their dependencies, is the
# control that the symbol names are right.
#   cmake -DNM=<nm> -DCONVERTER=<tern-convert> -DRUNTIME=<libtern.a> -P check_symbols.cmake
set(pattern "(^| )(xnn_[a-z]|pthreadpool_[a-z]|cpuinfo_[a-z]|tern::vk::|tern::cpu::)")
foreach(exe CONVERTER RUNTIME)
  execute_process(COMMAND "${NM}" -C "${${exe}}" OUTPUT_VARIABLE symbols RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} -C ${${exe}} failed: ${err}")
  endif()
  string(REGEX MATCHALL "[^\n]+" lines "${symbols}")
  list(LENGTH lines total)
  list(FILTER lines INCLUDE REGEX "${pattern}")
  list(LENGTH lines backend)
  set(${exe}_total ${total})
  set(${exe}_backend ${backend})
  set(${exe}_lines ${lines})
endforeach()
if(RUNTIME_backend EQUAL 0)
  message(FATAL_ERROR "the control ${RUNTIME} shows no backend symbols (of ${RUNTIME_total}): the check is blind")
endif()
if(CONVERTER_total LESS 100)
  message(FATAL_ERROR "${CONVERTER} has only ${CONVERTER_total} symbols: stripped?")
endif()
if(NOT CONVERTER_backend EQUAL 0)
  list(SUBLIST CONVERTER_lines 0 10 first)
  list(JOIN first "\n  " text)
  message(FATAL_ERROR "${CONVERTER} links ${CONVERTER_backend} backend symbols, e.g.\n  ${text}")
endif()
message(STATUS "${CONVERTER}: ${CONVERTER_total} symbols, none of XNNPACK, pthreadpool, cpuinfo or a backend "
               "(${RUNTIME}: ${RUNTIME_backend})")
