// ATTENTION: qkv [n, 3*H*dh] (q | k | v column blocks) -> [n, H*dh]. Kinds: Dense (causal softmax).
// State: the keys and values of every token seen, [H, capacity, dh] each.
#include <cmath>
#include <vector>

#include "cpu/kernels.h"
#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  if (p->heads() < 1 || p->head_dim() < 1 || p->heads() > 4096 || p->head_dim() > 4096) {
    return InvalidModel(node.label() + ": heads and head_dim must be in [1, 4096]");
  }
  if (!(std::isfinite(p->scale()) && p->scale() > 0)) return InvalidModel(node.label() + ": scale must be positive and finite");
  if (p->kind_type() != fb::AttentionKind::Dense) {
    return Unsupported(node.label() + ": attention kind " + std::to_string(int(p->kind_type())) + " is not supported");
  }
  if (!p->causal()) return Unsupported(node.label() + ": non-causal attention is not supported by a streaming decoder");
  int64_t inner = int64_t(p->heads()) * p->head_dim();
  TERN_RETURN_IF_ERROR(expect_width(node, values, false, 0, 3 * inner));
  return expect_width(node, values, true, 0, inner);
}

uint64_t state_bytes_per_token(const Node& node) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  return 2ull * uint64_t(p->heads()) * uint64_t(p->head_dim()) * sizeof(float);  // one key and one value per head
}

uint64_t dense_bytes(const Node& node, int64_t n) {
  return uint64_t(node.fb_op->params_as_AttentionParams()->heads()) * uint64_t(n) * uint64_t(n) * sizeof(float);
}

}  // namespace

void ref::attention_dense(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride, int64_t n,
                          int64_t pos0, int64_t T, int heads, int head_dim, float scale, bool causal, float* out) {
  std::vector<double> p(size_t(T > 0 ? T : 1));
  for (int h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t last = causal ? pos0 + i : T - 1;
      const float* qi = q + i * q_stride + int64_t(h) * head_dim;
      double mx = -INFINITY;
      for (int64_t j = 0; j <= last; ++j) {
        const float* kj = k + j * kv_stride + int64_t(h) * head_dim;
        double s = 0;
        for (int c = 0; c < head_dim; ++c) s += double(qi[c]) * double(kj[c]);
        p[j] = s * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j <= last; ++j) sum += (p[j] = std::exp(p[j] - mx));
      for (int c = 0; c < head_dim; ++c) {
        double acc = 0;
        for (int64_t j = 0; j <= last; ++j) acc += p[j] * double(v[j * kv_stride + int64_t(h) * head_dim + c]);
        out[i * int64_t(heads) * head_dim + int64_t(h) * head_dim + c] = float(acc / sum);
      }
    }
  }
}

extern const OpDef kAttentionOp = {fb::OpCode::ATTENTION, "ATTENTION", 1, 0, 0, fb::OpParams::AttentionParams,
                                   validate, cpu::make_attention, state_bytes_per_token, dense_bytes};

}  // namespace tern
