// SPDX-License-Identifier: MIT
#include "format/model.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "format/half.h"
#include "ops/op.h"

namespace tern {
namespace {

// The alignment the file's tensor offsets assume of the buffer holding the file (a page for a mapped one).
constexpr size_t kBufferAlignment = 64;

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

size_t dtype_size(fb::DType dtype) {
  switch (dtype) {
    case fb::DType::F32: return 4;
    case fb::DType::F16: return 2;
    case fb::DType::I8: return 1;
    case fb::DType::I32: return 4;
    case fb::DType::I4: return 0;
  }
  return 0;
}

bool is_compressed(fb::DType dtype) {
  return dtype == fb::DType::F16 || dtype == fb::DType::I8 || dtype == fb::DType::I4;
}

const char* dtype_name(fb::DType dtype) {
  switch (dtype) {
    case fb::DType::F32: return "F32";
    case fb::DType::F16: return "F16";
    case fb::DType::I8: return "I8";
    case fb::DType::I32: return "I32";
    case fb::DType::I4: return "I4";
  }
  return "unknown";
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // bounded by the loader's checks
  return n;
}

std::string TensorInfo::shape_string() const {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

std::string Node::label() const {
  const OpDef* def = find_op(code);
  return "op " + std::to_string(index) + " (" + (def ? def->name : "?") + " '" + name + "')";
}

std::string Model::architecture() const {
  auto* m = root_->metadata();
  return m && m->architecture() ? m->architecture()->str() : "";
}

std::string Model::description() const {
  auto* m = root_->metadata();
  return m && m->description() ? m->description()->str() : "";
}

Result<std::unique_ptr<Model>> Model::load_file(const std::string& path) {
  TERN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  auto model = verify(std::move(file));
  if (!model.ok()) return Status(model.status().code(), path + ": " + model.status().message());
  return model;
}

Result<std::unique_ptr<Model>> Model::load_buffer(const void* data, size_t size) {
  if (data == nullptr) return InvalidArgument("model buffer is null");
  // Tensors are read in place at the 64-byte aligned offsets the file gives them.
  if (reinterpret_cast<uintptr_t>(data) % kBufferAlignment != 0) {
    TERN_ASSIGN_OR_RETURN(auto copy, MappedFile::copy(data, size, kBufferAlignment));
    return verify(std::move(copy));
  }
  return verify(MappedFile::borrow(data, size));
}

Result<std::unique_ptr<Model>> Model::verify(std::unique_ptr<MappedFile> file) {
  const uint8_t* bytes = file->data();
  const size_t size = file->size();
  if (size < 8) return InvalidModel("file too small to be a Tern model (" + std::to_string(size) + " bytes)");
  if (reinterpret_cast<uintptr_t>(bytes) % kBufferAlignment != 0) return InvalidArgument("model buffer must be 64-byte aligned");
  uint32_t fb_size;
  std::memcpy(&fb_size, bytes, 4);
  if (uint64_t(fb_size) + 4 > size) {
    return InvalidModel("header says " + std::to_string(fb_size) + " bytes of graph but the file has " +
                        std::to_string(size) + " (truncated?)");
  }
  // The identifier sits after the root offset: a shorter graph would have it read past the graph (and the file).
  if (fb_size < 8) return InvalidModel("header says " + std::to_string(fb_size) + " bytes of graph, too few for a Tern model");
  if (!flatbuffers::BufferHasIdentifier(bytes + 4, fb::ModelIdentifier())) {
    return InvalidModel("not a Tern model (file identifier is not \"TERN\")");
  }
  flatbuffers::Verifier::Options vopts;
  vopts.max_depth = 64;
  vopts.max_tables = 10'000'000;
  vopts.check_alignment = true;
  flatbuffers::Verifier verifier(bytes, 4 + size_t(fb_size), vopts);
  if (!fb::VerifySizePrefixedModelBuffer(verifier)) return InvalidModel("graph failed FlatBuffers verification (corrupt file)");

  std::unique_ptr<Model> model(new Model());
  model->root_ = fb::GetSizePrefixedModel(bytes);
  model->name_bytes_left_ = fb_size;
  const fb::Model& root = *model->root_;
  if (root.format_version() < kMinFormatVersion || root.format_version() > kMaxFormatVersion) {
    const std::string reads = kMinFormatVersion == kMaxFormatVersion
                                  ? std::to_string(kMinFormatVersion)
                                  : std::to_string(kMinFormatVersion) + " to " + std::to_string(kMaxFormatVersion);
    return InvalidModel("format version " + std::to_string(root.format_version()) + " is not supported (this runtime reads " +
                        reads + ")");
  }
  uint32_t align = root.data_alignment();
  if (align < 64 || align > 65536 || (align & (align - 1)) != 0) {
    return InvalidModel("data_alignment " + std::to_string(align) + " must be a power of two in [64, 65536]");
  }
  uint64_t data_start = (uint64_t(fb_size) + 4 + align - 1) / align * align;
  if (data_start > size || root.data_size() > size - data_start) {
    return InvalidModel("data segment of " + std::to_string(root.data_size()) + " bytes at offset " +
                        std::to_string(data_start) + " runs past the end of the file (" + std::to_string(size) +
                        " bytes, truncated?)");
  }
  TERN_RETURN_IF_ERROR(model->check_tensors(bytes + data_start, root.data_size(), align));
  TERN_RETURN_IF_ERROR(model->check_values());
  TERN_RETURN_IF_ERROR(model->check_io());
  TERN_RETURN_IF_ERROR(model->check_ops());
  const fb::Metadata* meta = root.metadata();
  TERN_ASSIGN_OR_RETURN(model->tokenizer_,
                        Tokenizer::from_vocabulary(meta ? meta->vocab() : nullptr, model->vocab_size_));
  model->file_ = std::move(file);
  return model;
}

Status Model::take_name(const flatbuffers::String* name, const std::string& what, std::string fallback, std::string* out) {
  if (name == nullptr) {
    *out = std::move(fallback);
    return Status::Ok();
  }
  if (name->size() > kMaxNameBytes) {
    return InvalidModel(what + ": name of " + std::to_string(name->size()) + " bytes is longer than the " +
                        std::to_string(kMaxNameBytes) + " allowed");
  }
  if (name->size() > name_bytes_left_) {
    return InvalidModel(what + ": the names of tensors, values and ops add up to more bytes than the graph holds "
                        "(entries share one string?)");
  }
  name_bytes_left_ -= name->size();
  *out = name->str();
  return Status::Ok();
}

Status Model::check_tensors(const uint8_t* data_base, uint64_t data_size, uint32_t alignment) {
  auto* list = root_->tensors();
  size_t count = list ? list->size() : 0;
  tensors_.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const fb::Tensor* t = list->Get(i);
    TensorInfo& info = tensors_[i];
    TERN_RETURN_IF_ERROR(take_name(t->name(), "tensor " + std::to_string(i), "tensor_" + std::to_string(i), &info.name));
    const std::string where = "tensor " + std::to_string(i) + " '" + info.name + "'";
    if (dtype_size(t->dtype()) == 0 && t->dtype() != fb::DType::I4) {
      return InvalidModel(where + ": unknown dtype " + std::to_string(int(t->dtype())));
    }
    info.dtype = t->dtype();
    uint64_t numel = 1;
    if (!t->shape() || t->shape()->size() > kMaxRank) return InvalidModel(where + ": rank must be 0.." + std::to_string(kMaxRank));
    // The verifier checks a vector's length field, not that its 8-byte elements are 8-byte aligned.
    if (reinterpret_cast<uintptr_t>(t->shape()->data()) % alignof(int64_t) != 0) return InvalidModel(where + ": shape is misaligned");
    for (int64_t d : *t->shape()) {
      if (d < 0 || d > kMaxDim) return InvalidModel(where + ": dimension " + std::to_string(d) + " out of range");
      if (mul_overflows(numel, uint64_t(d), &numel)) return InvalidModel(where + ": shape overflows");
      info.shape.push_back(d);
    }
    uint64_t bytes = numel / 2;
    if (info.dtype == fb::DType::I4 && numel % 2 != 0) return InvalidModel(where + ": I4 needs an even element count");
    if ((info.dtype != fb::DType::I4 && mul_overflows(numel, dtype_size(info.dtype), &bytes)) || bytes != t->size()) {
      return InvalidModel(where + ": size " + std::to_string(t->size()) + " bytes does not match shape " +
                          info.shape_string() + " of " + dtype_name(info.dtype));
    }
    if (t->offset() % alignment != 0) {
      return InvalidModel(where + ": offset " + std::to_string(t->offset()) + " is not " + std::to_string(alignment) +
                          "-byte aligned");
    }
    if (t->offset() > data_size || t->size() > data_size - t->offset()) {
      return InvalidModel(where + ": bytes [" + std::to_string(t->offset()) + ", +" + std::to_string(t->size()) +
                          ") lie outside the data segment of " + std::to_string(data_size) + " bytes");
    }
    info.data = data_base + t->offset();
    info.size = t->size();
    weight_bytes_ += t->size();
  }
  return check_scales();
}

// The scale tensors and groups of I8 and I4 matrices (schema/tern.fbs, Tensor), once every tensor is known.
Status Model::check_scales() {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const fb::Tensor* t = root_->tensors()->Get(i);
    TensorInfo& info = tensors_[i];
    const std::string where = "tensor " + std::to_string(i) + " '" + info.name + "'";
    const bool quantised = info.dtype == fb::DType::I8 || info.dtype == fb::DType::I4;
    if (!quantised) {
      if (t->scales() != -1 || t->group_size() != 0) {
        return InvalidModel(where + ": a " + std::string(dtype_name(info.dtype)) + " tensor has no scales or group size");
      }
      continue;
    }
    if (info.shape.size() != 2) return InvalidModel(where + ": an " + dtype_name(info.dtype) + " tensor must be a matrix [out, in]");
    const int64_t out = info.shape[0], in = info.shape[1];
    if (in % kQuantBlock != 0) {
      return InvalidModel(where + ": " + dtype_name(info.dtype) + " rows must be a multiple of " +
                          std::to_string(kQuantBlock) + " elements, not " + std::to_string(in));
    }
    const int64_t g = t->group_size();
    if (g < 0 || (g > 0 && (g % kQuantBlock != 0 || in % g != 0))) {
      return InvalidModel(where + ": group size " + std::to_string(g) + " must be 0 or a multiple of " +
                          std::to_string(kQuantBlock) + " dividing the row length " + std::to_string(in));
    }
    const int32_t s = t->scales();
    if (s < 0 || size_t(s) >= tensors_.size() || size_t(s) == i) {
      return InvalidModel(where + ": scale tensor " + std::to_string(s) + " does not exist");
    }
    const TensorInfo& scales = tensors_[size_t(s)];
    const fb::DType want = info.dtype == fb::DType::I8 ? fb::DType::F32 : fb::DType::F16;
    if (scales.dtype != want) {
      return InvalidModel(where + ": its scales '" + scales.name + "' must be " + dtype_name(want) + ", not " +
                          dtype_name(scales.dtype));
    }
    const std::vector<int64_t> shape = g ? std::vector<int64_t>{out, in / g} : std::vector<int64_t>{out};
    if (scales.shape != shape) {
      TensorInfo expect;
      expect.shape = shape;
      return InvalidModel(where + ": its scales '" + scales.name + "' are " + scales.shape_string() + ", not " +
                          expect.shape_string());
    }
    // A NaN or infinite scale turns every product of its group into NaN (int8) or, once activations are quantised
    // per block, into finite garbage (int4): refused here, where the file is read, and named.
    for (int64_t e = 0; e < scales.numel(); ++e) {
      const bool finite = want == fb::DType::F32
                              ? std::isfinite(scales.f32()[e])
                              : half_is_finite(reinterpret_cast<const uint16_t*>(scales.data)[e]);
      if (!finite) {
        const int64_t per_row = g ? in / g : 1;
        return InvalidModel(where + ": its scales '" + scales.name + "' hold a NaN or infinite value at [" +
                            std::to_string(e / per_row) + (g ? ", " + std::to_string(e % per_row) : std::string()) + "]");
      }
    }
    info.scales = &scales;
    info.group_size = g;
  }
  return Status::Ok();
}

Status Model::check_values() {
  auto* list = root_->values();
  size_t count = list ? list->size() : 0;
  values_.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const fb::Value* v = list->Get(i);
    ValueInfo& info = values_[i];
    TERN_RETURN_IF_ERROR(take_name(v->name(), "value " + std::to_string(i), "value_" + std::to_string(i), &info.name));
    if (v->dtype() != fb::DType::F32 && v->dtype() != fb::DType::I32) {
      return InvalidModel("value '" + info.name + "': dtype " + dtype_name(v->dtype()) + " is not supported for activations");
    }
    if (v->width() < 1 || v->width() > kMaxWidth) {
      return InvalidModel("value '" + info.name + "': width " + std::to_string(v->width()) + " out of range [1, " +
                          std::to_string(kMaxWidth) + "]");
    }
    info.dtype = v->dtype();
    info.width = v->width();
  }
  return Status::Ok();
}

