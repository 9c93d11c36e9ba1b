# SPDX-License-Identifier: MIT
# Fails when a source includes a header across a layer it must not cross:
#   - runtime/src/{ops,core,format,text}/ include no backend header (cpu/, vulkan/, vulkan_absent/): op facts,
#     sessions, the file format and tokenizers sit above the backend boundary (core/backend.h), and the converter
#     links ops/, format/ and text/ alone;
#   - runtime/src/{format,text}/ include nothing of core/: the file format and the tokenizers sit below sessions;
#   - runtime/src/cpu/ includes nothing of vulkan/, runtime/src/vulkan/ nothing of cpu/: backends share ops/ only;
#   - examples/ and tools/ use the public API (tern/...) and runtime/src/format/ only: no runtime/src/core, ops,
#     text, cpu or vulkan header and no converter/src header, except the benchmarks listed in `allowed` below.
#   cmake -DSOURCE_DIR=<repository root> -P check_includes.cmake
cmake_policy(SET CMP0057 NEW)  # if(... IN_LIST ...)
set(root "${SOURCE_DIR}/runtime/src")
if(NOT EXISTS "${root}/core/session.h" OR NOT EXISTS "${root}/format/model.h")
  message(FATAL_ERROR "${SOURCE_DIR} holds no runtime/src/core and runtime/src/format: wrong SOURCE_DIR?")
endif()

# Tools that time internals on purpose, and why. "file: header" pairs.
set(allowed
  # Times the CPU attention kernel alone, beside the whole forward, for each window kind.
  "tools/bench/windowed_bench.cpp: cpu/kernels.h"
  "tools/bench/windowed_bench.cpp: ops/attention_pattern.h"
  # These two write their synthetic models with the converter's graph builder and writer; the windowed one's is a
  # decoder, built from the importers' decoder pieces.
  "tools/bench/windowed_bench.cpp: graph_builder.h"
  "tools/bench/windowed_bench.cpp: importers/decoder_builder.h"
  "tools/bench/windowed_bench.cpp: writer.h"
  "tools/bench/bucketed_bench.cpp: graph_builder.h"
  "tools/bench/bucketed_bench.cpp: writer.h")

set(bad "")
set(checked 0)
# check_layer(<regex of the included paths that cross, or TOOLS for the tools' rule> <globs of the files...>)
function(check_layer forbid)
  set(globs ${ARGN})
  file(GLOB_RECURSE files ${globs})
  foreach(f ${files})
    if(NOT f MATCHES "\\.(c|cc|cpp|h|hpp|inc)$")
      continue()
    endif()
    math(EXPR checked "${checked} + 1")
    file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
    file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line ${lines})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" header "${line}")
      set(crosses OFF)
      if(header MATCHES "${forbid}")
        set(crosses ON)
      endif()
      # A converter header is included by its bare name (converter/src is on the include path).
      if(forbid STREQUAL "TOOLS" AND NOT header MATCHES "/" AND EXISTS "${SOURCE_DIR}/converter/src/${header}")
        set(crosses ON)
      endif()
      if(forbid STREQUAL "TOOLS" AND header MATCHES "^(core|ops|text|cpu|vulkan|vulkan_absent|importers)/")
        set(crosses ON)
      endif()
      if(crosses AND NOT "${rel}: ${header}" IN_LIST allowed)
        list(APPEND bad "${rel}: ${line}")
      endif()
    endforeach()
  endforeach()
  set(bad "${bad}" PARENT_SCOPE)
  set(checked ${checked} PARENT_SCOPE)
endfunction()

check_layer("^(cpu|vulkan|vulkan_absent)/" "${root}/ops/*" "${root}/core/*" "${root}/format/*" "${root}/text/*")
check_layer("^core/" "${root}/format/*" "${root}/text/*")
check_layer("^(vulkan|vulkan_absent)/" "${root}/cpu/*")
check_layer("^cpu/" "${root}/vulkan/*" "${root}/vulkan_absent/*")
check_layer("TOOLS" "${SOURCE_DIR}/examples/*" "${SOURCE_DIR}/tools/*")

if(checked LESS 100)
  message(FATAL_ERROR "checked only ${checked} files under ${SOURCE_DIR}: wrong SOURCE_DIR?")
endif()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "includes across a layer boundary:\n  ${text}")
endif()
message(STATUS "${checked} files checked: no include crosses a layer boundary")
