// What the LSH attention shaders share (runtime/src/ops/lsh.h, runtime/src/vulkan/ops_lsh.cpp).
// arg layout of every lsh_*.comp: 0 heads, 1 hashes, 2 chunk, 3 chunks_before, 4 chunks_after, 5 pad_to,
// 6 pad_above; the rest per shader.

// The length the sequence is treated as (HF's right-padding): LshAttention::padded_length.
uint lsh_padded(uint n) {
  uint pad_to = uint(pc.arg[5]), pad_above = uint(pc.arg[6]);
  return (n > pad_above && n % pad_to != 0u) ? (n / pad_to + 1u) * pad_to : n;
}
bool lsh_chunked(uint n) { return lsh_padded(n) > uint(pc.arg[2]); }
