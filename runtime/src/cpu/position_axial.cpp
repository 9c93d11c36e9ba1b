// SPDX-License-Identifier: MIT
// POSITION of kind AXIAL on the CPU (Reformer's axial position embeddings, HF AxialPositionEmbeddings in eval mode):
// out[i] = x[i] + [rows[p / s1] | cols[p % s1]] with p = pos0 + i; rows [s0, d0], cols [s1, d1].
#include "cpu/kernels.h"
#include "cpu/parallel.h"

namespace tern::cpu {
namespace {

class AxialPositionKernel : public CpuKernel {
 public:
  explicit AxialPositionKernel(const Node& node)
      : node_(node), rows_(node.weights[0]), cols_(node.weights[1]),
        positions_(node.fb_op->params_as_PositionParams()->max_positions()) {}

  Status run(const RunContext& ctx) override {
    if (ctx.pos0 + ctx.n > positions_) {
      return InvalidArgument("position " + std::to_string(ctx.pos0 + ctx.n - 1) + " is past the model's " +
                             std::to_string(positions_) + " axial positions");
    }
    const int64_t d0 = rows_->shape[1], s1 = cols_->shape[0], d1 = cols_->shape[1], d = d0 + d1;
    const float* x = ctx.in(node_, 0);
    float* out = ctx.out(node_, 0);
    parallel_for(ctx.pool, size_t(ctx.n), 16, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        const int64_t p = ctx.pos0 + int64_t(i);
        const float* xi = x + int64_t(i) * d;
        float* oi = out + int64_t(i) * d;
        const float* r = rows_->f32() + (p / s1) * d0;
        const float* c = cols_->f32() + (p % s1) * d1;
        for (int64_t j = 0; j < d0; ++j) oi[j] = xi[j] + r[j];
        for (int64_t j = 0; j < d1; ++j) oi[d0 + j] = xi[d0 + j] + c[j];
      }
    });
    return Status::Ok();
  }

 private:
  const Node& node_;
  const TensorInfo* rows_;  // [s0, d0]
  const TensorInfo* cols_;  // [s1, d1]
  int64_t positions_;       // s0 * s1
};

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_axial_position(const Node& node, const Model&, const KernelConfig& cfg) {
  const int64_t positions = node.fb_op->params_as_PositionParams()->max_positions();
  if (cfg.max_tokens > positions) {
    return InvalidArgument("max_tokens " + std::to_string(cfg.max_tokens) + " exceeds the model's " +
                           std::to_string(positions) + " axial positions");
  }
  return std::unique_ptr<CpuKernel>(new AxialPositionKernel(node));
}

}  // namespace tern::cpu
