// Reader for the safetensors format: [u64 LE header length N][N bytes of JSON header][data segment].
// The file is memory-mapped read-only and every header field is validated before any tensor is handed out,
// so importers can trust a TensorView's pointer and size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"

namespace tern::convert {

enum class StDType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

const char* dtype_name(StDType dtype);
size_t dtype_size(StDType dtype);
// "[4, 8]"
std::string shape_string(const std::vector<int64_t>& shape);

// One tensor inside a mapped file. `data` stays valid while the owning SafetensorsFile lives.
struct TensorView {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // not necessarily aligned; read through memcpy
  size_t size = 0;                // bytes == numel * dtype_size
  std::string file;               // file name, for messages

  int64_t numel() const;
};

// Converts an F32, F16 or BF16 tensor to float32; out holds numel() floats. Other dtypes: error naming the tensor.
Status to_f32(const TensorView& view, float* out);

class SafetensorsFile {
 public:
  // Maps and validates `path`; messages name the file by `display_name` (defaults to the path's file name).
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path, std::string display_name = "");
  // Validates an in-memory image that the caller keeps alive; used by open() and by tests.
  static Result<std::unique_ptr<SafetensorsFile>> parse(const uint8_t* bytes, size_t size,
                                                        const std::string& display_name);

  const std::string& name() const { return name_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }  // sorted by name
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string name_;
  std::unique_ptr<MappedFile> map_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tern::convert
