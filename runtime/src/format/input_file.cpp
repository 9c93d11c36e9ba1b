// SPDX-License-Identifier: MIT
#include "format/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace tern {

Result<InputFile> InputFile::open(const std::string& path) {
  TERN_ASSIGN_OR_RETURN(const RegularFile opened, open_regular_file(path));
  InputFile f;
  f.path_ = path;
  f.fd_ = opened.fd;
  f.size_ = uint64_t(opened.st.st_size);
  f.dev_ = opened.st.st_dev;
  f.ino_ = opened.st.st_ino;
  return f;
}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_), dev_(other.dev_),
      ino_(other.ino_) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    dev_ = other.dev_;
    ino_ = other.ino_;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status InputFile::read_at(uint64_t offset, void* dst, size_t n, const std::string& what) const {
  auto* p = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, p + done, n - done, off_t(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      return IoError("'" + path_ + "': cannot read " + what + ": " + std::strerror(errno));
    if (r == 0)
      return IoError("'" + path_ + "': the file ends at byte " + std::to_string(offset + done) + " while reading " +
                     what + " (bytes [" + std::to_string(offset) + ", " + std::to_string(offset + n) +
                     ")); was it truncated while being converted?");
    done += size_t(r);
  }
  return Status::Ok();
}

Result<std::string> InputFile::read_all(uint64_t max_bytes, const std::string& what) const {
  std::string text;
  char buf[1 << 16];
  uint64_t offset = 0;
  for (;;) {
    const ssize_t r = ::pread(fd_, buf, sizeof buf, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return IoError("'" + path_ + "': cannot read: " + std::strerror(errno));
    if (r == 0) break;
    offset += uint64_t(r);
    if (offset > max_bytes)
      return InvalidModel("'" + path_ + "' holds more than " + std::to_string(max_bytes >> 20) + " MiB, too large for " +
                          what);
    text.append(buf, size_t(r));
  }
  return text;
}

}  // namespace tern
