// SPDX-License-Identifier: MIT
#include "compress.h"

#include <fnmatch.h>

#include <map>
#include <memory>

#include "ops/op.h"
#include "quantize.h"

namespace tern::convert {

bool parse_weight_format(const std::string& text, WeightFormat* out) {
  static const std::map<std::string, WeightFormat> kNames = {
      {"f32", WeightFormat::kF32}, {"f16", WeightFormat::kF16}, {"int8", WeightFormat::kInt8}, {"int4", WeightFormat::kInt4}};
  auto it = kNames.find(text);
  if (it == kNames.end()) return false;
  *out = it->second;
  return true;
}

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32: return "f32";
    case WeightFormat::kF16: return "f16";
    case WeightFormat::kInt8: return "int8";
    case WeightFormat::kInt4: return "int4";
  }
  return "?";
}

namespace {

// Where a tensor is read: "op 'NAME' weight SLOT".
struct Use {
  const OpSpec* op;
  int slot;
  bool compressible;
};

fb::AttentionKind attention_kind(const OpSpec& op) {
  if (const auto* a = op.params.AsAttentionParams()) return a->kind.type;
  return fb::AttentionKind::NONE;
}

std::vector<std::vector<Use>> tensor_uses(const GraphBuilder& graph) {
  std::vector<std::vector<Use>> uses(graph.tensors().size());
  for (const OpSpec& op : graph.ops()) {
    const OpDef* def = find_op(op.code);
    for (size_t slot = 0; slot < op.weights.size(); ++slot) {
      const int32_t t = op.weights[slot];
      if (t < 0) continue;
      const bool ok = def && def->compressible && def->compressible(attention_kind(op), int(slot));
      uses[size_t(t)].push_back({&op, int(slot), ok});
    }
  }
  return uses;
}

// One tensor's float32 contents, produced by its original fill on first use and shared by the fills of the
// compressed tensor and its scales (the writer calls them in tensor order: the tensor, later its scales).
struct Quantised {
  TensorFill source;
  int64_t out = 0, in = 0, group = 0;
  WeightFormat format = WeightFormat::kF32;
  std::vector<uint8_t> data, scales;  // compressed bytes and scale bytes, dropped once written
  bool done = false;

  Status ensure() {
    if (done) return Status::Ok();
    std::vector<float> w;
    try {
      w.resize(size_t(out * in));
    } catch (const std::bad_alloc&) {
      return OutOfMemory("cannot allocate " + std::to_string(out * in * 4) + " bytes to compress it");
    }
    TERN_RETURN_IF_ERROR(source(reinterpret_cast<uint8_t*>(w.data()), w.size() * sizeof(float)));
    const int64_t groups = group ? in / group : 1;
    switch (format) {
      case WeightFormat::kF16:
        data.resize(w.size() * 2);
        TERN_RETURN_IF_ERROR(quantize_f16(w.data(), int64_t(w.size()), reinterpret_cast<uint16_t*>(data.data())));
        break;
      case WeightFormat::kInt8:
        data.resize(w.size());
        scales.resize(size_t(out * groups) * sizeof(float));
        TERN_RETURN_IF_ERROR(quantize_i8(w.data(), out, in, group, reinterpret_cast<int8_t*>(data.data()),
                                         reinterpret_cast<float*>(scales.data())));
        break;
      case WeightFormat::kInt4:
        data.assign(w.size() / 2, 0);
        scales.resize(size_t(out * groups) * sizeof(uint16_t));
        TERN_RETURN_IF_ERROR(
            quantize_i4(w.data(), out, in, group, data.data(), reinterpret_cast<uint16_t*>(scales.data())));
        break;
      case WeightFormat::kF32: break;
    }
    done = true;
    return Status::Ok();
  }
};

Status copy_out(std::vector<uint8_t>& bytes, uint8_t* dst, size_t size) {
  if (bytes.size() != size) return InternalError("compressed size " + std::to_string(bytes.size()) + " != " + std::to_string(size));
  std::copy(bytes.begin(), bytes.end(), dst);
  std::vector<uint8_t>().swap(bytes);
  return Status::Ok();
}

std::string describe_use(const Use& u) {
  return "op '" + u.op->name + "' (" + find_op(u.op->code)->name + ") weight " + std::to_string(u.slot);
}

}  // namespace

