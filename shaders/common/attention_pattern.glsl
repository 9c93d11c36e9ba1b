// Which keys query i sees, as runtime/src/ops/attention_pattern.h defines it, for the kinds with a shader:
// a contiguous run [local_lo(i), i]. KIND: 0 dense, 1 sliding window, 2 chunked local.
int local_lo(int kind, int i, int window, int chunk, int chunks_before) {
  if (kind == 1) return max(0, i - window + 1);
  if (kind == 2) return max(0, (i / chunk - chunks_before) * chunk);
  return 0;
}
