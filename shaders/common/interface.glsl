// SPDX-License-Identifier: MIT
// What every Tern compute shader sees (runtime/src/vulkan/pipelines.h, program.h):
//   binding 0: the call, n tokens at positions pos0..pos0+n-1, written by the host before each run;
//   push constants: its family's block `pc` (runtime/src/vulkan/push_constants.h mirrors each one), declared by the
//   shader or its family's common/*.glsl, which starts with off[8]: off[b], the element offset of binding b's data
//   inside its bound range (bindings start at an aligned offset at or below the data); the op's parameters follow.
// Bindings 1.. are the op's own, declared by each shader.
layout(std430, set = 0, binding = 0) readonly buffer CallBuffer { uint n; uint pos0; } call;

// Grid-stride loops: the host caps workgroup counts, a loop covers the rest.
#define GRID_STRIDE(idx, count, wg) for (uint idx = gl_GlobalInvocationID.x; idx < (count); idx += gl_NumWorkGroups.x * (wg))
