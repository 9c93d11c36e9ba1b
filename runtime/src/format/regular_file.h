// SPDX-License-Identifier: MIT
// Opening a file that must be a regular file, so that no path can block or feed a reader without end, and what a
// path is, in words, for the messages that refuse anything else: the loader's (mapped_file.cpp), the converter's
// inputs and output (input_file.h, temp_file.h) and tern-run's.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "format/status.h"

namespace tern {

// "a FIFO", "a directory", "a character device", "a block device", "a socket", "a symbolic link", "a regular file".
inline const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// A descriptor the caller owns (closes) and what fstat said of it.
struct RegularFile {
  int fd;
  struct stat st;
};

// Opens `path` read-only with O_NONBLOCK (a FIFO with no writer, a tty or a device returns at once) and refuses
// anything but a regular file before a byte is read: "cannot open 'x': No such file or directory", "'x' is a FIFO,
// not a regular file". The descriptor is left blocking again: a regular file never blocks.
inline Result<RegularFile> open_regular_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return IoError("cannot open '" + path + "': " + std::strerror(errno));
  RegularFile f{fd, {}};
  if (::fstat(fd, &f.st) != 0) {
    const int e = errno;
    ::close(fd);
    return IoError("cannot stat '" + path + "': " + std::strerror(e));
  }
  if (!S_ISREG(f.st.st_mode)) {
    ::close(fd);
    return IoError("'" + path + "' is " + file_kind(f.st.st_mode) + ", not a regular file");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return f;
}

}  // namespace tern
