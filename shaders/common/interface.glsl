// What every Tern compute shader sees (runtime/src/vulkan/pipelines.h, program.h):
//   binding 0: the call, n tokens at positions pos0..pos0+n-1, written by the host before each run;
//   push constants: off[b], the element offset of binding b's data inside its bound range (bindings start at an
//   aligned offset at or below the data), and arg[], the op's parameters.
// Bindings 1.. are the op's own, declared by each shader.
layout(std430, set = 0, binding = 0) readonly buffer CallBuffer { uint n; uint pos0; } call;
layout(push_constant) uniform PushConstants { uint off[8]; int arg[16]; } pc;

// Grid-stride loops: the host caps workgroup counts, a loop covers the rest.
#define GRID_STRIDE(idx, count, wg) for (uint idx = gl_GlobalInvocationID.x; idx < (count); idx += gl_NumWorkGroups.x * (wg))
