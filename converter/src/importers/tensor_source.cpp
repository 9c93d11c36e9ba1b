#include "importers/tensor_source.h"

#include <algorithm>

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

}  // namespace tern::convert
