// SPDX-License-Identifier: MIT
// In-memory model that importers build and the writer serialises. Tensors carry a fill callback instead
// of bytes, so weights are produced (converted, fused) one tensor at a time while the file is written.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "format/status.h"
#include "tern_generated.h"

namespace tern::convert {

struct SentencePieceFile;  // sentencepiece_file.h
struct SymbolsFile;        // symbols_file.h
struct HfTokenizerJson;    // hf_tokenizer_json.h

// An op's parameters: one of the schema's *Params tables as flatc's object API generates it (schema/tern.fbs,
// `flatc --gen-object-api`), e.g. fb::LinearParamsT{} or fb::LayerNormParamsT{{}, 1e-5f}; `type` names the table.
class OpParams : public fb::OpParamsUnion {
 public:
  OpParams() = default;
  template <typename Table,
            typename = std::enable_if_t<fb::OpParamsUnionTraits<Table>::enum_value != fb::OpParams::NONE>>
  OpParams(Table table) {  // NOLINT(google-explicit-constructor): a table is its op's parameters
    Set(std::move(table));
  }
};

// An ATTENTION op's kind: one of the schema's kind tables (fb::DenseT, fb::SlidingWindowT, ... fb::RoutingT), each
// with the weights and inputs its schema comment names.
class AttentionKind : public fb::AttentionKindUnion {
 public:
  AttentionKind() = default;
  template <typename Table,
            typename = std::enable_if_t<fb::AttentionKindUnionTraits<Table>::enum_value != fb::AttentionKind::NONE>>
  AttentionKind(Table table) {  // NOLINT(google-explicit-constructor): a table is its kind
    Set(std::move(table));
  }
};

// ATTENTION parameters: `heads` heads of `head_dim`, q·k multiplied by `scale`, causal.
inline fb::AttentionParamsT attention_params(int32_t heads, int32_t head_dim, float scale, AttentionKind kind) {
  return fb::AttentionParamsT{{}, heads, head_dim, scale, true, std::move(kind)};
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
  std::shared_ptr<const HfTokenizerJson> hf_tokenizer;  // HF_TOKENIZER
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;  // special token ids; -1: none
  std::vector<int32_t> extra_eos_ids;  // ids besides eos_id that end generation
  bool add_bos = false;                // the tokenizer starts every text with bos_id
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
  // `version`: the op's version (schema/README.md: 2 when it sets a field an older runtime would ignore).
  Result<int32_t> add_op(fb::OpCode code, const std::string& name, std::vector<int32_t> inputs,
                         std::vector<int32_t> outputs, std::vector<int32_t> weights, OpParams params,
                         int32_t version = 1);
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
