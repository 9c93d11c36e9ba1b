#include "format/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
  ::close(fd);  // the mapping keeps the file alive
  if (p == MAP_FAILED) return IoError("cannot map '" + path + "': " + std::strerror(errno));
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<const uint8_t*>(p), size, true));
}

std::unique_ptr<MappedFile> MappedFile::borrow(const void* data, size_t size) {
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<const uint8_t*>(data), size, false));
}

void MappedFile::release(const void* p, size_t size) const {
  if (!owned_ || size == 0) return;
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return;
  const uintptr_t b = reinterpret_cast<uintptr_t>(p), e = b + size;
  const uintptr_t first = (b + uintptr_t(page) - 1) / uintptr_t(page) * uintptr_t(page), last = e / uintptr_t(page) * uintptr_t(page);
  // Neighbouring tensors may share the edge pages: only whole pages inside the range go.
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (owned_ && data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace tern
