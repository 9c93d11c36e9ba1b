// SPDX-License-Identifier: MIT
// Lowering of ATTENTION of kind Lsh (Reformer; semantics: ops/lsh.h). A first call runs four dispatches, as the CPU
// path's phases:
//   lsh_hash     normalised keys, and the bucket of every (round, position) by the rotation matmul + argmax per factor;
//   lsh_sort     per (round, head) a stable counting sort by bucket into the sorted axis (pads last);
//   lsh_attend   per chunk of the sorted axis, each query against its circular window of neighbouring chunks, with
//                HF's float32 log-sum-exp per round (or, for short calls, causal attention over the whole sequence);
//   lsh_combine  the rounds combined by a softmax over their log-sum-exps, into the op's output.
// Scratch, per op, for max_batch tokens: keys [H, n, dh], buckets [H, hashes, n], counts [H, hashes, buckets],
// order [H, hashes * n_pad], outs [H, hashes, n, dh], lses [H, hashes, n]: linear in n, nothing n x n.
// Continuing a sequence (Hugging Face's cached generation, ops/lsh.h), unless the session is forward_only:
//   lsh_store       after a first call: every position's qk | v and its buckets into the cache (the op's state,
//                   saved in the CPU kernel's layout);
//   lsh_stride      a later call: the round offset its new buckets take (HF's padding bucket);
//   lsh_step_store  the call's positions' qk | v and buckets into the cache, before any steps;
//   lsh_step        each (head, call position) in a workgroup of its own, as the CPU's LshCache::step;
//   lsh_hashed      then the cache's hashed flag for the next call.
// State [2 + H * hashes * max_tokens] words + [H, max_tokens, 2 * dh] floats; step scratch per head and position
// O(buckets + window + hashes * dh), nothing O(max_tokens).
#include <algorithm>
#include <string>

#include "ops/lsh.h"
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

constexpr uint32_t kQueryRows = 32;  // BQ: queries (invocations) per workgroup of lsh_attend
constexpr uint32_t kKeyTile = 32;    // BK: window slots staged in shared memory at a time, fewer for wide heads
constexpr uint32_t kSortGroup = 256;  // invocations of the one workgroup that sorts a (round, head)
constexpr uint32_t kHashGroup = 64;   // local_size_x of lsh_hash, lsh_store and lsh_step_store
constexpr uint32_t kStepGroup = 256;  // invocations of lsh_step's workgroup (one head, one position), fewer if need be
constexpr int64_t kStepScratchBytes = 16 << 20;  // lsh_step's scratch for the positions one dispatch covers
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
  const HeadLayout heads = a.layout();  // qk | v: the queries are the keys
  push.row = uint32_t(heads.row);
  push.k_col = uint32_t(heads.k);
  push.v_col = uint32_t(heads.v);
  return push;
}

// lsh_step's workgroup size: a power of two, at most the device's, at least the head size (an invocation per channel).
Result<uint32_t> step_group(const Node& node, const DeviceLimits& limits, int64_t dh) {
  const uint32_t wg = fit_workgroup(limits, kStepGroup, 32);
  if (int64_t(wg) < dh) {
    return Unsupported(where(node) + ": continuing a sequence through LSH attention with heads of " +
                       std::to_string(dh) + " needs workgroups of as many invocations; this device allows " +
                       std::to_string(wg) + "; use --backend cpu, or a forward_only session");
  }
  return wg;
}

