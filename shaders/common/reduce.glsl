// SPDX-License-Identifier: MIT
// Workgroup reductions over WG invocations (WG a power of two, declared by the including shader with red[WG]).
float reduce_sum(float v) {
  uint lid = gl_LocalInvocationID.x;
  red[lid] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) red[lid] += red[lid + s];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

float reduce_max(float v) {
  uint lid = gl_LocalInvocationID.x;
  red[lid] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) red[lid] = max(red[lid], red[lid + s]);
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}
