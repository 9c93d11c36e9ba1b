# SPDX-License-Identifier: MIT
# The libraries libtern links privately, found as Debian 12 installs them, as imported targets:
#   tern_deps::XNNPACK, tern_deps::pthreadpool  find_library (XNNPACK ships no CMake or pkg-config file)
#   tern_deps::cpuinfo                          pkg-config libcpuinfo (its CMake config is broken on Debian 12)
#   Threads::Threads                            find_package(Threads)
# (the Vulkan loader is opened at run time: libdl, a plain name, is all it adds). The build (runtime/CMakeLists.txt)
# and the installed package (ternConfig.cmake, which tern::tern_static needs it for) both include this file, so the
# two find the same things the same way. Sets TERN_DEPS_MISSING to what it did not find (empty when all were).
# TERN_DEPS_GLOBAL: make the targets global (the build tree, where other directories link them).
set(TERN_DEPS_MISSING "")
set(_tern_deps_global "")
if(TERN_DEPS_GLOBAL)
  set(_tern_deps_global GLOBAL)
endif()

if(NOT TARGET Threads::Threads)
  find_package(Threads QUIET)
endif()
if(NOT TARGET Threads::Threads)
  list(APPEND TERN_DEPS_MISSING Threads)
endif()

find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(TERN_CPUINFO QUIET IMPORTED_TARGET ${_tern_deps_global} libcpuinfo)
endif()
if(NOT TERN_CPUINFO_FOUND)
  list(APPEND TERN_DEPS_MISSING "libcpuinfo (pkg-config)")
endif()

find_library(XNNPACK_LIBRARY NAMES XNNPACK)
find_library(PTHREADPOOL_LIBRARY NAMES pthreadpool)
foreach(dep XNNPACK PTHREADPOOL)
  if(NOT ${dep}_LIBRARY)
    list(APPEND TERN_DEPS_MISSING ${dep})
  endif()
endforeach()

if(NOT TERN_DEPS_MISSING AND NOT TARGET tern_deps::XNNPACK)
  add_library(tern_deps::XNNPACK UNKNOWN IMPORTED ${_tern_deps_global})
  set_target_properties(tern_deps::XNNPACK PROPERTIES IMPORTED_LOCATION ${XNNPACK_LIBRARY})
  add_library(tern_deps::pthreadpool UNKNOWN IMPORTED ${_tern_deps_global})
  set_target_properties(tern_deps::pthreadpool PROPERTIES IMPORTED_LOCATION ${PTHREADPOOL_LIBRARY})
  add_library(tern_deps::cpuinfo INTERFACE IMPORTED ${_tern_deps_global})
  set_target_properties(tern_deps::cpuinfo PROPERTIES INTERFACE_LINK_LIBRARIES PkgConfig::TERN_CPUINFO)
  if(ANDROID)
    # cpuinfo logs through Android's liblog, which its libcpuinfo.pc does not name (a static libcpuinfo needs it).
    set_property(TARGET tern_deps::cpuinfo APPEND PROPERTY INTERFACE_LINK_LIBRARIES log)
  endif()
endif()
unset(_tern_deps_global)
