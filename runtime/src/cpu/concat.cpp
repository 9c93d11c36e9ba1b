// SPDX-License-Identifier: MIT
// CONCAT on the CPU: row copies.
#include <cstring>

#include "cpu/kernels.h"
#include "cpu/parallel.h"

namespace tern::cpu {
namespace {

class ConcatKernel : public CpuKernel {
 public:
  ConcatKernel(const Node& node, int64_t da, int64_t db) : node_(node), da_(da), db_(db) {}
  Status run(const RunContext& ctx) override {
    const float* a = ctx.in(node_, 0);  // [n, da]
    const float* b = ctx.in(node_, 1);  // [n, db]
    float* out = ctx.out(node_, 0);     // [n, da + db]
    parallel_for(ctx.pool, size_t(ctx.n), 64, [&](size_t s, size_t e) {
      for (size_t i = s; i < e; ++i) {
        std::memcpy(out + i * (da_ + db_), a + i * da_, size_t(da_) * sizeof(float));
        std::memcpy(out + i * (da_ + db_) + da_, b + i * db_, size_t(db_) * sizeof(float));
      }
    });
    return Status::Ok();
  }

 private:
  const Node& node_;
  int64_t da_, db_;
};

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_concat(const Node& node, const Model& model, const KernelConfig&) {
  return std::unique_ptr<CpuKernel>(
      new ConcatKernel(node, model.values()[node.inputs[0]].width, model.values()[node.inputs[1]].width));
}

}  // namespace tern::cpu
