// SPDX-License-Identifier: MIT
// Reader for the safetensors format: [u64 LE header length N][N bytes of JSON header][data segment].
// Every header field is validated before any tensor is handed out, so importers can trust a TensorView's offsets
// and size. A file is read with pread, never mapped: one truncated while it is being converted gives an I/O error
// naming it, where a mapping would raise SIGBUS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/status.h"
#include "format/input_file.h"

namespace tern::convert {

enum class StDType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

const char* dtype_name(StDType dtype);
size_t dtype_size(StDType dtype);
// "[4, 8]"
std::string shape_string(const std::vector<int64_t>& shape);

// One tensor of a safetensors file; its bytes are read by to_f32() while the owning SafetensorsFile lives.
struct TensorView {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;      // an in-memory image (parse()): the bytes, not necessarily aligned; else null
  const InputFile* source = nullptr;  // a file (open()): the bytes are [offset, offset + size) of it
  uint64_t offset = 0;
  size_t size = 0;                    // bytes == numel * dtype_size
  std::string file;                   // file name, for messages

  int64_t numel() const;
};

// Converts an F32, F16 or BF16 tensor to float32; out holds numel() floats. Other dtypes: error naming the tensor.
// A NaN or infinity is an error naming the tensor and the index of the first one, unless `allow_non_finite`.
Status to_f32(const TensorView& view, float* out, bool allow_non_finite = false);

class SafetensorsFile {
 public:
  // Opens (never blocking: a FIFO or device is refused) and validates `path`; messages name the file by
  // `display_name` (defaults to the path's file name), errors opening or reading it by the path.
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path, std::string display_name = "");
  // Validates an in-memory image that the caller keeps alive; used by open() and by tests.
  static Result<std::unique_ptr<SafetensorsFile>> parse(const uint8_t* bytes, size_t size,
                                                        const std::string& display_name);

  const std::string& name() const { return name_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }  // sorted by name
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const InputFile* input() const { return input_.get(); }  // null for an in-memory image

 private:
  static Result<std::unique_ptr<SafetensorsFile>> from_header(std::string_view header, uint64_t data_size,
                                                              const std::string& display_name);
  std::string name_;
  std::unique_ptr<InputFile> input_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tern::convert
