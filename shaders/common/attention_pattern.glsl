// SPDX-License-Identifier: MIT
// Which keys query i sees, as runtime/src/ops/attention_pattern.h defines it: a contiguous run [local_lo(i), i] plus,
// for strided and fixed, scattered keys below it. KIND: 0 dense, 1 sliding window, 2 chunked local, 3 strided,
// 4 fixed. `second`: a head of the second half of split heads (strided: strided keys only; fixed: summaries only).
int local_lo(int kind, int i, int window, int chunk, int chunks_before, int stride, int block, bool second) {
  if (kind == 1) return max(0, i - window + 1);
  if (kind == 2) return max(0, (i / chunk - chunks_before) * chunk);
  if (kind == 3) return second ? i : max(0, i - stride + 1);
  if (kind == 4) return second ? i : (i / block) * block;
  return 0;
}

// The state slot of position j, as runtime/src/cpu/kv_store.h places it: j % ring (ring = every position for the
// kinds that keep all keys), except fixed's summaries (block > 0), which follow the ring, `summary` slots per block.
uint state_slot(int j, uint ring, int block, int summary) {
  if (block > 0 && j % block >= block - summary) return ring + uint(j / block) * uint(summary) + uint(j % block - (block - summary));
  return uint(j) % ring;
}
