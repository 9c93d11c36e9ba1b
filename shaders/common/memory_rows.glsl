// Rows an attention op with a memory holds before a call (runtime/src/vulkan/ops_memory.cpp), a function of the
// tokens seen (call.pos0) alone, so nothing is counted on the host or the device between calls.
//   arg[12]: family, 0 RelativeXL (always mem_len rows: zeros before the first call), 1 Compressive
//   arg[13]: mem_len M, arg[14]: cmem_len C, arg[15]: rate
// Compressive (ops/compressive.h): after T tokens mem holds T rows while T <= M, then M + (T - M) % rate; every
// other row left in groups of rate, of which cmem keeps the last C.
uint mem_rows(uint t) {
  uint m = uint(pc.arg[13]), rate = uint(pc.arg[15]);
  return t <= m ? t : m + (t - m) % rate;
}
uint cmem_rows(uint t) { return min(uint(pc.arg[14]), (t - mem_rows(t)) / uint(pc.arg[15])); }
// Rows of [memory; input] before the call's: M for RelativeXL, |cmem| + |mem| for Compressive.
uint prefix_rows() {
  if (pc.arg[12] == 0) return uint(pc.arg[13]);
  return cmem_rows(call.pos0) + mem_rows(call.pos0);
}
