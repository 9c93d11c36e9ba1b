// SPDX-License-Identifier: MIT
// LINEAR through cpu/matrix.h: float32 weights, and int8 / int4 ones where the kernel variant packs them, packed once
// per model for Tern's GEMMs and shared by its sessions; the other compressed weights read in place by Tern's kernels.
#include "cpu/kernels.h"
#include "cpu/matrix.h"

namespace tern::cpu {

namespace {

class LinearKernel : public CpuKernel {
 public:
  LinearKernel(const Node& node, Matrix m, int64_t max_batch) : node_(node), m_(std::move(m)), max_batch_(max_batch) {}

  Status run(const RunContext& ctx) override {
    return m_.run(ctx.pool, ctx.threads, ctx.in(node_, 0), ctx.n, ctx.out(node_, 0), ctx.scratch, node_.label());
  }
  uint64_t packed_weight_bytes() const override { return m_.packed_bytes(); }
  // Float32 (and int8 / int4 packed for every call): W and b live in the model's packed copy and run() reads neither;
  // other compressed weights are read in place.
  bool weights_packed() const override { return m_.packs_weights(); }
  uint64_t scratch_bytes() const override { return m_.scratch_bytes(max_batch_); }
  uint64_t scratch_bytes_for(int64_t n) const override { return m_.scratch_bytes(n); }

 private:
  const Node& node_;
  Matrix m_;
  int64_t max_batch_;
};

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_linear(const Node& node, const Model& model, const KernelConfig& cfg) {
  const TensorInfo* w = node.weights[0];  // [out, in]
  const TensorInfo* b = node.weights.size() > 1 ? node.weights[1] : nullptr;  // [out]
  TERN_ASSIGN_OR_RETURN(Matrix m, Matrix::create(model, *w, b ? b->f32() : nullptr, node.label()));
  return std::unique_ptr<CpuKernel>(new LinearKernel(node, std::move(m), cfg.max_batch));
}

}  // namespace tern::cpu
