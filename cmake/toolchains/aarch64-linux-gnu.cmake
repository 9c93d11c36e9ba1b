# SPDX-License-Identifier: MIT
# Cross-compiling for 64-bit ARM Linux (phones' and boards' CPUs) with Debian's cross toolchain
# (crossbuild-essential-arm64), e.g.
#   cmake -S . -B build-aarch64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
# tools/cross/aarch64.sh does all of it: the packages, the sysroot, the build and (--test) the suite under qemu.
#
# TERN_SYSROOT: the target's libraries and headers (XNNPACK, pthreadpool, cpuinfo, FlatBuffers, ...), a directory
# laid out like an arm64 Debian root. From -DTERN_SYSROOT=..., else the environment's TERN_SYSROOT, else
# <build dir>/sysroot (where tools/cross/aarch64.sh assembles it). The C and C++ runtime (libc6-dev, libstdc++)
# come from the cross toolchain itself (/usr/aarch64-linux-gnu), which the compiler searches whatever the sysroot.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(TERN_CROSS_TRIPLE aarch64-linux-gnu)

if(NOT TERN_SYSROOT)
  if(DEFINED ENV{TERN_SYSROOT})
    set(TERN_SYSROOT "$ENV{TERN_SYSROOT}")
  else()
    set(TERN_SYSROOT "${CMAKE_BINARY_DIR}/sysroot")
  endif()
endif()
get_filename_component(TERN_SYSROOT "${TERN_SYSROOT}" ABSOLUTE)
set(TERN_SYSROOT "${TERN_SYSROOT}" CACHE PATH "The aarch64 target's root: libraries, headers, CMake and pkg-config files")
if(NOT IS_DIRECTORY "${TERN_SYSROOT}")
  message(FATAL_ERROR "TERN_SYSROOT ${TERN_SYSROOT} is no directory: assemble one (tools/cross/aarch64.sh) or "
                      "pass -DTERN_SYSROOT=<an arm64 root>")
endif()
# try_compile projects (CMake's compiler checks) read this file again in their own binary directory: hand them
# the sysroot chosen here rather than let them guess one under that directory.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TERN_SYSROOT)

set(CMAKE_C_COMPILER ${TERN_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${TERN_CROSS_TRIPLE}-g++)
set(CMAKE_SYSROOT "${TERN_SYSROOT}")

# Libraries, headers and CMake packages from the sysroot only (never the build machine's x86 ones); programs
# (flatc, glslc, pkg-config) from the build machine only, since they run there.
set(CMAKE_FIND_ROOT_PATH "${TERN_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Debian's multiarch directory for the target, for find_library and find_package's lib/<arch>/cmake.
set(CMAKE_LIBRARY_ARCHITECTURE ${TERN_CROSS_TRIPLE})

# pkg-config reads the sysroot's .pc files alone (LIBDIR replaces its default search path, so the build
# machine's libcpuinfo.pc cannot answer), and prefixes the paths they give with the sysroot.
set(ENV{PKG_CONFIG_LIBDIR}
    "${TERN_SYSROOT}/usr/lib/${TERN_CROSS_TRIPLE}/pkgconfig:${TERN_SYSROOT}/usr/lib/pkgconfig:${TERN_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${TERN_SYSROOT}")
set(ENV{PKG_CONFIG_PATH} "")

# Test and tool executables run under user-mode emulation, with the sysroot as their root (its ld.so, libc and
# shared libraries): ctest, and Catch2's test discovery at build time, go through it.
find_program(TERN_QEMU_AARCH64 qemu-aarch64)
if(TERN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${TERN_QEMU_AARCH64};-L;${TERN_SYSROOT}")
endif()
