// SPDX-License-Identifier: MIT
// Read-only view of a model's bytes: an mmap of a file, memory the caller owns, or an aligned copy of it.
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
  // A copy of data [size] in memory aligned to `alignment` bytes (a power of two), freed with this object.
  static Result<std::unique_ptr<MappedFile>> copy(const void* data, size_t size, size_t alignment);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Drops the whole pages inside [p, p + size) from memory when the bytes are a file mapping (a read later faults
  // them back in from the file, so nothing is lost); does nothing for borrowed memory, which has no file behind it.
  void release(const void* p, size_t size) const;
  // Copies [p, p + size) (inside data()) into dst. From a file mapping it reads the file (pread) instead of touching
  // the mapping: a copy out of the page cache, where the mapping takes a page fault per page not yet mapped (all of a
  // tensor's the first time, and again after release), which costs several times the copy (92 MB: 36 ms against
  // 190 ms on a 2-core VM), and the pages never count in the process's resident memory. Falls back to the mapping on
  // a read error.
  void read(const void* p, size_t size, void* dst) const;
  // The bytes of a copy (copy()); 0 for a mapping or borrowed memory.
  size_t copied_bytes() const { return kind_ == Kind::kCopied ? size_ : 0; }

 private:
  enum class Kind { kMapped, kBorrowed, kCopied };  // munmap, nothing, or operator delete on destruction
  MappedFile(const uint8_t* data, size_t size, Kind kind, size_t alignment = 0, int fd = -1)
      : data_(data), size_(size), kind_(kind), alignment_(alignment), fd_(fd) {}
  const uint8_t* data_;
  size_t size_;
  Kind kind_;
  size_t alignment_;  // of a copy
  int fd_;            // a mapping's file, kept open for read(); -1 otherwise
};

}  // namespace tern
