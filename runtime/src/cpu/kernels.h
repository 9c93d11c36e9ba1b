// SPDX-License-Identifier: MIT
// CPU kernels: the optimised paths behind each op, and the factories the CPU backend's op table points at
// (cpu/op_table.cpp).
#pragma once

#include <pthreadpool.h>

#include <memory>

#include "cpu/lsh_fold.h"
#include "cpu/kernel.h"
#include "ops/attention_pattern.h"
#include "ops/head_layout.h"
#include "ops/op.h"

namespace tern::cpu {

Result<std::unique_ptr<CpuKernel>> make_embedding(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_position(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_layer_norm(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_linear(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_activation(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_add(const Node& node, const Model& model, const KernelConfig& cfg);
// ATTENTION of the windowed kinds: Dense, SlidingWindow, ChunkedLocal, Strided, Fixed (cpu/attention.cpp).
Result<std::unique_ptr<CpuKernel>> make_windowed_attention(const Node& node, const Model& model, const KernelConfig& cfg);
// ATTENTION of kind AdaptiveSpan (cpu/attention_adaptive_span.cpp).
Result<std::unique_ptr<CpuKernel>> make_adaptive_span_attention(const Node& node, const Model& model, const KernelConfig& cfg);
// ATTENTION of kind Lsh (cpu/attention_lsh.cpp).
Result<std::unique_ptr<CpuKernel>> make_lsh_attention(const Node& node, const Model& model, const KernelConfig& cfg);
// The same with the layer's other ops run inside (cpu/lsh_fold.h).
Result<std::unique_ptr<CpuKernel>> make_lsh_attention_folded(const Node& node, const LshFold& fold, const Model& model,
                                                             const KernelConfig& cfg);
// The kernel of a node another kernel runs (folded): never run on its own.
Result<std::unique_ptr<CpuKernel>> make_folded_away(bool weights_packed);
// ATTENTION of kind Routing (cpu/attention_routing.cpp).
Result<std::unique_ptr<CpuKernel>> make_routing_attention(const Node& node, const Model& model, const KernelConfig& cfg);
// ATTENTION of kind RelativeXL (cpu/attention_relative_xl.cpp).
Result<std::unique_ptr<CpuKernel>> make_relative_xl_attention(const Node& node, const Model& model, const KernelConfig& cfg);
// ATTENTION of kind Compressive (cpu/attention_compressive.cpp).
Result<std::unique_ptr<CpuKernel>> make_compressive_attention(const Node& node, const Model& model, const KernelConfig& cfg);
// ADAPTIVE_EMBEDDING and ADAPTIVE_LOG_SOFTMAX (cpu/adaptive.cpp).
Result<std::unique_ptr<CpuKernel>> make_adaptive_embedding(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_adaptive_log_softmax(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_log_softmax(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_concat(const Node& node, const Model& model, const KernelConfig& cfg);
// cpu/decoder_ops.cpp
Result<std::unique_ptr<CpuKernel>> make_rms_norm(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_rotary(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_gated_activation(const Node& node, const Model& model, const KernelConfig& cfg);
// POSITION of kind AXIAL (cpu/position_axial.cpp); make_position hands it such ops.
Result<std::unique_ptr<CpuKernel>> make_axial_position(const Node& node, const Model& model, const KernelConfig& cfg);

// Direct entry points, for op tests and for kernels that compose them.
void layer_norm(pthreadpool_t pool, const float* x, int64_t n, int64_t d, const float* gamma, const float* beta, float eps,
                float* out);
// cap: SOFTCAP's (ActivationParams.cap)
void activation(pthreadpool_t pool, fb::ActivationKind kind, const float* x, int64_t count, float* out, float cap = 0.0f);
// The same on one thread: out [count] = act(x [count]).
void activation_row(fb::ActivationKind kind, const float* x, int64_t count, float* out, float cap = 0.0f);
void add(pthreadpool_t pool, const float* a, const float* b, int64_t count, float* out);
// x, out [n, d]; row-wise log-softmax
void log_softmax(pthreadpool_t pool, const float* x, int64_t n, int64_t d, float* out);

// Causal attention of one call starting at position 0, blockwise with online softmax: no [n, n] buffer exists.
// qkv [n, 3*heads*dh] (q | k | v); out [n, heads*dh]; scratch: attention_scratch_floats(head_dim, threads) floats.
struct AttentionArgs {
  const AttentionPattern* pattern;
  const float* qkv;
  int64_t n;
  int heads;
  int head_dim;
  float scale;
  float* out;
  float* scratch;
};
// group: query heads attended together per KV head (the attention kernel's own; 1 for the two calls here).
int64_t attention_scratch_floats(int head_dim, int threads, int group = 1);
void attention(pthreadpool_t pool, int threads, const AttentionArgs& args);

// Causal attention of n queries at positions held..held+n-1 over keys and values that all sit in one buffer: kv
// [held + n, 2 * kv_inner] (k | v per row, float32), q [n, heads*dh]; out [n, heads*dh]; scratch as above.
struct ContiguousAttention {
  const AttentionPattern* pattern;
  const HeadLayout* heads;
  const float* q;
  const float* kv;
  int64_t held, n;
  float scale, softcap;
  float* out;
  float* scratch;
};
void attend_contiguous(pthreadpool_t pool, int threads, const ContiguousAttention& args);

// Dense attention of a session with attention sinks (ops/sink_cache.h), cpu/attention_sinks.cpp.
Result<std::unique_ptr<CpuKernel>> make_sink_attention(const Node& node, const Model& model, const KernelConfig& cfg);

}  // namespace tern::cpu
