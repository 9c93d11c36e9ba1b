// SPDX-License-Identifier: MIT
// The bucket of lsh_x [HEAD_DIM] in round rnd of head h (runtime/src/ops/lsh.h): x R[h, :, rnd, :], then per bucket
// factor f (f/2 columns each, in order) the first maximum of [x | -x], mixed in radix order. The rotated columns are
// summed in the order the CPU path sums them, with fused multiply-adds (USE_FMA) where the CPU build contracts them,
// so both backends put a position in the same bucket.
// The includer declares HEAD_DIM, USE_FMA, `float lsh_x[HEAD_DIM]` (invocation-private), and the buffers rot[]
// (rotations [heads, HEAD_DIM, hashes, rot_half] from element rot_base) and factors[] (as floats, from factors_base).
uint lsh_bucket(uint h, uint rnd, uint rot_base, uint factors_base) {
  uint hashes = pc.hashes, rot_half = pc.rot_half;
  // R[h, c, rnd, k] = rot[rot_base + ((h * HEAD_DIM + c) * hashes + rnd) * rot_half + k]
  uint base = rot_base + (h * HEAD_DIM * hashes + rnd) * rot_half;
  uint stride = hashes * rot_half;
  uint b = 0, radix = 1, offset = 0;
  for (uint fi = 0; fi < pc.n_factors; ++fi) {
    uint f = uint(factors[factors_base + fi]), half_f = f / 2u;
    float vmax = 0.0, vmin = 0.0;
    uint tmax = 0, tmin = 0;
    for (uint t = 0; t < half_f; ++t) {
      precise float acc = 0.0;
      uint at = base + offset + t;
      for (uint c = 0; c < HEAD_DIM; ++c) {
        if (USE_FMA) {
          acc = fma(lsh_x[c], rot[at + c * stride], acc);
        } else {
          precise float prod = lsh_x[c] * rot[at + c * stride];
          acc = acc + prod;
        }
      }
      if (t == 0u || acc > vmax) { vmax = acc; tmax = t; }
      if (t == 0u || acc < vmin) { vmin = acc; tmin = t; }
    }
    // argmax over [x | -x], first maximum: a negated column wins only when strictly larger.
    uint best = (-vmin > vmax) ? half_f + tmin : tmax;
    b += best * radix;
    radix *= f;
    offset += half_f;
  }
  return b;
}
