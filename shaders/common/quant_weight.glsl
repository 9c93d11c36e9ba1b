// SPDX-License-Identifier: MIT
// Compressed weights read as they are stored (schema/tern.fbs, Tensor), widened exactly as core/dequantize.cpp
// defines them: value = float(q) * scale in float32. No 8- or 16-bit storage features: the packed bytes and the
// float16 scales are read as 32-bit words and unpacked.
// The shader defines WEIGHT_I8 or WEIGHT_I4 and, before including this, the buffers
//   uint wq[]      the matrix's bytes as words; its offset (woff) counts words
//   wscale[]       I8: float scales; I4: uint words of two float16 scales each; its offset (soff) counts scales
// A matrix [rows, cols] has cols / group scales per row, row major (group = cols: one scale per row).
// I8: element (r, c) is the int8 byte r * cols + c. I4: a row is cols / 32 blocks of 16 bytes; byte k of a block
// holds its element k in the low nibble and element k + 16 in the high nibble; nibble u is q = u - 8.
float quant_weight(uint woff, uint soff, uint r, uint c, uint cols, uint group) {
  uint s = soff + r * (cols / group) + c / group;
#ifdef WEIGHT_I8
  uint byte = r * cols + c;
  uint word = wq[woff + (byte >> 2)];
  int q = bitfieldExtract(int(word), int(byte & 3u) * 8, 8);  // sign-extended
  float scale = wscale[s];
#else
  uint k = c & 31u;
  uint byte = r * (cols >> 1) + (c >> 5) * 16u + (k & 15u);
  uint word = wq[woff + (byte >> 2)];
  int q = int(bitfieldExtract(word, int(byte & 3u) * 8 + (k >= 16u ? 4 : 0), 4)) - 8;
  vec2 pair = unpackHalf2x16(wscale[s >> 1]);  // .x: the half at the lower address
  float scale = (s & 1u) == 0u ? pair.x : pair.y;
#endif
  return float(q) * scale;
}

// Elements (r, c..c+3) at once, from one word: c, cols and group multiples of 4 (so the four share a word and a
// scale). I8: bytes r * cols + c .. +3; I4: the four nibbles of one word, low or high by c's half of its block.
vec4 quant_weight4(uint woff, uint soff, uint r, uint c, uint cols, uint group) {
  uint s = soff + r * (cols / group) + c / group;
#ifdef WEIGHT_I8
  int word = int(wq[woff + ((r * cols + c) >> 2)]);
  vec4 q = vec4(bitfieldExtract(word, 0, 8), bitfieldExtract(word, 8, 8), bitfieldExtract(word, 16, 8),
                bitfieldExtract(word, 24, 8));
  float scale = wscale[s];
#else
  uint k = c & 31u;
  uint word = wq[woff + ((r * (cols >> 1) + (c >> 5) * 16u + (k & 15u)) >> 2)];
  int shift = k >= 16u ? 4 : 0;
  vec4 q = vec4(ivec4(bitfieldExtract(word, shift, 4), bitfieldExtract(word, 8 + shift, 4),
                      bitfieldExtract(word, 16 + shift, 4), bitfieldExtract(word, 24 + shift, 4)) - 8);
  vec2 pair = unpackHalf2x16(wscale[s >> 1]);
  float scale = (s & 1u) == 0u ? pair.x : pair.y;
#endif
  return q * scale;
}
