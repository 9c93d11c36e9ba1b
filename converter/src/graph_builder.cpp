// SPDX-License-Identifier: MIT
#include "graph_builder.h"

#include <limits>

#include "format/model.h"
#include "ops/op.h"

namespace tern::convert {

Result<int32_t> GraphBuilder::add_value(const std::string& name, fb::DType dtype, int64_t width) {
  if (name.empty()) return InvalidArgument("value name is empty");
  if (width <= 0) return InvalidArgument("value '" + name + "': width " + std::to_string(width) + " must be positive");
  if (value_index_.count(name)) return InvalidArgument("value '" + name + "' is defined twice");
  const auto index = int32_t(values_.size());
  values_.push_back({name, dtype, width});
  written_.push_back(false);
  value_index_[name] = index;
  return index;
}

Result<int32_t> GraphBuilder::add_tensor(const std::string& name, fb::DType dtype, std::vector<int64_t> shape,
                                         TensorFill fill) {
  if (name.empty()) return InvalidArgument("tensor name is empty");
  if (tensor_index_.count(name)) return InvalidArgument("tensor '" + name + "' is defined twice");
  if (!fill) return InvalidArgument("tensor '" + name + "' has no fill function");
  uint64_t size = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(size, uint64_t(d), &size))
      return InvalidArgument("tensor '" + name + "': shape dimension " + std::to_string(d) + " is invalid");
  }
  if (size > uint64_t(std::numeric_limits<int64_t>::max()))
    return InvalidArgument("tensor '" + name + "' is too large");
  const auto index = int32_t(tensors_.size());
  tensors_.push_back({name, dtype, std::move(shape), size, std::move(fill)});
  tensor_index_[name] = index;
  return index;
}

void GraphBuilder::store_tensor_as(int32_t index, fb::DType dtype, uint64_t size, TensorFill fill, int32_t scales,
                                  int32_t group) {
  TensorSpec& t = tensors_[size_t(index)];
  t.dtype = dtype;
  t.size = size;
  t.fill = std::move(fill);
  t.scales = scales;
  t.group_size = group;
}

Result<int32_t> GraphBuilder::add_op(fb::OpCode code, const std::string& name, std::vector<int32_t> inputs,
                                     std::vector<int32_t> outputs, std::vector<int32_t> weights, OpParams params,
                                     int32_t version) {
  const std::string where = "op '" + name + "': ";
  if (name.empty()) return InvalidArgument("op name is empty");
  if (op_index_.count(name)) return InvalidArgument("op '" + name + "' is defined twice");
  // The runtime's op registry is the one source of each op's operand counts and parameter table.
  const OpDef* def = find_op(code);
  if (!def) return InvalidArgument(where + "unknown op code " + std::to_string(int(code)));
  if (inputs.size() != size_t(def->inputs))
    return InvalidArgument(where + "takes " + std::to_string(def->inputs) + " inputs, got " +
                           std::to_string(inputs.size()));
  // Optional weights are written as -1; trailing ones may be left out altogether.
  if (weights.size() < size_t(def->min_weights) || weights.size() > size_t(def->max_weights))
    return InvalidArgument(where + "takes " + std::to_string(def->min_weights) + ".." + std::to_string(def->max_weights) +
                           " weights, got " + std::to_string(weights.size()));
  if (params.type != def->params) return InvalidArgument(where + "parameters do not match the op code");
  if (version < 1) return InvalidArgument(where + "version " + std::to_string(version) + " is not an op version");
  if (outputs.empty()) return InvalidArgument(where + "has no outputs");

  for (int32_t v : inputs) {
    if (v < 0 || size_t(v) >= values_.size()) return InvalidArgument(where + "input " + std::to_string(v) + " is not a value");
    if (!written_[size_t(v)]) return InvalidArgument(where + "reads '" + values_[size_t(v)].name + "' before it is written");
  }
  for (int32_t v : outputs) {
    if (v < 0 || size_t(v) >= values_.size()) return InvalidArgument(where + "output " + std::to_string(v) + " is not a value");
    if (written_[size_t(v)]) return InvalidArgument(where + "writes '" + values_[size_t(v)].name + "' a second time");
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    const int32_t t = weights[i];
    if (t == -1 && i >= size_t(def->min_weights)) continue;
    if (t < 0 || size_t(t) >= tensors_.size())
      return InvalidArgument(where + "weight " + std::to_string(i) + " (" + std::to_string(t) + ") is not a tensor");
  }

  for (int32_t v : outputs) written_[size_t(v)] = true;
  const auto index = int32_t(ops_.size());
  ops_.push_back({code, version, name, std::move(inputs), std::move(outputs), std::move(weights), std::move(params)});
  op_index_[name] = index;
  return index;
}

Status GraphBuilder::add_input(int32_t value) {
  if (value < 0 || size_t(value) >= values_.size()) return InvalidArgument("model input " + std::to_string(value) + " is not a value");
  if (written_[size_t(value)]) return InvalidArgument("model input '" + values_[size_t(value)].name + "' is already written");
  written_[size_t(value)] = true;
  inputs_.push_back(value);
  return Status::Ok();
}

Status GraphBuilder::add_output(int32_t value) {
  if (value < 0 || size_t(value) >= values_.size()) return InvalidArgument("model output " + std::to_string(value) + " is not a value");
  outputs_.push_back(value);
  return Status::Ok();
}

Status GraphBuilder::finish() const {
  if (inputs_.empty()) return InvalidArgument("model has no inputs");
  if (outputs_.empty()) return InvalidArgument("model has no outputs");
  for (int32_t v : outputs_)
    if (!written_[size_t(v)]) return InvalidArgument("model output '" + values_[size_t(v)].name + "' is never written");
  if (metadata_.architecture.empty()) return InvalidArgument("model metadata has no architecture");
  return Status::Ok();
}

int32_t GraphBuilder::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? -1 : it->second;
}

int32_t GraphBuilder::find_value(const std::string& name) const {
  auto it = value_index_.find(name);
  return it == value_index_.end() ? -1 : it->second;
}

}  // namespace tern::convert