// The cache a later call continues from (lsh_store after a first call; lsh_stride, lsh_step_store, lsh_step and
// lsh_hashed in a later one), saved as the CPU kernel saves it: int32 hashed, int32 0, buckets [H, hashes,
// position], rows [H, position, 2 * dh].
Status lower_lsh_cache(const Node& node, const LshAttention& a, Lowering& low, const Binding& rotations,
                       const Binding& factors, const Binding& call_buckets) {
  const int64_t H = a.heads, dh = a.head_dim, nh = a.hashes, cap = low.max_tokens;
  const int64_t slots = std::max(a.window(), a.chunk + 1);
  // lsh_step's scratch per (head, workgroup row), in words: counts, pos, score, list, round outputs and lses.
  const int64_t per_row = a.buckets + nh + 1 + 3 * slots + nh * dh + nh;
  // Positions one lsh_step dispatch covers: all of a call's when the scratch for them stays small, else several
  // dispatches of `rows` each (a workgroup per position keeps every invocation's loops short).
  const int64_t rows =
      std::clamp<int64_t>(kStepScratchBytes / (4 * H * per_row), 1, std::min<int64_t>(low.max_batch, 65535));
  const int64_t dispatches = (low.max_batch + rows - 1) / rows;
  const int64_t bucket_words = H * nh * cap, row_words = H * cap * 2 * dh, scratch_words = 1 + H * rows * per_row;
  if (2 + bucket_words + row_words > INT32_MAX || scratch_words > INT32_MAX) {
    return Unsupported(where(node) + ": an LSH cache of " + std::to_string(cap) +
                       " positions needs indices past 2^31; use a smaller max_tokens on the Vulkan backend");
  }
  TERN_ASSIGN_OR_RETURN(const uint32_t wg, step_group(node, low.ctx.limits(), dh));  // before any allocation
  TERN_ASSIGN_OR_RETURN(auto state, low.state(uint64_t(2 + bucket_words + row_words) * 4, "LSH cache"));
  low.scratch_bytes += uint64_t(scratch_words) * 4;
  TERN_ASSIGN_OR_RETURN(auto scratch_slice, low.memory.allocate(uint64_t(scratch_words) * 4, MemoryKind::kDevice,
                                                                "LSH step scratch"));
  LshPush push = lsh_push(a);
  push.capacity = uint32_t(cap);
  const Binding cache{state, 0, 0, "LSH cache"}, scratch{scratch_slice, 0, 0, "LSH step scratch"};
  const Binding qkv = low.values[node.inputs[0]];
  const auto add = [&](DispatchSpec d, CallKind when) {
    d.when = when;
    return low.program.add(std::move(d));
  };

  TERN_RETURN_IF_ERROR(add(make_dispatch(node, "lsh_store", {uint32_t(dh)}, kHashGroup, push,
                                         [H](int64_t n) { return stride_groups(n * H, kHashGroup); },
                                         {qkv, call_buckets, cache}),
                           CallKind::kFirst));
  TERN_RETURN_IF_ERROR(add(make_dispatch(node, "lsh_stride", {}, 256, push, [](int64_t) { return Groups{1, 1, 1}; },
                                         {cache, scratch}),
                           CallKind::kLater));
  // Hashing every position so far happens only while the sequence is within a chunk: at most chunk + n of them.
  const int64_t C = a.chunk;
  TERN_RETURN_IF_ERROR(add(make_dispatch(node, "lsh_step_store", {uint32_t(dh), kCpuUsesFma ? 1u : 0u}, kHashGroup,
                                         push,
                                         [H, nh, C](int64_t n) { return stride_groups(H * nh * (C + n), kHashGroup); },
                                         {qkv, rotations, factors, cache, scratch}),
                           CallKind::kLater));
  for (int64_t k = 0; k < dispatches; ++k) {
    const int64_t first = k * rows;
    LshPush step_push = push;
    step_push.step_first = uint32_t(first);
    DispatchSpec step = make_dispatch(
        node, "lsh_step", {uint32_t(dh), wg}, wg, step_push,
        [H, first, rows](int64_t n) {
          return Groups{uint32_t(H), uint32_t(std::clamp<int64_t>(n - first, 0, rows)), 1};
        },
        {qkv, cache, low.values[node.outputs[0]], scratch});
    step.shared_bytes = uint32_t((3 * wg + dh + 5) * 4);
    TERN_RETURN_IF_ERROR(add(std::move(step), CallKind::kLater));
  }
  TERN_RETURN_IF_ERROR(add(make_dispatch(node, "lsh_hashed", {}, 1, push, [](int64_t) { return Groups{1, 1, 1}; },
                                         {cache}),
                           CallKind::kLater));

  SavedState saved;
  saved.node = node.index;
  saved.where = node.label();
  saved.slice = state;
  saved.bytes = [a](int64_t position) { return a.saved_cache(position).bytes(); };
  // The device cache: words hashed, 0, buckets [H, hashes, cap], rows [H, cap, 2 * dh].
  saved.copies = [a, H, nh, dh, cap, bucket_words](int64_t position, std::vector<StateCopy>* copies) {
    const LshSavedCache layout = a.saved_cache(position);
    copies->push_back({0, 0, LshSavedCache::kHeaderBytes});  // hashed, 0
    for (int64_t h = 0; h < H; ++h)
      for (int64_t r = 0; r < nh; ++r) {
        copies->push_back({layout.buckets_at(h, r), uint64_t(2 + (h * nh + r) * cap) * 4, layout.round_bytes()});
      }
    for (int64_t h = 0; h < H; ++h) {
      copies->push_back({layout.rows_at(h), uint64_t(2 + bucket_words + h * cap * 2 * dh) * 4, layout.head_rows_bytes()});
    }
  };
  saved.check = [a, cap, label = node.label()](int64_t position, const uint8_t* in) {
    return a.check_saved_cache(cap, position, in, label);
  };
  low.saved_states.push_back(std::move(saved));
  return Status::Ok();
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
  hash.when = CallKind::kFirst;
  TERN_RETURN_IF_ERROR(low.program.add(std::move(hash)));

  const DeviceLimits& limits = low.ctx.limits();
  const uint32_t sort_group = fit_workgroup(limits, kSortGroup, 32);
  DispatchSpec sort = make_dispatch(
      node, "lsh_sort", {sort_group}, sort_group, push, [nh, H](int64_t) { return Groups{uint32_t(nh), uint32_t(H), 1}; },
      {bind(buckets, "LSH buckets"), bind(counts, "LSH bucket counts"), bind(order, "LSH sorted order")});
  sort.shared_bytes = 2 * sort_group * sizeof(uint32_t);
  sort.when = CallKind::kFirst;
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
  attend.when = CallKind::kFirst;
  TERN_RETURN_IF_ERROR(low.program.add(std::move(attend)));

  DispatchSpec combine = make_dispatch(
      node, "lsh_combine", {uint32_t(dh)}, 256, push, [H, dh](int64_t n) { return stride_groups(n * H * dh, 256); },
      {bind(outs, "LSH round outputs"), bind(lses, "LSH round log-sum-exps"), low.values[node.outputs[0]]});
  combine.when = CallKind::kFirst;
  TERN_RETURN_IF_ERROR(low.program.add(std::move(combine)));
  if (low.forward_only) return Status::Ok();
  return lower_lsh_cache(node, a, low, bind(rotations, "LSH rotations"), bind(factors, "LSH bucket factors"),
                         bind(buckets, "LSH buckets"));
}

}  // namespace tern::vk
