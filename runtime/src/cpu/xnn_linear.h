// SPDX-License-Identifier: MIT
// One XNNPACK fully-connected operator owned by a kernel: y = x W^T + b, weights packed once at creation.
#pragma once

#include <pthreadpool.h>
#include <xnnpack.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "format/status.h"
#include "cpu/xnnpack_init.h"

namespace tern::cpu {

class XnnLinear {
 public:
  XnnLinear() = default;
  XnnLinear(XnnLinear&& o) noexcept { *this = std::move(o); }
  XnnLinear& operator=(XnnLinear&& o) noexcept {
    std::swap(op_, o.op_);
    std::swap(packed_, o.packed_);
    return *this;
  }
  XnnLinear(const XnnLinear&) = delete;
  XnnLinear& operator=(const XnnLinear&) = delete;
  ~XnnLinear() {
    if (op_) xnn_delete_operator(op_);
  }

  // W [out, in] (row-major, read now and not after), b [out] or null; rows of x are `in` apart, rows of y `out_stride`.
  static Result<XnnLinear> create(const float* w, const float* b, int64_t in, int64_t out, int64_t out_stride,
                                  const std::string& where) {
    TERN_RETURN_IF_ERROR(ensure_xnnpack());
    XnnLinear l;
    const xnn_status st = xnn_create_fully_connected_nc_f32(
        size_t(in), size_t(out), size_t(in), size_t(out_stride), w, b, -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::infinity(), 0, &l.op_);
    if (st == xnn_status_out_of_memory) return OutOfMemory(where + ": no memory to pack weights");
    if (st != xnn_status_success) return Unsupported(where + ": XNNPACK cannot create this fully-connected op");
    l.packed_ = uint64_t(in + 1) * uint64_t(out) * sizeof(float);
    return l;
  }

  // y [n, out_stride] (first `out` columns written) = x [n, in] W^T + b.
  Status run(pthreadpool_t pool, const float* x, int64_t n, float* y, const std::string& where) const {
    if (n == 0) return Status::Ok();
    if (xnn_setup_fully_connected_nc_f32(op_, size_t(n), x, y, pool) != xnn_status_success ||
        xnn_run_operator(op_, pool) != xnn_status_success) {
      return Status(TERN_DEVICE_ERROR, where + ": XNNPACK fully-connected failed");
    }
    return Status::Ok();
  }

  bool valid() const { return op_ != nullptr; }
  uint64_t packed_bytes() const { return packed_; }

 private:
  xnn_operator_t op_ = nullptr;
  uint64_t packed_ = 0;
};

}  // namespace tern::cpu
