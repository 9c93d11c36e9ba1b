// SPDX-License-Identifier: MIT
#include "format/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>

#include "format/regular_file.h"

namespace tern {

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  // Only a regular file is mapped: a FIFO or a device could block or be read without end.
  TERN_ASSIGN_OR_RETURN(const RegularFile opened, open_regular_file(path));
  const int fd = opened.fd;
  const struct stat& st = opened.st;
  size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return InvalidModel("'" + path + "' is empty");
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    const int error = errno;
    ::close(fd);
    return IoError("cannot map '" + path + "': " + std::strerror(error));
  }
  // The descriptor stays open for read() (one per model).
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<const uint8_t*>(p), size, Kind::kMapped, 0, fd));
}

std::unique_ptr<MappedFile> MappedFile::borrow(const void* data, size_t size) {
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<const uint8_t*>(data), size, Kind::kBorrowed));
}

Result<std::unique_ptr<MappedFile>> MappedFile::copy(const void* data, size_t size, size_t alignment) {
  void* p = ::operator new(size > 0 ? size : 1, std::align_val_t(alignment), std::nothrow);
  if (p == nullptr) {
    return OutOfMemory("cannot allocate " + std::to_string(size) + " bytes to copy the model buffer into aligned memory");
  }
  if (size > 0) std::memcpy(p, data, size);
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<const uint8_t*>(p), size, Kind::kCopied, alignment));
}

void MappedFile::release(const void* p, size_t size) const {
  if (kind_ != Kind::kMapped || size == 0) return;
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return;
  const uintptr_t b = reinterpret_cast<uintptr_t>(p), e = b + size;
  const uintptr_t first = (b + uintptr_t(page) - 1) / uintptr_t(page) * uintptr_t(page), last = e / uintptr_t(page) * uintptr_t(page);
  // Neighbouring tensors may share the edge pages: only whole pages inside the range go.
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void MappedFile::read(const void* p, size_t size, void* dst) const {
  const uint8_t* from = static_cast<const uint8_t*>(p);
  size_t done = 0;
  if (fd_ >= 0) {
    while (done < size) {
      const ssize_t got = ::pread(fd_, static_cast<uint8_t*>(dst) + done, size - done, off_t(from - data_) + off_t(done));
      if (got > 0) {
        done += size_t(got);
      } else if (got < 0 && errno == EINTR) {
        continue;
      } else {
        break;  // an error or an end of file: the rest comes from the mapping
      }
    }
  }
  if (done < size) std::memcpy(static_cast<uint8_t*>(dst) + done, from + done, size - done);
}

MappedFile::~MappedFile() {
  if (fd_ >= 0) ::close(fd_);
  if (data_ == nullptr) return;
  if (kind_ == Kind::kMapped) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (kind_ == Kind::kCopied) ::operator delete(const_cast<uint8_t*>(data_), std::align_val_t(alignment_));
}

}  // namespace tern
