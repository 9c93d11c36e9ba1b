#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tern {

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError("'" + path + "' is not a regular file");
  }
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

MappedFile::~MappedFile() {
  if (owned_ && data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace tern