Status Model::check_io() {
  auto one_value = [&](const flatbuffers::Vector<int32_t>* list, const char* what, int* out) -> Status {
    if (!list || list->size() != 1) return InvalidModel(std::string("model must have exactly one ") + what);
    int v = list->Get(0);
    if (v < 0 || size_t(v) >= values_.size()) return InvalidModel(std::string(what) + " refers to missing value " + std::to_string(v));
    *out = v;
    return Status::Ok();
  };
  TERN_RETURN_IF_ERROR(one_value(root_->inputs(), "input", &input_));
  TERN_RETURN_IF_ERROR(one_value(root_->outputs(), "output", &output_));
  const ValueInfo& in = values_[input_];
  if (in.dtype != fb::DType::I32 || in.width != 1) return InvalidModel("input '" + in.name + "' must be I32 token ids of width 1");
  const ValueInfo& out = values_[output_];
  if (out.dtype != fb::DType::F32) return InvalidModel("output '" + out.name + "' must be F32 logits");
  if (input_ == output_) return InvalidModel("input and output are the same value");
  vocab_size_ = out.width;
  auto* meta = root_->metadata();
  max_context_ = meta ? meta->max_context() : 0;
  if (max_context_ < 0) return InvalidModel("metadata: max_context " + std::to_string(max_context_) + " is negative");
  segment_length_ = meta ? meta->segment_length() : 0;
  if (segment_length_ < 0 || segment_length_ > (int64_t(1) << 31) ||
      (max_context_ > 0 && segment_length_ > max_context_)) {
    return InvalidModel("metadata: segment_length " + std::to_string(segment_length_) + " is outside [0, " +
                        std::to_string(max_context_ > 0 ? max_context_ : int64_t(1) << 31) + "]" +
                        (max_context_ > 0 ? " (max_context)" : ""));
  }
  if (meta && meta->vocab() && meta->vocab()->size() != vocab_size_) {
    return InvalidModel("metadata: vocabulary size " + std::to_string(meta->vocab()->size()) +
                        " differs from the output width " + std::to_string(vocab_size_));
  }
  return Status::Ok();
}

