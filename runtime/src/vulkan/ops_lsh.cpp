// Lowering of ATTENTION of kind Lsh (Reformer; semantics: ops/lsh.h) to four dispatches, as the CPU path's phases:
//   lsh_hash     normalised keys, and the bucket of every (round, position) by the rotation matmul + argmax per factor;
//   lsh_sort     per (round, head) a stable counting sort by bucket into the sorted axis (pads last);
//   lsh_attend   per chunk of the sorted axis, each query against its circular window of neighbouring chunks, with
//                HF's float32 log-sum-exp per round (or, for short calls, causal attention over the whole sequence);
//   lsh_combine  the rounds combined by a softmax over their log-sum-exps, into the op's output.
// Scratch, per op, for max_batch tokens: keys [H, n, dh], buckets [H, hashes, n], counts [H, hashes, buckets],
// order [H, hashes * n_pad], outs [H, hashes, n, dh], lses [H, hashes, n]: linear in n, nothing n x n.
// Whole sequences only: the backend refuses a call that continues one (pos0 > 0; the CPU backend continues it as
// Hugging Face's cached generation does, ops/lsh.h).
#include <algorithm>
#include <string>

#include "ops/lsh.h"
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

constexpr uint32_t kQueryRows = 32;  // BQ: queries (invocations) per workgroup of lsh_attend
constexpr uint32_t kKeyTile = 32;    // BK: window slots staged in shared memory at a time, fewer for wide heads
constexpr uint32_t kSortGroup = 256;  // invocations of the one workgroup that sorts a (round, head)
constexpr uint32_t kHashGroup = 64;   // local_size_x of lsh_hash
// The CPU path sums the rotated columns with fused multiply-adds where the build contracts them (-march with FMA,
// GCC/Clang's default contraction); lsh_hash does the same so both backends bucket a position alike.
#if defined(__FMA__)
constexpr bool kCpuUsesFma = true;
#else
constexpr bool kCpuUsesFma = false;
#endif

// The largest length a call of up to max_batch tokens is treated as (LshAttention::padded_length is at most this).
int64_t padded_bound(const LshAttention& a, int64_t max_batch) {
  return std::max(max_batch, (max_batch + a.pad_to - 1) / a.pad_to * a.pad_to);
}

// The push constants of every lsh_*.comp: each shader reads the fields it needs.
LshPush lsh_push(const LshAttention& a) {
  LshPush push;
  push.heads = uint32_t(a.heads);
  push.hashes = uint32_t(a.hashes);
  push.chunk = uint32_t(a.chunk);
  push.chunks_before = uint32_t(a.before);
  push.chunks_after = uint32_t(a.after);
  push.pad_to = uint32_t(a.pad_to);
  push.pad_above = uint32_t(a.pad_above);
  push.n_factors = uint32_t(a.factors.size());
  push.rot_half = uint32_t(a.rot_half);
  push.n_buckets = uint32_t(a.buckets);
  push.key_norm_eps = a.key_norm_eps;
  push.scale = a.scale;
  push.self_mask_value = a.self_mask_value;
  return push;
}

}  // namespace

