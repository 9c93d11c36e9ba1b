// LINEAR on XNNPACK's fully-connected operator: weights packed once per session, setup + run per call.
#include <xnnpack.h>

#include <limits>
#include <mutex>

#include "cpu/kernels.h"
#include "cpu/xnnpack_init.h"

namespace tern::cpu {

Status ensure_xnnpack() {
  static std::once_flag once;
  static xnn_status status = xnn_status_success;
  std::call_once(once, [] { status = xnn_initialize(nullptr); });
  if (status != xnn_status_success) return Unsupported("XNNPACK is not available on this CPU (xnn_initialize failed)");
  return Status::Ok();
}

namespace {

class LinearKernel : public CpuKernel {
 public:
  LinearKernel(const Node& node, xnn_operator_t op, int64_t in, int64_t out)
      : node_(node), op_(op), in_(in), out_(out) {}
  ~LinearKernel() override { xnn_delete_operator(op_); }

  Status run(const RunContext& ctx) override {
    if (xnn_setup_fully_connected_nc_f32(op_, size_t(ctx.n), ctx.in(node_, 0), ctx.out(node_, 0), ctx.pool) !=
            xnn_status_success ||
        xnn_run_operator(op_, ctx.pool) != xnn_status_success) {
      return Status(TERN_DEVICE_ERROR, node_.label() + ": XNNPACK fully-connected failed");
    }
    return Status::Ok();
  }
  uint64_t packed_weight_bytes() const override { return uint64_t(in_ + 1) * uint64_t(out_) * sizeof(float); }
  bool weights_packed() const override { return true; }  // W and b live in XNNPACK's copy; run() reads neither

 private:
  const Node& node_;
  xnn_operator_t op_;
  int64_t in_, out_;
};

}  // namespace

Result<std::unique_ptr<CpuKernel>> make_linear(const Node& node, const Model&, const KernelConfig&) {
  TERN_RETURN_IF_ERROR(ensure_xnnpack());
  const TensorInfo* w = node.weights[0];  // [out, in]
  const TensorInfo* b = node.weights.size() > 1 ? node.weights[1] : nullptr;  // [out]
  const int64_t out = w->shape[0], in = w->shape[1];
  xnn_operator_t op = nullptr;
  xnn_status st = xnn_create_fully_connected_nc_f32(size_t(in), size_t(out), size_t(in), size_t(out), w->f32(),
                                                    b ? b->f32() : nullptr, -std::numeric_limits<float>::infinity(),
                                                    std::numeric_limits<float>::infinity(), 0, &op);
  if (st == xnn_status_out_of_memory) return OutOfMemory(node.label() + ": no memory to pack weights");
  if (st != xnn_status_success) return Unsupported(node.label() + ": XNNPACK cannot create this fully-connected op");
  return std::unique_ptr<CpuKernel>(new LinearKernel(node, op, in, out));
}

}  // namespace tern::cpu
