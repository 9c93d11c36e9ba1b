// SPDX-License-Identifier: MIT
// A loaded, verified model: nothing in it is used before it has been checked.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <typeindex>
#include <vector>

#include "format/mapped_file.h"
#include "format/status.h"
#include "text/tokenizer.h"
#include "tern_generated.h"

namespace tern {

// Shape limits a model must respect; keep them in step with schema/README.md.
// The .tern format versions this runtime reads (schema/README.md, "Evolution"); tern_format_versions reports them.
constexpr uint32_t kMinFormatVersion = 1;
constexpr uint32_t kMaxFormatVersion = 1;
constexpr int kMaxRank = 8;
constexpr int64_t kMaxDim = int64_t(1) << 32;
constexpr int64_t kMaxWidth = int64_t(1) << 24;
// Names of tensors, values and ops are copied out of the file; a name longer than this is an error, and all names
// together may not exceed the graph's own bytes (a file whose entries share one long string would otherwise expand).
constexpr size_t kMaxNameBytes = 1024;

size_t dtype_size(fb::DType dtype);  // bytes per element; 0 for I4 (two per byte) and unknown dtypes
const char* dtype_name(fb::DType dtype);
// Compressed weight storage (schema/tern.fbs, Tensor): F16, I8 or I4.
bool is_compressed(fb::DType dtype);
// Elements per block of an I8 or I4 row: rows are a whole number of blocks, and a group a whole number of them.
constexpr int64_t kQuantBlock = 32;

// A constant tensor inside the mapping.
struct TensorInfo {
  std::string name;
  fb::DType dtype = fb::DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // inside the mapping, aligned to the model's data_alignment
  uint64_t size = 0;
  // I8, I4: the scale tensor (F32 for I8, F16 for I4) and the inputs per scale (0: one per output row).
  const TensorInfo* scales = nullptr;
  int64_t group_size = 0;
  int64_t numel() const;
  // Inputs per scale of an I8 or I4 matrix [out, in]: group_size, or in for one scale per row.
  int64_t group() const { return group_size ? group_size : shape[1]; }
  const float* f32() const { return reinterpret_cast<const float*>(data); }
  std::string shape_string() const;
};

// A runtime activation: [n_tokens, width].
struct ValueInfo {
  std::string name;
  fb::DType dtype = fb::DType::F32;
  int64_t width = 0;
  int producer = -1;  // op index, -1 for the model input
};

// One op with its references resolved; params stay in the FlatBuffer (fb_op).
struct Node {
  int index = 0;
  fb::OpCode code = fb::OpCode::EMBEDDING;
  std::string name;
  std::vector<int> inputs;                  // value indices
  std::vector<int> outputs;                 // value indices
  std::vector<const TensorInfo*> weights;   // nullptr where the op's optional weight is absent
  const fb::Op* fb_op = nullptr;
  std::string label() const;                // "op 12 (LINEAR 'layers.0.fc1')" for messages
};

class Model {
 public:
  static Result<std::unique_ptr<Model>> load_file(const std::string& path);
  // Reads a 64-byte aligned buffer in place (the caller keeps it alive and unchanged); copies any other into an
  // aligned one of its own first (copied_bytes()).
  static Result<std::unique_ptr<Model>> load_buffer(const void* data, size_t size);

  const fb::Model& fb() const { return *root_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::vector<ValueInfo>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  int input_value() const { return input_; }
  int output_value() const { return output_; }
  int64_t vocab_size() const { return vocab_size_; }
  int64_t max_context() const { return max_context_; }
  // Tokens per call of the model's evaluation (metadata segment_length); 0: none recorded.
  int64_t segment_length() const { return segment_length_; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Bytes load_buffer copied the model into (its buffer was not 64-byte aligned); 0 when read in place.
  size_t copied_bytes() const { return file_->copied_bytes(); }
  // Text <-> ids from the file's vocabulary; nullptr when the file carries none (ids only).
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  // Drops a tensor's pages of a file-mapped model from memory, for weights a backend has copied into its own
  // packed form; reading the tensor later still works (the pages come back from the file).
  void release_pages(const TensorInfo& t) const { file_->release(t.data, size_t(t.size)); }
  // Copies bytes [p, p + size) of the model (inside a tensor's data) into dst, from the file where the model is a
  // mapped one, without faulting its pages in (MappedFile::read): for a backend that copies weights once.
  void read_bytes(const void* p, size_t size, void* dst) const { file_->read(p, size, dst); }
  // One object of type T per model, made on first use (from any thread) and kept while the model lives: what a
  // backend derives from the weights once and shares among the model's sessions (the CPU backend's packed float32
  // matrices, cpu/packed_weights.h). T does its own locking; it must not refer back to a session. T is made from the
  // model where it has that constructor (it may keep the reference: the model outlives it), default-made otherwise.
  template <typename T>
  T& attachment() const {
    std::lock_guard<std::mutex> lock(attachments_mutex_);
    std::shared_ptr<void>& slot = attachments_[std::type_index(typeid(T))];
    if (!slot) {
      if constexpr (std::is_constructible_v<T, const Model&>) {
        slot = std::make_shared<T>(*this);
      } else {
        slot = std::make_shared<T>();
      }
    }
    return *static_cast<T*>(slot.get());
  }
  std::string architecture() const;
  std::string description() const;
  // The size-prefixed FlatBuffer (graph and tensor descriptions, not the weights), as verified.
  const uint8_t* graph_bytes() const { return file_->data(); }
  size_t graph_size() const { return 4 + size_t(reinterpret_cast<const uint32_t*>(file_->data())[0]); }

 private:
  Model() = default;
  static Result<std::unique_ptr<Model>> verify(std::unique_ptr<MappedFile> file);
  Status check_tensors(const uint8_t* data_base, uint64_t data_size, uint32_t alignment);
  Status check_scales();
  Status check_values();
  Status check_ops();
  Status check_io();
  // Copies a name out of the graph into *out (fallback when absent), charging it to name_bytes_left_.
  Status take_name(const flatbuffers::String* name, const std::string& what, std::string fallback, std::string* out);

  std::unique_ptr<MappedFile> file_;
  const fb::Model* root_ = nullptr;
  std::vector<TensorInfo> tensors_;
  std::vector<ValueInfo> values_;
  std::vector<Node> nodes_;
  int input_ = -1;
  int output_ = -1;
  int64_t vocab_size_ = 0;
  int64_t max_context_ = 0;
  int64_t segment_length_ = 0;
  std::unique_ptr<Tokenizer> tokenizer_;
  uint64_t weight_bytes_ = 0;
  uint64_t name_bytes_left_ = 0;  // starts at the graph's size
  mutable std::mutex attachments_mutex_;
  mutable std::map<std::type_index, std::shared_ptr<void>> attachments_;
};

}  // namespace tern
