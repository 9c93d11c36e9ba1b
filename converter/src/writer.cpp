// SPDX-License-Identifier: MIT
#include "writer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include <flatbuffers/flatbuffers.h>

#include "format/model.h"
#include "format/temp_file.h"
#include "vocabulary_table.h"

namespace tern::convert {
namespace {

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// An op's parameter table, packed by the object API. The generated Pack leaves an empty vector out where the
// converter has always written one (a one-cluster adaptive embedding or softmax has no cutoffs), so the two tables
// with a vector that can be empty go through their Create*Direct, which keeps it: converted files stay
// byte-identical to those written before the object API.
flatbuffers::Offset<void> pack_params(flatbuffers::FlatBufferBuilder& fbb, const OpParams& params) {
  if (const auto* p = params.AsAdaptiveEmbeddingParams())
    return fb::CreateAdaptiveEmbeddingParamsDirect(fbb, &p->cutoffs, p->scale).Union();
  if (const auto* p = params.AsAdaptiveLogSoftmaxParams())
    return fb::CreateAdaptiveLogSoftmaxParamsDirect(fbb, &p->cutoffs).Union();
  return params.Pack(fbb);
}

// The graph as a size-prefixed FlatBuffer; tensor offsets are already laid out.
void build_flatbuffer(const GraphBuilder& g, const std::vector<uint64_t>& offsets, uint64_t data_size,
                      flatbuffers::FlatBufferBuilder& fbb) {
  const ModelMetadata& m = g.metadata();
  auto vocab = build_vocabulary(fbb, m);
  auto metadata = fb::CreateMetadataDirect(fbb, m.architecture.c_str(), m.description.c_str(), kProducer, vocab,
                                           m.max_context, m.segment_length);
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  for (size_t i = 0; i < g.tensors().size(); ++i) {
    const TensorSpec& t = g.tensors()[i];
    tensors.push_back(fb::CreateTensorDirect(fbb, t.name.c_str(), t.dtype, &t.shape, offsets[i], t.size,
                                                  t.scales, t.group_size));
  }
  std::vector<flatbuffers::Offset<fb::Value>> values;
  for (const ValueSpec& v : g.values()) values.push_back(fb::CreateValueDirect(fbb, v.name.c_str(), v.dtype, v.width));
  std::vector<flatbuffers::Offset<fb::Op>> ops;
  for (const OpSpec& op : g.ops()) {
    const auto params = pack_params(fbb, op.params);
    ops.push_back(fb::CreateOpDirect(fbb, op.code, op.version, op.name.c_str(), &op.inputs, &op.outputs, &op.weights,
                                     op.params.type, params));
  }
  auto model = fb::CreateModelDirect(fbb, kFormatVersion, metadata, kDataAlignment, data_size, &tensors, &values, &ops,
                                     &g.inputs(), &g.outputs());
  fb::FinishSizePrefixedModelBuffer(fbb, model);
}

// "writing 34/120 tensors, 210/1024 MiB": one line per 5% of bytes for large models, only the last for small.
class Progress {
 public:
  Progress(bool quiet, size_t tensors, uint64_t bytes) : quiet_(quiet), tensors_(tensors), bytes_(bytes) {}
  void update(size_t tensors_done, uint64_t bytes_done) {
    if (quiet_) return;
    const bool last = tensors_done == tensors_;
    const uint64_t step = bytes_ ? bytes_done * 20 / bytes_ : 20;
    // Intermediate lines only for large models, once per 5% step, and never a 100% line before the last one.
    if (!last && (bytes_ < kChattyBytes || step <= last_step_ || step >= 20)) return;
    last_step_ = step;
    std::fprintf(stderr, "writing %zu/%zu tensors, %s/%s MiB\n", tensors_done, tensors_, mib(bytes_done).c_str(),
                 mib(bytes_).c_str());
  }

 private:
  static constexpr uint64_t kChattyBytes = 64ull << 20;
  std::string mib(uint64_t b) const {
    char buf[32];
    const double v = double(b) / double(1 << 20);
    std::snprintf(buf, sizeof buf, bytes_ < (10ull << 20) ? "%.1f" : "%.0f", v);
    return buf;
  }
  bool quiet_;
  size_t tensors_;
  uint64_t bytes_;
  uint64_t last_step_ = 0;
};

// Runs the runtime's loader over the bytes just written: a model tern-convert writes must be one libtern loads.
Status verify_written(const TempFile& file, const std::string& out_path) {
  const size_t size = size_t(file.written());
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, file.fd(), 0);
  if (p == MAP_FAILED)
    return IoError("'" + out_path + "': cannot map the written file to check it: " + std::strerror(errno));
  auto model = Model::load_buffer(p, size);
  ::munmap(p, size);
  if (!model.ok())
    return Status(model.status().code(), "'" + out_path + "': the converted model fails the loader's checks (" +
                                             model.status().message() + "); nothing was written");
  return Status::Ok();
}

}  // namespace

std::vector<uint64_t> layout_tensors(const std::vector<TensorSpec>& tensors, uint64_t alignment, uint64_t* data_size) {
  std::vector<uint64_t> offsets;
  uint64_t cursor = 0;
  for (const TensorSpec& t : tensors) {
    const uint64_t at = align_up(cursor, alignment);
    offsets.push_back(at);
    cursor = at + t.size;
  }
  *data_size = cursor;
  return offsets;
}

Status write_model(const GraphBuilder& graph, const std::string& out_path, const WriteOptions& options,
                   WriteStats* stats) {
  TERN_RETURN_IF_ERROR(graph.finish());
  uint64_t data_size = 0;
  const std::vector<uint64_t> offsets = layout_tensors(graph.tensors(), kDataAlignment, &data_size);

  flatbuffers::FlatBufferBuilder fbb(64 * 1024);
  build_flatbuffer(graph, offsets, data_size, fbb);
  const uint64_t fb_size = fbb.GetSize();  // 4-byte prefix + S
  const uint64_t data_start = align_up(fb_size, kDataAlignment);

  TempFile file;
  TERN_RETURN_IF_ERROR(file.create(out_path));
  TERN_RETURN_IF_ERROR(file.write(fbb.GetBufferPointer(), fbb.GetSize()));

  Progress progress(options.quiet, graph.tensors().size(), data_size);
  std::vector<uint8_t> buffer;  // one tensor at a time
  uint64_t bytes_done = 0;
  for (size_t i = 0; i < graph.tensors().size(); ++i) {
    const TensorSpec& t = graph.tensors()[i];
    TERN_RETURN_IF_ERROR(file.pad_to(data_start + offsets[i]));
    try {
      buffer.resize(size_t(t.size));
    } catch (const std::bad_alloc&) {
      return OutOfMemory("tensor '" + t.name + "': cannot allocate " + std::to_string(t.size) + " bytes");
    }
    Status filled = t.fill(buffer.data(), buffer.size());
    if (!filled.ok()) return Status(filled.code(), "tensor '" + t.name + "': " + filled.message());
    TERN_RETURN_IF_ERROR(file.write(buffer.data(), buffer.size()));
    bytes_done += t.size;
    progress.update(i + 1, bytes_done);
  }
  if (graph.tensors().empty()) TERN_RETURN_IF_ERROR(file.pad_to(data_start));
  const uint64_t file_size = file.written();
  if (options.verify) TERN_RETURN_IF_ERROR(verify_written(file, out_path));
  TERN_RETURN_IF_ERROR(file.commit());
  if (stats) *stats = {file_size, fb_size, data_size};
  return Status::Ok();
}

}  // namespace tern::convert
