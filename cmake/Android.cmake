# SPDX-License-Identifier: MIT
# An Android NDK build (docs/arm64-android.md, "Android"):
#   cmake -S . -B build-android -G Ninja -DCMAKE_TOOLCHAIN_FILE=$NDK/build/cmake/android.toolchain.cmake \
#         -DANDROID_ABI=arm64-v8a -DANDROID_PLATFORM=android-28 -DCMAKE_PREFIX_PATH=<prefix>
# The NDK's sysroot brings the C and C++ runtime, libdl, liblog and the Vulkan headers. XNNPACK, pthreadpool, cpuinfo,
# FlatBuffers and nlohmann_json come from prefixes built for the same ABI with their own CMake builds and named in
# CMAKE_PREFIX_PATH. The NDK's toolchain file searches libraries, headers and packages under CMAKE_FIND_ROOT_PATH
# only (its CMAKE_FIND_ROOT_PATH_MODE_* are ONLY), which a CMAKE_PREFIX_PATH entry alone does not reach: each prefix
# is made a root as well. pkg-config (cpuinfo's libcpuinfo.pc) reads the prefixes' .pc files alone, never the build
# machine's. glslc is the NDK's (shader-tools/) unless one is on the PATH. Included before any find step.
if(NOT CMAKE_PREFIX_PATH)
  message(FATAL_ERROR "Android: give -DCMAKE_PREFIX_PATH=<prefix> holding XNNPACK, pthreadpool, cpuinfo, FlatBuffers "
                      "and nlohmann_json built with the NDK for this ABI (ANDROID_ABI ${ANDROID_ABI}; docs/arm64-android.md)")
endif()
set(_tern_pkg_config_dirs "")
foreach(_tern_prefix IN LISTS CMAKE_PREFIX_PATH)
  get_filename_component(_tern_prefix "${_tern_prefix}" ABSOLUTE)
  list(APPEND CMAKE_FIND_ROOT_PATH "${_tern_prefix}")
  list(APPEND _tern_pkg_config_dirs "${_tern_prefix}/lib/pkgconfig" "${_tern_prefix}/share/pkgconfig")
endforeach()
list(JOIN _tern_pkg_config_dirs ":" _tern_pkg_config_dirs)
# The .pc files hold their prefix's absolute paths: no sysroot to prepend.
set(ENV{PKG_CONFIG_LIBDIR} "${_tern_pkg_config_dirs}")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
unset(_tern_pkg_config_dirs)
unset(_tern_prefix)
find_program(GLSLC_EXECUTABLE glslc HINTS "${ANDROID_NDK}/shader-tools/${ANDROID_HOST_TAG}"
                                          "${CMAKE_ANDROID_NDK}/shader-tools/linux-x86_64")
