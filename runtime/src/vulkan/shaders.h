// SPDX-License-Identifier: MIT
// SPIR-V of shaders/*.comp, compiled by glslc at build time and embedded (cmake/EmbedShaders.cmake).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::vk {

struct EmbeddedShader {
  const char* name;   // the file name without .comp, e.g. "linear"
  const uint32_t* code;
  size_t words;
};

const EmbeddedShader* find_shader(const char* name);  // null if no such shader

}  // namespace tern::vk
