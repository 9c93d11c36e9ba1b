// SPDX-License-Identifier: MIT
// Checkpoint tensors -> graph tensors, validated now and converted to float32 lazily when the file is written.
#pragma once

#include <string>
#include <vector>

#include "checkpoint.h"
#include "format/status.h"
#include "graph_builder.h"
#include "importers/decoder_builder.h"

namespace tern::convert {

class TensorSource {
 public:
  TensorSource(const Checkpoint& checkpoint, GraphBuilder& graph) : checkpoint_(checkpoint), graph_(graph) {}

  // The checkpoint tensor `name`, which must exist, be F32/F16/BF16 and have exactly `shape`.
  Result<const TensorView*> require(const std::string& name, const std::vector<int64_t>& shape) const;

  // Adds checkpoint tensor `name` (validated as by require) to the graph as F32 under the same name. A tensor that
  // several ops read (tied weights) is added once: adding it again gives the same index, if the shapes agree.
  Result<int32_t> add(const std::string& name, const std::vector<int64_t>& shape);

  // `<prefix>.weight` [out, in] and, when `bias`, `<prefix>.bias` [out].
  Result<LinearWeights> linear(const std::string& prefix, int64_t out, int64_t in, bool bias);
  // `<prefix>.weight` [d] and `<prefix>.bias` [d].
  Result<Norm> norm(const std::string& prefix, int64_t d, float eps);

  // Adds checkpoint tensor `name` of shape `shape` to the graph as F32 with `stored_shape` (same element count, same
  // row-major order), e.g. a [1, d, L] parameter stored as [d, L].
  Result<int32_t> add_reshaped(const std::string& name, const std::vector<int64_t>& shape,
                               const std::vector<int64_t>& stored_shape);

  // Adds the concatenation of `parts` along the first axis as one F32 tensor `name`;
  // each part must have shape `part_shape`, e.g. q, k, v weights [d, d] -> `name` [3*d, d].
  Result<int32_t> add_concat(const std::string& name, const std::vector<std::string>& parts,
                             const std::vector<int64_t>& part_shape);
  // The same with rows [row_begin, row_end) of each part only, e.g. the q, k and v rows of one group of heads
  // -> `name` [3 * (row_end - row_begin), d].
  // Adds the concatenation along the first axis of `parts`, each `repeat` times, as one F32 tensor `name`; parts
  // may differ in their first dimension only, e.g. q [H*dh, d], k and v [KV*dh, d] -> [(H + 2 KV) dh, d], or a
  // per-head q norm [dh] repeated H times then the k norm repeated KV times -> [(H + KV) dh].
  struct Part {
    std::string name;
    std::vector<int64_t> shape;
    int64_t repeat = 1;
  };
  Result<int32_t> add_stacked(const std::string& name, const std::vector<Part>& parts);
  // Adds checkpoint tensor `name` [rows, cols] transposed, as [cols, rows] (GPT-2's Conv1D weights, [in, out]).
  Result<int32_t> add_transposed(const std::string& name, int64_t rows, int64_t cols);
  // Adds a tensor the converter computed (RoPE frequency tables), F32 of `shape`.
  Result<int32_t> add_constant(const std::string& name, const std::vector<int64_t>& shape, std::vector<float> values);

  Result<int32_t> add_concat_rows(const std::string& name, const std::vector<std::string>& parts,
                                  const std::vector<int64_t>& part_shape, int64_t row_begin, int64_t row_end);

 private:
  const Checkpoint& checkpoint_;
  GraphBuilder& graph_;
};

}  // namespace tern::convert
