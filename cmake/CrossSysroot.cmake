# tern_check_in_sysroot(NAME path...): when cross-compiling, every file or directory that a find step chose for the
# library NAME must lie inside CMAKE_SYSROOT, symlinks resolved. A build machine's library or header reached by a
# loose search path (an x86 libcpuinfo through the host's pkg-config, a CMake package under /usr/lib, a sysroot
# link that still points at /usr/lib) would otherwise link or compile silently and fail only on the device.
# Empty or NOTFOUND entries and linker flags (-lfoo, -pthread) are not paths and pass.
function(tern_check_in_sysroot name)
  if(NOT CMAKE_CROSSCOMPILING)
    return()
  endif()
  if(NOT CMAKE_SYSROOT)
    message(FATAL_ERROR "Cross-compiling without CMAKE_SYSROOT: Tern's dependencies must come from the target's "
                        "root (cmake/toolchains/*.cmake set it)")
  endif()
  get_filename_component(root "${CMAKE_SYSROOT}" REALPATH)
  foreach(path IN LISTS ARGN)
    if(path STREQUAL "" OR path MATCHES "NOTFOUND$" OR path MATCHES "^-")
      continue()
    endif()
    get_filename_component(real "${path}" REALPATH)
    string(FIND "${real}/" "${root}/" at)
    if(NOT at EQUAL 0)
      message(FATAL_ERROR "${name}: found ${path} (${real}), outside the sysroot ${CMAKE_SYSROOT}: the build "
                          "machine's copy, not the target's. Put the target's ${name} into the sysroot "
                          "(tools/cross/aarch64.sh does) and configure a fresh build directory.")
    endif()
  endforeach()
endfunction()
