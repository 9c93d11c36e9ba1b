# SPDX-License-Identifier: MIT
# `cmake --install`: libtern (shared + static), the public headers, the CMake package (find_package(tern): tern::tern,
# tern::tern_static) and tern.pc. Included by runtime/CMakeLists.txt; the tools install themselves (converter/,
# examples/). Everything installed is relocatable: `cmake --install BUILD --prefix P` works for any P.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(TERN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tern)

install(TARGETS tern tern_static EXPORT ternTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/runtime/include/tern/tern.h ${PROJECT_SOURCE_DIR}/runtime/include/tern/tern.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tern)

install(EXPORT ternTargets NAMESPACE tern:: DESTINATION ${TERN_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ternConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/ternConfig.cmake INSTALL_DESTINATION ${TERN_CMAKE_DIR})
# A library with the same MAJOR and at least the MINOR asked for runs an app built against it.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/ternConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/ternConfig.cmake ${PROJECT_BINARY_DIR}/package/ternConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/ternDependencies.cmake DESTINATION ${TERN_CMAKE_DIR})

# tern.pc finds its prefix from where it lies (${pcfiledir}), so the file is right under any install prefix.
set(TERN_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${TERN_PC_DIR}")
  set(TERN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH TERN_PC_UP /root/${TERN_PC_DIR} /root)  # ../.. for lib/pkgconfig
  string(REGEX REPLACE "/$" "" TERN_PC_UP "${TERN_PC_UP}")
  set(TERN_PC_PREFIX "\${pcfiledir}/${TERN_PC_UP}")
endif()
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(TERN_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(TERN_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
# Static linking needs what libtern.so names as its own dependencies, and the C++ runtime for a C app.
set(TERN_PC_LIBS_PRIVATE -lXNNPACK -lpthreadpool -lstdc++ -lm ${CMAKE_THREAD_LIBS_INIT})
if(TERN_VULKAN_FOUND AND CMAKE_DL_LIBS)
  list(APPEND TERN_PC_LIBS_PRIVATE -l${CMAKE_DL_LIBS})
endif()
list(JOIN TERN_PC_LIBS_PRIVATE " " TERN_PC_LIBS_PRIVATE)
configure_file(${PROJECT_SOURCE_DIR}/cmake/tern.pc.in ${PROJECT_BINARY_DIR}/package/tern.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/tern.pc DESTINATION ${TERN_PC_DIR})

# The licence and the documentation, where Debian and most distributions keep a package's: P/share/doc/tern/.
set(TERN_DOC_DIR ${CMAKE_INSTALL_DATADIR}/doc/tern)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${TERN_DOC_DIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${TERN_DOC_DIR}/docs FILES_MATCHING PATTERN "*.md" PATTERN "*.png")
