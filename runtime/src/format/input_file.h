// SPDX-License-Identifier: MIT
// Opening the converter's inputs (config.json, *.safetensors) so that no path can block or feed it without end:
// opened with O_NONBLOCK (a FIFO with no writer, a tty or a device returns at once) and required to be a regular
// file before a byte is read. Messages name the path as given.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "format/regular_file.h"
#include "format/status.h"

namespace tern {

// An open, read-only descriptor of a regular file, closed on destruction.
class InputFile {
 public:
  // "cannot open 'x/config.json': No such file or directory"; "'x/config.json' is a FIFO, not a regular file".
  static Result<InputFile> open(const std::string& path);
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }  // at open time
  dev_t device() const { return dev_; }
  ino_t inode() const { return ino_; }

  // Reads exactly n bytes at `offset`. A file that ends first (truncated since it was opened) is an I/O error
  // naming the path, the bytes wanted and where the file ended; `what` says what was being read ("the header").
  Status read_at(uint64_t offset, void* dst, size_t n, const std::string& what) const;
  // Reads the whole file, which may hold at most max_bytes (however it grows while being read): "'x/config.json'
  // holds more than 16 MiB, too large for a config" (`what` is "a config").
  Result<std::string> read_all(uint64_t max_bytes, const std::string& what) const;

 private:
  InputFile() = default;
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace tern
