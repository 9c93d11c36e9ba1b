// In-memory model that importers build and the writer serialises. Tensors carry a fill callback instead
// of bytes, so weights are produced (converted, fused) one tensor at a time while the file is written.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "format/status.h"
#include "tern_generated.h"

namespace tern::convert {

struct SentencePieceFile;  // sentencepiece_file.h
struct SymbolsFile;        // symbols_file.h

// Op parameters, mirroring the schema's *Params tables; kType names the table each one becomes.
namespace params {
struct Embedding {
  static constexpr fb::OpParams kType = fb::OpParams::EmbeddingParams;
};
struct Position {
  static constexpr fb::OpParams kType = fb::OpParams::PositionParams;
  fb::PositionKind kind = fb::PositionKind::LEARNED;
  int64_t max_positions = 0;
};
struct LayerNorm {
  static constexpr fb::OpParams kType = fb::OpParams::LayerNormParams;
  float eps = 1e-5f;
};
struct Linear {
  static constexpr fb::OpParams kType = fb::OpParams::LinearParams;
};
struct Activation {
  static constexpr fb::OpParams kType = fb::OpParams::ActivationParams;
  fb::ActivationKind kind = fb::ActivationKind::GELU_ERF;
};
struct Add {
  static constexpr fb::OpParams kType = fb::OpParams::AddParams;
};
struct DenseAttention {};
struct SlidingWindow {
  int32_t window = 0;
};
struct ChunkedLocal {
  int32_t chunk = 0;
  int32_t chunks_before = 0;
  int32_t chunks_after = 0;
};
struct Strided {
  int32_t stride = 0;
  bool split = false;  // first half of the heads local, second half strided
};
struct Fixed {
  int32_t block = 0;
  int32_t summary = 0;
  bool split = false;  // first half of the heads own block, second half summaries
};
// Adaptive span (schema/tern.fbs, converter/adaptive-span.md): the ATTENTION op then takes weights key_pe
// [head_dim, max_span] and span [heads] (or -1: no mask, plain attention over the previous max_span keys).
struct AdaptiveSpan {
  int32_t max_span = 0;
  int32_t ramp = 0;
};
// Transformer-XL relative attention (schema/tern.fbs, runtime/src/ops/relative_xl.h): the ATTENTION op then reads the
// layer input and takes weights qkv, r_net, r_w_bias, r_r_bias, norm_weight / norm_bias (pre-LN) or -1, inv_freq or -1.
struct RelativeXL {
  int32_t mem_len = 0;
  int32_t clamp_len = 0;  // 0: no clamp
  bool same_length = false;
  float norm_eps = 1e-5f;
};
// Reformer LSH attention (schema/tern.fbs, runtime/src/ops/lsh.h): the ATTENTION op then reads qk | v [n, 2*H*dh]
// and takes one weight, rotations [H, dh, hashes, sum(buckets) / 2].
struct Lsh {
  int32_t chunk = 0;
  int32_t chunks_before = 0;
  int32_t chunks_after = 0;
  int32_t hashes = 1;
  std::vector<int32_t> buckets;  // factors; one entry for a plain bucket count
  int32_t pad_to = 0;            // the sequence is treated as right-padded to a multiple of this ...
  int32_t pad_above = 0;         // ... when longer than this
  float self_mask_value = -1e5f;
  float key_norm_eps = 1e-6f;
};
// Compressive memory (schema/tern.fbs, runtime/src/ops/compressive.h): the ATTENTION op then reads its attention input
// and takes weights qkv [3*H*dh, d], qkv_bias or -1, conv_weight [d, rate*d] (CONV) or -1, conv_bias or -1.
struct Compressive {
  int32_t mem_len = 0;
  int32_t cmem_len = 0;
  int32_t rate = 1;
  fb::Compression compression = fb::Compression::CONV;
};
// Routing attention (schema/tern.fbs, runtime/src/ops/routing.h): the ATTENTION op reads qkv and takes one weight,
// centroids [H - local_heads, clusters, dh].
struct Routing {
  int32_t clusters = 1;
  int32_t window = 1;
  int32_t local_heads = 0;
  int32_t local_chunk = 1;
};
using AttentionKind = std::variant<DenseAttention, SlidingWindow, ChunkedLocal, Strided, Fixed, AdaptiveSpan, RelativeXL,
                                   Lsh, Compressive, Routing>;
struct Attention {
  static constexpr fb::OpParams kType = fb::OpParams::AttentionParams;
  int32_t heads = 0;
  int32_t head_dim = 0;
  float scale = 0;  // multiplies q·k
  bool causal = true;
  AttentionKind kind;
};
struct LogSoftmax {
  static constexpr fb::OpParams kType = fb::OpParams::LogSoftmaxParams;
};
// Adaptive input: weights per cluster table_i, proj_i or -1 (schema/tern.fbs AdaptiveEmbeddingParams).
struct AdaptiveEmbedding {
  static constexpr fb::OpParams kType = fb::OpParams::AdaptiveEmbeddingParams;
  std::vector<int64_t> cutoffs;  // cluster ends before V
  float scale = 1.0f;
};
// Projected adaptive log-softmax: weights cluster_weight, cluster_bias, then per cluster weight_i, bias_i, proj_i.
struct AdaptiveLogSoftmax {
  static constexpr fb::OpParams kType = fb::OpParams::AdaptiveLogSoftmaxParams;
  std::vector<int64_t> cutoffs;
};
struct Concat {
  static constexpr fb::OpParams kType = fb::OpParams::ConcatParams;
};
}  // namespace params

using OpParams = std::variant<params::Embedding, params::Position, params::LayerNorm, params::Linear,
                              params::Activation, params::Add, params::Attention, params::LogSoftmax,
                              params::AdaptiveEmbedding, params::AdaptiveLogSoftmax, params::Concat>;

// The schema table a parameter set is written as.
inline fb::OpParams params_type(const OpParams& params) {
  return std::visit([](const auto& p) { return std::decay_t<decltype(p)>::kType; }, params);
}

// Writes exactly `size` bytes of a tensor into `dst` (little-endian, row-major).
using TensorFill = std::function<Status(uint8_t* dst, size_t size)>;

struct TensorSpec {
  std::string name;
  fb::DType dtype = fb::DType::F32;
  std::vector<int64_t> shape;
  uint64_t size = 0;  // numel * sizeof(dtype); I4: numel / 2
  TensorFill fill;
  int32_t scales = -1;     // I8, I4: the scale tensor's index (schema/tern.fbs, Tensor)
  int32_t group_size = 0;  // I8, I4: inputs per scale; 0 = one per output row
};

struct ValueSpec {
  std::string name;
  fb::DType dtype = fb::DType::F32;
  int64_t width = 0;  // a value is [n_tokens, width]
};

struct OpSpec {
  fb::OpCode code = fb::OpCode::EMBEDDING;
  int32_t version = 1;
  std::string name;
  std::vector<int32_t> inputs;   // value indices
  std::vector<int32_t> outputs;  // value indices
  std::vector<int32_t> weights;  // tensor indices, -1 for an optional weight left out (trailing ones may be omitted)
  OpParams params;
};

struct ModelMetadata {
  std::string architecture;
  std::string description;
  fb::VocabKind vocab_kind = fb::VocabKind::BYTES;
  int64_t vocab_size = 0;
  std::string vocab_note;
  int32_t byte_offset = 0;  // SHIFTED_BYTES: the id of byte 0
  // SENTENCEPIECE: the tokenizer file's contents (tokenizer_file.h); shared, so the metadata stays copyable.
  std::shared_ptr<const SentencePieceFile> sentencepiece;
  std::shared_ptr<const SymbolsFile> symbols;  // SYMBOLS
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;  // special token ids; -1: none
  int64_t max_context = 0;  // 0 = unbounded
  int64_t segment_length = 0;  // tokens per call of the model's evaluation; 0 = none recorded
};

class GraphBuilder {
 public:
  // Each returns the new index. Names are unique within values, tensors and ops respectively.
  Result<int32_t> add_value(const std::string& name, fb::DType dtype, int64_t width);
  Result<int32_t> add_tensor(const std::string& name, fb::DType dtype, std::vector<int64_t> shape, TensorFill fill);
  // Stores tensor `index` in another form (compress.h): its dtype, byte size, fill, scale tensor and group change;
  // its name, shape and uses do not.
  void store_tensor_as(int32_t index, fb::DType dtype, uint64_t size, TensorFill fill, int32_t scales, int32_t group);
  // Ops run in the order added; an op reads only model inputs and values written by earlier ops,
  // and each value is written once.
  Result<int32_t> add_op(fb::OpCode code, const std::string& name, std::vector<int32_t> inputs,
                         std::vector<int32_t> outputs, std::vector<int32_t> weights, OpParams params);
  Status add_input(int32_t value);
  Status add_output(int32_t value);
  ModelMetadata& metadata() { return metadata_; }

  // Checks the model is complete: at least one input and output, every output written.
  Status finish() const;

  const std::vector<ValueSpec>& values() const { return values_; }
  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  const std::vector<OpSpec>& ops() const { return ops_; }
  const std::vector<int32_t>& inputs() const { return inputs_; }
  const std::vector<int32_t>& outputs() const { return outputs_; }
  const ModelMetadata& metadata() const { return metadata_; }
  int32_t find_tensor(const std::string& name) const;  // -1 if absent
  int32_t find_value(const std::string& name) const;   // -1 if absent

 private:
  std::vector<ValueSpec> values_;
  std::vector<TensorSpec> tensors_;
  std::vector<OpSpec> ops_;
  std::vector<int32_t> inputs_, outputs_;
  std::vector<bool> written_;  // per value: a model input or an earlier op's output
  std::map<std::string, int32_t> value_index_, tensor_index_, op_index_;
  ModelMetadata metadata_;
};

}  // namespace tern::convert
