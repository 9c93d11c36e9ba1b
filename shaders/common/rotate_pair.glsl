// SPDX-License-Identifier: MIT
// One column of a rotary pair (ops/rotary.h: Rotary::first, second): column c of a head block, c < 2 * pairs, is
// pair k's first (a) or second (b) column; its partner is the other. a' = a cos - b sin, b' = b cos + a sin, each
// product rounded before the sum as the CPU path computes it (no fused multiply-add).
void rotary_pair(uint c, uint pairs, bool interleaved, out uint k, out bool is_first, out uint partner) {
  k = interleaved ? c / 2 : c % pairs;
  is_first = interleaved ? (c % 2 == 0) : (c < pairs);
  uint first = interleaved ? 2 * k : k, second = interleaved ? 2 * k + 1 : k + pairs;
  partner = is_first ? second : first;
}

float rotated(float self, float other, float cs, float sn, bool is_first) {
  precise float r = is_first ? self * cs - other * sn : self * cs + other * sn;
  return r;
}