Status compress_weights(GraphBuilder& graph, const CompressOptions& options, CompressReport* report) {
  CompressReport r;
  std::vector<bool> matched(options.overrides.size(), false);
  const auto uses = tensor_uses(graph);
  const size_t original = graph.tensors().size();
  for (size_t i = 0; i < original; ++i) {
    const TensorSpec t = graph.tensors()[i];  // a copy: adding scale tensors may move the vector
    r.bytes_before += t.size;
    WeightFormat want = options.format;
    bool named = false;
    for (size_t k = 0; k < options.overrides.size(); ++k) {
      if (fnmatch(options.overrides[k].pattern.c_str(), t.name.c_str(), 0) == 0) {
        want = options.overrides[k].format;
        named = true;
        matched[k] = true;
      }
    }
    const bool matrix = t.dtype == fb::DType::F32 && t.shape.size() == 2;
    bool eligible = matrix && !uses[i].empty();
    const Use* blocker = nullptr;
    for (const Use& u : uses[i])
      if (!u.compressible) eligible = false, blocker = &u;
    if (want == WeightFormat::kF32 || (!named && (!eligible || t.shape[0] * t.shape[1] < kMinCompressedElements))) {
      r.bytes_after += t.size;
      continue;
    }
    if (!eligible) {
      if (blocker) return InvalidArgument("--weight-type: tensor '" + t.name + "' cannot be " + weight_format_name(want) +
                                          ": " + describe_use(*blocker) + " reads it as float32 only");
      return InvalidArgument("--weight-type: tensor '" + t.name + "' is not a float32 matrix read by an op");
    }
    const int64_t out = t.shape[0], in = t.shape[1];
    // int4 keeps token embeddings (and a head tied to one) in int8, as llama.cpp's quantizer keeps them wider:
    // every logit and every input row goes through them.
    bool embedding = false;
    for (const Use& u : uses[i])
      embedding |= u.op->code == fb::OpCode::EMBEDDING || u.op->code == fb::OpCode::ADAPTIVE_EMBEDDING;
    if (want == WeightFormat::kInt4 && !named && embedding) {
      r.notes.push_back(t.name + ": int8, not int4 (a token embedding; --weight-type '" + t.name + "=int4' asks)");
      want = WeightFormat::kInt8;
    }
    int64_t group = 0;
    if (want == WeightFormat::kInt8 || want == WeightFormat::kInt4) {
      if (in % kQuantBlock != 0) {
        r.notes.push_back(t.name + ": f16, not " + std::string(weight_format_name(want)) + " (rows of " +
                          std::to_string(in) + " are not a multiple of " + std::to_string(kQuantBlock) + ")");
        want = WeightFormat::kF16;
      } else {
        group = options.group >= 0 ? options.group : (want == WeightFormat::kInt4 ? kDefaultInt4Group : 0);
        if (group && in % group != 0) {
          r.notes.push_back(t.name + ": groups of " + std::to_string(kQuantBlock) + ", not " + std::to_string(group) +
                            " (rows of " + std::to_string(in) + ")");
          group = kQuantBlock;
        }
      }
    }
    auto job = std::make_shared<Quantised>();
    job->source = t.fill;
    job->out = out, job->in = in, job->group = group, job->format = want;
    const uint64_t numel = uint64_t(out) * uint64_t(in);
    auto fill = [job](uint8_t* dst, size_t size) -> Status {
      TERN_RETURN_IF_ERROR(job->ensure());
      return copy_out(job->data, dst, size);
    };
    if (want == WeightFormat::kF16) {
      graph.store_tensor_as(int32_t(i), fb::DType::F16, numel * 2, fill, -1, 0);
      r.bytes_after += numel * 2;
    } else {
      const bool int8 = want == WeightFormat::kInt8;
      const int64_t groups = group ? in / group : 0;
      std::vector<int64_t> scale_shape = groups ? std::vector<int64_t>{out, groups} : std::vector<int64_t>{out};
      TERN_ASSIGN_OR_RETURN(
          int32_t scales,
          graph.add_tensor(t.name + ".scales", int8 ? fb::DType::F32 : fb::DType::F16, scale_shape,
                           [job](uint8_t* dst, size_t size) -> Status {
                             TERN_RETURN_IF_ERROR(job->ensure());
                             return copy_out(job->scales, dst, size);
                           }));
      const uint64_t bytes = int8 ? numel : numel / 2;
      graph.store_tensor_as(int32_t(i), int8 ? fb::DType::I8 : fb::DType::I4, bytes, fill, scales, int32_t(group));
      r.bytes_after += bytes + graph.tensors()[size_t(scales)].size;
    }
    ++r.compressed;
  }
  for (size_t k = 0; k < options.overrides.size(); ++k) {
    if (!matched[k]) return InvalidArgument("--weight-type: no tensor matches '" + options.overrides[k].pattern + "'");
  }
  if (report) *report = std::move(r);
  return Status::Ok();
}

}  // namespace tern::convert
