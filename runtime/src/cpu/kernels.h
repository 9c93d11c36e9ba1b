// CPU kernels: the optimised paths behind each op, and the factories the op registry points at.
#pragma once

#include <pthreadpool.h>

#include <memory>

#include "ops/op.h"

namespace tern::cpu {

Result<std::unique_ptr<CpuKernel>> make_embedding(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_position(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_layer_norm(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_linear(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_activation(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_add(const Node& node, const Model& model, const KernelConfig& cfg);
Result<std::unique_ptr<CpuKernel>> make_attention(const Node& node, const Model& model, const KernelConfig& cfg);

// Direct entry points, for op tests and for kernels that compose them.
void layer_norm(pthreadpool_t pool, const float* x, int64_t n, int64_t d, const float* gamma, const float* beta, float eps,
                float* out);
void activation(pthreadpool_t pool, fb::ActivationKind kind, const float* x, int64_t count, float* out);
void add(pthreadpool_t pool, const float* a, const float* b, int64_t count, float* out);

// Dense attention over a head-major cache, blockwise with online softmax: no [n, T] buffer exists.
// q [n, q_stride] (head h at columns h*dh); k_cache, v_cache [heads, capacity, dh] holding positions 0..T-1;
// out [n, heads*dh]; query i is at position pos0+i. scratch: attention_scratch_floats(head_dim, threads) floats.
struct DenseAttentionArgs {
  const float* q;
  int64_t q_stride;
  const float* k_cache;
  const float* v_cache;
  int64_t capacity;
  int64_t n;
  int64_t pos0;
  int64_t T;
  int heads;
  int head_dim;
  float scale;
  bool causal;
  float* out;
  float* scratch;
};
int64_t attention_scratch_floats(int head_dim, int threads);
void attention_dense(pthreadpool_t pool, int threads, const DenseAttentionArgs& args);

}  // namespace tern::cpu
