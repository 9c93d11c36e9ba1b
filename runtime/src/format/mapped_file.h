// Read-only view of a model's bytes: an mmap of a file, or memory the caller owns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "format/status.h"

namespace tern {

class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  static std::unique_ptr<MappedFile> borrow(const void* data, size_t size);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Drops the whole pages inside [p, p + size) from memory when the bytes are a file mapping (a read later faults
  // them back in from the file, so nothing is lost); does nothing for borrowed memory, which has no file behind it.
  void release(const void* p, size_t size) const;

 private:
  MappedFile(const uint8_t* data, size_t size, bool owned) : data_(data), size_(size), owned_(owned) {}
  const uint8_t* data_;
  size_t size_;
  bool owned_;  // true: munmap on destruction
};

}  // namespace tern
