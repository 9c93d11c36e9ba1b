# SPDX-License-Identifier: MIT
# tern_check_in_sysroot(NAME path...): when cross-compiling, every file or directory that a find step chose for the
# library NAME must lie inside one of the target's roots, symlinks resolved: CMAKE_SYSROOT, or a directory of
# CMAKE_FIND_ROOT_PATH (an Android build's dependency prefixes, cmake/Android.cmake). A build machine's library or
# header reached by a loose search path (an x86 libcpuinfo through the host's pkg-config, a CMake package under
# /usr/lib, a sysroot link that still points at /usr/lib) would otherwise link or compile silently and fail only on
# the device. Empty or NOTFOUND entries and linker flags (-lfoo, -pthread) are not paths and pass.
function(tern_check_in_sysroot name)
  if(NOT CMAKE_CROSSCOMPILING)
    return()
  endif()
  if(NOT CMAKE_SYSROOT)
    message(FATAL_ERROR "Cross-compiling without CMAKE_SYSROOT: Tern's dependencies must come from the target's "
                        "root (cmake/toolchains/*.cmake and the Android NDK's toolchain file set it)")
  endif()
  set(roots "")
  foreach(root IN LISTS CMAKE_SYSROOT CMAKE_FIND_ROOT_PATH)
    get_filename_component(root "${root}" REALPATH)
    list(APPEND roots "${root}")
  endforeach()
  list(JOIN roots ", " roots_text)
  foreach(path IN LISTS ARGN)
    if(path STREQUAL "" OR path MATCHES "NOTFOUND$" OR path MATCHES "^-")
      continue()
    endif()
    get_filename_component(real "${path}" REALPATH)
    set(inside OFF)
    foreach(root IN LISTS roots)
      string(FIND "${real}/" "${root}/" at)
      if(at EQUAL 0)
        set(inside ON)
      endif()
    endforeach()
    if(NOT inside)
      message(FATAL_ERROR "${name}: found ${path} (${real}), outside the target's roots (${roots_text}): the build "
                          "machine's copy, not the target's. Put the target's ${name} into the sysroot "
                          "(tools/cross/aarch64.sh does) or a prefix of CMAKE_PREFIX_PATH (Android), and configure a "
                          "fresh build directory.")
    endif()
  endforeach()
endfunction()
