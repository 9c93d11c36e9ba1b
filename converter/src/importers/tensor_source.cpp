// SPDX-License-Identifier: MIT
#include "importers/tensor_source.h"

#include <algorithm>
#include <cstring>

namespace tern::convert {

Result<const TensorView*> TensorSource::require(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorView* view = checkpoint_.find(name);
  if (!view) return InvalidModel("missing tensor '" + name + "'");
  if (view->dtype != StDType::F32 && view->dtype != StDType::F16 && view->dtype != StDType::BF16)
    return InvalidModel(view->file + ": tensor '" + name + "' has dtype " + dtype_name(view->dtype) +
                        ", expected F32, F16 or BF16");
  if (view->shape != shape)
    return InvalidModel(view->file + ": tensor '" + name + "' has shape " + shape_string(view->shape) +
                        ", expected " + shape_string(shape));
  return view;
}

Result<int32_t> TensorSource::add(const std::string& name, const std::vector<int64_t>& shape) {
  const int32_t existing = graph_.find_tensor(name);
  if (existing >= 0) {
    const std::vector<int64_t>& first = graph_.tensors()[size_t(existing)].shape;
    if (first != shape)
      return InvalidModel("tensor '" + name + "' is needed with shape " + shape_string(shape) + " and " +
                          shape_string(first));
    return existing;
  }
  TERN_ASSIGN_OR_RETURN(const TensorView* v, require(name, shape));
  return graph_.add_tensor(name, fb::DType::F32, shape, [v, ck = &checkpoint_](uint8_t* dst, size_t size) -> Status {
    if (size != size_t(v->numel()) * sizeof(float)) return InvalidArgument("destination size mismatch");
    return ck->read_f32(*v, reinterpret_cast<float*>(dst));
  });
}

Result<LinearWeights> TensorSource::linear(const std::string& prefix, int64_t out, int64_t in, bool bias) {
  LinearWeights w;
  TERN_ASSIGN_OR_RETURN(w.weight, add(prefix + ".weight", {out, in}));
  if (bias) {
    TERN_ASSIGN_OR_RETURN(w.bias, add(prefix + ".bias", {out}));
  }
  return w;
}

Result<Norm> TensorSource::norm(const std::string& prefix, int64_t d, float eps) {
  Norm n;
  n.eps = eps;
  TERN_ASSIGN_OR_RETURN(n.weight, add(prefix + ".weight", {d}));
  TERN_ASSIGN_OR_RETURN(n.bias, add(prefix + ".bias", {d}));
  return n;
}

Result<int32_t> TensorSource::add_reshaped(const std::string& name, const std::vector<int64_t>& shape,
                                           const std::vector<int64_t>& stored_shape) {
  TERN_ASSIGN_OR_RETURN(const TensorView* v, require(name, shape));
  int64_t numel = 1;
  for (int64_t d : stored_shape) numel *= d;
  if (numel != v->numel())
    return InvalidArgument("tensor '" + name + "': cannot store shape " + shape_string(shape) + " as " +
                           shape_string(stored_shape));
  return graph_.add_tensor(name, fb::DType::F32, stored_shape, [v, ck = &checkpoint_](uint8_t* dst, size_t size) -> Status {
    if (size != size_t(v->numel()) * sizeof(float)) return InvalidArgument("destination size mismatch");
    return ck->read_f32(*v, reinterpret_cast<float*>(dst));
  });
}

Result<int32_t> TensorSource::add_concat(const std::string& name, const std::vector<std::string>& parts,
                                         const std::vector<int64_t>& part_shape) {
  if (part_shape.empty()) return InvalidArgument("tensor '" + name + "': nothing to concatenate");
  return add_concat_rows(name, parts, part_shape, 0, part_shape[0]);
}

Result<int32_t> TensorSource::add_concat_rows(const std::string& name, const std::vector<std::string>& parts,
                                              const std::vector<int64_t>& part_shape, int64_t row_begin,
                                              int64_t row_end) {
  if (parts.empty() || part_shape.empty()) return InvalidArgument("tensor '" + name + "': nothing to concatenate");
  if (row_begin < 0 || row_end <= row_begin || row_end > part_shape[0])
    return InvalidArgument("tensor '" + name + "': rows [" + std::to_string(row_begin) + ", " +
                           std::to_string(row_end) + ") out of range");
  std::vector<const TensorView*> views;
  for (const std::string& part : parts) {
    TERN_ASSIGN_OR_RETURN(const TensorView* view, require(part, part_shape));
    views.push_back(view);
  }
  int64_t row_size = 1;  // elements per row
  for (size_t i = 1; i < part_shape.size(); ++i) row_size *= part_shape[i];
  const bool whole = row_begin == 0 && row_end == part_shape[0];
  std::vector<int64_t> shape = part_shape;
  shape[0] = (row_end - row_begin) * int64_t(parts.size());
  return graph_.add_tensor(
      name, fb::DType::F32, shape,
      [views, whole, first = row_begin * row_size, count = (row_end - row_begin) * row_size,
       ck = &checkpoint_](uint8_t* dst, size_t size) -> Status {
        auto* out = reinterpret_cast<float*>(dst);
        if (size != size_t(count) * views.size() * sizeof(float)) return InvalidArgument("destination size mismatch");
        std::vector<float> part;  // a whole part, when only some of its rows are kept
        for (const TensorView* v : views) {
          if (whole) {
            TERN_RETURN_IF_ERROR(ck->read_f32(*v, out));
          } else {
            part.resize(size_t(v->numel()));
            TERN_RETURN_IF_ERROR(ck->read_f32(*v, part.data()));
            std::copy(part.begin() + first, part.begin() + first + count, out);
          }
          out += count;
        }
        return Status::Ok();
      });
}

Result<int32_t> TensorSource::add_stacked(const std::string& name, const std::vector<Part>& parts) {
  if (parts.empty()) return InvalidArgument("tensor '" + name + "': nothing to concatenate");
  std::vector<const TensorView*> views;
  std::vector<int64_t> shape = parts[0].shape;
  shape.at(0) = 0;
  for (const Part& part : parts) {
    TERN_ASSIGN_OR_RETURN(const TensorView* view, require(part.name, part.shape));
    if (part.shape.size() != shape.size() || !std::equal(part.shape.begin() + 1, part.shape.end(), shape.begin() + 1))
      return InvalidArgument("tensor '" + name + "': part '" + part.name + "' has shape " +
                             shape_string(part.shape) + ", unlike the first part's");
    views.push_back(view);
    shape[0] += part.shape[0] * part.repeat;
  }
  std::vector<int64_t> repeats;
  for (const Part& part : parts) repeats.push_back(part.repeat);
  return graph_.add_tensor(name, fb::DType::F32, shape,
                           [views, repeats, ck = &checkpoint_](uint8_t* dst, size_t size) -> Status {
                             auto* out = reinterpret_cast<float*>(dst);
                             size_t total = 0;
                             for (size_t i = 0; i < views.size(); ++i)
                               total += size_t(views[i]->numel()) * size_t(repeats[i]);
                             if (size != total * sizeof(float)) return InvalidArgument("destination size mismatch");
                             for (size_t i = 0; i < views.size(); ++i) {
                               const size_t n = size_t(views[i]->numel());
                               TERN_RETURN_IF_ERROR(ck->read_f32(*views[i], out));
                               for (int64_t r = 1; r < repeats[i]; ++r) std::copy(out, out + n, out + n * size_t(r));
                               out += n * size_t(repeats[i]);
                             }
                             return Status::Ok();
                           });
}

Result<int32_t> TensorSource::add_transposed(const std::string& name, int64_t rows, int64_t cols) {
  TERN_ASSIGN_OR_RETURN(const TensorView* v, require(name, {rows, cols}));
  return graph_.add_tensor(name, fb::DType::F32, {cols, rows},
                           [v, rows, cols, ck = &checkpoint_](uint8_t* dst, size_t size) -> Status {
                             if (size != size_t(rows * cols) * sizeof(float))
                               return InvalidArgument("destination size mismatch");
                             std::vector<float> raw(size_t(rows * cols));
                             TERN_RETURN_IF_ERROR(ck->read_f32(*v, raw.data()));
                             auto* out = reinterpret_cast<float*>(dst);
                             for (int64_t r = 0; r < rows; ++r)
                               for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = raw[size_t(r * cols + c)];
                             return Status::Ok();
                           });
}

Result<int32_t> TensorSource::add_constant(const std::string& name, const std::vector<int64_t>& shape,
                                           std::vector<float> values) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel != int64_t(values.size()))
    return InvalidArgument("tensor '" + name + "': " + std::to_string(values.size()) + " values for shape " +
                           shape_string(shape));
  return graph_.add_tensor(name, fb::DType::F32, shape,
                           [values = std::move(values)](uint8_t* dst, size_t size) -> Status {
                             if (size != values.size() * sizeof(float)) return InvalidArgument("destination size mismatch");
                             std::memcpy(dst, values.data(), size);
                             return Status::Ok();
                           });
}

}  // namespace tern::convert