Status lower_lsh_attention(const Node& node, Lowering& low) {
  TERN_ASSIGN_OR_RETURN(auto spec, LshAttention::from(node));
  const LshAttention& a = spec;
  const int64_t N = low.max_batch, H = a.heads, dh = a.head_dim, nh = a.hashes;
  const int64_t n_pad = padded_bound(a, N);
  if (n_pad * nh > INT32_MAX || a.buckets * nh * H > INT32_MAX || N * H * nh * dh > INT32_MAX) {
    return Unsupported(where(node) + ": LSH attention for max_batch " + std::to_string(N) +
                       " needs indices past 2^31; use a smaller max_batch on the Vulkan backend");
  }

  auto scratch = [&](int64_t words, const char* what) {
    low.scratch_bytes += uint64_t(words) * 4;
    return low.memory.allocate(uint64_t(words) * 4, MemoryKind::kDevice, what);
  };
  TERN_ASSIGN_OR_RETURN(auto keys, scratch(H * N * dh, "LSH keys"));                     // [H, n, dh]
  TERN_ASSIGN_OR_RETURN(auto buckets, scratch(H * nh * N, "LSH buckets"));               // [H, hashes, n]
  TERN_ASSIGN_OR_RETURN(auto counts, scratch(H * nh * a.buckets, "LSH bucket counts"));  // [H, hashes, buckets]
  TERN_ASSIGN_OR_RETURN(auto order, scratch(H * nh * n_pad, "LSH sorted order"));        // [H, hashes * n_pad]
  TERN_ASSIGN_OR_RETURN(auto outs, scratch(H * nh * N * dh, "LSH round outputs"));       // [H, hashes, n, dh]
  TERN_ASSIGN_OR_RETURN(auto lses, scratch(H * nh * N, "LSH round log-sum-exps"));       // [H, hashes, n]
  std::vector<float> factor_table(a.factors.begin(), a.factors.end());  // each even, <= 2^24: exact as floats
  TERN_ASSIGN_OR_RETURN(auto factors, low.constant(std::move(factor_table), "LSH bucket factors"));
  TERN_ASSIGN_OR_RETURN(auto rotations, low.weight(node.weights[0]));  // [H, dh, hashes, rot_half]

  const Binding qkv = low.values[node.inputs[0]];  // [n, 2*inner]
  const LshPush push = lsh_push(a);
  const auto bind = [](const Result<Slice>& s, const char* what) { return Binding{s.value(), 0, 0, what}; };

  DispatchSpec hash = make_dispatch(
      node, "lsh_hash", {uint32_t(dh), kCpuUsesFma ? 1u : 0u}, kHashGroup, push,
      [H](int64_t n) { return stride_groups(n * H, kHashGroup); },
      {qkv, bind(rotations, "LSH rotations"), bind(factors, "LSH bucket factors"), bind(keys, "LSH keys"),
       bind(buckets, "LSH buckets")});
  TERN_RETURN_IF_ERROR(low.program.add(std::move(hash)));

  uint32_t sort_group = kSortGroup;
  const DeviceLimits& limits = low.ctx.limits();
  while (sort_group > 32 && (sort_group > limits.max_compute_work_group_invocations ||
                             sort_group > limits.max_compute_work_group_size[0])) {
    sort_group /= 2;
  }
  DispatchSpec sort = make_dispatch(
      node, "lsh_sort", {sort_group}, sort_group, push, [nh, H](int64_t) { return Groups{uint32_t(nh), uint32_t(H), 1}; },
      {bind(buckets, "LSH buckets"), bind(counts, "LSH bucket counts"), bind(order, "LSH sorted order")});
  sort.shared_bytes = 2 * sort_group * sizeof(uint32_t);
  TERN_RETURN_IF_ERROR(low.program.add(std::move(sort)));

  uint32_t key_tile = kKeyTile;
  const auto tile_bytes = [dh](uint64_t bk) { return 2 * bk * uint64_t(dh) * sizeof(float) + bk * sizeof(uint32_t); };
  while (key_tile > 1 && tile_bytes(key_tile) > limits.max_compute_shared_memory_size) key_tile /= 2;
  const LshAttention shape = a;
  DispatchSpec attend = make_dispatch(
      node, "lsh_attend", {kQueryRows, uint32_t(dh), key_tile}, kQueryRows, push,
      [shape, H](int64_t n) {
        const int64_t blocks = shape.chunked(n) ? shape.hashes * shape.padded_length(n) / shape.chunk *
                                                      ((shape.chunk + kQueryRows - 1) / kQueryRows)
                                                : (n + kQueryRows - 1) / kQueryRows;
        Groups g = stride_groups(blocks, 1);
        g[1] = uint32_t(H);
        return g;
      },
      {qkv, bind(keys, "LSH keys"), bind(order, "LSH sorted order"), bind(outs, "LSH round outputs"),
       bind(lses, "LSH round log-sum-exps")});
  attend.shared_bytes = uint32_t(std::min<uint64_t>(tile_bytes(key_tile), UINT32_MAX));
  TERN_RETURN_IF_ERROR(low.program.add(std::move(attend)));

  DispatchSpec combine = make_dispatch(
      node, "lsh_combine", {uint32_t(dh)}, 256, push, [H, dh](int64_t n) { return stride_groups(n * H * dh, 256); },
      {bind(outs, "LSH round outputs"), bind(lses, "LSH round log-sum-exps"), low.values[node.outputs[0]]});
  return low.program.add(std::move(combine));
}

}  // namespace tern::vk