Status Model::check_ops() {
  auto* list = root_->ops();
  size_t count = list ? list->size() : 0;
  if (count == 0) return InvalidModel("model has no ops");
  values_[input_].producer = -2;  // written by the caller
  nodes_.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const fb::Op* op = list->Get(i);
    Node& node = nodes_[i];
    node.index = int(i);
    node.code = op->code();
    TERN_RETURN_IF_ERROR(take_name(op->name(), "op " + std::to_string(i), "", &node.name));
    node.fb_op = op;
    const OpDef* def = find_op(op->code());
    if (def == nullptr) return Unsupported("op " + std::to_string(i) + " '" + node.name + "': unknown op code " + std::to_string(int(op->code())) + " (newer model format?)");
    // Version 2 marks an op that sets a field older runtimes would ignore (schema/README.md); this runtime reads both.
    if (op->version() < 1 || op->version() > 2) return Unsupported(node.label() + ": op version " + std::to_string(op->version()) + " is not supported");
    if (op->params_type() != def->params) return InvalidModel(node.label() + ": parameters of the wrong type");
    // The verifier accepts a union whose type is set but whose table is absent.
    if (op->params_type() != fb::OpParams::NONE && op->params() == nullptr) return InvalidModel(node.label() + ": parameters are missing");
    size_t n_in = op->inputs() ? op->inputs()->size() : 0;
    size_t n_out = op->outputs() ? op->outputs()->size() : 0;
    size_t n_w = op->weights() ? op->weights()->size() : 0;
    if (n_in != size_t(def->inputs) || n_out != 1) {
      return InvalidModel(node.label() + ": expects " + std::to_string(def->inputs) + " input(s) and 1 output, has " +
                          std::to_string(n_in) + " and " + std::to_string(n_out));
    }
    if (n_w < size_t(def->min_weights) || n_w > size_t(def->max_weights)) {
      return InvalidModel(node.label() + ": has " + std::to_string(n_w) + " weights, expects " +
                          std::to_string(def->min_weights) + ".." + std::to_string(def->max_weights));
    }
    for (int32_t v : *op->inputs()) {
      if (v < 0 || size_t(v) >= values_.size()) return InvalidModel(node.label() + ": input refers to missing value " + std::to_string(v));
      if (values_[v].producer == -1) return InvalidModel(node.label() + ": reads value '" + values_[v].name + "' before any op writes it");
      // The output lives in the caller's logits buffer, absent when a call asks for no logits: nothing may read it.
      if (v == output_) return InvalidModel(node.label() + ": reads the model output '" + values_[v].name + "'");
      node.inputs.push_back(v);
    }
    for (int32_t v : *op->outputs()) {
      if (v < 0 || size_t(v) >= values_.size()) return InvalidModel(node.label() + ": output refers to missing value " + std::to_string(v));
      if (values_[v].producer != -1) return InvalidModel(node.label() + ": writes value '" + values_[v].name + "' that is already written");
      values_[v].producer = int(i);
      node.outputs.push_back(v);
    }
    for (size_t w = 0; w < n_w; ++w) {
      int32_t t = op->weights()->Get(w);
      if (t == -1 && int(w) >= def->min_weights) {
        node.weights.push_back(nullptr);
        continue;
      }
      if (t < 0 || size_t(t) >= tensors_.size()) return InvalidModel(node.label() + ": weight " + std::to_string(w) + " refers to missing tensor " + std::to_string(t));
      node.weights.push_back(&tensors_[t]);
    }
    for (int v : node.inputs) {
      const bool reads_ids = def->code == fb::OpCode::EMBEDDING || def->code == fb::OpCode::ADAPTIVE_EMBEDDING;
      if (values_[v].dtype != (reads_ids ? fb::DType::I32 : fb::DType::F32)) {
        return InvalidModel(node.label() + ": input '" + values_[v].name + "' has the wrong dtype");
      }
    }
    if (values_[node.outputs[0]].dtype != fb::DType::F32) return InvalidModel(node.label() + ": output must be F32");
    const fb::AttentionKind kind = def->code == fb::OpCode::ATTENTION && op->params_as_AttentionParams()
                                       ? op->params_as_AttentionParams()->kind_type()
                                       : fb::AttentionKind::NONE;
    for (size_t w = 0; w < node.weights.size(); ++w) {
      const TensorInfo* t = node.weights[w];
      if (!t || t->dtype == fb::DType::F32) continue;
      if (!is_compressed(t->dtype) || !def->compressible || !def->compressible(kind, int(w))) {
        return Unsupported(node.label() + ": weight '" + t->name + "' is " + dtype_name(t->dtype) +
                           "; this weight of the op is read as F32 only");
      }
    }
    TERN_RETURN_IF_ERROR(def->validate(node, values_));
  }
  if (values_[output_].producer < 0) return InvalidModel("output '" + values_[output_].name + "' is never written");
  return Status::Ok();
}

}  // namespace tern
