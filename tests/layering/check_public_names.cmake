# SPDX-License-Identifier: MIT
# Fails when a class of tern.hpp (the C++ wrapper apps compile) shares its name with a class or struct of the runtime
# under runtime/src/: both live in namespace tern, so a program that links the static runtime and includes tern.hpp
# (the fuzz targets, tests, apps linking libtern.a) would hold two definitions of one class, and the linker keeps one
# of their inline members for both (a destructor of one class run on the other's object).
#   cmake -DSOURCE_DIR=<repository root> -P check_public_names.cmake
file(STRINGS "${SOURCE_DIR}/runtime/include/tern/tern.hpp" decls REGEX "^[ \t]*(class|struct)[ \t]+[A-Za-z_][A-Za-z0-9_]*")
set(public "")
foreach(d ${decls})
  string(REGEX REPLACE "^[ \t]*(class|struct)[ \t]+([A-Za-z_][A-Za-z0-9_]*).*" "\\2" name "${d}")
  list(APPEND public ${name})
endforeach()
list(LENGTH public count)
if(count LESS 4)
  message(FATAL_ERROR "found only ${count} classes in tern.hpp: wrong SOURCE_DIR?")
endif()
file(GLOB_RECURSE files "${SOURCE_DIR}/runtime/src/*.h" "${SOURCE_DIR}/runtime/src/*.cpp")
set(bad "")
foreach(f ${files})
  foreach(name ${public})
    file(STRINGS "${f}" lines REGEX "^[ \t]*(class|struct)[ \t]+${name}([ \t:{;]|$)")
    foreach(line ${lines})
      file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
      list(APPEND bad "${rel}: ${line} (tern.hpp has class ${name})")
    endforeach()
  endforeach()
endforeach()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "runtime classes named as tern.hpp's:\n  ${text}")
endif()
message(STATUS "${count} tern.hpp classes, none named again under runtime/src")
